/* The runtime of the C target (codegen/emit/c/): plain C99, what its emitters and the
 * segment function call. A segment is `int fl_seg_N(int64_t* args, char* arena, int64_t
 * cap, char* err)` with segment_args.h's records, as the C++ target's; the arithmetic is
 * written as numerics.h writes it for the C++ target (numpy's NaN rule for max/min, the
 * stable sigmoid), in C's float functions. */
#ifndef FLUIDITY_C_RT_H
#define FLUIDITY_C_RT_H
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "segment_args.h"
#include "sizes.h"

#define FL_MISMATCH (-1)

/* A message in `err`; op k's return code (status.h's fail). */
static inline int fl_fail(char* err, int k, const char* msg) {
    snprintf(err, 512, "%s", msg);
    return 2 + k;
}

/* Inputs of other shapes than the segment was built for (status.h's mismatch). */
static inline int fl_mismatch(char* err, const char* msg) {
    snprintf(err, 512, "%s", msg);
    return FL_MISMATCH;
}

static inline int64_t fl_max2(int64_t a, int64_t b) { return a > b ? a : b; }

static inline float fl_fmaxnp(float a, float b) { return (a >= b || a != a) ? a : b; }
static inline float fl_fminnp(float a, float b) { return (a <= b || a != a) ? a : b; }
static inline float fl_sign(float x) { return x > 0 ? 1.0f : (x < 0 ? -1.0f : x); }

static inline float fl_sigmoid(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

/* C[M,N] = A[M,K] @ B[K,N], row-major, a plain loop: each output summed over k in order. */
static inline void fl_matmul(const float* a, const float* b, float* c, int64_t m, int64_t n,
                             int64_t k) {
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            float s = 0.0f;
            for (int64_t t = 0; t < k; ++t) s += a[i * k + t] * b[t * n + j];
            c[i * n + j] = s;
        }
}

/* softmax over the last axis of [rows, cols]: exp(max(x - max, -64)) / their sum, summed in
   order (Fluid's clip at -64, as ops/activation.py's softmax). */
static inline void fl_softmax_rows(const float* x, float* out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* o = out + r * cols;
        float m = xr[0], s = 0.0f;
        for (int64_t c = 1; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        for (int64_t c = 0; c < cols; ++c) {
            const float v = xr[c] - m;
            s += (o[c] = expf(v < -64.0f ? -64.0f : v));
        }
        for (int64_t c = 0; c < cols; ++c) o[c] = o[c] / s;
    }
}

#endif
