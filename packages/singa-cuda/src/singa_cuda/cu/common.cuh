// Helpers shared by every .cu file of the package (included as "common.cuh"; NVRTC gets this
// text in memory and it is part of every cubin's cache key, so editing it recompiles all).
// Acc<T>: the accumulation type of T (float for __half and float, double for double).
// ld/st: read an element as its accumulation type, and store one rounded once to T
// (__half round-to-nearest-even).
#pragma once
#include <cuda_fp16.h>

template <typename T> struct Acc { typedef float type; };
template <> struct Acc<double> { typedef double type; };

__device__ __forceinline__ float ld(const __half* p, long long i) { return __half2float(p[i]); }
__device__ __forceinline__ float ld(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ double ld(const double* p, long long i) { return p[i]; }
__device__ __forceinline__ int ld(const int* p, long long i) { return p[i]; }
__device__ __forceinline__ void st(__half* p, long long i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void st(float* p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void st(double* p, long long i, double v) { p[i] = v; }
__device__ __forceinline__ void st(int* p, long long i, int v) { p[i] = v; }

// ReLU as the shared ReLU kernel computes it, cupy's maximum(v, 0): isnan(v) ? NAN : max(v, 0)
// with NAN = __int_as_float(0x7fffffff), in float for __half and float, in double for double
// (the caller rounds once to T).
template <typename A>
__device__ __forceinline__ A relu_value(A v) {
    return isnan(v) ? (A)__int_as_float(0x7fffffff) : max(v, (A)0);
}
__device__ __forceinline__ int relu_value(int v) { return max(v, 0); }

// Structs passed by value to kernels. The launchers (cu_kernels.py) build them as one-element
// numpy arrays of a structured dtype whose offsets and size a test checks against offsetof and
// sizeof as NVRTC and g++ compile this header; cupy hands the driver that array's bytes.
struct PoolGeom {
    int n, c, h, w, kh, kw, sh, sw, pt, pb, pl, pr, ho, wo, is_max, count_include_pad;
};

struct PhiloxKey {
    unsigned int k0, k1, call0, call1;
};
