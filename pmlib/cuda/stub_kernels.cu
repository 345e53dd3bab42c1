// Kernels of the GPU stub itself (the reduce ops live in reduce_kernels.cu).
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

namespace {

template <typename T>
__global__ void fill(T *__restrict__ dst, T v, size_t n)
{
    size_t stride = (size_t)blockDim.x * gridDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = v;
}

template <typename T>
cudaError_t launch_fill(void *dst, const void *elem, size_t n, cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    T v;
    memcpy(&v, elem, sizeof v);
    const unsigned threads = 256;
    size_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535u * 8u)
        blocks = 65535u * 8u;
    fill<T><<<(unsigned)blocks, threads, 0, stream>>>((T *)dst, v, n);
    return cudaGetLastError();
}

} // namespace

// Fills `count` elements of `elem_bytes` bytes (4 or 8) at dst with the bits
// at `elem` on `stream`. The identity of a reduce op is computed on the host
// by the same code the CPU stub uses, so both start from identical bits.
// Returns a cudaError_t.
extern "C" int pm__cuda_fill(void *dst, const void *elem, int elem_bytes, size_t count,
                             void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    switch (elem_bytes) {
    case 4: return launch_fill<uint32_t>(dst, elem, count, s);
    case 8: return launch_fill<uint64_t>(dst, elem, count, s);
    default: return cudaErrorInvalidValue;
    }
}
