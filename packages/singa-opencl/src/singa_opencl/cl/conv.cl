// Convolution helpers, compiled together with gemm.cl: the GEMM's B operand is packed straight
// from the image (implicit im2col, no column buffer), and col2im folds the columns of the
// backward-data GEMM back onto the image. Inputs are contiguous NCHW.
//
// Column index (c, i, j) -> k = (c * kh + i) * kw + j over the cg input channels of a group;
// pixel index p = ph * wo + pw over the output plane.

typedef struct {
    int C, H, W, G, cg, kh, kw, sh, sw, pt, pl, dh, dw, ho, wo;
} cv_geom;

// Forward: B[k, p] of batch b = n * G + group is the im2col matrix of image n0 + n, group g;
// one work-item packs one k-row of one GM_NR-column panel, walking the pixels in order.
__kernel void pack_b_im2col(int K, int N, int n0, cv_geom g, __global const T_S* x,
                            int xo, __global T_C* bp)
{
    int id = get_global_id(0);  // launched for exactly the number of rows (no guard)
    int njb = (N + GM_NR - 1) / GM_NR;
    int k = id % K, t = id / K;
    int jb = t % njb, b = t / njb;
    int n = n0 + b / g.G, grp = b % g.G;
    int base = xo + (n * g.C + grp * g.cg) * g.H * g.W;
    int khw = g.kh * g.kw;
    int c = k / khw, r = k - c * khw;
    int i = r / g.kw, j = r - i * g.kw;
    base += c * g.H * g.W;
    int p = jb * GM_NR;
    int ph = p / g.wo, pw = p - ph * g.wo;
    __global T_C* dst = bp + ((size_t)(b * njb + jb) * K + k) * GM_NR;
    for (int q = 0; q < GM_NR; ++q, ++p) {
        int h = ph * g.sh + i * g.dh - g.pt;
        int w = pw * g.sw + j * g.dw - g.pl;
        int ok = p < N && h >= 0 && h < g.H && w >= 0 && w < g.W;
        dst[q] = ok ? T_LOAD(x, base + h * g.W + w) : (T_C)0;
        if (++pw == g.wo) {
            pw = 0;
            ++ph;
        }
    }
}

// Backward-filter: B[(n, p), k] of batch b = group, for images n0 .. n0 + K / P - 1; one
// work-item packs one (n, p) row of one panel, walking the columns (c, i, j) in order.
__kernel void pack_b_im2col_t(int K, int N, int P, int n0, cv_geom g,
                              __global const T_S* x, int xo, __global T_C* bp)
{
    int id = get_global_id(0);  // launched for exactly the number of rows (no guard)
    int njb = (N + GM_NR - 1) / GM_NR;
    int r = id % K, t = id / K;
    int jb = t % njb, b = t / njb;
    int n = n0 + r / P, p = r - (r / P) * P;
    int ph = p / g.wo, pw = p - ph * g.wo;
    int base = xo + (n * g.C + b * g.cg) * g.H * g.W;
    int khw = g.kh * g.kw;
    int kk = jb * GM_NR;
    int c = kk / khw, rem = kk - c * khw;
    int i = rem / g.kw, j = rem - i * g.kw;
    __global T_C* dst = bp + ((size_t)(b * njb + jb) * K + r) * GM_NR;
    for (int q = 0; q < GM_NR; ++q, ++kk) {
        int h = ph * g.sh + i * g.dh - g.pt;
        int w = pw * g.sw + j * g.dw - g.pl;
        int ok = kk < N && h >= 0 && h < g.H && w >= 0 && w < g.W;
        dst[q] = ok ? T_LOAD(x, base + (c * g.H + h) * g.W + w) : (T_C)0;
        if (++j == g.kw) {
            j = 0;
            if (++i == g.kh) {
                i = 0;
                ++c;
            }
        }
    }
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
        if (hh < 0) break;  // hh only decreases with i
        int ph = hh;
        if (g.sh != 1) {
            if (hh % g.sh) continue;
            ph = hh / g.sh;
        }
        if (ph >= g.ho) continue;
        for (int j = 0; j < g.kw; ++j) {
            int ww = w + g.pl - j * g.dw;
            if (ww < 0) break;
            int pw = ww;
            if (g.sw != 1) {
                if (ww % g.sw) continue;
                pw = ww / g.sw;
            }
            if (pw >= g.wo) continue;
            acc += T_LOAD(col, (size_t)((cl * g.kh + i) * g.kw + j) * P + ph * g.wo + pw);
        }
    }
    O_STORE(dx, dxo + ((n0 + n) * g.C + c) * g.H * g.W + h * g.W + w, (O_C)acc);
}
