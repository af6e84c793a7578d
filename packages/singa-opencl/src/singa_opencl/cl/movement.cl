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
