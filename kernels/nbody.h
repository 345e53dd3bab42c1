/*
 * The GPU side of apps/nbody (kernels/nbody.cu). Plain C, no CUDA header:
 * `stream` is the cudaStream_t pmlib hands a cuda callback.
 */
#ifndef PMLIB_KERNELS_NBODY_H
#define PMLIB_KERNELS_NBODY_H

#ifdef __cplusplus
extern "C" {
#endif

/**
 * One step of bodies [begin, end) on the GPU. Arrays hold 4 floats per body
 * and are natural-view device pointers, 16-byte aligned: pos (x, y, z, mass)
 * of all n bodies is read; vel (x, y, z, unused) and next (the new pos) are
 * read and written for bodies [begin, end) only. eps2 must be > 0.
 * Enqueues on `stream` and returns 0, or prints one line and returns a
 * nonzero CUDA status.
 */
int nbody_gpu_step(const float *pos, float *next, float *vel, int n, int begin,
                   int end, float dt, float eps2, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* PMLIB_KERNELS_NBODY_H */
