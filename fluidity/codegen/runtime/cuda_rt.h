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

#define FL_HD __host__ __device__

namespace fl {

using i64 = int64_t;

// --- errors (host): the same codes as the C++ target's runtime (fluidity.h) ------------------
inline int fail(char* err, int op_index, const char* msg) {
    std::snprintf(err, 512, "%s", msg);
    return 2 + op_index;
}
constexpr int MISMATCH = -1;
inline int mismatch(char* err, const char* msg) {
    std::snprintf(err, 512, "%s", msg);
    return MISMATCH;
}
inline int64_t align(int64_t n) { return (n + 255) / 256 * 256; }   // device: 256-byte slots

// --- numerics shared with the C++ target (fluidity.h), callable in kernels -------------------
FL_HD inline float fmaxnp(float a, float b) { return (a >= b || a != a) ? a : b; }
FL_HD inline float fminnp(float a, float b) { return (a <= b || a != a) ? a : b; }
FL_HD inline float sigmoid(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}
FL_HD inline float sign(float x) { return x > 0 ? 1.0f : (x < 0 ? -1.0f : x); }
FL_HD inline float logaddexp0(float x) {
    return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x));
}
FL_HD inline float tolerable_log(float x) {
    const float v = logf(x);
    return v != v ? v : (v < -1e20f ? -1e20f : (v > 1e20f ? 1e20f : v));
}

// gelu and its gradient in the precisions of ops_extra.h's (the numpy kernel's).
constexpr double SQRT_2_OVER_PI = 0.7978845608028654;
FL_HD inline double gelu_tanh(float x) {
    const float inner = x + 0.044715f * powf(x, 3.0f);
    return tanh(SQRT_2_OVER_PI * (double)inner);
}
FL_HD inline float gelu(float x, bool approximate) {
    if (approximate) return (float)((double)(0.5f * x) * (1.0 + gelu_tanh(x)));
    return (float)((double)(0.5f * x) * (1.0 + erf((double)(x / 1.4142135623730951f))));
}
FL_HD inline float gelu_grad(float x, float d, bool approximate) {
    if (approximate) {
        const double t = gelu_tanh(x);
        const float poly = 1.0f + 0.134145f * x * x;
        const double g = 0.5 * (1.0 + t) + (double)(0.5f * x) * (1.0 - t * t) * SQRT_2_OVER_PI
                         * (double)poly;
        return (float)((double)d * g);
    }
    const double cdf = 0.5 * (1.0 + erf((double)(x / 1.4142135623730951f)));
    const float pdf = x * expf(-x * x / 2.0f) / 2.5066282746310002f;
    return (float)((double)d * (cdf + (double)pdf));
}

// numpy's pairwise summation (fluidity.h's), so a row sum rounds as the CPU path's.
FL_HD inline float pairwise_sum(const float* a, i64 n, i64 stride) {
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

// --- rows (one device thread each): softmax and its loss, as fluidity.h's loops ----------------
FL_HD inline void softmax_row(const float* xr, float* o, i64 cols) {
    float m = xr[0];
    for (i64 c = 1; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    for (i64 c = 0; c < cols; ++c) o[c] = expf(xr[c] - m);
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
