// Indexing, padding and resampling kernels. Layouts use ew_layout's five int arrays as generic
// per-dim slots (shape + four stride/size arrays), named at each kernel. Negative indices
// count from the end of their axis. T_* is the element type (raw bits for pure moves), K_* the
// condition type of `where`.

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

inline int ix_norm(int i, int n) { return i < 0 ? i + n : i; }

// y = where(cond != 0, a, b); L: shape, sy (y), sa (cond), sb (a), sc (b)
__kernel void where_nd(int total, int nd, ew_layout L, __global O_S* y, int yo,
                       __global const K_S* cond, int co, __global const T_S* a, int ao,
                       __global const T_S* b, int bo)
{
    int i = get_global_id(0);
    if (i >= total) return;
    int iy = yo, ic = co, ia = ao, ib = bo;
    for (int d = nd - 1; d >= 0; --d) {
        int q = i / L.shape[d], k = i - q * L.shape[d];
        i = q;
        iy += k * L.sy[d];
        ic += k * L.sa[d];
        ia += k * L.sb[d];
        ib += k * L.sc[d];
    }
    K_C cv = K_LOAD(cond, ic);
    O_STORE(y, iy, (O_C)(cv != 0 ? T_LOAD(a, ia) : T_LOAD(b, ib)));
}

// Pad: L.shape = output shape, sy = x shape, sa = x strides, sb = begin pads.
// mode 0 constant, 1 reflect, 2 edge.
__kernel void pad_fwd(int total, int nd, ew_layout L, int mode, T_C value,
                      __global const T_S* x, int xo, __global O_S* y, int yo)
{
    int i = get_global_id(0);
    if (i >= total) return;
    int t = i, ix = xo, outside = 0;
    for (int d = nd - 1; d >= 0; --d) {
        int q = t / L.shape[d], k = t - q * L.shape[d];
        t = q;
        int n = L.sy[d];
        int s = k - L.sb[d];
        if (s < 0 || s >= n) {
            if (mode == 0) outside = 1;
            else if (mode == 1) s = s < 0 ? -s : 2 * (n - 1) - s;
            else s = s < 0 ? 0 : n - 1;
        }
        ix += s * L.sa[d];
    }
    O_STORE(y, yo + i, outside ? (O_C)value : (O_C)T_LOAD(x, ix));
}

// Adjoint of Pad along one axis: dx (pre, n, post) gets the sum of the dy (pre, n + lo + hi,
// post) cells whose padded position maps to its own.
__kernel void pad_fold(int total, int n, int post, int lo, int hi, int mode,
                       __global const T_S* dy, int dyo, __global O_S* dx, int dxo)
{
    int i = get_global_id(0);
    if (i >= total) return;
    int b = i % post, t = i / post;
    int xi = t % n, a = t / n;
    int len = n + lo + hi;
    T_C acc = 0;
    for (int o = 0; o < len; ++o) {
        int s = o - lo;
        if (s < 0 || s >= n) {
            if (mode == 0) continue;
            s = mode == 1 ? (s < 0 ? -s : 2 * (n - 1) - s) : (s < 0 ? 0 : n - 1);
        }
        if (s == xi) acc += T_LOAD(dy, dyo + (a * len + o) * post + b);
    }
    O_STORE(dx, dxo + i, (O_C)acc);
}

// OneHot: y (pre, depth, post) from idx (pre * post)
__kernel void onehot(int total, int depth, int post, __global const int* idx, int io,
                     T_C on, T_C off, __global O_S* y, int yo)
{
    int i = get_global_id(0);
    if (i >= total) return;
    int b = i % post, t = i / post;
    int k = t % depth, a = t / depth;
    int v = ix_norm(idx[io + a * post + b], depth);
    O_STORE(y, yo + i, (O_C)(v == k ? on : off));
}

// GatherElements: y[p] = x[p with p[axis] := idx[p]]; y and idx contiguous of shape L.shape,
// L.sa = x strides, alen = x's axis length.
__kernel void gather_elements(int total, int nd, ew_layout L, int axis, int alen,
                              __global const T_S* x, int xo, __global const int* idx, int io,
                              __global O_S* y, int yo)
{
    int i = get_global_id(0);
    if (i >= total) return;
    int t = i, ix = xo;
    for (int d = nd - 1; d >= 0; --d) {
        int q = t / L.shape[d], k = t - q * L.shape[d];
        t = q;
        ix += (d == axis ? ix_norm(idx[io + i], alen) : k) * L.sa[d];
    }
    O_STORE(y, yo + i, T_LOAD(x, ix));
}

// Scatter along `axis` of index space L.shape: one work-item per fiber (all coordinates but
// axis) walks the axis in order, so duplicates accumulate (add) or the last one wins (none)
// deterministically, without atomics. L.sy = out strides (at the axis: the target's stride),
// L.sa = update strides, L.sb = index strides.
__kernel void scatter_fibers(int nfib, int nd, ew_layout L, int axis, int alen, int add,
                             __global O_S* out, int oo, __global const T_S* upd, int uo,
                             __global const int* idx, int io)
{
    int f = get_global_id(0);
    if (f >= nfib) return;
    int t = f, ooff = oo, uoff = uo, ioff = io;
    for (int d = nd - 1; d >= 0; --d) {
        if (d == axis) continue;
        int q = t / L.shape[d], k = t - q * L.shape[d];
        t = q;
        ooff += k * L.sy[d];
        uoff += k * L.sa[d];
        ioff += k * L.sb[d];
    }
    for (int j = 0; j < L.shape[axis]; ++j) {
        int target = ooff + ix_norm(idx[ioff + j * L.sb[axis]], alen) * L.sy[axis];
        T_C v = T_LOAD(upd, uoff + j * L.sa[axis]);
        if (add) v += (T_C)T_LOAD(out, target);
        O_STORE(out, target, (O_C)v);
    }
}

// UpsampleNearest: y (shape L.shape, contiguous) from x (strides L.sa), integer scales L.sb
__kernel void upsample_nearest(int total, int nd, ew_layout L, __global const T_S* x, int xo,
                       __global O_S* y, int yo)
{
    int i = get_global_id(0);
    if (i >= total) return;
    int t = i, ix = xo;
    for (int d = nd - 1; d >= 0; --d) {
        int q = t / L.shape[d], k = t - q * L.shape[d];
        t = q;
        ix += (k / L.sb[d]) * L.sa[d];
    }
    O_STORE(y, yo + i, T_LOAD(x, ix));
}

// Its adjoint: dx (shape L.shape, contiguous) sums its block of dy (strides L.sa), scales L.sb
__kernel void upsample_bwd(int total, int nd, int block, ew_layout L,
                           __global const T_S* dy, int dyo, __global O_S* dx, int dxo)
{
    int i = get_global_id(0);
    if (i >= total) return;
    int t = i, base = dyo;
    for (int d = nd - 1; d >= 0; --d) {
        int q = t / L.shape[d], k = t - q * L.shape[d];
        t = q;
        base += k * L.sb[d] * L.sa[d];
    }
    T_C acc = 0;
    for (int r = 0; r < block; ++r) {
        int u = r, off = base;
        for (int d = nd - 1; d >= 0; --d) {
            int q = u / L.sb[d];
            off += (u - q * L.sb[d]) * L.sa[d];
            u = q;
        }
        acc += T_LOAD(dy, off);
    }
    O_STORE(dx, dxo + i, (O_C)acc);
}
