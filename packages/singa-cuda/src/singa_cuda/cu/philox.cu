// Counter-based random draws with Philox4x32-10, word for word what singa_cuda/xp/random.py
// computes (so a GPU run can be checked against the shared code): draw e of a call uses the
// counter (e lo, e hi, call lo, call hi) under the key (seed lo, seed hi); numbers are formed
// in double and rounded once to the output dtype. See random.py for the formulas.
// kernels: philox_uniform_f32 philox_uniform_f16 philox_uniform_f64
// kernels: philox_gaussian_f32 philox_gaussian_f16 philox_gaussian_f64
// kernels: philox_bernoulli_f32 philox_bernoulli_f16 philox_bernoulli_f64
#include "common.cuh"

__device__ __forceinline__ void philox4x32_10(unsigned int c[4], unsigned int k0,
                                              unsigned int k1) {
    for (int r = 0; r < 10; ++r) {
        if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
        unsigned int hi0 = __umulhi(0xD2511F53u, c[0]), lo0 = 0xD2511F53u * c[0];
        unsigned int hi1 = __umulhi(0xCD9E8D57u, c[2]), lo1 = 0xCD9E8D57u * c[2];
        unsigned int n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
        c[0] = n0; c[1] = lo1; c[2] = n2; c[3] = lo0;
    }
}

__device__ __forceinline__ void words(unsigned long long e, PhiloxKey key, unsigned int w[4]) {
    w[0] = (unsigned int)(e & 0xFFFFFFFFull);
    w[1] = (unsigned int)(e >> 32);
    w[2] = key.call0;
    w[3] = key.call1;
    philox4x32_10(w, key.k0, key.k1);
}

// uniform on [0, 1) (or (0, 1] with open_low) from one word (24 bits) or two (53 bits)
__device__ __forceinline__ double unit(unsigned int a, unsigned int b, bool wide, bool open_low) {
    double bits, scale;
    if (wide) {
        bits = (double)(a >> 5) * 67108864.0 + (double)(b >> 6);
        scale = 1.1102230246251565e-16;  // 2^-53
    } else {
        bits = (double)(a >> 8);
        scale = 5.9604644775390625e-08;  // 2^-24
    }
    if (open_low) bits += 1.0;
    return bits * scale;
}

__device__ __forceinline__ void put(float* p, long long i, double v) { p[i] = (float)v; }
__device__ __forceinline__ void put(double* p, long long i, double v) { p[i] = v; }
__device__ __forceinline__ void put(__half* p, long long i, double v) { p[i] = __double2half(v); }

template <typename T, int KIND>  // KIND 0 uniform, 1 gaussian, 2 bernoulli
__device__ void philox_fill(T* out, long long n, PhiloxKey key, double a, double b, bool wide) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x) {
        unsigned int w[4];
        words((unsigned long long)e, key, w);
        double v;
        if (KIND == 1) {
            double u1 = unit(w[0], w[1], wide, true), u2 = unit(w[2], w[3], wide, false);
            v = a + b * (sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
        } else if (KIND == 0) {
            v = a + (b - a) * unit(w[0], w[1], wide, false);
        } else {
            v = unit(w[0], w[1], wide, false) < a ? 1.0 : 0.0;
        }
        put(out, e, v);
    }
}

#define PHILOX_KERNELS(T, SUF, WIDE)                                                          \
    extern "C" __global__ void philox_uniform_##SUF(T* out, long long n, PhiloxKey key,       \
                                                    double low, double high) {                \
        philox_fill<T, 0>(out, n, key, low, high, WIDE);                                      \
    }                                                                                         \
    extern "C" __global__ void philox_gaussian_##SUF(T* out, long long n, PhiloxKey key,      \
                                                     double mean, double stddev) {            \
        philox_fill<T, 1>(out, n, key, mean, stddev, WIDE);                                   \
    }                                                                                         \
    extern "C" __global__ void philox_bernoulli_##SUF(T* out, long long n, PhiloxKey key,     \
                                                      double p, double unused) {              \
        philox_fill<T, 2>(out, n, key, p, unused, WIDE);                                      \
    }

PHILOX_KERNELS(float, f32, false)
PHILOX_KERNELS(__half, f16, false)
PHILOX_KERNELS(double, f64, true)
