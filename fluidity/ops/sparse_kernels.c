/* Sparse embedding kernels (float32 tables, int64 ids) and the optimizer loops that numpy
 * does in several passes or with a sort (Adam's step, merging duplicate gradient rows),
 * called through ctypes by fluidity/ops/sparse_kernels.py, which holds the numpy versions
 * with the same semantics.
 *
 * Layout shared by pool and pool_grad: S slots, each a LoD tensor of ids with B sequences.
 * `ids` holds all slots' ids back to back, slot s at [starts[s], starts[s+1]); `offs` holds
 * the per-slot LoD offsets, slot s at offs + s * offs_stride (offs_stride 0: all slots share
 * one offsets array). `out` / `dout` is [B, S * D]: slot s's pooled rows in columns
 * [s * D, (s + 1) * D) -- the concat of the per-slot results along axis 1.
 *
 * Every kernel validates all of its input before writing anything, so a bad id or LoD leaves
 * the output (and, for rows_axpy, the parameter) untouched. Return codes: 0 ok,
 * 1 id/row out of range (err[0] = the id, err[1] = slot or position), 2 malformed LoD
 * (err[1] = slot).
 */
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A loop worth vectorizing is built for AVX-512, AVX2 and the x86-64 baseline, and the loader
 * picks what the CPU has (GCC's target_clones, a glibc ifunc); elsewhere, the baseline. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__GNUC__) && !defined(__clang__)
#define MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MULTIVERSION
#endif

/* Table rows are read in id order, and a table of 1e6+ rows is cold in cache (and, in shared
 * memory without huge pages, in the TLB): ask for rows PF ids ahead so the misses overlap
 * instead of stalling one after another (both cache lines of a row that straddles two).
 * Each slot starts with a burst of PF prefetches. Measured on a cold 1e6 x 10 table with
 * 26 slots of 128 ids: PF 16 259 us a batch, PF 128 165 us; prefetching across slots
 * (one steady stream, or the next slot's burst while summing this one) was slower. */
#define PF 128
static inline void prefetch_row(const float *row, int64_t D, int write) {
    if (write) {
        __builtin_prefetch(row, 1, 0);
        __builtin_prefetch(row + D - 1, 1, 0);
    } else {
        __builtin_prefetch(row, 0, 0);
        __builtin_prefetch(row + D - 1, 0, 0);
    }
}

static int check_lod(const int64_t *offs, int64_t offs_stride, const int64_t *starts,
                     int64_t S, int64_t B, int64_t *err) {
    for (int64_t s = 0; s < S; s++) {
        const int64_t *o = offs + s * offs_stride;
        if (o[0] != 0 || o[B] != starts[s + 1] - starts[s]) { err[1] = s; return 2; }
        for (int64_t i = 0; i < B; i++)
            if (o[i + 1] < o[i]) { err[1] = s; return 2; }
    }
    return 0;
}

static int check_ids(const int64_t *ids, int64_t n, int64_t H, int64_t *err) {
    for (int64_t k = 0; k < n; k++)
        if (ids[k] < 0 || ids[k] >= H) { err[0] = ids[k]; err[1] = k; return 1; }
    return 0;
}

/* out[i, s*D:(s+1)*D] = sum of W[id] over the ids of sequence i of slot s (pad ids skipped) */
int emb_pool_f32(const float *W, int64_t H, int64_t D, const int64_t *ids,
                 const int64_t *starts, const int64_t *offs, int64_t offs_stride, int64_t S,
                 int64_t B, int64_t pad, float *out, int64_t *err) {
    int rc = check_lod(offs, offs_stride, starts, S, B, err);
    if (rc) return rc;
    if ((rc = check_ids(ids, starts[S], H, err))) return rc;
    int64_t width = S * D;
    memset(out, 0, sizeof(float) * (size_t)(B * width));
    for (int64_t s = 0; s < S; s++) {
        const int64_t *o = offs + s * offs_stride, *id = ids + starts[s];
        int64_t n = starts[s + 1] - starts[s];
        for (int64_t j = 0; j < PF && j < n; j++) prefetch_row(W + id[j] * D, D, 0);
        for (int64_t i = 0; i < B; i++) {
            float *dst = out + i * width + s * D;
            for (int64_t j = o[i]; j < o[i + 1]; j++) {
                if (j + PF < n) prefetch_row(W + id[j + PF] * D, D, 0);
                if (id[j] == pad) continue;
                const float *src = W + id[j] * D;
                for (int64_t d = 0; d < D; d++) dst[d] += src[d];
            }
        }
    }
    return 0;
}

/* value[starts[s] + j] = dout[i, s*D:(s+1)*D] for each id j of sequence i of slot s
 * (zeros for pad ids): the rows of the table's sparse gradient, one per id. */
int emb_pool_grad_f32(const float *dout, int64_t D, const int64_t *ids, const int64_t *starts,
                      const int64_t *offs, int64_t offs_stride, int64_t S, int64_t B,
                      int64_t pad, float *value, int64_t *err) {
    int rc = check_lod(offs, offs_stride, starts, S, B, err);
    if (rc) return rc;
    int64_t width = S * D;
    for (int64_t s = 0; s < S; s++) {
        const int64_t *o = offs + s * offs_stride, *id = ids + starts[s];
        float *v = value + starts[s] * D;
        for (int64_t i = 0; i < B; i++) {
            const float *src = dout + i * width + s * D;
            for (int64_t j = o[i]; j < o[i + 1]; j++) {
                if (id[j] == pad) memset(v + j * D, 0, sizeof(float) * (size_t)D);
                else memcpy(v + j * D, src, sizeof(float) * (size_t)D);
            }
        }
    }
    return 0;
}

/* P[rows[k]] += alpha * V[k] for k < n, duplicates accumulating (Paddle's sparse SGD). */
int rows_axpy_f32(float *P, int64_t H, int64_t D, const int64_t *rows, int64_t n,
                  const float *V, float alpha, int64_t *err) {
    int rc = check_ids(rows, n, H, err);
    if (rc) return rc;
    for (int64_t a = 0; a < n; a += PF) { /* bursts of PF rows, as in emb_pool_f32 */
        int64_t b = a + PF < n ? a + PF : n;
        for (int64_t k = a; k < b; k++) prefetch_row(P + rows[k] * D, D, 1);
        for (int64_t k = a; k < b; k++) {
            float *p = P + rows[k] * D;
            const float *v = V + k * D;
            for (int64_t d = 0; d < D; d++) p[d] += alpha * v[d];
        }
    }
    return 0;
}

/* Paddle's Adam step, in one pass per element, on P, M1, M2 (float32) from G: every element
 * (rows == NULL: n_rows rows of D), or row rows[k] from row k of G (lazy mode; rows unique).
 * Rounding follows the numpy version: moments in float32, the step in double.
 *   m1 = b1 m1 + (1 - b1) g;  m2 = b2 m2 + ((1 - b2) g) g;  p -= lr_t m1 / (sqrt(m2) + eps_t) */
MULTIVERSION
int adam_f32(float *P, float *M1, float *M2, const float *G, const int64_t *rows,
             int64_t n_rows, int64_t D, int64_t H, double lr_t, float b1, float c1, float b2,
             float c2, double eps_t, int64_t *err) {
    if (rows) { /* c1 = 1 - b1 and c2 = 1 - b2 rounded from double, as numpy has them */
        int rc = check_ids(rows, n_rows, H, err);
        if (rc) return rc;
    }
    for (int64_t k = 0; k < n_rows; k++) {
        int64_t base = (rows ? rows[k] : k) * D;
        float *p = P + base, *m1 = M1 + base, *m2 = M2 + base;
        const float *g = G + k * D;
        for (int64_t d = 0; d < D; d++) {
            float a = b1 * m1[d] + c1 * g[d];
            float b = b2 * m2[d] + (c2 * g[d]) * g[d];
            m1[d] = a;
            m2[d] = b;
            p[d] = (float)((double)p[d] - lr_t * ((double)a / ((double)sqrtf(b) + eps_t)));
        }
    }
    return 0;
}

/* The unique values of rows[0:n] in first-seen order (out_rows[0:m]) with their rows of V
 * summed in order (out_V[0:m]): Paddle's MergeAdd without a sort, by an open-addressing
 * table. Returns m, or -1 when out of memory. */
int64_t merge_rows_f32(const int64_t *rows, const float *V, int64_t n, int64_t D,
                       int64_t *out_rows, float *out_V) {
    int64_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    int64_t *slot = malloc(sizeof(int64_t) * (size_t)cap);
    if (!slot) return -1;
    memset(slot, 0xff, sizeof(int64_t) * (size_t)cap); /* -1: empty */
    int shift = 64 - __builtin_ctzll((unsigned long long)cap);
    int64_t m = 0;
    for (int64_t k = 0; k < n; k++) {
        uint64_t h = ((uint64_t)rows[k] * 0x9E3779B97F4A7C15ULL) >> shift;
        while (slot[h] >= 0 && out_rows[slot[h]] != rows[k]) h = (h + 1) & (uint64_t)(cap - 1);
        const float *v = V + k * D;
        if (slot[h] < 0) {
            slot[h] = m;
            out_rows[m] = rows[k];
            memcpy(out_V + m * D, v, sizeof(float) * (size_t)D);
            m++;
        } else {
            float *o = out_V + slot[h] * D;
            for (int64_t d = 0; d < D; d++) o[d] += v[d];
        }
    }
    free(slot);
    return m;
}

/* Adagrad's step, rounding as numpy's (float32 throughout):
 *   m += g g;  p -= (lr g) / (sqrt(m) + eps)
 * on every element (rows == NULL) or on the unique rows `rows` from the rows of G, their
 * cache lines fetched in bursts ahead (with Hogwild they are often in another core's cache). */
MULTIVERSION
int adagrad_f32(float *P, float *M, const float *G, const int64_t *rows, int64_t n_rows,
                int64_t D, int64_t H, float lr, float eps, int64_t *err) {
    if (rows) {
        int rc = check_ids(rows, n_rows, H, err);
        if (rc) return rc;
    }
    for (int64_t a = 0; a < n_rows; a += PF) {
        int64_t b = a + PF < n_rows ? a + PF : n_rows;
        if (rows)
            for (int64_t k = a; k < b; k++) {
                prefetch_row(P + rows[k] * D, D, 1);
                prefetch_row(M + rows[k] * D, D, 1);
            }
        for (int64_t k = a; k < b; k++) {
            int64_t base = (rows ? rows[k] : k) * D;
            float *p = P + base, *m = M + base;
            const float *g = G + k * D;
            for (int64_t d = 0; d < D; d++) {
                float v = m[d] + g[d] * g[d];
                m[d] = v;
                p[d] = p[d] - (lr * g[d]) / (sqrtf(v) + eps);
            }
        }
    }
    return 0;
}
