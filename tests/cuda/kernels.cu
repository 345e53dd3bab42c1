// Kernels of the GPU stub's test suite, launched from its cuda callbacks.
// Each mirrors a C function in test_cuda.c that computes the same values on
// the CPU. Products and sums go through __dmul_rn/__dadd_rn (and the float
// forms) so nvcc cannot contract them into FMAs: the CPU and GPU results
// are compared bit for bit.
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels.h"

namespace {

const unsigned kThreads = 256;

unsigned blocks_for(uint64_t n)
{
    uint64_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b > 4096 ? 4096 : (b ? b : 1));
}

__global__ void fill_f(double *out, uint64_t lo, uint64_t hi)
{
    for (uint64_t i = lo + blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < hi;
         i += (uint64_t)blockDim.x * gridDim.x)
        out[i] = __dadd_rn(__dmul_rn((double)i, 0.5), 3.0);
}

__global__ void fill_column(double *m, uint64_t rows, uint64_t cols, uint64_t col)
{
    for (uint64_t r = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; r < rows;
         r += (uint64_t)blockDim.x * gridDim.x)
        m[r * cols + col] = (double)(r * 1000 + col);
}

__global__ void copy_column(double *out, const double *m, uint64_t rows, uint64_t cols, uint64_t col)
{
    for (uint64_t r = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; r < rows;
         r += (uint64_t)blockDim.x * gridDim.x)
        out[col * rows + r] = m[r * cols + col];
}

__global__ void combine(double *out, const double *in, uint64_t n, uint64_t lo, uint64_t hi)
{
    for (uint64_t i = lo + blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < hi;
         i += (uint64_t)blockDim.x * gridDim.x)
        out[i] = __dadd_rn(__dmul_rn(2.0, in[i]), in[(i * 7) % n]);
}

__global__ void contrib(int64_t *s, double *d, float *f, uint64_t lo, uint64_t hi, uint64_t id)
{
    for (uint64_t j = lo + blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < hi;
         j += (uint64_t)blockDim.x * gridDim.x) {
        if (s != NULL)
            s[j] += (int64_t)(id * 1000003u + j * 7919u) - 5000000;
        if (d != NULL)
            d[j] = __dadd_rn(d[j], __dmul_rn((double)(id * 131 + j), 0.1));
        if (f != NULL) {
            float v = __fmul_rn((float)((id * 37 + j * 11) % 1009), 0.3f);
            f[j] = v < f[j] ? v : f[j];
        }
    }
}

} // namespace

extern "C" int tk_fill_f(double *out, uint64_t lo, uint64_t hi, void *stream)
{
    fill_f<<<blocks_for(hi - lo), kThreads, 0, (cudaStream_t)stream>>>(out, lo, hi);
    return 0;
}

extern "C" int tk_fill_column(double *m, uint64_t rows, uint64_t cols, uint64_t col, void *stream)
{
    fill_column<<<blocks_for(rows), kThreads, 0, (cudaStream_t)stream>>>(m, rows, cols, col);
    return 0;
}

extern "C" int tk_copy_column(double *out, const double *m, uint64_t rows, uint64_t cols, uint64_t col,
                              void *stream)
{
    copy_column<<<blocks_for(rows), kThreads, 0, (cudaStream_t)stream>>>(out, m, rows, cols, col);
    return 0;
}

extern "C" int tk_combine(double *out, const double *in, uint64_t n, uint64_t lo, uint64_t hi,
                          void *stream)
{
    combine<<<blocks_for(hi - lo), kThreads, 0, (cudaStream_t)stream>>>(out, in, n, lo, hi);
    return 0;
}

extern "C" int tk_contrib(int64_t *s, double *d, float *f, uint64_t lo, uint64_t hi, uint64_t id,
                          void *stream)
{
    contrib<<<blocks_for(hi - lo), kThreads, 0, (cudaStream_t)stream>>>(s, d, f, lo, hi, id);
    return 0;
}

// A launch with zero blocks fails with cudaErrorInvalidConfiguration. This
// file has its own static CUDA runtime, apart from pmlib's, so only it can
// see that error: it returns it, as a callback should.
extern "C" int tk_bad_launch(double *out, void *stream)
{
    fill_f<<<0, kThreads, 0, (cudaStream_t)stream>>>(out, 0, 1);
    return (int)cudaGetLastError();
}

__global__ void fault(double *p)
{
    p[threadIdx.x] = 1.0;
}

extern "C" int tk_pin(void *host, size_t bytes)
{
    return (int)cudaHostRegister(host, bytes, cudaHostRegisterPortable);
}

extern "C" int tk_unpin(void *host)
{
    return (int)cudaHostUnregister(host);
}

namespace {
void *hog;
}

extern "C" int tk_hog(size_t leave)
{
    size_t free_b = 0, total = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total);
    if (e != cudaSuccess || free_b <= leave)
        return (int)(e != cudaSuccess ? e : cudaErrorMemoryAllocation);
    return (int)cudaMalloc(&hog, free_b - leave);
}

extern "C" int tk_unhog(void)
{
    cudaError_t e = cudaFree(hog);
    hog = NULL;
    return (int)e;
}

// A kernel writing to an unmapped address: the context is lost for good.
extern "C" int tk_fault(void *stream)
{
    fault<<<1, 32, 0, (cudaStream_t)stream>>>((double *)(uintptr_t)64);
    return 0;
}

// Whether GPU a can read GPU b's memory directly (1) or not (0).
extern "C" int tk_peer_ok(int a, int b)
{
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return can;
}
