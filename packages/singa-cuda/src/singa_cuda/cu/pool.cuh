// Pooling windows over one NCHW image plane, shared by pool.cu and epilogue.cu (the pooling of
// the fused Conv2d+ReLU+Pooling2d is this code, so it is bitwise the Pooling2d kernel's).
// Semantics are the op table's (Pooling2d): windows start at p*sh - pt; max ignores padding
// and picks the first NaN, else the first maximal cell in row-major window order; average
// divides by the cells inside the padded input (count_include_pad) or inside the real input;
// ceil-mode overhang never counts.
#pragma once
#include "common.cuh"

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

// The pooled value of window (p, q) of ``plane``, in the accumulation type.
template <typename T>
__device__ typename Acc<T>::type pool_window(const T* plane, const PoolGeom& g, int p, int q) {
    if (g.is_max) return ld(plane, window_argmax(plane, g, p, q));
    int hs = p * g.sh - g.pt, ws = q * g.sw - g.pl;
    typename Acc<T>::type s = 0;
    for (int i = max(hs, 0); i < min(hs + g.kh, g.h); ++i)
        for (int j = max(ws, 0); j < min(ws + g.kw, g.w); ++j)
            s += ld(plane, (long long)i * g.w + j);
    return s / pool_divisor(g, p, q);
}
