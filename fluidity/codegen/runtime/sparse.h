// Sparse embedding kernels and sparse updates for generated code: the C++ twins of
// fluidity/ops/sparse_kernels.c (same loops, same summation order, same checks before any
// write), with each slot of ids a separate array (generated code passes one per input).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fl {

// S slots of int64 ids, each a LoD tensor with the same B sequences: ids[s][0..n[s]) and its
// level-0 offsets offs[s][0..B], as generated code hands them over.
struct Slots {
    int S;
    int64_t B;
    const int64_t* const* ids;
    const int64_t* const* offs;
    const int64_t* n;
};

// Table rows are read in id order; ask for rows PF ids ahead (sparse_kernels.c measured 128).
constexpr int64_t PF = 128;
inline void prefetch_row(const float* row, int64_t D, bool write) {
    if (write) {
        __builtin_prefetch(row, 1, 0);
        __builtin_prefetch(row + D - 1, 1, 0);
    } else {
        __builtin_prefetch(row, 0, 0);
        __builtin_prefetch(row + D - 1, 0, 0);
    }
}

// Rows looked up by id are asked for LOOKUP_PF_LINES cache lines ahead (at least 4 rows),
// every line of a row (up to 8): under Hogwild the hot rows of a shared table are often in
// the other core's cache, just written there, and a lookup that waits for each row in turn
// pays that transfer (or a lone thread's L3 miss) row after row. Measured on the word2vec
// workloads (real text, 3,881 x 64 tables; synthetic, 5,000 x 32): 5-13% less CPU a batch,
// with one worker thread and with two (benchmarks/RESULTS.md, issue 27); 8, 16 and 64 rows
// ahead measured alike.
constexpr int64_t LOOKUP_PF_LINES = 64;
inline int64_t lookup_pf_rows(int64_t D) {
    const int64_t lines = (D * (int64_t)sizeof(float) + 63) / 64;
    const int64_t rows = LOOKUP_PF_LINES / (lines > 0 ? lines : 1);
    return rows > 4 ? rows : 4;
}
inline void prefetch_row_lines(const float* row, int64_t D, bool write) {
    const int64_t n = D < 8 * 16 ? D : 8 * 16;
    for (int64_t o = 0; o < n; o += 16) {
        if (write) __builtin_prefetch(row + o, 1, 3);
        else __builtin_prefetch(row + o, 0, 3);
    }
    // a row narrower than a line may straddle two (10 floats of a 1e6 x 10 CTR table)
    if (write) __builtin_prefetch(row + n - 1, 1, 3);
    else __builtin_prefetch(row + n - 1, 0, 3);
}

// out[k] = W[ids[k]] (zeros where ids[k] == pad): lookup_table's rows, prefetched ahead.
// Ids checked by the caller (0 <= id < rows, or pad).
inline void lookup_rows(const float* W, int64_t D, const int64_t* ids, int64_t n, int64_t pad,
                        float* out) {
    const int64_t A = lookup_pf_rows(D);
    for (int64_t k = 0; k < A && k < n; ++k)
        if (ids[k] != pad) prefetch_row_lines(W + ids[k] * D, D, false);
    for (int64_t k = 0; k < n; ++k) {
        if (k + A < n && ids[k + A] != pad) prefetch_row_lines(W + ids[k + A] * D, D, false);
        const int64_t r = ids[k];
        if (r == pad) std::memset(out + k * D, 0, sizeof(float) * (size_t)D);
        else std::memcpy(out + k * D, W + r * D, sizeof(float) * (size_t)D);
    }
}

// lookup_table_grad fused into its sparse sgd: P[ids[k]] += alpha * dout[k] (a pad id's
// row adds alpha * 0), in id order, duplicates accumulating; the rows prefetched for write
// as lookup_rows does. Ids checked by the caller.
inline void lookup_grad_sgd(float* P, int64_t D, const int64_t* ids, int64_t n, int64_t pad,
                            const float* dout, float alpha) {
    const int64_t A = lookup_pf_rows(D);
    for (int64_t k = 0; k < A && k < n; ++k)
        if (ids[k] != pad) prefetch_row_lines(P + ids[k] * D, D, true);
    for (int64_t k = 0; k < n; ++k) {
        if (k + A < n && ids[k + A] != pad) prefetch_row_lines(P + ids[k + A] * D, D, true);
        float* p = P + ids[k] * D;
        const float* g = dout + k * D;
        const bool is_pad = ids[k] == pad;
        for (int64_t j = 0; j < D; ++j) p[j] += alpha * (is_pad ? 0.0f : g[j]);
    }
}

