/*
 * GPU code of apps/montecarlo: one block per option, each thread a strided
 * share of its paths with its own cuRAND Philox subsequence, the payoff
 * sums reduced in shared memory. Philox, because curand_init of it is
 * cheap at any subsequence (XORWOW's skip-ahead is slow there).
 */
#include <cuda_runtime.h>
#include <curand_kernel.h>
#include <stdio.h>

#include "montecarlo.h"

#define THREADS 256 /* per block; a power of two for the reduction */

/* Sums of the call and put payoffs and of their squares. */
struct sums {
    double c, c2, p, p2;
};

/* Thread 0 gets the block's total. */
__device__ static struct sums block_sum(struct sums mine)
{
    __shared__ struct sums part[THREADS];

    part[threadIdx.x] = mine;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            part[threadIdx.x].c += part[threadIdx.x + half].c;
            part[threadIdx.x].c2 += part[threadIdx.x + half].c2;
            part[threadIdx.x].p += part[threadIdx.x + half].p;
            part[threadIdx.x].p2 += part[threadIdx.x + half].p2;
        }
        __syncthreads();
    }
    return part[0];
}

/* Discounted means and standard errors from the sums of n payoffs. */
__device__ static struct mc_price finish(struct sums a, double n, double disc)
{
    struct mc_price pr;

    pr.call = disc * a.c / n;
    pr.put = disc * a.p / n;
    /* fmax: rounding may leave a zero variance slightly negative. */
    pr.call_se = disc * sqrt(fmax(a.c2 - a.c * a.c / n, 0.0) / (n - 1) / n);
    pr.put_se = disc * sqrt(fmax(a.p2 - a.p * a.p / n, 0.0) / (n - 1) / n);
    return pr;
}

/*
 * Paths in float (its rounding is far below the standard error), sums in
 * double. Subsequence o * THREADS + thread: every (option, thread) pair
 * draws its own numbers, whichever subtask or GPU runs the option.
 */
__global__ void montecarlo_price(const struct mc_option *opt,
                                 struct mc_price *price, uint64_t first,
                                 uint64_t paths, uint64_t seed)
{
    uint64_t o = first + blockIdx.x;
    struct mc_option op = opt[o];
    float drift = (float)((op.r - 0.5 * op.sigma * op.sigma) * op.t);
    float vol = (float)(op.sigma * sqrt(op.t));
    float s = (float)op.s, k = (float)op.k;
    struct sums acc = {0, 0, 0, 0};
    curandStatePhilox4_32_10_t rng;

    curand_init(seed, o * THREADS + threadIdx.x, 0, &rng);
    for (uint64_t q = threadIdx.x; q < paths; q += THREADS) {
        float st = s * expf(drift + vol * curand_normal(&rng));
        float c = fmaxf(st - k, 0.0f), p = fmaxf(k - st, 0.0f);

        acc.c += c, acc.c2 += (double)c * c;
        acc.p += p, acc.p2 += (double)p * p;
    }
    acc = block_sum(acc);
    if (threadIdx.x == 0)
        price[o] = finish(acc, (double)paths, exp(-op.r * op.t));
}

extern "C" int montecarlo_gpu(const struct mc_option *opt,
                              struct mc_price *price, uint64_t first,
                              uint64_t count, uint64_t paths, uint64_t seed,
                              void *stream)
{
    cudaError_t e;

    if (count == 0)
        return 0;
    if (count > 0x7fffffff || paths < 2) {
        fprintf(stderr, "montecarlo: %llu options of %llu paths cannot be "
                "priced in one launch\n", (unsigned long long)count,
                (unsigned long long)paths);
        return 1;
    }
    montecarlo_price<<<(unsigned)count, THREADS, 0, (cudaStream_t)stream>>>(
        opt, price, first, paths, seed);
    e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "montecarlo: the montecarlo_price launch failed: %s\n",
                cudaGetErrorString(e));
        return (int)e;
    }
    return 0;
}
