/*
 * GPU code of apps/pagerank: the pull step, GROUP lanes of a warp per
 * destination page. In-degrees follow a power law (most pages have a few
 * in-edges, a few have up to 1e5), so one thread per page would leave
 * most lanes idle behind the longest list and read src[] uncoalesced. A
 * group strides over its page's in-edges (consecutive lanes read
 * consecutive src[] entries), each lane with up to DEPTH of them in flight
 * at once (the share reads are random: the step is bound by how many of
 * them the memory serves), and sums with shuffles; a page with
 * more than BIG in-edges is taken by the whole warp instead, so no group holds its
 * warp back for long. The two statistics are summed per warp with
 * shuffles, then per block, then added to the subtask's private (reduced)
 * output with one atomicAdd per block.
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "pagerank.h"

#define THREADS 256 /* per block */
#define GROUP 8     /* lanes per page: a power of two, at most 32 */
#define DEPTH 4     /* in-edges per lane in flight */
#define BIG (32 * DEPTH)
#define PAGES_PER_BLOCK (THREADS / GROUP)
#define FULL 0xffffffffu

/*
 * Sum of share[u] over u = src[e], e = from, from + step, ... below to:
 * each round first reads DEPTH entries of src[], then their shares, so
 * that DEPTH reads of each kind are in flight together.
 */
__device__ static __forceinline__ double
gather(const uint32_t *__restrict__ src, const double *__restrict__ share,
       uint64_t from, uint64_t to, int step)
{
    double sum = 0;

    for (uint64_t e = from; e < to; e += (uint64_t)step * DEPTH) {
        uint32_t u[DEPTH];

#pragma unroll
        for (int j = 0; j < DEPTH; j++)
            if (e + j * step < to)
                u[j] = src[e + j * step];
#pragma unroll
        for (int j = 0; j < DEPTH; j++)
            if (e + j * step < to)
                sum += share[u[j]];
    }
    return sum;
}

/*
 * Block b takes pages first + b * PAGES_PER_BLOCK + [0, PAGES_PER_BLOCK).
 * The explicit minimum of 1 block lets ptxas give gather() the registers
 * its DEPTH loads need (left to itself it stops at 32, ~15% slower).
 */
__global__ void __launch_bounds__(THREADS, 1)
pull_kernel(const uint64_t *__restrict__ off, const uint32_t *__restrict__ src,
            const double *__restrict__ inv_deg,
            const double *__restrict__ rank, const double *__restrict__ share,
            double *__restrict__ next_rank, double *__restrict__ next_share,
            double *stats, uint64_t first, uint64_t last, double base,
            double damping)
{
    __shared__ double part[2][THREADS / 32];
    int lane = threadIdx.x % 32, sub = lane % GROUP, warp = threadIdx.x / 32;
    uint64_t v = first + (uint64_t)blockIdx.x * PAGES_PER_BLOCK +
                 threadIdx.x / GROUP;
    uint64_t lo = 0, hi = 0;
    double sum = 0, dangling = 0, change = 0;
    unsigned big;

    if (v < last) {
        lo = off[v];
        hi = off[v + 1];
    }
    if (hi - lo <= BIG)
        sum = gather(src, share, lo + sub, hi, GROUP);
    /* Large pages, one at a time, by all 32 lanes; the sum goes to the
     * first lane of the page's group (its other lanes hold 0). */
    big = __ballot_sync(FULL, hi - lo > BIG);
    while (big != 0) {
        int leader = __ffs(big) - 1;
        uint64_t b = __shfl_sync(FULL, lo, leader);
        uint64_t end = __shfl_sync(FULL, hi, leader);
        double s = gather(src, share, b + lane, end, 32);

        for (int m = 16; m > 0; m /= 2)
            s += __shfl_xor_sync(FULL, s, m);
        if (lane == leader)
            sum = s;
        big &= ~((FULL >> (32 - GROUP)) << leader); /* its whole group */
    }
    for (int m = GROUP / 2; m > 0; m /= 2)
        sum += __shfl_xor_sync(FULL, sum, m);
    if (v < last && sub == 0) {
        double r = base + damping * sum;

        next_rank[v] = r;
        next_share[v] = r * inv_deg[v];
        dangling = inv_deg[v] == 0 ? r : 0;
        change = fabs(r - rank[v]);
    }
    for (int m = 16; m > 0; m /= 2) {
        dangling += __shfl_xor_sync(FULL, dangling, m);
        change += __shfl_xor_sync(FULL, change, m);
    }
    if (lane == 0) {
        part[0][warp] = dangling;
        part[1][warp] = change;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < THREADS / 32; w++) {
            dangling += part[0][w];
            change += part[1][w];
        }
        atomicAdd(&stats[0], dangling);
        atomicAdd(&stats[1], change);
    }
}

extern "C" int pagerank_gpu_pull(const uint64_t *off, const uint32_t *src,
                                 const double *inv_deg, const double *rank,
                                 const double *share, double *next_rank,
                                 double *next_share, double *stats,
                                 uint64_t first, uint64_t last, double base,
                                 double damping, void *stream)
{
    uint64_t blocks;
    cudaError_t e;

    if (last <= first) /* a subtask may own no page */
        return 0;
    blocks = (last - first + PAGES_PER_BLOCK - 1) / PAGES_PER_BLOCK;
    if (blocks > 0x7fffffff) {
        fprintf(stderr, "pagerank: %llu pages are too many for one launch\n",
                (unsigned long long)(last - first));
        return 1;
    }
    pull_kernel<<<(unsigned)blocks, THREADS, 0, (cudaStream_t)stream>>>(
        off, src, inv_deg, rank, share, next_rank, next_share, stats, first,
        last, base, damping);
    e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "pagerank: pull_kernel launch failed: %s\n",
                cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
