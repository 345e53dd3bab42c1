// Built-in reduce ops as CUDA kernels: the device-level reduce merges each
// subtask's output into a device-resident accumulator with these, so no
// output crosses PCIe per subtask.
#include <cuda_runtime.h>
#include <stdint.h>

#include "pmlib.h"

namespace {

template <typename T> struct Sum { __device__ static T op(T a, T b) { return a + b; } };
template <typename T> struct Prod { __device__ static T op(T a, T b) { return a * b; } };
template <typename T> struct Min { __device__ static T op(T a, T b) { return b < a ? b : a; } };
template <typename T> struct Max { __device__ static T op(T a, T b) { return b > a ? b : a; } };
template <typename T> struct And { __device__ static T op(T a, T b) { return a & b; } };
template <typename T> struct Or { __device__ static T op(T a, T b) { return a | b; } };
template <typename T> struct Xor { __device__ static T op(T a, T b) { return a ^ b; } };

template <typename T, typename Op>
__global__ void merge(T *__restrict__ into, const T *__restrict__ from, size_t n)
{
    size_t stride = (size_t)blockDim.x * gridDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        into[i] = Op::op(into[i], from[i]);
}

template <typename T, typename Op>
cudaError_t launch(void *into, const void *from, size_t n, cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    const unsigned threads = 256;
    size_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535u * 8u)
        blocks = 65535u * 8u;
    merge<T, Op><<<(unsigned)blocks, threads, 0, stream>>>((T *)into, (const T *)from, n);
    return cudaGetLastError();
}

// Signed sums and products wrap like the CPU ops: do them unsigned.
template <typename T, typename U>
cudaError_t launch_op(pm_reduce_op_t op, void *into, const void *from, size_t n, cudaStream_t s,
                      bool bitwise)
{
    switch (op) {
    case PM_REDUCE_SUM: return launch<U, Sum<U>>(into, from, n, s);
    case PM_REDUCE_PROD: return launch<U, Prod<U>>(into, from, n, s);
    case PM_REDUCE_MIN: return launch<T, Min<T>>(into, from, n, s);
    case PM_REDUCE_MAX: return launch<T, Max<T>>(into, from, n, s);
    default: break;
    }
    if (!bitwise)
        return cudaErrorInvalidValue;
    switch (op) {
    case PM_REDUCE_BAND: return launch<U, And<U>>(into, from, n, s);
    case PM_REDUCE_BOR: return launch<U, Or<U>>(into, from, n, s);
    case PM_REDUCE_BXOR: return launch<U, Xor<U>>(into, from, n, s);
    default: return cudaErrorInvalidValue;
    }
}

template <typename T>
cudaError_t launch_float(pm_reduce_op_t op, void *into, const void *from, size_t n, cudaStream_t s)
{
    switch (op) {
    case PM_REDUCE_SUM: return launch<T, Sum<T>>(into, from, n, s);
    case PM_REDUCE_PROD: return launch<T, Prod<T>>(into, from, n, s);
    case PM_REDUCE_MIN: return launch<T, Min<T>>(into, from, n, s);
    case PM_REDUCE_MAX: return launch<T, Max<T>>(into, from, n, s);
    default: return cudaErrorInvalidValue;
    }
}

} // namespace

// into[i] = into[i] OP from[i] on `stream`; returns a cudaError_t.
extern "C" int pm__cuda_reduce_apply(pm_reduce_op_t op, pm_type_t type, void *into,
                                     const void *from, size_t count, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    switch (type) {
    case PM_INT32: return launch_op<int32_t, uint32_t>(op, into, from, count, s, true);
    case PM_UINT32: return launch_op<uint32_t, uint32_t>(op, into, from, count, s, true);
    case PM_INT64: return launch_op<int64_t, uint64_t>(op, into, from, count, s, true);
    case PM_UINT64: return launch_op<uint64_t, uint64_t>(op, into, from, count, s, true);
    case PM_FLOAT: return launch_float<float>(op, into, from, count, s);
    case PM_DOUBLE: return launch_float<double>(op, into, from, count, s);
    default: return cudaErrorInvalidValue;
    }
}
