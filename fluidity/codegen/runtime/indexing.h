// Slicing and ranges for generated code: slice's and strided_slice's bounds as numpy clamps
// them, a box of X copied out or back, arange's length.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>

namespace fl {

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

// --- expand (np.tile) --------------------------------------------------------------------------
// Out = np.tile(X, times) for X [dims] with one time per dim (nd >= 1): X's rows at dim k
// placed, then the finished block of dim k copied times[k] - 1 more times after itself.
// in_inner[k] / out_inner[k]: the elements one index of dim k spans in X / in Out.
template <class T>
inline void tile_dim(const T* x, T* out, int k, int nd, const i64* dims, const i64* times,
                     const i64* in_inner, const i64* out_inner) {
    if (k == nd - 1) std::memcpy(out, x, sizeof(T) * dims[k]);
    else
        for (i64 i = 0; i < dims[k]; ++i)
            tile_dim(x + i * in_inner[k], out + i * out_inner[k], k + 1, nd, dims, times,
                     in_inner, out_inner);
    const i64 block = dims[k] * out_inner[k];
    for (i64 t = 1; t < times[k]; ++t) std::memcpy(out + t * block, out, sizeof(T) * block);
}
template <class T>
inline void tile(const T* x, T* out, int nd, const i64* dims, const i64* times) {
    i64 in_inner[REDUCE_MAX_DIMS], out_inner[REDUCE_MAX_DIMS], a = 1, b = 1;
    for (int k = nd - 1; k >= 0; --k) {
        in_inner[k] = a;
        out_inner[k] = b;
        a *= dims[k];
        b *= dims[k] * times[k];
    }
    if (b == 0) return;
    tile_dim(x, out, 0, nd, dims, times, in_inner, out_inner);
}

// --- gather_nd ---------------------------------------------------------------------------------
// Out[r] = the slice of X (`slice` elements) that row r of Index [rows, k] addresses through
// X's first k dims (xdims; a negative entry counts from the end; k = 0: the whole X). Every
// entry is checked first, column by column as the kernel checks them, and the first out of
// range named.
template <class T, class I>
inline int gather_nd(const T* x, const I* index, T* out, int64_t rows, int k,
                     const i64* xdims, i64 slice, char* err, int op) {
    i64 stride[REDUCE_MAX_DIMS];
    i64 s = slice;
    for (int j = k - 1; j >= 0; --j) {
        stride[j] = s;
        s *= xdims[j];
    }
    for (int j = 0; j < k; ++j)
        for (i64 r = 0; r < rows; ++r) {
            const i64 c = (i64)index[r * k + j];
            if (c < -xdims[j] || c >= xdims[j]) {
                std::snprintf(err, 512, "gather_nd: index %lld is out of range for dim %d of "
                              "size %lld", (long long)c, j, (long long)xdims[j]);
                return 2 + op;
            }
        }
    for (i64 r = 0; r < rows; ++r) {
        i64 off = 0;
        for (int j = 0; j < k; ++j) {
            const i64 c = (i64)index[r * k + j];
            off += (c < 0 ? c + xdims[j] : c) * stride[j];
        }
        if (slice > 0) std::memcpy(out + r * slice, x + off, sizeof(T) * (size_t)slice);
    }
    return 0;
}

// --- flip, reverse ---------------------------------------------------------------------------------
// Out = X (nd dims) reversed along each dim k with rev[k] (np.flip): Out walked in C order, an
// odometer of its index giving X's.
template <class T>
inline void flip(const T* x, T* out, int nd, const i64* dims, const bool* rev) {
    i64 stride[REDUCE_MAX_DIMS], idx[REDUCE_MAX_DIMS], total = 1;
    for (int k = nd - 1; k >= 0; --k) {
        stride[k] = total;
        total *= dims[k];
        idx[k] = 0;
    }
    for (i64 o = 0; o < total; ++o) {
        i64 src = 0;
        for (int k = 0; k < nd; ++k) src += (rev[k] ? dims[k] - 1 - idx[k] : idx[k]) * stride[k];
        out[o] = x[src];
        for (int k = nd - 1; k >= 0; --k) {
            if (++idx[k] < dims[k]) break;
            idx[k] = 0;
        }
    }
}

// --- cumsum ---------------------------------------------------------------------------------------
// Running sums of X as [pre, n, post] along n, in order (np.cumsum: no pairing), from the end when
// `reverse`; `exclusive` leaves each element out of its own sum (the first is 0). Integers wrap.
template <class T>
inline void cumsum(const T* x, T* out, i64 pre, i64 n, i64 post, bool exclusive, bool reverse) {
    for (i64 p = 0; p < pre; ++p)
        for (i64 q = 0; q < post; ++q) {
            T acc = (T)0;
            for (i64 t = 0; t < n; ++t) {
                const i64 at = (p * n + (reverse ? n - 1 - t : t)) * post + q;
                if (exclusive) out[at] = acc;
                acc = t == 0 ? x[at] : add_wrap(acc, x[at]);
                if (!exclusive) out[at] = acc;
            }
        }
}

// --- gather, index_select, index_sample, scatter --------------------------------------------------
// The first of `n` indices outside [lo, hi) named in err as the kernels name it
// ("<op>: index I is out of range for a dim of size D", or the message `fmt` gives with the
// index and the bound); the op's error code, or 0 when every index is in range.
template <class I>
inline int check_index(const I* idx, i64 n, i64 lo, i64 hi, const char* fmt, char* err,
                       int code) {
    for (i64 j = 0; j < n; ++j) {
        const i64 c = (i64)idx[j];
        if (c < lo || c >= hi) {
            std::snprintf(err, 512, fmt, (long long)c, (long long)hi);
            return code;
        }
    }
    return 0;
}

// Out[p, j, q] = X[p, idx[j], q]: X as [pre, n, post], m indices in [-n, n) (checked by the
// caller), a negative one counting from the end (np.take).
template <class T, class I>
inline void take_axis(const T* x, const I* idx, T* out, i64 pre, i64 n, i64 post, i64 m) {
    for (i64 p = 0; p < pre; ++p)
        for (i64 j = 0; j < m; ++j) {
            const i64 c = (i64)idx[j] < 0 ? (i64)idx[j] + n : (i64)idx[j];
            std::memcpy(out + (p * m + j) * post, x + (p * n + c) * post, sizeof(T) * post);
        }
}

// take_axis's gradient: dX = 0, then dX[p, idx[j], q] += dOut[p, j, q] in j's order (np.add.at's).
template <class T, class I>
inline void take_axis_grad(const T* dout, const I* idx, T* dx, i64 pre, i64 n, i64 post, i64 m) {
    std::memset(dx, 0, sizeof(T) * (size_t)(pre * n * post));
    for (i64 p = 0; p < pre; ++p)
        for (i64 j = 0; j < m; ++j) {
            const i64 c = (i64)idx[j] < 0 ? (i64)idx[j] + n : (i64)idx[j];
            T* d = dx + (p * n + c) * post;
            const T* g = dout + (p * m + j) * post;
            for (i64 q = 0; q < post; ++q) d[q] += g[q];
        }
}

}  // namespace fl
