// Fluidity's runtime for generated CUDA code (codegen/cuda.py): what CUDA emitters call.
//
// A compiled segment is the same `extern "C" int fl_seg_N(int64_t* args, char* arena,
// int64_t cap, char* err)` as the C++ target's: args (host memory) holds device pointers
// and dims, the arena is device memory; the segment function and each op's function run on
// the host and launch kernels. Every kernel is a grid-stride loop (fl::cu::each) over a
// __device__ lambda, one thread per element or per row: no shared memory, no
// __syncthreads, so the host emulation (cuda_host.h, FL_CUDA_EMULATE) runs the very same
// kernels one thread at a time. Matmuls go to cuBLAS (FL_HAVE_CUBLAS), or, where cuBLAS is
// not installed, to a plain kernel here (one thread per output element).
#pragma once
#ifdef FL_CUDA_EMULATE
#include "cuda_host.h"
#else
#include <cuda_runtime.h>
#if __has_include(<cublas_v2.h>) && defined(FL_USE_CUBLAS)
#include <cublas_v2.h>
#define FL_HAVE_CUBLAS 1
#endif
#define FL_LAUNCH(kernel, grid, block, ...) kernel<<<(grid), (block)>>>(__VA_ARGS__)
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "segment_args.h"   // the segment's arguments (codegen/abi.py)
#include "sizes.h"          // overflow-checked sizes of the arena
#include "status.h"     // fail, mismatch: the C++ target's return codes (host)
#define FL_HD __host__ __device__
#include "numerics.h"   // the C++ target's arithmetic (fmaxnp, pairwise_sum, gelu, ...), FL_HD

