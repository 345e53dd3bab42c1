/*
 * GPU code of apps/matmul: cuBLAS sgemm on the stream pmlib hands the cuda
 * callback, or a plain kernel (one thread per element of C, global memory
 * only) to compare with.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include "matmul.h"

#define MAX_STREAMS 8 /* pmlib keeps a few streams per GPU */

/*
 * cuBLAS handles of this thread, one per stream: a handle used on two
 * streams at once would share its workspace between kernels that may run
 * concurrently. They are created on first use and live as long as the
 * thread (destroying them at exit could race with the CUDA runtime's own
 * teardown).
 */
struct stream_handle {
    cudaStream_t stream;
    cublasHandle_t handle;
    int device;              /* the GPU the handle was created on */
    unsigned long last_use;  /* 0: never used */
};
static __thread struct stream_handle handles[MAX_STREAMS];
static __thread unsigned long use_clock;

static int cublas_failed(const char *call, cublasStatus_t st)
{
    fprintf(stderr, "matmul: %s failed: %s\n", call, cublasGetStatusString(st));
    return (int)st;
}

static int cuda_failed(const char *call, cudaError_t e)
{
    fprintf(stderr, "matmul: %s failed: %s\n", call, cudaGetErrorString(e));
    return (int)e;
}

/*
 * Binds the least recently used entry to a stream not seen before: with
 * only a few subtasks in flight per GPU, that entry's work is long done.
 */
static int bind_handle(struct stream_handle *e, cudaStream_t stream, int device)
{
    cublasStatus_t st;

    if (e->handle != NULL && e->device != device) {
        cublasDestroy(e->handle); /* its GPU is not this thread's any more */
        e->handle = NULL;
    }
    if (e->handle == NULL) {
        st = cublasCreate(&e->handle);
        if (st != CUBLAS_STATUS_SUCCESS) {
            e->handle = NULL;
            return cublas_failed("cublasCreate", st);
        }
        e->device = device;
    }
    st = cublasSetStream(e->handle, stream);
    if (st != CUBLAS_STATUS_SUCCESS)
        return cublas_failed("cublasSetStream", st);
    e->stream = stream;
    return 0;
}

/* This thread's handle for `stream`, created on first use. */
static int handle_for(cudaStream_t stream, cublasHandle_t *out)
{
    struct stream_handle *e = &handles[0];
    int device, rc = 0;
    cudaError_t ce = cudaGetDevice(&device);

    if (ce != cudaSuccess)
        return cuda_failed("cudaGetDevice", ce);
    for (int i = 0; i < MAX_STREAMS; i++) {
        if (handles[i].handle != NULL && handles[i].stream == stream &&
            handles[i].device == device) {
            e = &handles[i];
            break;
        }
        if (handles[i].last_use < e->last_use)
            e = &handles[i];
    }
    if (e->handle == NULL || e->stream != stream || e->device != device)
        rc = bind_handle(e, stream, device);
    if (rc != 0)
        return rc;
    e->last_use = ++use_clock;
    *out = e->handle;
    return 0;
}

/*
 * Row-major C = A B, read by cuBLAS as column-major, is C^T = B^T A^T: the
 * row-major arrays already are those transposes, so swap the operands and
 * transpose nothing. cuBLAS's default math mode keeps fp32 (no TF32), which
 * --verify's error bound assumes.
 */
static int gemm_cublas(const float *a, const float *b, float *c, int rows,
                       int cols, int k, int n, cudaStream_t stream)
{
    const float one = 1.0f, zero = 0.0f;
    cublasHandle_t h;
    cublasStatus_t st;
    int rc = handle_for(stream, &h);

    if (rc != 0)
        return rc;
    st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, cols, rows, k, &one, b, n,
                     a, k, &zero, c, n);
    return st == CUBLAS_STATUS_SUCCESS ? 0 : cublas_failed("cublasSgemm", st);
}

/* c[i][j] = sum_l a[i][l] b[l][j] for i < rows, j < cols, l < k; rows of
 * a are k floats long, rows of b and c n floats; threads along j read b and
 * write c coalesced. */
__global__ void matmul_simple(const float *a, const float *b, float *c,
                              int rows, int cols, int k, int n)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    float sum = 0.0f;

    if (i >= rows || j >= cols)
        return;
    for (int l = 0; l < k; l++)
        sum += a[(size_t)i * k + l] * b[(size_t)l * n + j];
    c[(size_t)i * n + j] = sum;
}

static int gemm_simple(const float *a, const float *b, float *c, int rows,
                       int cols, int k, int n, cudaStream_t stream)
{
    dim3 block(32, 8);
    dim3 grid((cols + 31) / 32, (rows + 7) / 8);

    if (grid.y > 65535) {
        fprintf(stderr, "matmul: %d rows per subtask are too many for the "
                "simple kernel; use --rows 500000 or less\n", rows);
        return 1;
    }
    matmul_simple<<<grid, block, 0, stream>>>(a, b, c, rows, cols, k, n);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : cuda_failed("the matmul_simple launch", e);
}

extern "C" int matmul_gpu(const float *a, const float *b, float *c, int rows,
                          int cols, int k, int n, enum matmul_kernel kernel,
                          void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;

    if (kernel == MATMUL_SIMPLE)
        return gemm_simple(a, b, c, rows, cols, k, n, s);
    return gemm_cublas(a, b, c, rows, cols, k, n, s);
}
