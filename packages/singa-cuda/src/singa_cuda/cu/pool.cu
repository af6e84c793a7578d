// 2-D max/average pooling over NCHW, forward and backward, and the backward fused with the
// ReLU backward that follows it in graph mode. Semantics are the op table's (Pooling2d):
// windows start at p*sh - pt; max ignores padding and picks the first NaN, else the first maximal cell in
// row-major window order; average divides by the cells inside the padded input
// (count_include_pad) or inside the real input; ceil-mode overhang never counts.
// Inputs and outputs are contiguous; float16 is read into float, accumulated in float.
// kernels: pool_fwd_f32 pool_fwd_f16 pool_fwd_f64 pool_bwd_f32 pool_bwd_f16 pool_bwd_f64
// kernels: pool_bwd_relu_f32 pool_bwd_relu_f16 pool_bwd_relu_f64
#include <cuda_fp16.h>

struct PoolGeom {
    int n, c, h, w, kh, kw, sh, sw, pt, pb, pl, pr, ho, wo, is_max, count_include_pad;
};

template <typename T> struct Acc { typedef float type; };
template <> struct Acc<double> { typedef double type; };

__device__ __forceinline__ float ld(const __half* p, long long i) { return __half2float(p[i]); }
__device__ __forceinline__ float ld(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ double ld(const double* p, long long i) { return p[i]; }
__device__ __forceinline__ void st(__half* p, long long i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void st(float* p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void st(double* p, long long i, double v) { p[i] = v; }

// Cells of window (p, q) counted by the average: inside the padded input, or the real input.
__device__ __forceinline__ int pool_divisor(const PoolGeom& g, int p, int q) {
    int lo_h = g.count_include_pad ? -g.pt : 0, hi_h = g.count_include_pad ? g.h + g.pb : g.h;
    int lo_w = g.count_include_pad ? -g.pl : 0, hi_w = g.count_include_pad ? g.w + g.pr : g.w;
    int hs = p * g.sh - g.pt, ws = q * g.sw - g.pl;
    int rows = min(hs + g.kh, hi_h) - max(hs, lo_h);
    int cols = min(ws + g.kw, hi_w) - max(ws, lo_w);
    return max(rows, 0) * max(cols, 0);
}

// Flat index (within one image plane) of the first maximal real cell of window (p, q).
template <typename T>
__device__ int window_argmax(const T* plane, const PoolGeom& g, int p, int q) {
    int hs = p * g.sh - g.pt, ws = q * g.sw - g.pl;
    int best = -1;
    typename Acc<T>::type bv = 0;
    for (int i = max(hs, 0); i < min(hs + g.kh, g.h); ++i)
        for (int j = max(ws, 0); j < min(ws + g.kw, g.w); ++j) {
            typename Acc<T>::type v = ld(plane, (long long)i * g.w + j);
            // NaN propagates (numpy's and PyTorch's max pooling): the first NaN cell wins
            if (best < 0 || v > bv || (v != v && bv == bv)) { bv = v; best = i * g.w + j; }
        }
    return best;
}

template <typename T>
__device__ void pool_fwd(const T* x, T* y, PoolGeom g) {
    long long total = (long long)g.n * g.c * g.ho * g.wo;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        int q = e % g.wo, p = (e / g.wo) % g.ho;
        long long nc = e / ((long long)g.ho * g.wo);
        const T* plane = x + nc * g.h * g.w;
        if (g.is_max) {
            int at = window_argmax(plane, g, p, q);
            st(y, e, ld(plane, at));
        } else {
            int hs = p * g.sh - g.pt, ws = q * g.sw - g.pl;
            typename Acc<T>::type s = 0;
            for (int i = max(hs, 0); i < min(hs + g.kh, g.h); ++i)
                for (int j = max(ws, 0); j < min(ws + g.kw, g.w); ++j)
                    s += ld(plane, (long long)i * g.w + j);
            st(y, e, s / pool_divisor(g, p, q));
        }
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
// as the two kernels would (multiplying by 0 or 1 is exact).
template <typename T>
__device__ void pool_bwd_relu(const T* dy, const T* x, const T* relu_x, T* dx, PoolGeom g) {
    long long total = (long long)g.n * g.c * g.h * g.w;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        T rounded;
        st(&rounded, 0, pool_bwd_cell(dy, x, g, e));
        st(dx, e, ld(relu_x, e) > 0 ? ld(&rounded, 0) : 0);
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
