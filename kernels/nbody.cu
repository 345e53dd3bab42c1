/*
 * GPU code of apps/nbody: all-pairs gravity with the positions of the
 * other bodies staged through shared memory, one tile of TILE at a time,
 * so that each is read from global memory once per block, not per thread.
 * Each thread moves PER bodies: every body read from shared memory (one
 * broadcast load) then serves PER interactions, and the PER independent
 * sums keep the pipelines busy. An interaction is 3 FADD, 3 FFMA for r^2,
 * one MUFU.RSQ, 3 FMUL for m / r^3 and 3 FFMA into the sums. A block's
 * warps all move the same 32 * PER bodies, each warp pulling them towards
 * its own share of every tile; their sums are added at the end. So a block
 * covers few bodies and a small subtask still fills the GPU.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "nbody.h"

#define THREADS 256            /* per block */
#define WARPS (THREADS / 32)
#define PER 4                  /* bodies per thread */
#define BODIES (32 * PER)      /* bodies per block */
#define TILE 256               /* bodies per tile */
#define LOADS (TILE / THREADS) /* of each tile, per thread */
#define SHARE (TILE / WARPS)   /* of each tile, per warp */

/*
 * 1 / sqrt(x) in one MUFU.RSQ. rsqrtf() adds a scaling step for subnormal
 * x; here x >= eps2 > 0 is normal (as in the CPU code, eps2 must be large
 * enough that 1 / r^3 stays finite).
 */
__device__ static __forceinline__ float rsqrt_ftz(float x)
{
    float y;

    asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* Adds the pull of q (mass in q.w) on p to a. */
__device__ static __forceinline__ float3 pull(float4 p, float4 q, float3 a,
                                              float eps2)
{
    float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
    float inv = rsqrt_ftz(fmaf(dx, dx, fmaf(dy, dy, fmaf(dz, dz, eps2))));
    float s = (q.w * inv) * (inv * inv);

    a.x = fmaf(dx, s, a.x);
    a.y = fmaf(dy, s, a.y);
    a.z = fmaf(dz, s, a.z);
    return a;
}

/*
 * Block b moves the BODIES bodies from begin + b * BODIES, lane l of every
 * warp those at l, l + 32, ... (coalesced); warp w pulls them towards
 * bodies [w * SHARE, (w + 1) * SHARE) of each tile. Bodies past `end`
 * compute on a dummy position and write nothing. Each thread loads its
 * bodies of the next tile into registers while the current tile is used,
 * hiding that latency.
 */
__global__ void __launch_bounds__(THREADS)
nbody_step(const float4 *__restrict__ pos, float4 *__restrict__ next,
           float4 *__restrict__ vel, int n, int begin, int end, float dt,
           float eps2)
{
    __shared__ float4 tile[TILE];
    __shared__ float3 part[WARPS][PER][32]; /* the warps' sums */
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int first = begin + blockIdx.x * BODIES + lane;
    const float4 *mine = tile + warp * SHARE;
    float4 p[PER], ahead[LOADS];
    float3 a[PER];

    for (int b = 0; b < PER; b++) {
        int i = first + 32 * b;

        p[b] = i < end ? pos[i] : zero;
        a[b] = make_float3(0.0f, 0.0f, 0.0f);
    }
    /* Past the last body: mass 0 pulls with force 0 (eps2 > 0). */
    for (int l = 0; l < LOADS; l++) {
        int j = l * THREADS + threadIdx.x;

        ahead[l] = j < n ? pos[j] : zero;
    }
    for (int base = 0; base < n; base += TILE) {
        for (int l = 0; l < LOADS; l++)
            tile[l * THREADS + threadIdx.x] = ahead[l];
        __syncthreads();
        for (int l = 0; l < LOADS; l++) {
            int j = base + TILE + l * THREADS + threadIdx.x;

            ahead[l] = j < n ? pos[j] : zero;
        }
#pragma unroll 8
        for (int k = 0; k < SHARE; k++) {
            float4 q = mine[k];

#pragma unroll
            for (int b = 0; b < PER; b++)
                a[b] = pull(p[b], q, a[b], eps2);
        }
        __syncthreads(); /* before the next tile overwrites this one */
    }
    for (int b = 0; b < PER; b++)
        part[warp][b][lane] = a[b];
    __syncthreads();
    if (warp > 0)
        return;
    for (int w = 1; w < WARPS; w++) {
        for (int b = 0; b < PER; b++) {
            float3 o = part[w][b][lane];

            a[b].x += o.x, a[b].y += o.y, a[b].z += o.z;
        }
    }
    for (int b = 0; b < PER; b++) {
        int i = first + 32 * b;

        if (i < end) {
            float4 v = vel[i];

            v.x += a[b].x * dt;
            v.y += a[b].y * dt;
            v.z += a[b].z * dt;
            vel[i] = v;
            next[i] = make_float4(p[b].x + v.x * dt, p[b].y + v.y * dt,
                                  p[b].z + v.z * dt, p[b].w);
        }
    }
}

extern "C" int nbody_gpu_step(const float *pos, float *next, float *vel, int n,
                              int begin, int end, float dt, float eps2,
                              void *stream)
{
    cudaError_t e;

    /* float4 accesses need every body of every array 16-byte aligned. */
    if (((uintptr_t)pos | (uintptr_t)next | (uintptr_t)vel) % 16 != 0) {
        fprintf(stderr, "nbody: device arrays are not 16-byte aligned\n");
        return 1;
    }
    if (end <= begin)
        return 0;
    nbody_step<<<(end - begin + BODIES - 1) / BODIES, THREADS, 0,
                 (cudaStream_t)stream>>>(
        (const float4 *)pos, (float4 *)next, (float4 *)vel, n, begin, end, dt,
        eps2);
    e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "nbody: the nbody_step launch failed: %s\n",
                cudaGetErrorString(e));
        return (int)e;
    }
    return 0;
}
