// Elementwise kernels that take one launch where the shared array code (xp/elementwise.py)
// takes two, with the same arithmetic, so each output is bitwise the shared kernels':
// - relu_backward_*: ReLUBackward, dx = dy * (x > 0), the product of dy and the mask that the
//   shared code's multiply computes (multiplying by 1 or 0 is exact; a negative dy gives -0.0
//   and a NaN or infinite one NaN where x <= 0);
// - add_relu_*: graph mode's fused Add+ReLU, y = relu(a + b), the sum rounded to T as the
//   shared Add stores it (int32 wrapping around), then common.cuh's relu_value of that.
// Every operand is contiguous with n elements; the output may alias an input (each thread
// reads element e before it writes element e).
// kernels: relu_backward_f32 relu_backward_f16 relu_backward_f64
// kernels: add_relu_f32 add_relu_f16 add_relu_f64 add_relu_i32
#include "common.cuh"

template <typename T>
__device__ void relu_backward(const T* dy, const T* x, T* dx, long long n) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x)
        st(dx, e, ld(dy, e) * (ld(x, e) > 0 ? 1 : 0));
}

// a + b as the shared Add computes it: int32 wraps around (two's complement)
template <typename A>
__device__ __forceinline__ A add_value(A a, A b) { return a + b; }
__device__ __forceinline__ int add_value(int a, int b) {
    return (int)((unsigned int)a + (unsigned int)b);
}

template <typename T>
__device__ void add_relu(const T* a, const T* b, T* y, long long n) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x) {
        T sum;
        st(&sum, 0, add_value(ld(a, e), ld(b, e)));
        st(y, e, relu_value(ld(&sum, 0)));
    }
}

#define ELEMENTWISE_KERNELS(T, SUF)                                                           \
    extern "C" __global__ void relu_backward_##SUF(const T* dy, const T* x, T* dx,            \
                                                   long long n) {                             \
        relu_backward<T>(dy, x, dx, n);                                                       \
    }                                                                                         \
    extern "C" __global__ void add_relu_##SUF(const T* a, const T* b, T* y, long long n) {    \
        add_relu<T>(a, b, y, n);                                                              \
    }

ELEMENTWISE_KERNELS(float, f32)
ELEMENTWISE_KERNELS(__half, f16)
ELEMENTWISE_KERNELS(double, f64)
extern "C" __global__ void add_relu_i32(const int* a, const int* b, int* y, long long n) {
    add_relu<int>(a, b, y, n);
}
