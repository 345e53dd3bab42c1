/*
 * The GPU side of apps/fft2d (kernels/fft2d.cu). Plain C, no CUDA header:
 * `stream` is the cudaStream_t pmlib hands a cuda callback.
 */
#ifndef PMLIB_KERNELS_FFT2D_H
#define PMLIB_KERNELS_FFT2D_H

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Forward FFTs, in place, of `howmany` complex-float sequences of length n
 * in device memory: element j of sequence b is data[b * dist + j * stride]
 * (8 bytes each). Enqueues on `stream` and returns 0, or prints one line
 * and returns nonzero.
 */
int fft2d_gpu_batch(void *data, int n, int howmany, int stride, int dist,
                    void *stream);

/** Destroys the cached cuFFT plans; call once the GPU stubs have stopped. */
void fft2d_gpu_release(void);

#ifdef __cplusplus
}
#endif

#endif /* PMLIB_KERNELS_FFT2D_H */
