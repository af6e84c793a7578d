// Host stand-in for CUDA's cuda_fp16.h, for building the package's .cu kernels as C++ on the
// CPU in tests: __half is IEEE binary16 (GCC's _Float16), conversions round to nearest even
// as the CUDA intrinsics named here do.
#pragma once
struct __half {
    _Float16 v;
};
inline float __half2float(__half h) { return (float)h.v; }
inline __half __float2half_rn(float f) { __half h; h.v = (_Float16)f; return h; }
inline __half __double2half(double d) { __half h; h.v = (_Float16)d; return h; }
