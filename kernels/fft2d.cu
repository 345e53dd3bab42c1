/*
 * GPU code of apps/fft2d: batched 1-D transforms with cuFFT, on the stream
 * pmlib hands the cuda callback.
 *
 * Columns (sequences whose elements lie `stride` apart, the sequences next
 * to each other) are transposed into a scratch buffer, transformed there as
 * contiguous rows and transposed back: cuFFT's own strided layout reads
 * elements a whole row apart and ran about ten times slower, while the two
 * transposes go through shared memory at full bandwidth.
 *
 * Plans are cached by (GPU, stream, shape). The stream is part of the key
 * because a plan owns one work area: two subtasks in flight on two streams
 * must not share it. Each stream belongs to one GPU stub thread, so this is
 * one plan per thread per shape; the cache itself is global (under a lock)
 * only so that fft2d_gpu_release can destroy every plan at the end.
 */
#include <cuda_runtime.h>
#include <cufft.h>
#include <pthread.h>
#include <stdio.h>

#include "fft2d.h"

#define MAX_PLANS 128
#define TILE 32 /* transpose tile: TILE x TILE elements, TILE x ROWS threads */
#define ROWS 8

struct plan_entry {
    int device, n, howmany, stride, dist;
    cudaStream_t stream;
    cufftHandle plan;
};

/* A scratch buffer per (GPU, stream), for the transposed columns. */
struct scratch_entry {
    int device;
    cudaStream_t stream;
    void *ptr;
    size_t bytes;
};

static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;
static plan_entry plans[MAX_PLANS];
static int nplans;
static scratch_entry scratch[MAX_PLANS];
static int nscratch;

static int cuda_ok(cudaError_t e, const char *call)
{
    if (e == cudaSuccess)
        return 1;
    fprintf(stderr, "fft2d: %s failed: %s\n", call, cudaGetErrorString(e));
    return 0;
}

/* cuFFT has no message table of its own; its enum values are documented. */
static int cufft_ok(cufftResult r, const char *call)
{
    if (r == CUFFT_SUCCESS)
        return 1;
    fprintf(stderr, "fft2d: %s failed: cufftResult %d\n", call, (int)r);
    return 0;
}

static int make_plan(cufftHandle *plan, int n, int howmany, int stride,
                     int dist)
{
    int len = n, embed = n; /* a non-NULL embed makes cuFFT use the strides */

    return cufft_ok(cufftPlanMany(plan, 1, &len, &embed, stride, dist, &embed,
                                  stride, dist, CUFFT_C2C, howmany),
                    "cufftPlanMany");
}

/*
 * Finds or makes the plan. *cached is 0 when the cache is full: the caller
 * then owns a one-off plan and destroys it once the stream is done with it.
 */
static int get_plan(const plan_entry *key, cufftHandle *plan, int *cached)
{
    int ok = 1;

    pthread_mutex_lock(&plan_lock);
    for (int i = 0; i < nplans; i++) {
        const plan_entry *p = &plans[i];
        if (p->device == key->device && p->stream == key->stream &&
            p->n == key->n && p->howmany == key->howmany &&
            p->stride == key->stride && p->dist == key->dist) {
            *plan = p->plan;
            *cached = 1;
            goto out;
        }
    }
    ok = make_plan(plan, key->n, key->howmany, key->stride, key->dist);
    *cached = ok && nplans < MAX_PLANS;
    if (*cached) {
        plans[nplans] = *key;
        plans[nplans++].plan = *plan;
    }
out:
    pthread_mutex_unlock(&plan_lock);
    return ok;
}

/*
 * dst[c * dpitch + r] = src[r * spitch + c] for r < rows, c < cols, through
 * a shared tile so that both the reads and the writes are coalesced. The
 * grid covers the columns in x and strides over the rows in y.
 */
__global__ void transpose(const float2 *__restrict__ src, size_t spitch,
                          float2 *__restrict__ dst, size_t dpitch, int rows,
                          int cols)
{
    __shared__ float2 tile[TILE][TILE + 1]; /* +1: no bank conflicts */
    int c0 = blockIdx.x * TILE;

    for (int r0 = blockIdx.y * TILE; r0 < rows; r0 += gridDim.y * TILE) {
        for (int i = threadIdx.y; i < TILE; i += ROWS) {
            int r = r0 + i, c = c0 + threadIdx.x;

            if (r < rows && c < cols)
                tile[i][threadIdx.x] = src[(size_t)r * spitch + c];
        }
        __syncthreads();
        for (int i = threadIdx.y; i < TILE; i += ROWS) {
            int c = c0 + i, r = r0 + threadIdx.x;

            if (r < rows && c < cols)
                dst[(size_t)c * dpitch + r] = tile[threadIdx.x][i];
        }
        __syncthreads(); /* before the next rows overwrite the tile */
    }
}

