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

// Copies `rows` rows of `words` T each, `pitch` T apart on both sides: one
// block per row at a time, consecutive threads on consecutive words.
template <typename T>
__global__ void copy_rows(T *__restrict__ dst, const T *__restrict__ src, size_t words,
                          size_t pitch, size_t rows)
{
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x)
        for (size_t i = threadIdx.x; i < words; i += blockDim.x)
            dst[r * pitch + i] = src[r * pitch + i];
}

template <typename T>
cudaError_t launch_copy_rows(void *dst, const void *src, size_t width, size_t pitch,
                             size_t rows, cudaStream_t stream)
{
    size_t blocks = rows < 65535u * 8u ? rows : 65535u * 8u;
    copy_rows<T><<<(unsigned)blocks, 256, 0, stream>>>((T *)dst, (const T *)src,
                                                       width / sizeof(T), pitch / sizeof(T), rows);
    return cudaGetLastError();
}

} // namespace

// Copies `rows` rows of `width` bytes, `pitch` apart in both dst and src,
// with a kernel on `stream`: for narrow rows between device memory and
// mapped page-locked host memory this runs at PCIe speed where a 2-D copy
// pays per row. Uses the widest word that the addresses, width and pitch
// allow. Returns a cudaError_t.
extern "C" int pm__cuda_copy_rows(void *dst, const void *src, size_t width, size_t pitch,
                                  size_t rows, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    uintptr_t a = (uintptr_t)dst | (uintptr_t)src | width | pitch;
    if (rows == 0 || width == 0)
        return cudaSuccess;
    if (a % 16 == 0)
        return launch_copy_rows<uint4>(dst, src, width, pitch, rows, s);
    if (a % 8 == 0)
        return launch_copy_rows<uint2>(dst, src, width, pitch, rows, s);
    if (a % 4 == 0)
        return launch_copy_rows<uint32_t>(dst, src, width, pitch, rows, s);
    return launch_copy_rows<unsigned char>(dst, src, width, pitch, rows, s);
}

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
