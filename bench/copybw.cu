// The card's host<->device copy bandwidth with page-locked memory: the
// ceiling pmlib's GPU path is compared with in doc/benchmarks.md.
#include <cstdio>
#include <cuda_runtime.h>

int main()
{
    const size_t n = (size_t)1 << 30;
    void *h, *d;
    if (cudaHostAlloc(&h, n, cudaHostAllocPortable) != cudaSuccess || cudaMalloc(&d, n) != cudaSuccess) {
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
    return 0;
}