static int launch_transpose(const void *src, size_t spitch, void *dst,
                            size_t dpitch, int rows, int cols,
                            cudaStream_t stream)
{
    unsigned gx = (unsigned)((cols + TILE - 1) / TILE);
    unsigned gy = (unsigned)((rows + TILE - 1) / TILE);

    transpose<<<dim3(gx, gy < 65535 ? gy : 65535), dim3(TILE, ROWS), 0,
                stream>>>((const float2 *)src, spitch, (float2 *)dst, dpitch,
                          rows, cols);
    return cuda_ok(cudaGetLastError(), "the transpose launch");
}

/* The stream's scratch buffer of at least `bytes`, or NULL. */
static void *get_scratch(int device, cudaStream_t stream, size_t bytes)
{
    scratch_entry *e = NULL;
    void *ptr = NULL;

    pthread_mutex_lock(&plan_lock);
    for (int i = 0; i < nscratch && e == NULL; i++)
        if (scratch[i].device == device && scratch[i].stream == stream)
            e = &scratch[i];
    if (e == NULL && nscratch < MAX_PLANS) {
        e = &scratch[nscratch++];
        *e = (scratch_entry){device, stream, NULL, 0};
    }
    if (e != NULL && e->bytes < bytes) {
        /* Only this stream uses the old buffer: wait for it, then swap. */
        if (e->ptr == NULL ||
            (cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize") &&
             cuda_ok(cudaFree(e->ptr), "cudaFree"))) {
            e->ptr = NULL;
            e->bytes = 0;
            if (cuda_ok(cudaMalloc(&e->ptr, bytes), "cudaMalloc"))
                e->bytes = bytes;
            else
                e->ptr = NULL;
        }
    }
    if (e != NULL && e->bytes >= bytes)
        ptr = e->ptr;
    else if (e == NULL)
        fprintf(stderr, "fft2d: more than %d streams need scratch space\n",
                MAX_PLANS);
    pthread_mutex_unlock(&plan_lock);
    return ptr;
}

/* Transforms in place with a cached plan (or a one-off one). */
static int run_plan(plan_entry *key, cufftComplex *x)
{
    cufftHandle plan;
    int cached, ok;

    if (!get_plan(key, &plan, &cached))
        return 0;
    ok = cufft_ok(cufftSetStream(plan, key->stream), "cufftSetStream") &&
         cufft_ok(cufftExecC2C(plan, x, x, CUFFT_FORWARD), "cufftExecC2C");
    if (!cached) {
        ok = cuda_ok(cudaStreamSynchronize(key->stream), "cudaStreamSynchronize")
             && ok;
        ok = cufft_ok(cufftDestroy(plan), "cufftDestroy") && ok;
    }
    return ok;
}

extern "C" int fft2d_gpu_batch(void *data, int n, int howmany, int stride,
                               int dist, void *stream)
{
    plan_entry key = {0, n, howmany, stride, dist, (cudaStream_t)stream, 0};
    cufftComplex *x = (cufftComplex *)data, *t;

    if (!cuda_ok(cudaGetDevice(&key.device), "cudaGetDevice"))
        return 1;
    if (stride == 1 || dist != 1 || howmany == 1)
        return run_plan(&key, x) ? 0 : 1;
    /* Columns: n rows of `howmany` elements, `stride` apart. */
    t = (cufftComplex *)get_scratch(key.device, key.stream,
                                    (size_t)n * (size_t)howmany * sizeof *t);
    if (t == NULL)
        return 1;
    key.stride = 1;
    key.dist = n;
    return launch_transpose(x, (size_t)stride, t, (size_t)n, n, howmany,
                            key.stream) &&
                   run_plan(&key, t) &&
                   launch_transpose(t, (size_t)n, x, (size_t)stride, howmany,
                                    n, key.stream)
               ? 0
               : 1;
}

extern "C" void fft2d_gpu_release(void)
{
    pthread_mutex_lock(&plan_lock);
    for (int i = 0; i < nplans; i++)
        if (cuda_ok(cudaSetDevice(plans[i].device), "cudaSetDevice"))
            cufft_ok(cufftDestroy(plans[i].plan), "cufftDestroy");
    nplans = 0;
    for (int i = 0; i < nscratch; i++)
        if (scratch[i].ptr != NULL &&
            cuda_ok(cudaSetDevice(scratch[i].device), "cudaSetDevice"))
            cuda_ok(cudaFree(scratch[i].ptr), "cudaFree");
    nscratch = 0;
    pthread_mutex_unlock(&plan_lock);
}
