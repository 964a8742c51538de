// Fluidity's runtime for generated code: the primitives op emitters call.
//
// Generated code is one C++ translation unit per program block; each compiled segment of
// the block is `extern "C" int fl_seg_N(int64_t* args, char* arena, int64_t cap, char* err)`.
// Everything here is header-only and inline so that the compiler sees through it; float
// arithmetic is written to round as numpy's kernels do (no FMA contraction: the build
// passes -ffp-contract=off), BLAS calls go to OpenBLAS (scipy-openblas32).
#pragma once
#include <cblas.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace fl {

using i64 = int64_t;

// --- errors: a kernel that finds bad input writes a message and the segment returns -------
struct Error {
    char* buf;
    i64 len;
};

// Format a message into the error buffer; returns the segment's error code for op k.
inline int fail(char* err, int op_index, const char* msg) {
    std::snprintf(err, 512, "%s", msg);
    return 2 + op_index;
}

// Arena slots are 64-byte aligned (cache lines; AVX-512 loads).
inline int64_t align(int64_t n) { return (n + 63) / 64 * 64; }

// --- BLAS ---------------------------------------------------------------------------------
// C[M,N] = alpha * op(A) @ op(B) + beta * C, row-major, leading dims given.
inline void gemm(bool ta, bool tb, i64 M, i64 N, i64 K, float alpha, const float* A, i64 lda,
                 const float* B, i64 ldb, float beta, float* C, i64 ldc) {
    if (M == 0 || N == 0) return;
    if (K == 0) {
        for (i64 i = 0; i < M; ++i)
            for (i64 j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
        return;
    }
    scipy_cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (blasint)M, (blasint)N, (blasint)K, alpha, A, (blasint)lda, B, (blasint)ldb,
                beta, C, (blasint)ldc);
}

// Plain row-major matmul without transposes: C = A[M,K] @ B[K,N].
inline void matmul(i64 M, i64 N, i64 K, const float* A, const float* B, float* C) {
    gemm(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
}

// --- numerics shared with the numpy kernels -------------------------------------------------
inline float sigmoid(float x) {   // the same branches as ops/activation.py's _sigmoid
    if (x >= 0) return 1.0f / (1.0f + std::exp(-x));
    float e = std::exp(x);
    return e / (1.0f + e);
}

inline float logaddexp0(float x) {   // log(1 + exp(x)), numpy's logaddexp(0, x)
    return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

// numpy's pairwise summation of n contiguous floats (umath/loops_utils pairwise_sum), so a
// compiled full reduction rounds as numpy's does.
inline float pairwise_sum(const float* a, i64 n, i64 stride) {
    if (n < 8) {
        float res = 0.0f;
        for (i64 i = 0; i < n; ++i) res += a[i * stride];
        return res;
    }
    if (n <= 128) {
        float r[8];
        for (int j = 0; j < 8; ++j) r[j] = a[j * stride];
        i64 i = 8;
        for (; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; ++j) r[j] += a[(i + j) * stride];
        float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; ++i) res += a[i * stride];
        return res;
    }
    i64 n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_sum(a, n2, stride) + pairwise_sum(a + n2 * stride, n - n2, stride);
}

// --- rows of a matrix -----------------------------------------------------------------------
// softmax over the last axis of a [rows, cols] matrix, as ops/activation.py's softmax:
// e = exp(x - max); e / sum(e).
inline void softmax_rows(const float* x, float* out, i64 rows, i64 cols) {
    for (i64 r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* o = out + r * cols;
        float m = xr[0];
        for (i64 c = 1; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        for (i64 c = 0; c < cols; ++c) o[c] = std::exp(xr[c] - m);
        float s = pairwise_sum(o, cols, 1);
        for (i64 c = 0; c < cols; ++c) o[c] = o[c] / s;
    }
}

}  // namespace fl
