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

#include "segment_args.h"   // the segment's arguments (codegen/abi.py)
#include "sizes.h"          // overflow-checked sizes of the arena
#include "status.h"     // fail, mismatch: the segment's return codes, shared with cuda_rt.h
#include "numerics.h"   // fmaxnp, sigmoid, pairwise_sum, gelu, ...: shared with cuda_rt.h

namespace fl {

using i64 = int64_t;

// --- errors: a kernel that finds bad input writes a message and the segment returns -------
struct Error {
    char* buf;
    i64 len;
};


// --- BLAS ---------------------------------------------------------------------------------
// C[M,N] = alpha * op(A) @ op(B) + beta * C, row-major, leading dims given.
//
// One row (M == 1) or one column (N == 1) of C is a matrix-vector product and goes to sgemv,
// as numpy's matmul sends it (so a batch-1 layer rounds as the interpreter's does): sgemm
// would first copy the whole matrix into its packed panels, which at batch 1 costs more than
// the product (measured: a third of a batch-1 MLP training step). With beta = 0 the output
// is zeroed first, so what the arena held before (a NaN) is never scaled into it.
inline void gemv_of_gemm(bool ta, bool tb, i64 M, i64 N, i64 K, float alpha, const float* A,
                         i64 lda, const float* B, i64 ldb, float beta, float* C, i64 ldc) {
    if (M == 1) {           // C[0,:] = alpha * op(B)^T a + beta C, a = op(A)'s one row
        const i64 inca = ta ? lda : 1, incc = 1;
        if (beta == 0.0f) for (i64 j = 0; j < N; ++j) C[j] = 0.0f;
        if (tb)             // op(B) = B^T, B stored [N, K]: C = B a
            scipy_cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)N, (blasint)K, alpha, B,
                              (blasint)ldb, A, (blasint)inca, beta, C, (blasint)incc);
        else                // B stored [K, N]: C = B^T a
            scipy_cblas_sgemv(CblasRowMajor, CblasTrans, (blasint)K, (blasint)N, alpha, B,
                              (blasint)ldb, A, (blasint)inca, beta, C, (blasint)incc);
        return;
    }
    // N == 1: C[:,0] = alpha * op(A) b + beta C, b = op(B)'s one column
    const i64 incb = tb ? 1 : ldb;
    if (beta == 0.0f) for (i64 i = 0; i < M; ++i) C[i * ldc] = 0.0f;
    if (ta)                 // op(A) = A^T, A stored [K, M]
        scipy_cblas_sgemv(CblasRowMajor, CblasTrans, (blasint)K, (blasint)M, alpha, A,
                          (blasint)lda, B, (blasint)incb, beta, C, (blasint)ldc);
    else
        scipy_cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)M, (blasint)K, alpha, A,
                          (blasint)lda, B, (blasint)incb, beta, C, (blasint)ldc);
}

