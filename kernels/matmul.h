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
 * c = a x b on the GPU for a block of the product, row-major: a holds
 * `rows` rows of k floats (rows of an m x k matrix), b is k x `cols`
 * (columns of a k x n matrix, rows n floats apart), c is rows x cols (of an
 * m x n matrix, rows n floats apart); all are device pointers. Enqueues on
 * `stream` and returns 0, or prints one line and returns a nonzero CUDA or
 * cuBLAS status.
 */
int matmul_gpu(const float *a, const float *b, float *c, int rows, int cols,
               int k, int n, enum matmul_kernel kernel, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* PMLIB_KERNELS_MATMUL_H */