// 0, or -1 with a message: each slot's offsets start at 0, never decrease and end at its
// number of ids; every slot holds B sequences (n_offs[s] == B + 1).
inline int check_slots(const Slots& sl, const int64_t* n_offs, const char* op, char* err) {
    for (int s = 0; s < sl.S; ++s) {
        const int64_t* o = sl.offs[s];
        if (n_offs[s] != sl.B + 1) {
            std::snprintf(err, 512, "%s: Ids #%d holds %lld sequences, Ids #0 %lld; every slot "
                          "needs one per example", op, s, (long long)(n_offs[s] - 1),
                          (long long)sl.B);
            return -1;
        }
        bool bad = o[0] != 0 || o[sl.B] != sl.n[s];
        for (int64_t i = 0; i < sl.B && !bad; ++i) bad = o[i + 1] < o[i];
        if (bad) {
            std::snprintf(err, 512, "%s: the LoD of Ids #%d does not fit its %lld ids (offsets "
                          "must start at 0, not decrease and end at the number of ids)", op, s,
                          (long long)sl.n[s]);
            return -1;
        }
    }
    return 0;
}

inline int check_ids(const int64_t* ids, int64_t n, int64_t H, const char* op, char* err) {
    for (int64_t k = 0; k < n; ++k)
        if (ids[k] < 0 || ids[k] >= H) {
            std::snprintf(err, 512, "%s: id %lld is out of range for a table of %lld rows", op,
                          (long long)ids[k], (long long)H);
            return -1;
        }
    return 0;
}

// out[i, s*D:(s+1)*D] = sum of W[id] over the ids of sequence i of slot s (pad ids skipped),
// summed in id order from zero.
inline void pool(const float* W, int64_t D, const Slots& sl, int64_t pad, float* out) {
    const int64_t width = sl.S * D;
    std::memset(out, 0, sizeof(float) * (size_t)(sl.B * width));
    for (int s = 0; s < sl.S; ++s) {
        const int64_t *o = sl.offs[s], *id = sl.ids[s];
        const int64_t n = sl.n[s];
        for (int64_t j = 0; j < PF && j < n; ++j) prefetch_row(W + id[j] * D, D, false);
        for (int64_t i = 0; i < sl.B; ++i) {
            float* dst = out + i * width + s * D;
            for (int64_t j = o[i]; j < o[i + 1]; ++j) {
                if (j + PF < n) prefetch_row(W + id[j + PF] * D, D, false);
                if (id[j] == pad) continue;
                const float* src = W + id[j] * D;
                for (int64_t d = 0; d < D; ++d) dst[d] += src[d];
            }
        }
    }
}

// The rows of the table's sparse gradient, one per id (slot order): its sequence's slice of
// dout (zeros for pad ids); rows[k] = the id.
inline void pool_grad(const float* dout, int64_t D, const Slots& sl, int64_t pad, float* value,
                      int64_t* rows) {
    const int64_t width = sl.S * D;
    int64_t base = 0;
    for (int s = 0; s < sl.S; ++s) {
        const int64_t *o = sl.offs[s], *id = sl.ids[s];
        for (int64_t i = 0; i < sl.B; ++i) {
            const float* src = dout + i * width + s * D;
            for (int64_t j = o[i]; j < o[i + 1]; ++j) {
                float* v = value + (base + j) * D;
                rows[base + j] = id[j];
                if (id[j] == pad) std::memset(v, 0, sizeof(float) * (size_t)D);
                else std::memcpy(v, src, sizeof(float) * (size_t)D);
            }
        }
        base += sl.n[s];
    }
}

