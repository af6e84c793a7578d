// ScatterAdd along an axis: acc[o, idx[j], i] += src[o, j, i] for a contiguous src viewed as
// (outer, n_idx, inner) and an accumulator viewed as (outer, axis_len, inner). Negative ids
// count from the end. Duplicate ids accumulate with atomics into a float (float16 inputs),
// double or int accumulator that the host side casts to the output dtype.
// kernels: scatter_add_f32 scatter_add_f16 scatter_add_f64 scatter_add_i32
#include "common.cuh"

template <typename T, typename A>
__device__ void scatter_add(const int* idx, const T* src, A* acc, long long outer, long long n_idx,
                            long long inner, long long axis_len) {
    long long total = outer * n_idx * inner;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long i = e % inner, j = (e / inner) % n_idx, o = e / (inner * n_idx);
        long long t = idx[j];
        if (t < 0) t += axis_len;
        atomicAdd(acc + (o * axis_len + t) * inner + i, (A)ld(src, e));
    }
}

#define SCATTER_KERNEL(T, A, SUF)                                                             \
    extern "C" __global__ void scatter_add_##SUF(const int* idx, const T* src, A* acc,        \
            long long outer, long long n_idx, long long inner, long long axis_len) {          \
        scatter_add<T, A>(idx, src, acc, outer, n_idx, inner, axis_len);                      \
    }

SCATTER_KERNEL(float, float, f32)
SCATTER_KERNEL(__half, float, f16)
SCATTER_KERNEL(double, double, f64)
SCATTER_KERNEL(int, int, i32)
