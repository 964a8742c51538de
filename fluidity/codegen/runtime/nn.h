// Primitives for the nn op emitters (pooling forms, batched matmul, padding, ...).
#pragma once
#include <cmath>
#include <cstdint>

namespace fl {

// Calls f(i, ia, ib) for every element i (row-major) of an nd-dim iteration space `dims`,
// ia / ib advancing by sa[k] / sb[k] along dim k (0 where that operand broadcasts): the
// walk of numpy-style broadcasting of two operands. The innermost dim is a plain loop.
template <typename F>
inline void broadcast_each(int nd, const int64_t* dims, const int64_t* sa, const int64_t* sb,
                           F&& f) {
    int64_t total = 1;
    for (int k = 0; k < nd; ++k) total *= dims[k];
    if (total == 0) return;
    int64_t idx[16] = {0};
    int64_t ia = 0, ib = 0;
    const int64_t inner = dims[nd - 1], ia1 = sa[nd - 1], ib1 = sb[nd - 1];
    for (int64_t i = 0; i < total; i += inner) {
        for (int64_t j = 0; j < inner; ++j) f(i + j, ia + j * ia1, ib + j * ib1);
        for (int k = nd - 2; k >= 0; --k) {
            ia += sa[k];
            ib += sb[k];
            if (++idx[k] < dims[k]) break;
            ia -= sa[k] * dims[k];
            ib -= sb[k] * dims[k];
            idx[k] = 0;
        }
    }
}

}  // namespace fl
