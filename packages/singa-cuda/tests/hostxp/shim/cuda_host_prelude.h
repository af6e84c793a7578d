// Host prelude for building the package's .cu kernels as C++ on the CPU in tests (g++ -include).
// Kernels are grid-stride loops, so one "thread" (grid 1, block 1) runs every item in order;
// atomics become plain read-modify-writes (one thread), __umulhi the high half of a 64-bit
// product. The kernel source itself is compiled unchanged.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
struct singa_dim3 {
    unsigned int x, y, z;
};
static const singa_dim3 blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0};
static const singa_dim3 gridDim = {1, 1, 1}, blockDim = {1, 1, 1};
using std::cos;
using std::exp;
using std::isnan;
using std::log;
using std::max;
using std::min;
using std::sqrt;
inline unsigned int __umulhi(unsigned int a, unsigned int b) {
    return (unsigned int)(((unsigned long long)a * b) >> 32);
}
template <typename T> inline T atomicAdd(T* p, T v) {
    T old = *p;
    *p = old + v;
    return old;
}
inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, sizeof f);
    return f;
}
