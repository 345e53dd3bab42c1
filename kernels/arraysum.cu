// arraysum on the GPU: the same element function as the serial code, one
// thread per element, and the slice's sum reduced in the block before a
// single atomic add per block.
#include <cuda_runtime.h>

#include "arraysum.h"

__device__ static int32_t element(int32_t x, double c)
{
    double v = (double)x;
    return (int32_t)floor(c * pow(fabs(sin(v)), cbrt(fabs(cos(v)))));
}

__global__ static void apply(int32_t *x, unsigned long long *sum, uint64_t begin, uint64_t end,
                             uint64_t repeat, double c)
{
    __shared__ long long part[32];
    long long local = 0;
    uint64_t stride = (uint64_t)blockDim.x * gridDim.x;
    for (uint64_t i = begin + (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < end; i += stride) {
        int32_t v = x[i];
        for (uint64_t r = 0; r < repeat; r++)
            v = element(v, c);
        x[i] = v;
        local += v;
    }
    for (int off = 16; off > 0; off >>= 1)
        local += __shfl_down_sync(0xffffffffu, local, off);
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = local;
    __syncthreads();
    if (threadIdx.x < 32) {
        local = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0;
        for (int off = 16; off > 0; off >>= 1)
            local += __shfl_down_sync(0xffffffffu, local, off);
        if (threadIdx.x == 0)
            atomicAdd(sum, (unsigned long long)local); // two's complement: adds int64s too
    }
}

extern "C" int arraysum_cuda_launch(int32_t *x, int64_t *sum, uint64_t begin, uint64_t end,
                                    uint64_t repeat, double c, void *stream)
{
    const unsigned threads = 256;
    uint64_t blocks = (end - begin + threads - 1) / threads;
    if (blocks > 65535)
        blocks = 65535;
    if (blocks == 0)
        return 0;
    apply<<<(unsigned)blocks, threads, 0, (cudaStream_t)stream>>>(x, (unsigned long long *)sum, begin,
                                                                  end, repeat, c);
    return (int)cudaGetLastError();
}
