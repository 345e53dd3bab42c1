/*
 * GPU code of apps/fft2d: batched 1-D transforms with cuFFT, on the stream
 * pmlib hands the cuda callback.
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

struct plan_entry {
    int device, n, howmany, stride, dist;
    cudaStream_t stream;
    cufftHandle plan;
};

static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;
static plan_entry plans[MAX_PLANS];
static int nplans;

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

extern "C" int fft2d_gpu_batch(void *data, int n, int howmany, int stride,
                               int dist, void *stream)
{
    plan_entry key = {0, n, howmany, stride, dist, (cudaStream_t)stream, 0};
    cufftComplex *x = (cufftComplex *)data;
    cufftHandle plan;
    int cached, ok;

    if (!cuda_ok(cudaGetDevice(&key.device), "cudaGetDevice") ||
        !get_plan(&key, &plan, &cached))
        return 1;
    ok = cufft_ok(cufftSetStream(plan, key.stream), "cufftSetStream") &&
         cufft_ok(cufftExecC2C(plan, x, x, CUFFT_FORWARD), "cufftExecC2C");
    if (!cached) {
        ok = cuda_ok(cudaStreamSynchronize(key.stream), "cudaStreamSynchronize")
             && ok;
        ok = cufft_ok(cufftDestroy(plan), "cufftDestroy") && ok;
    }
    return ok ? 0 : 1;
}

extern "C" void fft2d_gpu_release(void)
{
    pthread_mutex_lock(&plan_lock);
    for (int i = 0; i < nplans; i++)
        if (cuda_ok(cudaSetDevice(plans[i].device), "cudaSetDevice"))
            cufft_ok(cufftDestroy(plans[i].plan), "cufftDestroy");
    nplans = 0;
    pthread_mutex_unlock(&plan_lock);
}