namespace fl {

using i64 = int64_t;

// --- rows (one device thread each): softmax and its loss, as fluidity.h's loops ----------------
FL_HD inline void softmax_row(const float* xr, float* o, i64 cols) {
    float m = xr[0];
    for (i64 c = 1; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    for (i64 c = 0; c < cols; ++c) {   // Fluid's clip at -64: no probability is 0
        const float v = xr[c] - m;
        o[c] = expf(v < -64.0f ? -64.0f : v);
    }
    const float s = pairwise_sum(o, cols, 1);
    for (i64 c = 0; c < cols; ++c) o[c] = o[c] / s;
}

FL_HD inline void softmax_row_grad(const float* orow, const float* drow, float* out, i64 cols) {
    for (i64 c = 0; c < cols; ++c) out[c] = drow[c] * orow[c];
    const float s = pairwise_sum(out, cols, 1);
    for (i64 c = 0; c < cols; ++c) out[c] = orow[c] * (drow[c] - s);
}

// One row of softmax_with_cross_entropy with hard label l: the probabilities into p, the
// loss returned (0 for an ignored row; NaN for a label out of range, which the C++ target
// reports as an error: a kernel cannot stop the run).
FL_HD inline float softmax_xent_row(const float* xr, i64 l, float* p, i64 cols, i64 ignore) {
    float m = xr[0];
    for (i64 c = 1; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    for (i64 c = 0; c < cols; ++c) p[c] = expf(xr[c] - m);
    const float s = pairwise_sum(p, cols, 1);
    if (l >= 0 && l < cols && l != ignore) {
        for (i64 c = 0; c < cols; ++c) p[c] = p[c] / s;
        return logf(s) - (xr[l] - m);
    }
    const float ls = logf(s);
    for (i64 c = 0; c < cols; ++c) p[c] = expf((xr[c] - m) - ls);
    return l == ignore ? 0.0f : NAN;
}

FL_HD inline void softmax_xent_row_grad(const float* p, i64 l, float dloss, float* o, i64 cols,
                                        i64 ignore) {
    const float g = l == ignore ? 0.0f : dloss;
    for (i64 c = 0; c < cols; ++c) o[c] = p[c] * g;
    if (l >= 0 && l < cols) o[l] = o[l] - g;
}

// One element of Adam (fluidity.h's fl::adam): moments in float32, the step in double.
FL_HD inline void adam_elem(float* p, float* m1, float* m2, float g, double lr_t, float b1,
                            float c1, float b2, float c2, double eps_t) {
    const float a = b1 * *m1 + c1 * g;
    const float b = b2 * *m2 + (c2 * g) * g;
    *m1 = a;
    *m2 = b;
    *p = (float)((double)*p - lr_t * ((double)a / ((double)sqrtf(b) + eps_t)));
}

namespace cu {

constexpr int THREADS = 256;
constexpr i64 MAX_BLOCKS = 65535;

template <class F>
__global__ void each_kernel(i64 n, F f) {
    const i64 stride = (i64)blockDim.x * gridDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

// f(i) for i in [0, n), one device thread each (a grid-stride loop past 65535 blocks).
template <class F>
inline void each(i64 n, F f) {
    if (n <= 0) return;
    const i64 blocks = std::min<i64>((n + THREADS - 1) / THREADS, MAX_BLOCKS);
    const int threads = (int)std::min<i64>(n, THREADS);
    FL_LAUNCH(each_kernel<F>, blocks, threads, n, f);
}

#ifdef FL_HAVE_CUBLAS
inline cublasHandle_t blas() {
    static cublasHandle_t h = [] { cublasHandle_t x; cublasCreate(&x); return x; }();
    return h;
}
#endif

// C[M,N] = alpha * op(A) @ op(B) + beta * C, row-major with leading dims (fluidity.h's
// fl::gemm, on device memory). cuBLAS is column-major: C^T = op(B)^T op(A)^T.
inline void gemm(bool ta, bool tb, i64 M, i64 N, i64 K, float alpha, const float* A, i64 lda,
                 const float* B, i64 ldb, float beta, float* C, i64 ldc) {
    if (M == 0 || N == 0) return;
#ifdef FL_HAVE_CUBLAS
    if (K > 0) {
        cublasSgemm(blas(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                    (int)N, (int)M, (int)K, &alpha, B, (int)ldb, A, (int)lda, &beta, C, (int)ldc);
        return;
    }
#endif
    each(M * N, [=] __device__(i64 t) {
        const i64 i = t / N, j = t % N;
        float s = 0.0f;
        for (i64 k = 0; k < K; ++k)
            s += (ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
        C[i * ldc + j] = beta == 0.0f ? alpha * s : alpha * s + beta * C[i * ldc + j];
    });
}

// Fill n floats with v.
inline void fill(float* p, i64 n, float v) {
    each(n, [=] __device__(i64 i) { p[i] = v; });
}

}  // namespace cu
}  // namespace fl

#include "cuda_ops.h"   // the named kernels CUDA emitters call

// --- the device library (codegen/cuda.py device_library): memory and copies for the executor --
#define FL_CUDA_DEVICE_API                                                                      \
    extern "C" int fl_cuda_device_count() {                                                     \
        int n = 0;                                                                              \
        return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;                                   \
    }                                                                                           \
    extern "C" void* fl_cuda_malloc(int64_t n) {                                                \
        void* p = nullptr;                                                                      \
        return cudaMalloc(&p, (size_t)std::max<int64_t>(n, 1)) == cudaSuccess ? p : nullptr;    \
    }                                                                                           \
    extern "C" void fl_cuda_free(void* p) { cudaFree(p); }                                      \
    extern "C" int fl_cuda_copy(void* dst, const void* src, int64_t n, int kind) {              \
        return (int)cudaMemcpy(dst, src, (size_t)n, (cudaMemcpyKind)kind);                      \
    }                                                                                           \
    extern "C" int fl_cuda_zero(void* p, int64_t n) { return (int)cudaMemset(p, 0, (size_t)n); } \
    extern "C" int fl_cuda_sync(char* err) {                                                    \
        cudaError_t e = cudaDeviceSynchronize();                                                \
        if (e == cudaSuccess) e = cudaGetLastError();                                           \
        if (e != cudaSuccess) std::snprintf(err, 512, "%s", cudaGetErrorString(e));             \
        return (int)e;                                                                          \
    }