inline void gemm(bool ta, bool tb, i64 M, i64 N, i64 K, float alpha, const float* A, i64 lda,
                 const float* B, i64 ldb, float beta, float* C, i64 ldc) {
    if (M == 0 || N == 0) return;
    if (K == 0) {
        for (i64 i = 0; i < M; ++i)
            for (i64 j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
        return;
    }
    if (M == 1 || N == 1) {
        gemv_of_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
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

// Y = A[M,K]^T @ D[M,N] as the numpy kernels' _at_b: for one row an outer product (exactly
// a * d, as numpy's multiply), else one gemm.
inline void at_b(i64 M, i64 K, i64 N, const float* A, const float* D, float* Y) {
    if (M == 1) {
        for (i64 i = 0; i < K; ++i)
            for (i64 j = 0; j < N; ++j) Y[i * N + j] = A[i] * D[j];
        return;
    }
    gemm(true, false, K, N, M, 1.0f, A, K, D, N, 0.0f, Y, N);
}

// P -= lr[0] * (A^T @ D) in place: sgd applied where its gradient is made (the gradient is
// never stored). One row: P[i,j] - r * (a_i * d_j), the unfused arithmetic exactly; more:
// one gemm accumulating -r * A^T D into P.
inline void at_b_update(i64 M, i64 K, i64 N, const float* A, const float* D, float* P,
                        const float* lr) {
    const float r = lr[0];
    if (M == 1) {
        for (i64 i = 0; i < K; ++i) {
            const float a = A[i];
            float* p = P + i * N;
            for (i64 j = 0; j < N; ++j) p[j] = p[j] - r * (a * D[j]);
        }
        return;
    }
    gemm(true, false, K, N, M, -r, A, K, D, N, 1.0f, P, N);
}

// --- rows of a matrix -----------------------------------------------------------------------
// softmax over the last axis of a [rows, cols] matrix, as ops/activation.py's softmax:
// e = exp(max(x - max, -64)); e / sum(e) (Fluid's clip: no probability underflows to 0).
inline void softmax_rows(const float* x, float* out, i64 rows, i64 cols) {
    for (i64 r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* o = out + r * cols;
        float m = xr[0];
        for (i64 c = 1; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        for (i64 c = 0; c < cols; ++c) {
            const float v = xr[c] - m;
            o[c] = std::exp(v < -64.0f ? -64.0f : v);
        }
        float s = pairwise_sum(o, cols, 1);
        for (i64 c = 0; c < cols; ++c) o[c] = o[c] / s;
    }
}

// softmax's gradient over rows: dx = o * (d - sum(d * o)), the sum pairwise as numpy's.
inline void softmax_rows_grad(const float* o, const float* d, float* dx, i64 rows, i64 cols) {
    for (i64 r = 0; r < rows; ++r) {
        const float* orow = o + r * cols;
        const float* drow = d + r * cols;
        float* out = dx + r * cols;
        for (i64 c = 0; c < cols; ++c) out[c] = drow[c] * orow[c];
        const float s = pairwise_sum(out, cols, 1);
        for (i64 c = 0; c < cols; ++c) out[c] = orow[c] * (drow[c] - s);
    }
}

// --- losses -----------------------------------------------------------------------------------
// softmax_with_cross_entropy over [rows, cols] logits with one int64 label per row, as the
// numpy kernel computes it (ops/loss.py): when every label is in range and none is ignored,
// prob = e / s and loss = log(s) - shifted[label]; otherwise through log_softmax, loss 0 at
// ignored rows. Returns 0, or -1 with a message for a label out of range.
inline int softmax_xent_hard(const float* x, const int64_t* label, float* prob, float* loss,
                             i64 rows, i64 cols, i64 ignore_index, char* err) {
    bool fast = true;
    for (i64 r = 0; r < rows; ++r) {
        i64 l = label[r];
        if (l < 0 || l >= cols || (ignore_index >= 0 && ignore_index < cols && l == ignore_index))
            fast = false;
        if (l != ignore_index && (l < 0 || l >= cols)) {
            std::snprintf(err, 512, "label %lld is out of range [0, %lld) (ignore_index=%lld)",
                          (long long)l, (long long)cols, (long long)ignore_index);
            return -1;
        }
    }
    for (i64 r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* p = prob + r * cols;
        float m = xr[0];
        for (i64 c = 1; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        for (i64 c = 0; c < cols; ++c) p[c] = std::exp(xr[c] - m);
        const float s = pairwise_sum(p, cols, 1);
        const i64 l = label[r];
        if (fast) {
            loss[r] = std::log(s) - (xr[l] - m);
            for (i64 c = 0; c < cols; ++c) p[c] = p[c] / s;
        } else {
            const float ls = std::log(s);
            const bool ignored = l == ignore_index;
            loss[r] = ignored ? 0.0f : -((xr[l] - m) - ls);
            for (i64 c = 0; c < cols; ++c) p[c] = std::exp((xr[c] - m) - ls);
        }
    }
    return 0;
}

// its gradient: d = prob * dloss; d[label] -= dloss (rows whose label is ignored: 0).
inline void softmax_xent_hard_grad(const float* prob, const int64_t* label, const float* dloss,
                                   float* d, i64 rows, i64 cols, i64 ignore_index) {
    for (i64 r = 0; r < rows; ++r) {
        const float* p = prob + r * cols;
        float* o = d + r * cols;
        const i64 l = label[r];
        const float g = l == ignore_index ? 0.0f : dloss[r];
        for (i64 c = 0; c < cols; ++c) o[c] = p[c] * g;
        if (l >= 0 && l < cols) o[l] = o[l] - g;
    }
}

// --- optimizers (dense) --------------------------------------------------------------------------
// Adam as ops/optimizer_ops.py and sparse_kernels.c: moments in float32, the step in double.
inline void adam(float* p, float* m1, float* m2, const float* g, i64 n, double lr_t, float b1,
                 float c1, float b2, float c2, double eps_t) {
    for (i64 i = 0; i < n; ++i) {
        float a = b1 * m1[i] + c1 * g[i];
        float b = b2 * m2[i] + (c2 * g[i]) * g[i];
        m1[i] = a;
        m2[i] = b;
        p[i] = (float)((double)p[i] - lr_t * ((double)a / ((double)std::sqrt(b) + eps_t)));
    }
}

}  // namespace fl

#include "conv.h"
#include "conv_chain.h"   // 1x1 and depthwise conv chains in channel-last layout
#include "volume.h"     // conv3d, conv3d_transpose and 3-D pooling
#include "pyramid.h"    // spp
#include "scatter_nd.h" // gather_nd_grad, scatter_nd_add: checked offsets, ordered adds
#include "sparse.h"
#include "rnn.h"
#include "reduce.h"     // reductions of any type
#include "indexing.h"   // slice, strided_slice, range
#include "rows.h"       // mish, log_softmax, layer_norm
#include "nn.h"
#include "seq.h"
#include "philox.h"    // counter-based random numbers (core/philox.py's twin)
#include "nce.h"        // nce's samplers, cost and gradient
#include "arrays.h"     // tensor arrays and rank tables (DynamicRNN)
#include "beam.h"       // beam_search, beam_search_decode, a computed LoD handed back
