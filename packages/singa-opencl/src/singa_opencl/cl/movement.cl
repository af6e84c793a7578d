// Index-based data movement on raw element bits (T_S is uchar/ushort/uint/ulong by item size).
//
// gather: y[p] = x[p with coordinate `gdim` replaced by idx[p[gdim]]] along x's axis; the output
// layout L (from elementwise.cl's ew_layout) has strides sy for y and sa for x, where
// sa[gdim] is unused: the axis stride is `ast`. Negative indices count from the end (numpy).

#ifndef EW_MAXD
#define EW_MAXD 6
typedef struct {
    int shape[EW_MAXD];
    int sy[EW_MAXD];
    int sa[EW_MAXD];
    int sb[EW_MAXD];
    int sc[EW_MAXD];
} ew_layout;
#endif

__kernel void gather(int n, int nd, ew_layout L, int gdim, int alen, int ast,
                     __global T_S* y, int yo, __global const T_S* x, int xo,
                     __global const int* idx, int io, int is)
{
    int i = get_global_id(0);
    if (i >= n) return;
    int iy = yo, ix = xo;
    for (int d = nd - 1; d >= 0; --d) {
        int q = i / L.shape[d];
        int k = i - q * L.shape[d];
        i = q;
        iy += k * L.sy[d];
        if (d == gdim) {
            int j = idx[io + k * is];
            ix += (j < 0 ? j + alen : j) * ast;
        } else {
            ix += k * L.sa[d];
        }
    }
    y[iy] = x[ix];
}

// Strided copy in TP_TILE x TP_TILE blocks, for layouts whose input and output run along
// different innermost dims (transposes): a work-item copies one block of one batch, so both
// its reads and its writes stay within TP_TILE cache lines.
#define TP_TILE 16

__kernel void copy_tiles(int B, int R, int C, int yb, int y0, int y1, int xb, int x0, int x1,
                         __global T_S* y, int yo, __global const T_S* x, int xo)
{
    int tc = (C + TP_TILE - 1) / TP_TILE, tr = (R + TP_TILE - 1) / TP_TILE;
    int id = get_global_id(0);
    int b = id / (tr * tc), t = id - b * (tr * tc);
    if (b >= B) return;
    int r0 = (t / tc) * TP_TILE, c0 = (t % tc) * TP_TILE;
    int r1 = min(r0 + TP_TILE, R), c1 = min(c0 + TP_TILE, C);
    int ybase = yo + b * yb, xbase = xo + b * xb;
    for (int r = r0; r < r1; ++r)
        for (int c = c0; c < c1; ++c)
            y[ybase + r * y0 + c * y1] = x[xbase + r * x0 + c * x1];
}
