// The card's host<->device copy bandwidth with page-locked memory: the
// ceiling pmlib's GPU path is compared with in doc/benchmarks.md. Then
// strided rows (`width` bytes out of every `pitch`, the shape of a column
// block of a row-major matrix) both ways, as 2-D copies and as a kernel
// reading or writing the mapped host buffer: the two ways pmlib's GPU stub
// can move them (PMLIB_CUDA_NARROW_ROW picks between them).
// Build: nvcc -O2 -o copybw bench/copybw.cu
#include <cstdio>
#include <cuda_runtime.h>

// One block per row at a time, consecutive threads on consecutive 16 bytes.
__global__ void copy_rows(uint4 *dst, const uint4 *src, size_t words, size_t pitch, size_t rows)
{
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x)
        for (size_t i = threadIdx.x; i < words; i += blockDim.x)
            dst[r * pitch + i] = src[r * pitch + i];
}

enum way { H2D_2D, D2H_2D, H2D_KERNEL, D2H_KERNEL };

// Best of 5, in GB/s of the bytes the rows hold.
static double strided(enum way w, char *h, char *hm, char *d, size_t width, size_t pitch,
                      size_t rows)
{
    cudaEvent_t a, b;
    float best = 1e9f, ms;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int r = 0; r < 5; r++) {
        cudaEventRecord(a);
        if (w == H2D_2D)
            cudaMemcpy2DAsync(d, pitch, h, pitch, width, rows, cudaMemcpyHostToDevice);
        else if (w == D2H_2D)
            cudaMemcpy2DAsync(h, pitch, d, pitch, width, rows, cudaMemcpyDeviceToHost);
        else if (w == H2D_KERNEL)
            copy_rows<<<(unsigned)rows, 256>>>((uint4 *)d, (const uint4 *)hm, width / 16, pitch / 16, rows);
        else
            copy_rows<<<(unsigned)rows, 256>>>((uint4 *)hm, (const uint4 *)d, width / 16, pitch / 16, rows);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&ms, a, b);
        best = ms < best ? ms : best;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return cudaGetLastError() == cudaSuccess ? (double)width * rows / best / 1e6 : 0.0;
}

int main()
{
    const size_t n = (size_t)1 << 30;
    char *h, *hm, *d;
    if (cudaHostAlloc((void **)&h, n, cudaHostAllocPortable | cudaHostAllocMapped) != cudaSuccess ||
        cudaHostGetDevicePointer((void **)&hm, h, 0) != cudaSuccess ||
        cudaMalloc((void **)&d, n) != cudaSuccess) {
        std::printf("copybw: no GPU\n");
        return 77;
    }
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    float best_h2d = 1e9f, best_d2h = 1e9f, ms;
    for (int r = 0; r < 5; r++) {
        cudaEventRecord(a);
        cudaMemcpy(d, h, n, cudaMemcpyHostToDevice);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&ms, a, b);
        best_h2d = ms < best_h2d ? ms : best_h2d;
        cudaEventRecord(a);
        cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&ms, a, b);
        best_d2h = ms < best_d2h ? ms : best_d2h;
    }
    std::printf("result bench=copybw h2d_gbs=%.1f d2h_gbs=%.1f\n", n / best_h2d / 1e6, n / best_d2h / 1e6);

    std::printf("strided rows, GB/s of row bytes (256 MiB of rows, best of 5):\n");
    std::printf("%8s %8s %10s %10s %12s %12s\n", "width", "pitch", "2-D in", "2-D out", "kernel in",
                "kernel out");
    const size_t pitches[] = {64 << 10, 256 << 10};
    const size_t widths[] = {2 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10};
    for (size_t pitch : pitches)
        for (size_t width : widths) {
            if (width >= pitch)
                continue;
            size_t rows = ((size_t)256 << 20) / width;
            if (rows * pitch > n)
                rows = n / pitch;
            std::printf("%7zuK %7zuK %10.1f %10.1f %12.1f %12.1f\n", width >> 10, pitch >> 10,
                        strided(H2D_2D, h, hm, d, width, pitch, rows),
                        strided(D2H_2D, h, hm, d, width, pitch, rows),
                        strided(H2D_KERNEL, h, hm, d, width, pitch, rows),
                        strided(D2H_KERNEL, h, hm, d, width, pitch, rows));
        }
    return 0;
}
