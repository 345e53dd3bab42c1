/*
 * GPU code of apps/nbody: all-pairs gravity with the positions of the
 * other bodies staged through shared memory, one tile of TILE at a time,
 * so that each is read from global memory once per block, not per thread.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "nbody.h"

#define TILE 256 /* bodies per shared-memory tile = threads per block */

__device__ static float3 pull(float4 p, float4 q, float3 a, float eps2)
{
    float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
    float inv = rsqrtf(dx * dx + dy * dy + dz * dz + eps2);
    float s = q.w * inv * inv * inv;

    a.x += dx * s;
    a.y += dy * s;
    a.z += dz * s;
    return a;
}

/* One thread per body of [begin, end); every thread helps load the tiles. */
__global__ void nbody_step(const float4 *pos, float4 *next, float4 *vel,
                           int n, int begin, int end, float dt, float eps2)
{
    __shared__ float4 tile[TILE];
    int i = begin + blockIdx.x * TILE + threadIdx.x;
    float4 p = i < end ? pos[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float3 a = make_float3(0.0f, 0.0f, 0.0f);

    for (int base = 0; base < n; base += TILE) {
        int j = base + threadIdx.x;

        /* Past the last body: mass 0 pulls with force 0 (eps2 > 0). */
        tile[threadIdx.x] = j < n ? pos[j] : make_float4(0.0f, 0.0f, 0.0f,
                                                          0.0f);
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < TILE; k++)
            a = pull(p, tile[k], a, eps2);
        __syncthreads(); /* before the next tile overwrites this one */
    }
    if (i < end) {
        float4 v = vel[i];

        v.x += a.x * dt;
        v.y += a.y * dt;
        v.z += a.z * dt;
        vel[i] = v;
        next[i] = make_float4(p.x + v.x * dt, p.y + v.y * dt,
                              p.z + v.z * dt, p.w);
    }
}

extern "C" int nbody_gpu_step(const float *pos, float *next, float *vel, int n,
                              int begin, int end, float dt, float eps2,
                              void *stream)
{
    int blocks = (end - begin + TILE - 1) / TILE;
    cudaError_t e;

    /* float4 accesses need every body of every array 16-byte aligned. */
    if (((uintptr_t)pos | (uintptr_t)next | (uintptr_t)vel) % 16 != 0) {
        fprintf(stderr, "nbody: device arrays are not 16-byte aligned\n");
        return 1;
    }
    if (blocks == 0)
        return 0;
    nbody_step<<<blocks, TILE, 0, (cudaStream_t)stream>>>(
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
