// GEMM: Y = alpha * op(A) @ op(B) + beta * C, batched, for any strided A, B, C, Y.
//
// Packing kernels copy op(A) and op(B) (any strides, any storage type) into panels in the
// compute type: A in row panels of GM_MR rows, k-major (Ap[batch][panel][k][r]), B in column
// panels of GM_NR columns (Bp[batch][panel][k][c]), zero-padded to whole panels. One
// packing work-item writes one k-row of one panel, so index arithmetic is paid once per row.
// A batch dim along which an operand does not change (stride 0, e.g. the shared filter of a
// convolution or a broadcast Matmul operand) is packed once.
//
// gemm_tile gives each work-item one GM_MR x GM_NR tile of Y: it streams the two panels and
// keeps the tile in GM_MR * 2 vector registers (register blocking), so each loaded B vector is
// used GM_MR times and each A value GM_NR times. With work-groups of one work-item, a CPU
// runtime (pocl) maps the vector types straight onto SIMD registers. Tiles are visited in
// blocks of GM_BI x GM_BJ (A panel fastest), so work-items that run close together share
// panels while those are in cache, and a call may cover only the k range [k0, k0 + kc): the
// host splits a long K into such chunks (accumulating into Y) to keep the panels cached.

#define GM_MAXD 6

// Batch dims of a call: strides of Y, A, B, C (elements) and of the packed panels of A, B.
typedef struct {
    int shape[GM_MAXD];
    int sy[GM_MAXD];
    int sa[GM_MAXD];
    int sb[GM_MAXD];
    int sc[GM_MAXD];
    int pa[GM_MAXD];
    int pb[GM_MAXD];
} gm_batch;

// The batches one operand is packed for: their dims and the operand's strides.
typedef struct {
    int shape[GM_MAXD];
    int st[GM_MAXD];
} gm_pack;

inline int gm_offset(int b, int nd, const int* shape, const int* st)
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
__kernel void pack_a(int M, int K, int nd, gm_pack L, __global const T_S* a, int ao,
                     int s0, int s1, int kdiv, int s1hi, __global T_C* ap)
{
    int id = get_global_id(0);  // launched for exactly the number of rows (no guard)
    int nib = (M + GM_MR - 1) / GM_MR;
    int k = id % K, t = id / K;
    int ib = t % nib, b = t / nib;
    int kh = k / kdiv;
    int off = ao + gm_offset(b, nd, L.shape, L.st) + kh * s1hi + (k - kh * kdiv) * s1;
    __global T_C* dst = ap + ((size_t)(b * nib + ib) * K + k) * GM_MR;
    for (int r = 0; r < GM_MR; ++r) {
        int i = ib * GM_MR + r;
        dst[r] = i < M ? T_LOAD(a, off + i * s0) : (T_C)0;
    }
}

// Element (k, j) of op(B) is at b[off + (k / kdiv)*s0hi + (k % kdiv)*s0 + j*s1].
__kernel void pack_b(int K, int N, int nd, gm_pack L, __global const T_S* bm, int bo,
                     int s0, int s1, int kdiv, int s0hi, __global T_C* bp)
{
    int id = get_global_id(0);  // launched for exactly the number of rows (no guard)
    int njb = (N + GM_NR - 1) / GM_NR;
    int k = id % K, t = id / K;
    int jb = t % njb, b = t / njb;
    int kh = k / kdiv;
    int off = bo + gm_offset(b, nd, L.shape, L.st) + kh * s0hi + (k - kh * kdiv) * s0;
    __global T_C* dst = bp + ((size_t)(b * njb + jb) * K + k) * GM_NR;
    for (int c = 0; c < GM_NR; ++c) {
        int j = jb * GM_NR + c;
        dst[c] = j < N ? T_LOAD(bm, off + j * s1) : (T_C)0;
    }
}

#define GM_BI 16
#define GM_BJ 8

__kernel void gemm_tile(int M, int N, int K, int k0, int kc, int nd, gm_batch B_,
                        __global const T_C* ap, __global const T_C* bp,
                        T_C alpha, T_C beta, int has_c,
                        __global const T_S* c, int co, int c0, int c1,
                        __global O_S* y, int yo, int y0, int y1)
{
    int nib = (M + GM_MR - 1) / GM_MR, njb = (N + GM_NR - 1) / GM_NR;
    int id = get_global_id(0), b = get_global_id(1);
    int blk = id / (GM_BI * GM_BJ), r_ = id - blk * (GM_BI * GM_BJ);
    int nbj = (njb + GM_BJ - 1) / GM_BJ;
    int bi = blk / nbj, bj = blk - bi * nbj;
    int ib = bi * GM_BI + r_ % GM_BI, jb = bj * GM_BJ + r_ / GM_BI;
    if (ib >= nib || jb >= njb) return;
    __global const T_C* pa = ap + gm_offset(b, nd, B_.shape, B_.pa) + (size_t)ib * K * GM_MR;
    __global const T_C* pb = bp + gm_offset(b, nd, B_.shape, B_.pb) + (size_t)jb * K * GM_NR;
    GM_VT acc0[GM_MR], acc1[GM_MR];
    for (int r = 0; r < GM_MR; ++r) {
        acc0[r] = (GM_VT)0;
        acc1[r] = (GM_VT)0;
    }
    for (int k = k0; k < k0 + kc; ++k) {
        GM_VT b0 = GM_VLOAD(0, pb + k * GM_NR);
        GM_VT b1 = GM_VLOAD(1, pb + k * GM_NR);
#pragma unroll
        for (int r = 0; r < GM_MR; ++r) {
            GM_VT av = (GM_VT)(pa[k * GM_MR + r]);
            acc0[r] = mad(av, b0, acc0[r]);
            acc1[r] = mad(av, b1, acc1[r]);
        }
    }
    int yb = yo + gm_offset(b, nd, B_.shape, B_.sy);
    int cb = co + gm_offset(b, nd, B_.shape, B_.sc);
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

// Matrix-vector product (a GEMM with one row or one column): y[i] = alpha * sum_k
// A[i, k] x[k] + beta * c[i], one work-item per row, four partial sums to shorten the
// dependency chain. Avoids padding the single column to a GM_NR-wide panel.
__kernel void gemv_rows(int M, int K, __global const T_S* a, int ao, int a0, int a1,
                        __global const T_S* x, int xo, int xs, T_C alpha, T_C beta, int has_c,
                        __global const T_S* c, int co, int cs, __global O_S* y, int yo, int ys)
{
    int i = get_global_id(0);
    if (i >= M) return;
    int base = ao + i * a0;
    T_C s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int k = 0;
    for (; k + 3 < K; k += 4) {
        s0 += T_LOAD(a, base + k * a1) * T_LOAD(x, xo + k * xs);
        s1 += T_LOAD(a, base + (k + 1) * a1) * T_LOAD(x, xo + (k + 1) * xs);
        s2 += T_LOAD(a, base + (k + 2) * a1) * T_LOAD(x, xo + (k + 2) * xs);
        s3 += T_LOAD(a, base + (k + 3) * a1) * T_LOAD(x, xo + (k + 3) * xs);
    }
    for (; k < K; ++k)
        s0 += T_LOAD(a, base + k * a1) * T_LOAD(x, xo + k * xs);
    T_C v = alpha * ((s0 + s1) + (s2 + s3));
    if (has_c) v += beta * T_LOAD(c, co + i * cs);
    O_STORE(y, yo + i * ys, (O_C)v);
}
