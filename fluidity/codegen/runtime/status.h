// What a compiled segment returns, for both targets (fluidity.h, cuda_rt.h: host code): 0 when
// it ran, 2 + k when op k found bad input (the message in `err`), MISMATCH when an input's
// rank or a dim differs from what the segment was compiled for. The executors read the codes
// alike for either target (executor/native.py, executor/cuda.py), so they are defined once.
#pragma once
#include <cstdio>

namespace fl {

// Format a message into the error buffer; returns the segment's error code for op k.
inline int fail(char* err, int op_index, const char* msg) {
    std::snprintf(err, 512, "%s", msg);
    return 2 + op_index;
}

// An input whose rank or a dim differs from what the program's desc says (the segment was
// compiled for that): nothing written yet; the caller runs the segment's ops interpreted.
constexpr int MISMATCH = -1;
inline int mismatch(char* err, const char* msg) {
    std::snprintf(err, 512, "%s", msg);
    return MISMATCH;
}

}  // namespace fl
