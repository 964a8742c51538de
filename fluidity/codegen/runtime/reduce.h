// Reductions of any element type for generated code (ops/reduce.py's), walking X as numpy's
// reduction does, in numpy's accumulator types, with the element helpers they need (numpy's
// NaN rule for max/min, wrapping integer adds, pairwise sums of any type).
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

// dX of reduce_prod (ops/reduce.py _prod_of_others): each element's Out@GRAD times the product of
// the other elements of its reduced group, the group in C order of the reduced dims, as prefix
// products from the front times suffix products from the back (each a running product in
// order, numpy's cumprod), so a group holding zeros is exact. `before` (count values) and `roff`
// (count offsets) are the caller's scratch.
template <class T>
inline void reduce_prod_grad(const T* x, const T* d, T* dx, int nd, const i64* dims,
                             const bool* red, T* before, i64* roff) {
    i64 stride[REDUCE_MAX_DIMS], s = 1, count = 1, nout = 1;
    for (int k = nd - 1; k >= 0; --k) {
        stride[k] = s;
        s *= dims[k];
        if (red[k]) count *= dims[k];
        else nout *= dims[k];
    }
    if (s == 0) return;
    i64 idx[REDUCE_MAX_DIMS];
    for (int k = 0; k < nd; ++k) idx[k] = 0;
    for (i64 r = 0; r < count; ++r) {            // the reduced dims' offsets, C order
        i64 off = 0;
        for (int k = 0; k < nd; ++k) if (red[k]) off += idx[k] * stride[k];
        roff[r] = off;
        for (int k = nd - 1; k >= 0; --k) {
            if (!red[k]) continue;
            if (++idx[k] < dims[k]) break;
            idx[k] = 0;
        }
    }
    for (int k = 0; k < nd; ++k) idx[k] = 0;
    for (i64 o = 0; o < nout; ++o) {             // the kept dims, C order: Out's
        i64 base = 0;
        for (int k = 0; k < nd; ++k) if (!red[k]) base += idx[k] * stride[k];
        T acc = (T)1;
        for (i64 r = 0; r < count; ++r) {
            before[r] = acc;
            acc = acc * x[base + roff[r]];
        }
        acc = (T)1;
        for (i64 r = count - 1; r >= 0; --r) {
            dx[base + roff[r]] = d[o] * (before[r] * acc);
            acc = acc * x[base + roff[r]];
        }
        for (int k = nd - 1; k >= 0; --k) {
            if (red[k]) continue;
            if (++idx[k] < dims[k]) break;
            idx[k] = 0;
        }
    }
}

}  // namespace fl
