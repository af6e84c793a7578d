// Convolution helpers, compiled together with gemm.cl: the GEMM's B operand is packed straight
// from the image (implicit im2col, no column buffer), and col2im folds the columns of the
// backward-data GEMM back onto the image. Inputs are contiguous NCHW.
//
// Column index (c, i, j) -> k = (c * kh + i) * kw + j over the cg input channels of a group;
// pixel index p = ph * wo + pw over the output plane.

typedef struct {
    int C, H, W, G, cg, kh, kw, sh, sw, pt, pl, dh, dw, ho, wo;
} cv_geom;

inline T_C cv_pixel(__global const T_S* x, int base, cv_geom g, int k, int p)
{
    int khw = g.kh * g.kw;
    int c = k / khw, r = k - c * khw;
    int i = r / g.kw, j = r - i * g.kw;
    int ph = p / g.wo, pw = p - ph * g.wo;
    int h = ph * g.sh + i * g.dh - g.pt;
    int w = pw * g.sw + j * g.dw - g.pl;
    if (h < 0 || h >= g.H || w < 0 || w >= g.W) return (T_C)0;
    return T_LOAD(x, base + (c * g.H + h) * g.W + w);
}

// Forward: B[k, p] of batch b = (n, group) is the im2col column matrix of image n, group g.
__kernel void pack_b_im2col(int K, int N, cv_geom g, __global const T_S* x, int xo,
                            __global T_C* bp)
{
    int j = get_global_id(0), k = get_global_id(1), b = get_global_id(2);
    int Np = (N + GM_NR - 1) / GM_NR * GM_NR;
    if (k >= K || j >= Np) return;
    int n = b / g.G, grp = b - n * g.G;
    int base = xo + (n * g.C + grp * g.cg) * g.H * g.W;
    T_C v = j < N ? cv_pixel(x, base, g, k, j) : (T_C)0;
    bp[(size_t)b * Np * K + ((size_t)(j / GM_NR) * K + k) * GM_NR + j % GM_NR] = v;
}

// Backward-filter: B[(n, p), k] of batch b = group, images n0 .. n0 + K / P - 1.
__kernel void pack_b_im2col_t(int K, int N, int P, int n0, cv_geom g, __global const T_S* x,
                              int xo, __global T_C* bp)
{
    int j = get_global_id(0), r = get_global_id(1), b = get_global_id(2);
    int Np = (N + GM_NR - 1) / GM_NR * GM_NR;
    if (r >= K || j >= Np) return;
    int n = n0 + r / P, p = r - (r / P) * P;
    int base = xo + (n * g.C + b * g.cg) * g.H * g.W;
    T_C v = j < N ? cv_pixel(x, base, g, j, p) : (T_C)0;
    bp[(size_t)b * Np * K + ((size_t)(j / GM_NR) * K + r) * GM_NR + j % GM_NR] = v;
}

// Backward-data: dx[n, c, h, w] = sum of the column cells (c, i, j, p) that read (h, w);
// cols holds [n - n0][group][k][p] for images n0 .. n0 + nn - 1. One work-item per dx cell,
// so no atomics and a deterministic summation order.
__kernel void col2im(int nn, int n0, cv_geom g, __global const T_S* cols,
                     __global O_S* dx, int dxo)
{
    int idx = get_global_id(0);
    int total = nn * g.C * g.H * g.W;
    if (idx >= total) return;
    int w = idx % g.W;
    int t = idx / g.W;
    int h = t % g.H;
    t /= g.H;
    int c = t % g.C;
    int n = t / g.C;
    int grp = c / g.cg, cl = c - grp * g.cg;
    int K = g.cg * g.kh * g.kw, P = g.ho * g.wo;
    __global const T_S* col = cols + ((size_t)(n * g.G + grp) * K) * P;
    T_C acc = 0;
    for (int i = 0; i < g.kh; ++i) {
        int hh = h + g.pt - i * g.dh;
        if (hh < 0 || hh % g.sh) continue;
        int ph = hh / g.sh;
        if (ph >= g.ho) continue;
        for (int j = 0; j < g.kw; ++j) {
            int ww = w + g.pl - j * g.dw;
            if (ww < 0 || ww % g.sw) continue;
            int pw = ww / g.sw;
            if (pw >= g.wo) continue;
            acc += T_LOAD(col, (size_t)((cl * g.kh + i) * g.kw + j) * P + ph * g.wo + pw);
        }
    }
    O_STORE(dx, dxo + ((n0 + n) * g.C + c) * g.H * g.W + h * g.W + w, (O_C)acc);
}
