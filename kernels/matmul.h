/*
 * The GPU side of apps/matmul (kernels/matmul.cu). Plain C, no CUDA header:
 * `stream` is the cudaStream_t pmlib hands a cuda callback.
 */
#ifndef PMLIB_KERNELS_MATMUL_H
#define PMLIB_KERNELS_MATMUL_H

#ifdef __cplusplus
extern "C" {
#endif

/** Which GPU code computes a block of rows. */
enum matmul_kernel {
    MATMUL_CUBLAS, /**< cublasSgemm */
    MATMUL_SIMPLE  /**< one thread per element of C, global memory only */
};

/**
 * c = a x b on the GPU for a block of the product, row-major with every row
 * n floats long: a holds `rows` rows of n floats, b is n x `cols` (columns
 * of an n x n matrix), c is rows x cols; all are device pointers. Enqueues
 * on `stream` and returns 0, or prints one line and returns a nonzero CUDA
 * or cuBLAS status.
 */
int matmul_gpu(const float *a, const float *b, float *c, int rows, int cols,
               int n, enum matmul_kernel kernel, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* PMLIB_KERNELS_MATMUL_H */
