/*
 * GPU code of apps/montecarlo: one block per option, each thread a strided
 * share of its paths with its own cuRAND Philox subsequence, the payoff
 * sums reduced with warp shuffles. Philox, because curand_init of it is
 * cheap at any subsequence (XORWOW's skip-ahead is slow there), and
 * because curand_normal4 turns one Philox call into 4 normals (two
 * Box-Muller pairs). The time goes into Philox's integer multiplies and
 * the special-function unit (log, sqrt, sin, cos per pair, exp per path),
 * so a path is otherwise kept to a few instructions: the stock price is
 * one exp2, payoffs are summed in float over runs of RUN draws (unrolled,
 * so that several Philox calls are in flight) and only then added to the
 * double sums. apps/montecarlo/local.mk builds this file with
 * --use_fast_math, so that cuRAND's inline logf and sqrtf are the
 * one-instruction approximations; their error is far below the standard
 * error of any price.
 */
#include <cuda_runtime.h>
#include <curand_kernel.h>
#include <stdio.h>

#include "montecarlo.h"

#define THREADS 256 /* per block: a multiple of 32 */
#define WARPS (THREADS / 32)
#define RUN 8 /* curand_normal4 draws summed in float before going to double */
#define LOG2E 1.4426950408889634

/* Sums of the call and put payoffs and of their squares. */
struct sums {
    double c, c2, p, p2;
};

/* The same in float, over a short run of paths. */
struct fsums {
    float c, c2, p, p2;
};

/* 2^x in one MUFU.EX2; results below 2^-126 (a worthless stock) give 0. */
__device__ static __forceinline__ float exp2_fast(float x)
{
    float y;

    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/*
 * Adds the payoffs of the path with normal z. The stock ends at
 * s * exp(drift + vol z) = 2^(a + b z); put and call share d = st - k.
 */
__device__ static __forceinline__ void path(struct fsums *f, float z, float a,
                                            float b, float k)
{
    float d = exp2_fast(fmaf(b, z, a)) - k;
    float c = fmaxf(d, 0.0f), p = fmaxf(-d, 0.0f);

    f->c += c, f->c2 = fmaf(c, c, f->c2);
    f->p += p, f->p2 = fmaf(p, p, f->p2);
}

/* Float sums of at most RUN * 4 payoffs (rounded by about 1e-6 of their
 * size, far below the standard error) go into the double ones. */
__device__ static __forceinline__ void fold(struct sums *acc, struct fsums f)
{
    acc->c += f.c, acc->c2 += f.c2;
    acc->p += f.p, acc->p2 += f.p2;
}

/* The block's total, in thread 0. */
__device__ static struct sums block_sum(struct sums mine)
{
    __shared__ struct sums part[WARPS];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

    for (int m = 16; m > 0; m /= 2) {
        mine.c += __shfl_xor_sync(0xffffffffu, mine.c, m);
        mine.c2 += __shfl_xor_sync(0xffffffffu, mine.c2, m);
        mine.p += __shfl_xor_sync(0xffffffffu, mine.p, m);
        mine.p2 += __shfl_xor_sync(0xffffffffu, mine.p2, m);
    }
    if (lane == 0)
        part[warp] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < WARPS; w++) {
            mine.c += part[w].c, mine.c2 += part[w].c2;
            mine.p += part[w].p, mine.p2 += part[w].p2;
        }
    }
    return mine;
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
 * draws its own numbers, whichever subtask or GPU runs the option. The
 * paths come in groups of 4 (one curand_normal4); thread t takes groups
 * t, t + THREADS, ...; the last paths % 4 paths take part of one more
 * draw of the thread next in turn.
 */
__global__ void __launch_bounds__(THREADS)
montecarlo_price(const struct mc_option *__restrict__ opt,
                 struct mc_price *__restrict__ price, uint64_t first,
                 uint64_t paths, uint64_t seed)
{
    uint64_t o = first + blockIdx.x;
    struct mc_option op = opt[o];
    float a = (float)(log2(op.s) +
                      (op.r - 0.5 * op.sigma * op.sigma) * op.t * LOG2E);
    float b = (float)(op.sigma * sqrt(op.t) * LOG2E);
    float k = (float)op.k;
    uint64_t groups = paths / 4, t = threadIdx.x;
    uint64_t mine = groups > t ? (groups - t - 1) / THREADS + 1 : 0, i;
    int rest = (int)(paths % 4);
    struct sums acc = {0, 0, 0, 0};
    curandStatePhilox4_32_10_t rng;

    curand_init(seed, o * THREADS + t, 0, &rng);
    for (i = 0; i + RUN <= mine; i += RUN) {
        struct fsums f = {0, 0, 0, 0};

#pragma unroll
        for (int j = 0; j < RUN; j++) {
            float4 z = curand_normal4(&rng);

            path(&f, z.x, a, b, k);
            path(&f, z.y, a, b, k);
            path(&f, z.z, a, b, k);
            path(&f, z.w, a, b, k);
        }
        fold(&acc, f);
    }
    if (i < mine || (rest > 0 && t == groups % THREADS)) {
        struct fsums f = {0, 0, 0, 0};

        for (; i < mine; i++) {
            float4 z = curand_normal4(&rng);

            path(&f, z.x, a, b, k);
            path(&f, z.y, a, b, k);
            path(&f, z.z, a, b, k);
            path(&f, z.w, a, b, k);
        }
        if (rest > 0 && t == groups % THREADS) {
            float4 z = curand_normal4(&rng);

            path(&f, z.x, a, b, k);
            if (rest > 1)
                path(&f, z.y, a, b, k);
            if (rest > 2)
                path(&f, z.z, a, b, k);
        }
        fold(&acc, f);
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
