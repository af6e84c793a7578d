// Epilogues of the fused convolution kernels of graph mode (singa.ops.FUSIONS), run on the
// convolution's output y right after cuDNN (or the shared im2col code) wrote it:
// - Conv2d+ReLU: relu_*, y = ReLU(y) in place;
// - Conv2d+ReLU+Pooling2d: relu_pool_*, when no two pooling windows share a cell (stride >=
//   kernel, e.g. the common 2x2/2 max pooling): one pass in which each window's thread applies
//   the ReLU to its cells in place and pools them, and the cells no window covers get their
//   ReLU from a thread of their own, so every cell has exactly one writer. Overlapping windows
//   run relu_* and then pool.cu's pool_fwd_* (the launcher decides).
// ReLU is common.cuh's relu_value, what the unfused ReLU kernel computes; the pooling is
// pool.cuh's, the Pooling2d kernel's code, so each output is bitwise what the ops give one
// after the other.
// kernels: relu_f32 relu_f16 relu_f64 relu_pool_f32 relu_pool_f16 relu_pool_f64
#include "pool.cuh"

template <typename T>
__device__ __forceinline__ void relu_at(T* y, long long i) {
    st(y, i, relu_value(ld(y, i)));
}

template <typename T>
__device__ void relu_inplace(T* y, long long n) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x)
        relu_at(y, e);
}

// Is row i (of extent h) inside some window of a pooling with stride s >= kernel k?
__device__ __forceinline__ bool covered(int i, int pad, int k, int s, int n_windows) {
    int p = (i + pad) / s;  // the only window that can hold i (pad >= 0, i >= 0)
    return p < n_windows && i + pad - p * s < k;
}

// Items 0 .. n*c*ho*wo - 1 are windows, the rest are the n*c*h*w cells of y; y is read and
// written only by the thread of the window holding the cell, or the cell's own thread.
template <typename T>
__device__ void relu_pool(T* y, T* pooled, PoolGeom g) {
    long long windows = (long long)g.n * g.c * g.ho * g.wo;
    long long total = windows + (long long)g.n * g.c * g.h * g.w;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        if (e < windows) {
            int q = e % g.wo, p = (e / g.wo) % g.ho;
            T* plane = y + e / ((long long)g.ho * g.wo) * g.h * g.w;
            int hs = p * g.sh - g.pt, ws = q * g.sw - g.pl;
            for (int i = max(hs, 0); i < min(hs + g.kh, g.h); ++i)
                for (int j = max(ws, 0); j < min(ws + g.kw, g.w); ++j)
                    relu_at(plane, (long long)i * g.w + j);
            st(pooled, e, pool_window((const T*)plane, g, p, q));
        } else {
            long long c = e - windows;
            int j = c % g.w, i = (c / g.w) % g.h;
            if (!covered(i, g.pt, g.kh, g.sh, g.ho) || !covered(j, g.pl, g.kw, g.sw, g.wo))
                relu_at(y, c);
        }
    }
}

#define EPILOGUE_KERNELS(T, SUF)                                                              \
    extern "C" __global__ void relu_##SUF(T* y, long long n) { relu_inplace<T>(y, n); }       \
    extern "C" __global__ void relu_pool_##SUF(T* y, T* pooled, PoolGeom g) {                 \
        relu_pool<T>(y, pooled, g);                                                           \
    }

EPILOGUE_KERNELS(float, f32)
EPILOGUE_KERNELS(__half, f16)
EPILOGUE_KERNELS(double, f64)
