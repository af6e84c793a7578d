// 2-D max/average pooling, NCHW, contiguous. See Pooling2d's docstring for the rules: max
// ignores padding and takes the first maximal cell in row-major window order; average divides
// by the cells inside the padded input (count_include_pad) or by the real input cells, and
// ceil-mode overhang cells never count.

typedef struct {
    int H, W, kh, kw, sh, sw, pt, pl, ho, wo, is_max, count_pad, Hend, Wend;
} pl_geom;  // Hend = H + bottom padding, Wend = W + right padding

inline int pl_divisor(pl_geom g, int h0, int w0)
{
    int hl = g.count_pad ? max(h0, -g.pt) : max(h0, 0);
    int hh = g.count_pad ? min(h0 + g.kh, g.Hend) : min(h0 + g.kh, g.H);
    int wl = g.count_pad ? max(w0, -g.pl) : max(w0, 0);
    int wh = g.count_pad ? min(w0 + g.kw, g.Wend) : min(w0 + g.kw, g.W);
    return max(hh - hl, 0) * max(wh - wl, 0);
}

// index (h * W + w) of the first maximal real cell of the window at (h0, w0); a NaN is the
// maximum (the first NaN wins), so max pooling propagates NaN as numpy and PyTorch do
inline int pl_argmax(__global const T_S* x, int base, pl_geom g, int h0, int w0)
{
    int best_i = -1;
    T_C best = 0;
    for (int i = max(h0, 0); i < min(h0 + g.kh, g.H); ++i)
        for (int j = max(w0, 0); j < min(w0 + g.kw, g.W); ++j) {
            T_C v = T_LOAD(x, base + i * g.W + j);
            if (best_i < 0 || v > best || (isnan(v) && !isnan(best))) {
                best = v;
                best_i = i * g.W + j;
            }
        }
    return best_i;
}

__kernel void pool_fwd(int total, pl_geom g, __global const T_S* x, int xo,
                       __global O_S* y, int yo)
{
    int idx = get_global_id(0);
    if (idx >= total) return;
    int q = idx % g.wo, t = idx / g.wo;
    int p = t % g.ho, plane = t / g.ho;
    int base = xo + plane * g.H * g.W;
    int h0 = p * g.sh - g.pt, w0 = q * g.sw - g.pl;
    T_C r;
    if (g.is_max) {
        r = T_LOAD(x, base + pl_argmax(x, base, g, h0, w0));
    } else {
        T_C s = 0;
        for (int i = max(h0, 0); i < min(h0 + g.kh, g.H); ++i)
            for (int j = max(w0, 0); j < min(w0 + g.kw, g.W); ++j)
                s += T_LOAD(x, base + i * g.W + j);
        r = s / (T_C)pl_divisor(g, h0, w0);
    }
    O_STORE(y, yo + idx, (O_C)r);
}

// One work-item per dx cell: sum the dy of every window that routes to it.
__kernel void pool_bwd(int total, pl_geom g, __global const T_S* dy, int dyo,
                       __global const T_S* x, int xo, __global O_S* dx, int dxo)
{
    int idx = get_global_id(0);
    if (idx >= total) return;
    int w = idx % g.W, t = idx / g.W;
    int h = t % g.H, plane = t / g.H;
    int base = xo + plane * g.H * g.W;
    int dbase = dyo + plane * g.ho * g.wo;
    int p_lo = max(0, (h + g.pt - g.kh + g.sh) / g.sh);
    int p_hi = min(g.ho - 1, (h + g.pt) / g.sh);
    int q_lo = max(0, (w + g.pl - g.kw + g.sw) / g.sw);
    int q_hi = min(g.wo - 1, (w + g.pl) / g.sw);
    T_C acc = 0;
    for (int p = p_lo; p <= p_hi; ++p) {
        int h0 = p * g.sh - g.pt;
        if (h < h0 || h >= h0 + g.kh) continue;
        for (int q = q_lo; q <= q_hi; ++q) {
            int w0 = q * g.sw - g.pl;
            if (w < w0 || w >= w0 + g.kw) continue;
            T_C d = T_LOAD(dy, dbase + p * g.wo + q);
            if (g.is_max) {
                if (pl_argmax(x, base, g, h0, w0) == h * g.W + w) acc += d;
            } else {
                acc += d / (T_C)pl_divisor(g, h0, w0);
            }
        }
    }
    O_STORE(dx, dxo + idx, (O_C)acc);
}

// Backward for non-overlapping windows (stride >= kernel on both axes), into a zeroed dx: one
// work-item per window finds its maximum once (or spreads the average) and writes its cells;
// no two windows share a cell, so there are no races.
__kernel void pool_bwd_windows(int total, pl_geom g, __global const T_S* dy, int dyo,
                               __global const T_S* x, int xo, __global O_S* dx, int dxo)
{
    int idx = get_global_id(0);
    if (idx >= total) return;
    int q = idx % g.wo, t = idx / g.wo;
    int p = t % g.ho, plane = t / g.ho;
    int base = plane * g.H * g.W;
    int h0 = p * g.sh - g.pt, w0 = q * g.sw - g.pl;
    T_C d = T_LOAD(dy, dyo + idx);
    if (g.is_max) {
        int at = pl_argmax(x, xo + base, g, h0, w0);
        O_STORE(dx, dxo + base + at, (O_C)d);
    } else {
        T_C share = d / (T_C)pl_divisor(g, h0, w0);
        for (int i = max(h0, 0); i < min(h0 + g.kh, g.H); ++i)
            for (int j = max(w0, 0); j < min(w0 + g.kw, g.W); ++j)
                O_STORE(dx, dxo + base + i * g.W + j, (O_C)share);
    }
}
