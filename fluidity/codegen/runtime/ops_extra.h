// More primitives for op emitters: reductions of any element type, slicing, ranges, gelu and
// mish, log_softmax and layer_norm rows. Each computes what its op's numpy kernel computes, in
// the same precision and order where that decides the rounding (noted per function).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace fl {

// --- element helpers ----------------------------------------------------------------------------
// numpy's maximum/minimum for any element type: a NaN in either operand is the result.
template <class T> inline T maxnp(T a, T b) { return (a >= b || a != a) ? a : b; }
template <class T> inline T minnp(T a, T b) { return (a <= b || a != a) ? a : b; }

// The start of a max (min) reduction: -inf (+inf) for floats, the type's extreme otherwise.
template <class T> inline T lowest() {
    if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::lowest();
}
template <class T> inline T highest() {
    if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::max();
}

// a + b and a * b as numpy computes them: integers wrap around (two's complement, never
// C's undefined signed overflow), floats round as usual. (Not for bool: reductions of bools
// accumulate in int64, as numpy's do.)
template <class T> inline T add_wrap(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        return (T)((U)a + (U)b);
    } else {
        return a + b;
    }
}
template <class T> inline T mul_wrap(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        return (T)((U)a * (U)b);
    } else {
        return a * b;
    }
}

// numpy's pairwise summation (fluidity.h's pairwise_sum) of n elements of type T, each taken
// as E (the type numpy's astype made of them) and summed in A.
template <class A, class E = A, class T>
inline A pairwise_sum_as(const T* a, i64 n, i64 stride) {
    auto at = [&](i64 i) { return (A)(E)a[i * stride]; };
    if (n < 8) {
        A res = (A)0;
        for (i64 i = 0; i < n; ++i) res += at(i);
        return res;
    }
    if (n <= 128) {
        A r[8];
        for (int j = 0; j < 8; ++j) r[j] = at(j);
        i64 i = 8;
        for (; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; ++j) r[j] += at(i + j);
        A res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; ++i) res += at(i);
        return res;
    }
    i64 n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_sum_as<A, E>(a, n2, stride) +
           pairwise_sum_as<A, E>(a + n2 * stride, n - n2, stride);
}
inline double pairwise_sum(const double* a, i64 n, i64 stride) {
    return pairwise_sum_as<double>(a, n, stride);
}

// --- reductions (ops/reduce.py) -----------------------------------------------------------------
// X [dims] reduced over the dims flagged in `red` into Out (X's dims without them), the way
// numpy's reduction walks a C-contiguous array: size-1 dims dropped, neighbouring dims alike
// (reduced or kept) merged, then the runs of the innermost dim in C order. A reduced innermost
// run is one inner-loop call (pairwise for a float sum: each run's sum added to Out); a kept
// innermost run adds element by element into Out's row. The same walk gives the gradients.
enum ReduceOp { R_SUM = 0, R_MEAN = 1, R_MAX = 2, R_MIN = 3, R_PROD = 4, R_ALL = 5, R_ANY = 6 };
constexpr int REDUCE_MAX_DIMS = 8;

struct ReducePlan {
    int m = 0;                         // merged dims
    i64 size[REDUCE_MAX_DIMS];
    bool red[REDUCE_MAX_DIMS];
    i64 ostride[REDUCE_MAX_DIMS];      // Out's stride of a kept merged dim, 0 for a reduced one
    i64 nx = 1, nout = 1, count = 1;   // elements of X, of Out, reduced into each of Out's
};

inline ReducePlan reduce_plan(int nd, const i64* dims, const bool* red) {
    ReducePlan p;
    for (int k = 0; k < nd; ++k) {
        const i64 d = dims[k];
        p.nx *= d;
        if (red[k]) p.count *= d;
        else p.nout *= d;
        if (d == 1) continue;
        if (p.m > 0 && p.red[p.m - 1] == red[k]) {
            p.size[p.m - 1] *= d;
        } else {
            p.size[p.m] = d;
            p.red[p.m] = red[k];
            ++p.m;
        }
    }
    if (p.m == 0) {                    // one element
        p.size[0] = 1;
        p.red[0] = true;
        p.m = 1;
    }
    i64 s = 1;
    for (int k = p.m - 1; k >= 0; --k) {
        p.ostride[k] = p.red[k] ? 0 : s;
        if (!p.red[k]) s *= p.size[k];
    }
    return p;
}

