/*
 * Launchers of the GPU test kernels (kernels.cu). Plain C, no CUDA header:
 * `stream` is the cudaStream_t pmlib hands a cuda callback. Pointers are
 * natural-view device pointers; each returns 0.
 */
#ifndef PMLIB_TESTS_CUDA_KERNELS_H
#define PMLIB_TESTS_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[i] = i * 0.5 + 3 for lo <= i < hi. */
int tk_fill_f(double *out, uint64_t lo, uint64_t hi, void *stream);
/* m[r * cols + col] = r * 1000 + col for every row r. */
int tk_fill_column(double *m, uint64_t rows, uint64_t cols, uint64_t col, void *stream);
/* out[col * rows + r] = m[r * cols + col] for every row r. */
int tk_copy_column(double *out, const double *m, uint64_t rows, uint64_t cols, uint64_t col,
                   void *stream);
/* out[i] = 2 * in[i] + in[(i * 7) % n] for lo <= i < hi. */
int tk_combine(double *out, const double *in, uint64_t n, uint64_t lo, uint64_t hi,
               void *stream);
/* Subtask id's contribution to elements lo..hi-1 of each non-NULL output:
 * s[j] += a(id, j), d[j] += b(id, j), f[j] = min(f[j], c(id, j)). */
int tk_contrib(int64_t *s, double *d, float *f, uint64_t lo, uint64_t hi, uint64_t id,
               void *stream);
/* A launch CUDA rejects (zero blocks); returns its cudaError_t. */
int tk_bad_launch(double *out, void *stream);
/* Page-locks / unlocks a host buffer (cudaHostRegister); a cudaError_t. */
int tk_pin(void *host, size_t bytes);
int tk_unpin(void *host);
/* Takes all device memory but `leave` bytes / gives it back; a cudaError_t. */
int tk_hog(size_t leave);
int tk_unhog(void);
/* Whether GPU a can read GPU b's memory directly: 1 or 0. */
int tk_peer_ok(int a, int b);
/* A kernel that faults (an illegal address): the GPU's context is lost. */
int tk_fault(void *stream);

#ifdef __cplusplus
}
#endif

#endif /* PMLIB_TESTS_CUDA_KERNELS_H */
