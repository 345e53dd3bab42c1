/* The GPU side of apps/arraysum: C declarations of kernels/arraysum.cu. */
#ifndef KERNELS_ARRAYSUM_H
#define KERNELS_ARRAYSUM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Applies the element function `repeat` times to x[begin..end) in place and
 * adds the slice's sum into *sum (a device int64), on `stream`. x is the
 * natural-view base: x[i] is element i. Returns 0 or a cudaError_t.
 */
int arraysum_cuda_launch(int32_t *x, int64_t *sum, uint64_t begin, uint64_t end,
                         uint64_t repeat, double c, void *stream);

#ifdef __cplusplus
}
#endif

#endif