// f(x offset, Out offset, n, reduced) for each run of n elements along X's innermost merged
// dim, in C order: `reduced` runs all go to Out[offset], kept ones to Out[offset + j].
template <class F> inline void reduce_walk(const ReducePlan& p, F f) {
    if (p.nx == 0) return;
    const i64 n = p.size[p.m - 1];
    const bool inner = p.red[p.m - 1];
    i64 idx[REDUCE_MAX_DIMS] = {0};
    i64 off = 0;
    const i64 runs = p.nx / n;
    for (i64 c = 0; c < runs; ++c) {
        f(c * n, off, n, inner);
        for (int k = p.m - 2; k >= 0; --k) {
            off += p.ostride[k];
            if (++idx[k] < p.size[k]) break;
            off -= p.ostride[k] * p.size[k];
            idx[k] = 0;
        }
    }
}

// The accumulator of reduction K with results of type E, as numpy's: E for float sums,
// products, means and for max/min; int64 for integer (and bool) sums and products (wrapping);
// double for the mean of integers; bool for all/any.
template <int K, class E> struct ReduceAcc {
    using type = std::conditional_t<
        K == R_ALL || K == R_ANY, bool,
        std::conditional_t<std::is_floating_point_v<E> || K == R_MAX || K == R_MIN, E,
                           std::conditional_t<K == R_MEAN, double, int64_t>>>;
};

template <int K, class A> inline A reduce_init() {
    if constexpr (K == R_MAX) return lowest<A>();
    else if constexpr (K == R_MIN) return highest<A>();
    else if constexpr (K == R_PROD || K == R_ALL) return (A)1;
    else return (A)0;
}

template <int K, class A> inline A reduce_step(A a, A v) {
    if constexpr (K == R_SUM || K == R_MEAN) return add_wrap(a, v);
    else if constexpr (K == R_PROD) return mul_wrap(a, v);
    else if constexpr (K == R_MAX) return maxnp(a, v);
    else if constexpr (K == R_MIN) return minnp(a, v);
    else if constexpr (K == R_ALL) return a && v;
    else return a || v;
}

// One inner-loop call over a reduced run of n contiguous elements: a float sum is numpy's
// pairwise sum added to the accumulator; the mean of integers (summed as doubles through
// numpy's cast buffers) one pairwise sum per buffer of 8192 elements.
template <int K, class A, class E, class T> inline A reduce_run(A a, const T* x, i64 n) {
    if constexpr ((K == R_SUM || K == R_MEAN) && std::is_floating_point_v<A>) {
        if constexpr (K == R_MEAN && !std::is_floating_point_v<E>) {
            for (i64 b = 0; b < n; b += 8192)
                a = a + pairwise_sum_as<A, E>(x + b, std::min<i64>(8192, n - b), 1);
            return a;
        } else {
            return a + pairwise_sum_as<A, E>(x, n, 1);
        }
    } else {
        for (i64 i = 0; i < n; ++i) a = reduce_step<K, A>(a, (A)(E)x[i]);
        return a;
    }
}

// Out = reduction K of X over `red` (see above). X's elements are taken as E (the kernel's
// astype to out_dtype) and Out is E. `acc` holds Out's accumulators when their type is not E
// (ReduceAcc; null otherwise: Out accumulates in place). A mean divides by the count in its
// accumulator type (NaN for an empty float mean, as numpy's).
template <int K, class T, class E>
inline void reduce(const T* x, E* out, typename ReduceAcc<K, E>::type* acc, int nd,
                   const i64* dims, const bool* red) {
    using A = typename ReduceAcc<K, E>::type;
    const ReducePlan p = reduce_plan(nd, dims, red);
    A* a;
    if constexpr (std::is_same_v<A, E>) a = out;
    else a = acc;
    for (i64 o = 0; o < p.nout; ++o) a[o] = reduce_init<K, A>();
    reduce_walk(p, [&](i64 xo, i64 oo, i64 n, bool inner) {
        if (inner) {
            a[oo] = reduce_run<K, A, E>(a[oo], x + xo, n);
        } else {
            for (i64 j = 0; j < n; ++j) a[oo + j] = reduce_step<K, A>(a[oo + j], (A)(E)x[xo + j]);
        }
    });
    for (i64 o = 0; o < p.nout; ++o) {
        if constexpr (K == R_MEAN) out[o] = (E)(a[o] / (A)p.count);
        else out[o] = (E)a[o];
    }
}

// dX of reduce_sum / mean / max / min (ReduceGrad's table): Out@GRAD spread over the reduced
// dims, divided by max(count, 1) for the mean (in X's type), for max/min times (X == Out).
template <int K, class T>
inline void reduce_grad(const T* x, const T* o, const T* d, T* dx, int nd, const i64* dims,
                        const bool* red) {
    const ReducePlan p = reduce_plan(nd, dims, red);
    const T c = (T)(p.count > 1 ? p.count : 1);
    reduce_walk(p, [&](i64 xo, i64 oo, i64 n, bool inner) {
        for (i64 j = 0; j < n; ++j) {
            const i64 k = inner ? oo : oo + j;
            if constexpr (K == R_MEAN) dx[xo + j] = d[k] / c;
            else if constexpr (K == R_MAX || K == R_MIN)
                dx[xo + j] = d[k] * (x[xo + j] == o[k] ? (T)1 : (T)0);
            else dx[xo + j] = d[k];
        }
    });
}

