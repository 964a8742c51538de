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

// Channel sums of batch_norm (statistics and gradient) in double over 8 lanes: the lanes are
// independent, so the compiler vectorizes the loop (one double accumulator is a chain of
// dependent adds, ~4 cycles an element); they are added together at the end. Each element's
// own float arithmetic is the kernel's.
constexpr int kSumLanes = 8;

inline double lanes_total(const double* a) {
    double t = 0;
    for (int j = 0; j < kSumLanes; ++j) t += a[j];
    return t;
}

// sum of r[0..n)
inline double sum_d(const float* __restrict__ r, int64_t n) {
    double a[kSumLanes] = {0};
    int64_t i = 0;
    for (; i + kSumLanes <= n; i += kSumLanes)
        for (int j = 0; j < kSumLanes; ++j) a[j] += r[i + j];
    for (; i < n; ++i) a[0] += r[i];
    return lanes_total(a);
}

// sum of (r[i] - mu)^2, the difference and its square in float
inline double sum_sq_dev_d(const float* __restrict__ r, int64_t n, float mu) {
    double a[kSumLanes] = {0};
    int64_t i = 0;
    for (; i + kSumLanes <= n; i += kSumLanes)
        for (int j = 0; j < kSumLanes; ++j) { const float t = r[i + j] - mu; a[j] += t * t; }
    for (; i < n; ++i) { const float t = r[i] - mu; a[0] += t * t; }
    return lanes_total(a);
}

// sb += sum of g[i], ss += sum of g[i] * ((r[i] - sm) * iv) (the products in float). Each
// lane adds kSumBlock of its terms in float before they join its double: an 8-term float
// partial is off by at most a few roundings of its own size, and the float lanes run 2.4x
// the conversions and double adds of every term (0.9 -> 0.37 ms for the MNIST CNN's first
// batch_norm_grad at batch 64, in a C harness).
constexpr int kSumBlock = 8;
static_assert(kSumLanes == 8, "bn_grad_sums_d holds a lane a float of its 8-float vectors");
typedef float sum_v8 __attribute__((vector_size(32), aligned(4)));

inline void bn_grad_sums_d(const float* __restrict__ r, const float* __restrict__ g, int64_t n,
                           float sm, float iv, double& sb, double& ss) {
    double a[kSumLanes] = {0}, b[kSumLanes] = {0};
    int64_t i = 0;
    const sum_v8 smv = sum_v8{} + sm, ivv = sum_v8{} + iv;
    for (; i + kSumLanes * kSumBlock <= n; i += kSumLanes * kSumBlock) {
        sum_v8 fa{}, fb{};
        for (int k = 0; k < kSumBlock; ++k) {
            const sum_v8 gv = *(const sum_v8*)(g + i + k * kSumLanes);
            const sum_v8 rv = *(const sum_v8*)(r + i + k * kSumLanes);
            fa += gv;
            fb += gv * ((rv - smv) * ivv);
        }
        for (int j = 0; j < kSumLanes; ++j) {
            a[j] += fa[j];
            b[j] += fb[j];
        }
    }
    for (; i + kSumLanes <= n; i += kSumLanes)
        for (int j = 0; j < kSumLanes; ++j) {
            a[j] += g[i + j];
            b[j] += g[i + j] * ((r[i + j] - sm) * iv);
        }
    for (; i < n; ++i) { a[0] += g[i]; b[0] += g[i] * ((r[i] - sm) * iv); }
    sb += lanes_total(a);
    ss += lanes_total(b);
}

}  // namespace fl
