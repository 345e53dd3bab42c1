/*
 * GPU code of apps/pagerank: the pull step, one thread per destination page,
 * summing its in-edges in CSR order like the CPU code. The two statistics
 * are summed per block in shared memory, then added to the subtask's private
 * (reduced) output with one atomicAdd per block.
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "pagerank.h"

#define THREADS 256

__global__ void pull_kernel(const uint64_t *off, const uint32_t *src,
                            const double *inv_deg, const double *rank,
                            double *next, double *stats, uint64_t first,
                            uint64_t last, double base, double damping)
{
    __shared__ double part[2][THREADS];
    uint64_t v = first + (uint64_t)blockIdx.x * THREADS + threadIdx.x;
    double dangling = 0, change = 0;

    if (v < last) {
        double sum = 0, r;

        for (uint64_t e = off[v]; e < off[v + 1]; e++)
            sum += rank[src[e]] * inv_deg[src[e]];
        r = base + damping * sum;
        next[v] = r;
        dangling = inv_deg[v] == 0 ? r : 0;
        change = fabs(r - rank[v]);
    }
    part[0][threadIdx.x] = dangling;
    part[1][threadIdx.x] = change;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            part[0][threadIdx.x] += part[0][threadIdx.x + half];
            part[1][threadIdx.x] += part[1][threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        atomicAdd(&stats[0], part[0][0]);
        atomicAdd(&stats[1], part[1][0]);
    }
}

extern "C" int pagerank_gpu_pull(const uint64_t *off, const uint32_t *src,
                                 const double *inv_deg, const double *rank,
                                 double *next, double *stats, uint64_t first,
                                 uint64_t last, double base, double damping,
                                 void *stream)
{
    uint64_t blocks = (last - first + THREADS - 1) / THREADS;
    cudaError_t e;

    if (blocks == 0) /* a subtask may own no page */
        return 0;
    if (blocks > 0x7fffffff) {
        fprintf(stderr, "pagerank: %llu pages are too many for one launch\n",
                (unsigned long long)(last - first));
        return 1;
    }
    pull_kernel<<<(unsigned)blocks, THREADS, 0, (cudaStream_t)stream>>>(
        off, src, inv_deg, rank, next, stats, first, last, base, damping);
    e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "pagerank: pull_kernel launch failed: %s\n",
                cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
