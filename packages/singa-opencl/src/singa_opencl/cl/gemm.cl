// GEMM: Y = alpha * op(A) @ op(B) + beta * C, batched, for any strided A, B, C, Y.
//
// Three kernels. pack_a and pack_b copy op(A) and op(B) (any strides, any storage type) into
// panels in the compute type: A in row panels of GM_MR rows, k-major (Ap[panel][k][r]), B in
// column panels of GM_NR columns (Bp[panel][k][c]), zero-padded to whole panels. gemm_tile then
// gives each work-item one GM_MR x GM_NR tile of Y: it streams the two panels from memory and
// keeps the tile in GM_MR * 2 vector registers (register blocking), so each loaded B vector is
// used GM_MR times and each A value GM_NR times. On a CPU runtime (pocl) a work-group is one
// work-item, so the vector types map straight onto SIMD registers.
//
// Batch dims: work-item dim 2 is the (collapsed) batch index; ew_layout gives per-batch-dim
// strides of Y (sy), A (sa), B (sb) and C (sc).

#define GM_MAXD 6

typedef struct {
    int shape[GM_MAXD];
    int sy[GM_MAXD];
    int sa[GM_MAXD];
    int sb[GM_MAXD];
    int sc[GM_MAXD];
} gm_batch;

// element offset of batch `b` in the operand whose strides are `st`
inline int gm_batch_offset(int b, int nd, const int* shape, const int* st)
{
    int off = 0;
    for (int d = nd - 1; d >= 0; --d) {
        int q = b / shape[d];
        off += (b - q * shape[d]) * st[d];
        b = q;
    }
    return off;
}

// Element (i, k) of op(A) is at a[off + i*s0 + (k / kdiv)*s1hi + (k % kdiv)*s1]: kdiv = K for a
// plain matrix; a smaller kdiv lets K run over two dims (e.g. images x pixels).
__kernel void pack_a(int M, int K, int nb, gm_batch B_, __global const T_S* a, int ao,
                     int s0, int s1, int kdiv, int s1hi, __global T_C* ap)
{
    int k = get_global_id(0), i = get_global_id(1), b = get_global_id(2);
    int Mp = (M + GM_MR - 1) / GM_MR * GM_MR;
    if (k >= K || i >= Mp) return;
    int off = ao + gm_batch_offset(b, nb, B_.shape, B_.sa);
    int kh = k / kdiv;
    T_C v = i < M ? T_LOAD(a, off + i * s0 + kh * s1hi + (k - kh * kdiv) * s1) : (T_C)0;
    ap[(size_t)b * Mp * K + ((size_t)(i / GM_MR) * K + k) * GM_MR + i % GM_MR] = v;
}

// Element (k, j) of op(B) is at b[off + (k / kdiv)*s0hi + (k % kdiv)*s0 + j*s1].
__kernel void pack_b(int K, int N, int nb, gm_batch B_, __global const T_S* bm, int bo,
                     int s0, int s1, int kdiv, int s0hi, __global T_C* bp)
{
    int j = get_global_id(0), k = get_global_id(1), b = get_global_id(2);
    int Np = (N + GM_NR - 1) / GM_NR * GM_NR;
    if (k >= K || j >= Np) return;
    int off = bo + gm_batch_offset(b, nb, B_.shape, B_.sb);
    int kh = k / kdiv;
    T_C v = j < N ? T_LOAD(bm, off + kh * s0hi + (k - kh * kdiv) * s0 + j * s1) : (T_C)0;
    bp[(size_t)b * Np * K + ((size_t)(j / GM_NR) * K + k) * GM_NR + j % GM_NR] = v;
}

__kernel void gemm_tile(int M, int N, int K, int nb, gm_batch B_,
                        __global const T_C* ap, __global const T_C* bp,
                        T_C alpha, T_C beta, int has_c,
                        __global const T_S* c, int co, int c0, int c1,
                        __global O_S* y, int yo, int y0, int y1)
{
    int jb = get_global_id(0), ib = get_global_id(1), b = get_global_id(2);
    int Mp = (M + GM_MR - 1) / GM_MR * GM_MR;
    int Np = (N + GM_NR - 1) / GM_NR * GM_NR;
    if (jb * GM_NR >= Np || ib * GM_MR >= Mp) return;
    __global const T_C* pa = ap + (size_t)b * Mp * K + (size_t)ib * K * GM_MR;
    __global const T_C* pb = bp + (size_t)b * Np * K + (size_t)jb * K * GM_NR;
    GM_VT acc0[GM_MR], acc1[GM_MR];
    for (int r = 0; r < GM_MR; ++r) {
        acc0[r] = (GM_VT)0;
        acc1[r] = (GM_VT)0;
    }
    for (int k = 0; k < K; ++k) {
        GM_VT b0 = GM_VLOAD(0, pb + k * GM_NR);
        GM_VT b1 = GM_VLOAD(1, pb + k * GM_NR);
#pragma unroll
        for (int r = 0; r < GM_MR; ++r) {
            GM_VT av = (GM_VT)(pa[k * GM_MR + r]);
            acc0[r] = mad(av, b0, acc0[r]);
            acc1[r] = mad(av, b1, acc1[r]);
        }
    }
    int yb = yo + gm_batch_offset(b, nb, B_.shape, B_.sy);
    int cb = co + gm_batch_offset(b, nb, B_.shape, B_.sc);
    T_C t[GM_NR];
    for (int r = 0; r < GM_MR; ++r) {
        int i = ib * GM_MR + r;
        if (i >= M) break;
        GM_VSTORE(acc0[r], 0, t);
        GM_VSTORE(acc1[r], 1, t);
        for (int q = 0; q < GM_NR; ++q) {
            int j = jb * GM_NR + q;
            if (j >= N) break;
            T_C v = alpha * t[q];
            if (has_c) v += beta * T_LOAD(c, cb + i * c0 + j * c1);
            O_STORE(y, yb + i * y0 + j * y1, (O_C)v);
        }
    }
}
