// Host emulation of the CUDA runtime and cuBLAS for generated `.cu` code (the test hook:
// built with g++ -DFL_CUDA_EMULATE, never with nvcc). It lets the same generated source,
// kernels and launches included, run and be checked against numpy on a machine with no GPU.
//
// * `__global__` / `__device__` / `__host__` are nothing: kernels are plain functions;
// * FL_LAUNCH(kernel, grid, block, args...) runs every (block, thread) of the grid in turn,
//   setting blockIdx/threadIdx/blockDim/gridDim as the device would, so the kernels' own
//   index arithmetic (grid-stride loops) is what runs;
// * cudaMalloc/cudaFree/cudaMemcpy/cudaMemset on host memory (64-byte aligned);
// * cublasSgemm (column-major, as cuBLAS) onto OpenBLAS's sgemm;
// * atomicAdd is a plain add (kernels run one thread at a time).
// Kernels here use no __shared__ memory and no __syncthreads, so sequential threads are a
// sound model of them.
#pragma once
#include <cblas.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
inline thread_local dim3 blockIdx, threadIdx, blockDim, gridDim;

#define FL_LAUNCH(kernel, grid, block, ...)                                   \
    do {                                                                      \
        gridDim = dim3((unsigned)(grid)); blockDim = dim3((unsigned)(block)); \
        for (unsigned fl_b = 0; fl_b < gridDim.x; ++fl_b)                     \
            for (unsigned fl_t = 0; fl_t < blockDim.x; ++fl_t) {              \
                blockIdx = dim3(fl_b); threadIdx = dim3(fl_t);                \
                kernel(__VA_ARGS__);                                          \
            }                                                                 \
    } while (0)

typedef int cudaError_t;
constexpr cudaError_t cudaSuccess = 0;
constexpr cudaError_t cudaErrorMemoryAllocation = 2;
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
                      cudaMemcpyDeviceToDevice = 3 };

inline cudaError_t cudaMalloc(void** p, size_t n) {
    *p = std::aligned_alloc(64, (n + 63) / 64 * 64 + 64);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void* p) { std::free(p); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind) {
    if (n) std::memmove(dst, src, n);
    return cudaSuccess;
}
inline cudaError_t cudaMemset(void* p, int v, size_t n) { std::memset(p, v, n); return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline const char* cudaGetErrorString(cudaError_t e) { return e ? "emulated CUDA error" : "no error"; }

inline float atomicAdd(float* a, float v) { float old = *a; *a += v; return old; }

// --- cuBLAS (the one call generated code makes) --------------------------------------------
#define FL_HAVE_CUBLAS 1
typedef struct fl_cublas_ctx* cublasHandle_t;
typedef int cublasStatus_t;
constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
inline cublasStatus_t cublasCreate(cublasHandle_t* h) { *h = nullptr; return 0; }
inline cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb,
                                  int m, int n, int k, const float* alpha, const float* A,
                                  int lda, const float* B, int ldb, const float* beta,
                                  float* C, int ldc) {
    scipy_cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_T ? CblasTrans : CblasNoTrans,
                      tb == CUBLAS_OP_T ? CblasTrans : CblasNoTrans, m, n, k, *alpha, A, lda,
                      B, ldb, *beta, C, ldc);
    return CUBLAS_STATUS_SUCCESS;
}