// --- slice, strided_slice, range ----------------------------------------------------------------
// Paddle's slice bounds on a dim of size `dim` (ops/indexing.py _slice_plan): a negative bound
// counts from the end, then both are clamped to [0, dim]; an empty range has length 0.
inline i64 slice_bound(i64 v, i64 dim) {
    v = v < 0 ? v + dim : v;
    return v < 0 ? 0 : (v > dim ? dim : v);
}
inline i64 slice_len(i64 start, i64 end, i64 dim) {
    const i64 s = slice_bound(start, dim), e = slice_bound(end, dim);
    return e > s ? e - s : 0;
}

// strided_slice's (_strided_plan): negative bounds count from the end once; a positive stride
// takes [start, end) clamped to [0, dim], a negative one goes down from min(start, dim - 1) to
// max(end, -1), exclusive. The first index taken and how many.
inline i64 strided_begin(i64 start, i64 end, i64 step, i64 dim) {
    start = start < 0 ? start + dim : start;
    if (step > 0) return start < 0 ? 0 : (start > dim ? dim : start);
    return start < dim - 1 ? start : dim - 1;
}
inline i64 strided_len(i64 start, i64 end, i64 step, i64 dim) {
    const i64 s = strided_begin(start, end, step, dim);
    end = end < 0 ? end + dim : end;
    if (step > 0) {
        const i64 e = end < 0 ? 0 : (end > dim ? dim : end);
        return e > s ? (e - s + step - 1) / step : 0;
    }
    const i64 e = end > -1 ? end : -1;
    return s > e ? (s - e + (-step) - 1) / (-step) : 0;
}

// The box of X [dims] that starts at begin[k] and takes len[k] indices step[k] apart on each
// dim, copied to `part` (contiguous, C order), or with back = true, `part` copied into it.
template <class T>
inline void strided_box(T* x, T* part, int nd, const i64* dims, const i64* begin,
                        const i64* len, const i64* step, bool back) {
    i64 stride[REDUCE_MAX_DIMS], idx[REDUCE_MAX_DIMS] = {0};
    i64 total = 1, s = 1, off = 0;
    for (int k = nd - 1; k >= 0; --k) {
        stride[k] = s * step[k];
        off += begin[k] * s;
        s *= dims[k];
        total *= len[k];
    }
    if (total == 0) return;
    const i64 n = len[nd - 1], st = stride[nd - 1];
    for (i64 c = 0; c < total; c += n) {
        if (back)
            for (i64 j = 0; j < n; ++j) x[off + j * st] = part[c + j];
        else
            for (i64 j = 0; j < n; ++j) part[c + j] = x[off + j * st];
        for (int k = nd - 2; k >= 0; --k) {
            off += stride[k];
            if (++idx[k] < len[k]) break;
            off -= stride[k] * len[k];
            idx[k] = 0;
        }
    }
}

// numpy's arange length for integer bounds: ceil((end - start) / step), at least 0.
inline i64 arange_len(i64 start, i64 end, i64 step) {
    const i64 span = end - start;
    const i64 n = step > 0 ? (span + step - 1) / step : (span + step + 1) / step;
    return n > 0 ? n : 0;
}

// --- activations --------------------------------------------------------------------------------
// Paddle's mish: x * tanh(softplus(x)), softplus(x) = x where x > threshold (the kernel's
// _softplus_thr: log(1 + exp(min(x, threshold))) otherwise), all in float.
inline float mish_softplus(float x, float threshold) {
    return x > threshold ? x : logaddexp0(fminnp(x, threshold));
}
inline float mish(float x, float threshold) { return x * std::tanh(mish_softplus(x, threshold)); }
inline float mish_grad(float x, float d, float threshold) {
    const float t = std::tanh(mish_softplus(x, threshold));
    return d * (t + x * (1.0f - t * t) * (x > threshold ? 1.0f : sigmoid(x)));
}

