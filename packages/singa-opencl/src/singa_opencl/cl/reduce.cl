// Reductions (instantiated per op by kernels/reduce.py with RD_KERNEL lines), arg-max and the
// softmax family. T_* is the input type; O_* the output type; accumulation is in T_C (float
// for float16 inputs).
//
// A reduction sees its input as kept dims (the output's) and reduced dims, each with strides,
// so any strided view reduces over any axes without a copy. Work-item (p, o) reduces part p
// of output o's elements, walking the reduced dims with an odometer (no division per element).
// With one part it writes the output; otherwise partial results go to `part` and NAME_final
// combines them: the result does not depend on how the runtime groups work-items.

#define RD_MAXD 6

typedef struct {
    int kshape[RD_MAXD];
    int kx[RD_MAXD];
    int ky[RD_MAXD];
    int rshape[RD_MAXD];
    int rx[RD_MAXD];
} rd_layout;

#define RD_KEPT_OFFSETS(L, nk, o, xoff, yoff)                                              \
    {                                                                                      \
        int t_ = (o);                                                                      \
        for (int d = (nk) - 1; d >= 0; --d) {                                              \
            int q_ = t_ / L.kshape[d];                                                     \
            int k_ = t_ - q_ * L.kshape[d];                                                \
            t_ = q_;                                                                       \
            xoff += k_ * L.kx[d];                                                          \
            yoff += k_ * L.ky[d];                                                          \
        }                                                                                  \
    }

#define RD_KERNEL(NAME, INIT, MAP, COMB, FINAL)                                             \
inline T_C NAME##_map(T_C v) { return MAP; }                                               \
inline T_C NAME##_comb(T_C acc, T_C v) { return COMB; }                                    \
__kernel void NAME(int nout, int nk, int nr, int R, int chunk, int nparts, int last,       \
                   rd_layout L, __global O_S* y, int yo, __global const T_S* x, int xo,    \
                   __global T_C* part)                                                     \
{                                                                                          \
    int p = get_global_id(0), o = get_global_id(1);                                        \
    if (p >= nparts || o >= nout) return;                                                  \
    int off = xo, yoff = yo;                                                               \
    RD_KEPT_OFFSETS(L, nk, o, off, yoff)                                                   \
    int start = p * chunk;                                                                 \
    int end = min(start + chunk, R);                                                       \
    int c[RD_MAXD];                                                                        \
    int t = start;                                                                         \
    for (int d = nr - 1; d >= 0; --d) {                                                    \
        int q = t / L.rshape[d];                                                           \
        c[d] = t - q * L.rshape[d];                                                        \
        t = q;                                                                             \
        off += c[d] * L.rx[d];                                                             \
    }                                                                                      \
    T_C acc = INIT;                                                                        \
    int inner = L.rshape[nr - 1], ist = L.rx[nr - 1];                                      \
    for (int r = start; r < end;) {                                                        \
        int run = min(inner - c[nr - 1], end - r);                                         \
        int j = 0;                                                                         \
        if (ist == 1) { /* contiguous run: four accumulators hide the add latency */       \
            T_C a1 = INIT, a2 = INIT, a3 = INIT;                                           \
            for (; j + 3 < run; j += 4) {                                                  \
                acc = NAME##_comb(acc, NAME##_map(T_LOAD(x, off + j)));                    \
                a1 = NAME##_comb(a1, NAME##_map(T_LOAD(x, off + j + 1)));                  \
                a2 = NAME##_comb(a2, NAME##_map(T_LOAD(x, off + j + 2)));                  \
                a3 = NAME##_comb(a3, NAME##_map(T_LOAD(x, off + j + 3)));                  \
            }                                                                              \
            acc = NAME##_comb(NAME##_comb(acc, a1), NAME##_comb(a2, a3));                  \
        }                                                                                  \
        for (; j < run; ++j)                                                               \
            acc = NAME##_comb(acc, NAME##_map(T_LOAD(x, off + j * ist)));                  \
        r += run;                                                                          \
        off += run * ist;                                                                  \
        c[nr - 1] += run;                                                                  \
        for (int d = nr - 1; d > 0 && c[d] == L.rshape[d]; --d) {                          \
            off += L.rx[d - 1] - c[d] * L.rx[d];                                           \
            c[d] = 0;                                                                      \
            c[d - 1] += 1;                                                                 \
        }                                                                                  \
    }                                                                                      \
    if (last) {                                                                            \
        T_C n = (T_C)R;                                                                    \
        O_STORE(y, yoff, (O_C)(FINAL));                                                    \
    } else {                                                                               \
        part[o * nparts + p] = acc;                                                        \
    }                                                                                      \
}                                                                                          \
__kernel void NAME##_final(int nout, int nk, int R, int nparts, rd_layout L,               \
                           __global O_S* y, int yo, __global const T_C* part)              \
{                                                                                          \
    int o = get_global_id(0);                                                              \
    if (o >= nout) return;                                                                 \
    int xoff = 0, yoff = yo;                                                               \
    RD_KEPT_OFFSETS(L, nk, o, xoff, yoff)                                                  \
    T_C acc = INIT;                                                                        \
    for (int p = 0; p < nparts; ++p) {                                                     \
        T_C v = part[o * nparts + p];                                                      \
        acc = COMB;                                                                        \
    }                                                                                      \
    T_C n = (T_C)R;                                                                        \
    O_STORE(y, yoff, (O_C)(FINAL));                                                        \
}