// pool_grad followed by the sparse sgd (P[id] += -lr * row, duplicates accumulating, in id
// order): the same arithmetic without the gradient in memory. Ids checked by the caller.
inline void pool_grad_sgd(const float* dout, int64_t D, const Slots& sl, int64_t pad, float* P,
                          float alpha) {
    const int64_t width = sl.S * D;
    for (int s = 0; s < sl.S; ++s) {
        const int64_t *o = sl.offs[s], *id = sl.ids[s];
        const int64_t n = sl.n[s];
        for (int64_t j = 0; j < PF && j < n; ++j) prefetch_row(P + id[j] * D, D, true);
        for (int64_t i = 0; i < sl.B; ++i) {
            const float* src = dout + i * width + s * D;
            for (int64_t j = o[i]; j < o[i + 1]; ++j) {
                if (j + PF < n) prefetch_row(P + id[j + PF] * D, D, true);
                float* p = P + id[j] * D;
                if (id[j] == pad)
                    for (int64_t d = 0; d < D; ++d) p[d] += alpha * 0.0f;
                else
                    for (int64_t d = 0; d < D; ++d) p[d] += alpha * src[d];
            }
        }
    }
}

// P[rows[k]] += alpha * V[k], duplicates accumulating (Paddle's sparse SGD).
inline void rows_axpy(float* P, int64_t D, const int64_t* rows, int64_t n, const float* V,
                      float alpha) {
    for (int64_t a = 0; a < n; a += PF) {
        const int64_t b = a + PF < n ? a + PF : n;
        for (int64_t k = a; k < b; ++k) prefetch_row(P + rows[k] * D, D, true);
        for (int64_t k = a; k < b; ++k) {
            float* p = P + rows[k] * D;
            const float* v = V + k * D;
            for (int64_t d = 0; d < D; ++d) p[d] += alpha * v[d];
        }
    }
}

// The unique rows in first-seen order with their values summed in order (Paddle's MergeAdd,
// by an open-addressing table in `slot`, cap >= 2n a power of two): returns their number.
inline int64_t merge_rows(const int64_t* rows, const float* V, int64_t n, int64_t D,
                          int64_t* out_rows, float* out_V, int64_t* slot, int64_t cap) {
    std::memset(slot, 0xff, sizeof(int64_t) * (size_t)cap);
    const int shift = 64 - __builtin_ctzll((unsigned long long)cap);
    int64_t m = 0;
    for (int64_t k = 0; k < n; ++k) {
        uint64_t h = ((uint64_t)rows[k] * 0x9E3779B97F4A7C15ULL) >> shift;
        while (slot[h] >= 0 && out_rows[slot[h]] != rows[k]) h = (h + 1) & (uint64_t)(cap - 1);
        const float* v = V + k * D;
        if (slot[h] < 0) {
            slot[h] = m;
            out_rows[m] = rows[k];
            std::memcpy(out_V + m * D, v, sizeof(float) * (size_t)D);
            ++m;
        } else {
            float* o = out_V + slot[h] * D;
            for (int64_t d = 0; d < D; ++d) o[d] += v[d];
        }
    }
    return m;
}

// A power of two >= 2n that fits in `room` int64 entries (room >= 4n + 16 always does).
inline int64_t merge_cap(int64_t n) {
    int64_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    return cap;
}

// Adam on the given rows (unique) of P, M1, M2 from G's rows (lazy mode), as adam_f32.
inline void adam_rows(float* P, float* M1, float* M2, const float* G, const int64_t* rows,
                      int64_t n, int64_t D, double lr_t, float b1, float c1, float b2, float c2,
                      double eps_t) {
    for (int64_t k = 0; k < n; ++k) {
        const int64_t base = rows[k] * D;
        float *p = P + base, *m1 = M1 + base, *m2 = M2 + base;
        const float* g = G + k * D;
        for (int64_t d = 0; d < D; ++d) {
            float a = b1 * m1[d] + c1 * g[d];
            float b = b2 * m2[d] + (c2 * g[d]) * g[d];
            m1[d] = a;
            m2[d] = b;
            p[d] = (float)((double)p[d] - lr_t * ((double)a / ((double)std::sqrt(b) + eps_t)));
        }
    }
}

// Adagrad on the given rows, as adagrad_f32.
inline void adagrad_rows(float* P, float* M, const float* G, const int64_t* rows, int64_t n,
                         int64_t D, float lr, float eps) {
    for (int64_t k = 0; k < n; ++k) {
        float *p = P + rows[k] * D, *m = M + rows[k] * D;
        const float* g = G + k * D;
        for (int64_t d = 0; d < D; ++d) {
            float v = m[d] + g[d] * g[d];
            m[d] = v;
            p[d] = p[d] - (lr * g[d]) / (std::sqrt(v) + eps);
        }
    }
}

}  // namespace fl
