// Index-addressed slices for generated code (ops/scatter.py): the offsets of Index's rows
// into X, every entry checked first, and np.add.at's row-ordered adds. gather_nd_grad,
// scatter_nd_add and scatter_nd_add_grad use them.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace fl {

// off[r] = the element offset of the slice row r of Index [rows, k] addresses through X's
// first k dims (xdims; a negative entry counts from the end; k = 0: the whole X, offset 0),
// `slice` elements a slice. Every entry is checked first, column by column as the kernel
// checks them, and the first one out of range named with the op's name.
template <class I>
inline int nd_offsets(const I* index, int64_t rows, int k, const int64_t* xdims, int64_t slice,
                      int64_t* off, const char* name, char* err, int op) {
    int64_t stride[8];
    int64_t s = slice;
    for (int j = k - 1; j >= 0; --j) {
        stride[j] = s;
        s *= xdims[j];
    }
    for (int j = 0; j < k; ++j)
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t c = (int64_t)index[r * k + j];
            if (c < -xdims[j] || c >= xdims[j]) {
                std::snprintf(err, 512, "%s: index %lld is out of range for dim %d of size %lld",
                              name, (long long)c, j, (long long)xdims[j]);
                return 2 + op;
            }
        }
    for (int64_t r = 0; r < rows; ++r) {
        int64_t o = 0;
        for (int j = 0; j < k; ++j) {
            const int64_t c = (int64_t)index[r * k + j];
            o += (c < 0 ? c + xdims[j] : c) * stride[j];
        }
        off[r] = o;
    }
    return 0;
}

// dst[off[r] + j] += src[r * slice + j], rows in order (np.add.at's order: duplicates add up
// one after another).
template <class T>
inline void add_slices_at(T* dst, const T* src, const int64_t* off, int64_t rows, int64_t slice) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < slice; ++j) dst[off[r] + j] += src[r * slice + j];
}

// dst[r * slice + j] = src[off[r] + j]: the slices gathered.
template <class T>
inline void gather_slices(T* dst, const T* src, const int64_t* off, int64_t rows, int64_t slice) {
    for (int64_t r = 0; r < rows; ++r)
        if (slice > 0) std::memcpy(dst + r * slice, src + off[r], sizeof(T) * (size_t)slice);
}

}  // namespace fl
