// 2-D max/average pooling over NCHW, forward and backward, and the backward fused with the
// ReLU backward that follows it in graph mode. Semantics are the op table's (Pooling2d):
// see pool.cuh for the window rules.
// Inputs and outputs are contiguous; float16 is read into float, accumulated in float.
// kernels: pool_fwd_f32 pool_fwd_f16 pool_fwd_f64 pool_bwd_f32 pool_bwd_f16 pool_bwd_f64
// kernels: pool_bwd_relu_f32 pool_bwd_relu_f16 pool_bwd_relu_f64
#include "pool.cuh"

template <typename T>
__device__ void pool_fwd(const T* x, T* y, PoolGeom g) {
    long long total = (long long)g.n * g.c * g.ho * g.wo;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        int q = e % g.wo, p = (e / g.wo) % g.ho;
        long long nc = e / ((long long)g.ho * g.wo);
        st(y, e, pool_window(x + nc * g.h * g.w, g, p, q));
    }
}

// Gather form of the backward pass: one thread per input cell sums the gradient of every
// window that covers it, so no atomics and a deterministic result.
template <typename T>
__device__ typename Acc<T>::type pool_bwd_cell(const T* dy, const T* x, PoolGeom g,
                                               long long e) {
    int j = e % g.w, i = (e / g.w) % g.h;
    long long nc = e / ((long long)g.h * g.w);
    const T* plane = x + nc * g.h * g.w;
    const T* dplane = dy + nc * g.ho * g.wo;
    // windows p with p*sh - pt <= i < p*sh - pt + kh (C division truncates, but a negative
    // numerator only ever clamps to 0)
    int p0 = max(0, (i + g.pt - g.kh + g.sh) / g.sh), p1 = min(g.ho - 1, (i + g.pt) / g.sh);
    int q0 = max(0, (j + g.pl - g.kw + g.sw) / g.sw), q1 = min(g.wo - 1, (j + g.pl) / g.sw);
    typename Acc<T>::type s = 0;
    for (int p = p0; p <= p1; ++p)
        for (int q = q0; q <= q1; ++q) {
            typename Acc<T>::type d = ld(dplane, (long long)p * g.wo + q);
            if (g.is_max) {
                if (window_argmax(plane, g, p, q) == i * g.w + j) s += d;
            } else {
                s += d / pool_divisor(g, p, q);
            }
        }
    return s;
}

template <typename T>
__device__ void pool_bwd(const T* dy, const T* x, T* dx, PoolGeom g) {
    long long total = (long long)g.n * g.c * g.h * g.w;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x)
        st(dx, e, pool_bwd_cell(dy, x, g, e));
}

// Pooling2dBackward+ReLUBackward: dx = pool_backward(dy, x) * (relu_x > 0), rounded to T once
// as the two kernels would. A product, as ReLUBackward's multiply is, not a select: by 0 it
// gives -0.0 for a negative gradient and NaN for a NaN one (multiplying by 0 or 1 is exact).
template <typename T>
__device__ void pool_bwd_relu(const T* dy, const T* x, const T* relu_x, T* dx, PoolGeom g) {
    long long total = (long long)g.n * g.c * g.h * g.w;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        T rounded;
        st(&rounded, 0, pool_bwd_cell(dy, x, g, e));
        st(dx, e, ld(&rounded, 0) * (ld(relu_x, e) > 0 ? 1 : 0));
    }
}

#define POOL_KERNELS(T, SUF)                                                                  \
    extern "C" __global__ void pool_fwd_##SUF(const T* x, T* y, PoolGeom g) {                 \
        pool_fwd<T>(x, y, g);                                                                 \
    }                                                                                         \
    extern "C" __global__ void pool_bwd_##SUF(const T* dy, const T* x, T* dx, PoolGeom g) {   \
        pool_bwd<T>(dy, x, dx, g);                                                            \
    }                                                                                         \
    extern "C" __global__ void pool_bwd_relu_##SUF(const T* dy, const T* x, const T* relu_x,  \
                                                   T* dx, PoolGeom g) {                       \
        pool_bwd_relu<T>(dy, x, relu_x, dx, g);                                               \
    }

POOL_KERNELS(float, f32)
POOL_KERNELS(__half, f16)
POOL_KERNELS(double, f64)
