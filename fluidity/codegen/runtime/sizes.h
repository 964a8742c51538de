// Sizes that generated code computes from run-time dims, overflow-checked, for both targets
// (fluidity.h and cuda_rt.h include it after their fl::align). A product of dims
// (codegen/cir.py's mul: `fl::mul(a, b)`) that does not fit an int64 is BAD_SIZE, a
// negative value every later product keeps; a segment adds up its arena with slot_size and
// add_size, which take any negative size, or one above MAX_SIZE, as "does not fit" (-1), and
// the segment then returns MISMATCH before it writes anything: its ops run interpreted, where
// the kernels say what is too large. So no size wraps around into a small arena that loops
// then overrun.
#pragma once
#include <cstdint>
#include <initializer_list>

#ifndef FL_HD
#define FL_HD
#endif

namespace fl {

constexpr int64_t BAD_SIZE = INT64_MIN;
constexpr int64_t MAX_SIZE = (int64_t(1) << 62) - 1;   // any byte count generated code may use

// a * b, or BAD_SIZE when the product does not fit an int64.
FL_HD inline int64_t mul(int64_t a, int64_t b) {
#ifdef __CUDA_ARCH__
    const int64_t lo = (int64_t)((uint64_t)a * (uint64_t)b);
    return __mul64hi(a, b) == (lo >> 63) ? lo : BAD_SIZE;
#else
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? BAD_SIZE : r;
#endif
}

// The bytes of an arena slot: the largest of its values' sizes, aligned as the target aligns
// (fl::align); -1 when a size is negative (an overflowed product, a negative dim) or too large.
inline int64_t slot_size(std::initializer_list<int64_t> sizes) {
    int64_t m = 0;
    for (int64_t s : sizes) {
        if (s < 0 || s > MAX_SIZE) return -1;
        if (s > m) m = s;
    }
    return align(m);
}

// off + size for the arena's next slot; -1 when either is -1 or the sum is too large.
inline int64_t add_size(int64_t off, int64_t size) {
    if (off < 0 || size < 0 || size > MAX_SIZE - off) return -1;
    return off + size;
}

}  // namespace fl