// --- rows along an axis -------------------------------------------------------------------------
// log_softmax of x seen as [pre, n, post] along n (ops/activation.py LogSoftmax):
// (x - m) - log(sum(exp(x - m))). The sum is numpy's: pairwise along a contiguous axis
// (post == 1, exp values staged in out), else element by element in order.
inline void log_softmax(const float* x, float* out, i64 pre, i64 n, i64 post) {
    for (i64 p = 0; p < pre; ++p)
        for (i64 q = 0; q < post; ++q) {
            const float* xr = x + p * n * post + q;
            float* o = out + p * n * post + q;
            float m = -INFINITY;
            for (i64 i = 0; i < n; ++i) m = fmaxnp(m, xr[i * post]);
            float s = 0.0f;
            if (post == 1) {
                for (i64 i = 0; i < n; ++i) o[i] = std::exp(xr[i] - m);
                s = pairwise_sum(o, n, 1);
            } else {
                for (i64 i = 0; i < n; ++i) s += std::exp(xr[i * post] - m);
            }
            const float ls = std::log(s);
            for (i64 i = 0; i < n; ++i) o[i * post] = (xr[i * post] - m) - ls;
        }
}

// its gradient: dx = d - exp(o) * sum(d) along the axis (the sum as in log_softmax).
inline void log_softmax_grad(const float* o, const float* d, float* dx, i64 pre, i64 n,
                             i64 post) {
    for (i64 p = 0; p < pre; ++p)
        for (i64 q = 0; q < post; ++q) {
            const i64 base = p * n * post + q;
            float s = 0.0f;
            if (post == 1) s = pairwise_sum(d + base, n, 1);
            else
                for (i64 i = 0; i < n; ++i) s += d[base + i * post];
            for (i64 i = 0; i < n; ++i)
                dx[base + i * post] = d[base + i * post] - std::exp(o[base + i * post]) * s;
        }
}

// layer_norm over the rows of x [rows, cols] (ops/norm.py LayerNorm): mean and variance by
// numpy's pairwise sums (the squares staged in `tmp`, cols floats), y = (x - m) / sqrt(v + eps),
// then * scale, + bias where given (null: absent); mean/var written where not null.
inline void layer_norm(const float* x, const float* scale, const float* bias, float* y,
                       float* mean, float* var, float* tmp, i64 rows, i64 cols, float eps) {
    for (i64 r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        const float m = pairwise_sum(xr, cols, 1) / (float)cols;
        for (i64 j = 0; j < cols; ++j) {
            const float t = xr[j] - m;
            tmp[j] = t * t;
        }
        const float v = pairwise_sum(tmp, cols, 1) / (float)cols;
        const float s = std::sqrt(v + eps);
        for (i64 j = 0; j < cols; ++j) {
            float t = (xr[j] - m) / s;
            if (scale) t = t * scale[j];
            if (bias) t = t + bias[j];
            yr[j] = t;
        }
        if (mean) mean[r] = m;
        if (var) var[r] = v;
    }
}

// its gradient (LayerNormGrad): per row, xhat = (x - mean) * inv, dxhat = d * scale,
// dx = inv * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) (row means pairwise, staged in
// tmp); dscale / dbias (where not null) sum d * xhat / d over the rows as numpy's sum over axis
// 0 does: row by row in order, or with one column (a contiguous run) pairwise. tmp holds
// 2 * cols + 2 * rows floats.
inline void layer_norm_grad(const float* x, const float* scale, const float* mean,
                            const float* var, const float* d, float* dx, float* dscale,
                            float* dbias, float* tmp, i64 rows, i64 cols, float eps) {
    float* t1 = tmp;
    float* t2 = tmp + cols;
    float* c1 = tmp + 2 * cols;          // one column: d * xhat and d of each row
    float* c2 = c1 + rows;
    const bool column = cols == 1;
    if (dscale)
        for (i64 j = 0; j < cols; ++j) dscale[j] = 0.0f;
    if (dbias)
        for (i64 j = 0; j < cols; ++j) dbias[j] = 0.0f;
    for (i64 r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        const float* dr = d + r * cols;
        const float inv = 1.0f / std::sqrt(var[r] + eps);
        const float mu = mean[r];
        for (i64 j = 0; j < cols; ++j) {
            const float xh = (xr[j] - mu) * inv;
            const float g = scale ? dr[j] * scale[j] : dr[j];
            t1[j] = g;
            t2[j] = g * xh;
            if (column) {
                c1[r] = dr[j] * xh;
                c2[r] = dr[j];
            } else {
                if (dscale) dscale[j] += dr[j] * xh;
                if (dbias) dbias[j] += dr[j];
            }
        }
        if (!dx) continue;
        const float m1 = pairwise_sum(t1, cols, 1) / (float)cols;
        const float m2 = pairwise_sum(t2, cols, 1) / (float)cols;
        float* o = dx + r * cols;
        for (i64 j = 0; j < cols; ++j) {
            const float xh = (xr[j] - mu) * inv;
            o[j] = inv * ((t1[j] - m1) - xh * m2);
        }
    }
    if (column) {
        if (dscale) dscale[0] = pairwise_sum(c1, rows, 1);
        if (dbias) dbias[0] = pairwise_sum(c2, rows, 1);
    }
}

}  // namespace fl