#if T_IS_INT
#define RD_LOWEST INT_MIN
#define RD_HIGHEST INT_MAX
#define RD_MAX(x, y) max((x), (y))
#define RD_MIN(x, y) min((x), (y))
#define RD_BEATS(v, best) ((v) > (best))
#else
#define RD_LOWEST (-INFINITY)
#define RD_HIGHEST INFINITY
#define RD_MAX(x, y) (((x) >= (y) || (x) != (x)) ? (x) : (y))
#define RD_MIN(x, y) (((x) <= (y) || (x) != (x)) ? (x) : (y))
#define RD_BEATS(v, best) ((v) > (best) || (isnan(v) && !isnan(best)))
#endif

// Index of the first maximum along one axis (the first NaN, like numpy.argmax).
__kernel void argmax(int nout, int nk, int len, int st, rd_layout L,
                     __global int* y, int yo, __global const T_S* x, int xo)
{
    int o = get_global_id(0);
    if (o >= nout) return;
    int off = xo, yoff = yo;
    RD_KEPT_OFFSETS(L, nk, o, off, yoff)
    T_C best = T_LOAD(x, off);
    int idx = 0;
    for (int j = 1; j < len; ++j) {
        T_C v = T_LOAD(x, off + j * st);
        if (RD_BEATS(v, best)) {
            best = v;
            idx = j;
        }
    }
    y[yoff] = idx;
}

// Softmax family: one work-item per row. `L` (from elementwise.cl's ew_layout) holds the
// outer dims with strides sy (output), sa (x or y), sb (dy); the row has `len` elements with
// strides ys, as, bs. mode 0: softmax, 1: log-softmax, 2: softmax backward (a = y, b = dy).
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

#if !T_IS_INT
__kernel void softmax_rows(int nrows, int nd, ew_layout L, int len, int mode,
                           __global O_S* y, int yo, int ys,
                           __global const T_S* a, int ao, int as,
                           __global const T_S* b, int bo, int bs)
{
    int r = get_global_id(0);
    if (r >= nrows) return;
    int iy = yo, ia = ao, ib = bo, t = r;
    for (int d = nd - 1; d >= 0; --d) {
        int q = t / L.shape[d];
        int k = t - q * L.shape[d];
        t = q;
        iy += k * L.sy[d];
        ia += k * L.sa[d];
        ib += k * L.sb[d];
    }
    // the row sums are compensated (Kahan): a plain running sum over a million-element row
    // drifts by ~1e-3 relative in float32, which the conformance kit's large cases catch
    if (mode == 2) {
        T_C s = 0, comp = 0;
        for (int j = 0; j < len; ++j) {
            T_C v = T_LOAD(a, ia + j * as) * T_LOAD(b, ib + j * bs) - comp;
            T_C t2 = s + v;
            comp = (t2 - s) - v;
            s = t2;
        }
        for (int j = 0; j < len; ++j) {
            T_C yv = T_LOAD(a, ia + j * as);
            O_STORE(y, iy + j * ys, (O_C)(yv * (T_LOAD(b, ib + j * bs) - s)));
        }
        return;
    }
    T_C m = T_LOAD(a, ia);
    for (int j = 1; j < len; ++j)
        m = fmax(m, T_LOAD(a, ia + j * as));
    T_C s = 0, comp = 0;
    for (int j = 0; j < len; ++j) {
        T_C v = exp(T_LOAD(a, ia + j * as) - m) - comp;
        T_C t2 = s + v;
        comp = (t2 - s) - v;
        s = t2;
    }
    if (mode == 1) {
        T_C ls = log(s);
        for (int j = 0; j < len; ++j)
            O_STORE(y, iy + j * ys, (O_C)(T_LOAD(a, ia + j * as) - m - ls));
    } else {
        T_C inv = (T_C)1 / s;
        for (int j = 0; j < len; ++j)
            O_STORE(y, iy + j * ys, (O_C)(exp(T_LOAD(a, ia + j * as) - m) * inv));
    }
}
#endif
