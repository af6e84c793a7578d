// Row-wise losses over (N, C) inputs: softmax cross-entropy (forward, backward) and the
// cross-entropy of probabilities. The target is int32 class ids (N,) or a dense (N, C) array
// of the input's dtype (use_ids selects). One thread per row for the forward passes (C is a
// class count); float16 is computed in float. Row losses go to an accumulator-typed buffer
// that the host side sums (deterministically) into the mean.
// kernels: softmax_ce_fwd_f32 softmax_ce_fwd_f16 softmax_ce_fwd_f64
// kernels: softmax_ce_bwd_f32 softmax_ce_bwd_f16 softmax_ce_bwd_f64
// kernels: cross_entropy_fwd_f32 cross_entropy_fwd_f16 cross_entropy_fwd_f64
#include "common.cuh"

// SINGA clamps probabilities at float32's smallest normal number (FLT_MIN).
#define P_FLOOR 1.1754943508222875e-38

template <typename T>
__device__ typename Acc<T>::type target_at(const int* ids, const T* dense, int use_ids,
                                           long long row, int c, int n_classes) {
    if (use_ids) return ids[row] == c ? 1 : 0;
    return ld(dense, row * n_classes + c);
}

template <typename T>
__device__ void softmax_ce_fwd(const T* logits, const int* ids, const T* dense, int use_ids,
                               int n, int n_classes, T* probs, typename Acc<T>::type* row_loss) {
    typedef typename Acc<T>::type A;
    for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < n;
         r += (long long)gridDim.x * blockDim.x) {
        const T* z = logits + r * n_classes;
        A mx = ld(z, 0);
        for (int c = 1; c < n_classes; ++c) mx = max(mx, ld(z, c));
        A sum = 0;
        for (int c = 0; c < n_classes; ++c) sum += exp(ld(z, c) - mx);
        A lse = log(sum);
        A loss = 0;
        for (int c = 0; c < n_classes; ++c) {
            A logp = ld(z, c) - mx - lse;
            loss -= target_at(ids, dense, use_ids, r, c, n_classes) * logp;
            st(probs, r * n_classes + c, exp(logp));
        }
        row_loss[r] = loss;
    }
}

template <typename T>
__device__ void softmax_ce_bwd(const T* probs, const int* ids, const T* dense, int use_ids,
                               int n, int n_classes, T* dx) {
    long long total = (long long)n * n_classes;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long r = e / n_classes;
        int c = e % n_classes;
        st(dx, e, (ld(probs, e) - target_at(ids, dense, use_ids, r, c, n_classes)) / n);
    }
}

template <typename T>
__device__ void cross_entropy_fwd(const T* p, const int* ids, const T* dense, int use_ids, int n,
                                  int n_classes, T* loss) {
    typedef typename Acc<T>::type A;
    for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < n;
         r += (long long)gridDim.x * blockDim.x) {
        A s = 0;
        for (int c = 0; c < n_classes; ++c) {
            A t = target_at(ids, dense, use_ids, r, c, n_classes);
            if (t != 0) s -= t * log(max(ld(p, r * n_classes + c), (A)P_FLOOR));
        }
        st(loss, r, s);
    }
}

#define LOSS_KERNELS(T, SUF)                                                                  \
    extern "C" __global__ void softmax_ce_fwd_##SUF(const T* logits, const int* ids,          \
            const T* dense, int use_ids, int n, int n_classes, T* probs,                      \
            Acc<T>::type* row_loss) {                                                         \
        softmax_ce_fwd<T>(logits, ids, dense, use_ids, n, n_classes, probs, row_loss);        \
    }                                                                                         \
    extern "C" __global__ void softmax_ce_bwd_##SUF(const T* probs, const int* ids,           \
            const T* dense, int use_ids, int n, int n_classes, T* dx) {                       \
        softmax_ce_bwd<T>(probs, ids, dense, use_ids, n, n_classes, dx);                      \
    }                                                                                         \
    extern "C" __global__ void cross_entropy_fwd_##SUF(const T* p, const int* ids,            \
            const T* dense, int use_ids, int n, int n_classes, T* loss) {                     \
        cross_entropy_fwd<T>(p, ids, dense, use_ids, n, n_classes, loss);                     \
    }

LOSS_KERNELS(float, f32)
LOSS_KERNELS(__half, f16)
LOSS_KERNELS(double, f64)
