// Elementwise kernels. One template, instantiated once per op by the table in
// kernels/elementwise.py (EW_KERNEL(name, expression) lines appended to this file).
//
// Types come from the prelude: T_* is the input element type, O_* the output type; *_S is the
// storage type, *_C the compute type, *_LOAD/*_STORE read and write one element.
//
// Each op gets three kernels, with signatures shared by all ops so that one launcher serves
// them (the first two are launched for exactly n work-items and have no bounds guard, which
// would stop pocl from vectorising across work-items):
//   NAME_contig: every operand contiguous (unit stride), the common case, which the compiler
//                can vectorise across work-items;
//   NAME_flat:   a 1-D layout with one stride per operand (scalar broadcast, step slices);
//   NAME_nd:     up to EW_MAXD dimensions with per-operand strides (zero for broadcast dims);
//                a work-item handles EW_SEG consecutive elements of one innermost row, so the
//                index arithmetic (divisions) is paid once per segment.
// Operands: y (output), a, b, c (inputs; unused ones are passed as a dummy), and the scalar
// attributes v, w. Expressions name the input values a, b, c and the scalars v, w.

#define EW_MAXD 6

typedef struct {
    int shape[EW_MAXD];
    int sy[EW_MAXD];
    int sa[EW_MAXD];
    int sb[EW_MAXD];
    int sc[EW_MAXD];
} ew_layout;

#define EW_SEG 32

#define EW_KERNEL(NAME, EXPR)                                                               \
__kernel void NAME##_contig(__global O_S* y, int yo,                                       \
                            __global const T_S* pa, int ao,                                \
                            __global const T_S* pb, int bo,                                \
                            __global const T_S* pc, int co, T_C v, T_C w)                  \
{                                                                                          \
    int i = get_global_id(0);  /* launched for exactly n items: no guard (vectorises) */   \
    T_C a = T_LOAD(pa, ao + i);                                                            \
    T_C b = T_LOAD(pb, bo + i);                                                            \
    T_C c = T_LOAD(pc, co + i);                                                            \
    O_STORE(y, yo + i, (O_C)(EXPR));                                                       \
}                                                                                          \
__kernel void NAME##_flat(int sy, int sa, int sb, int sc,                                  \
                          __global O_S* y, int yo,                                         \
                          __global const T_S* pa, int ao,                                  \
                          __global const T_S* pb, int bo,                                  \
                          __global const T_S* pc, int co, T_C v, T_C w)                    \
{                                                                                          \
    int i = get_global_id(0);  /* exactly n items, as _contig */                           \
    T_C a = T_LOAD(pa, ao + i * sa);                                                       \
    T_C b = T_LOAD(pb, bo + i * sb);                                                       \
    T_C c = T_LOAD(pc, co + i * sc);                                                       \
    O_STORE(y, yo + i * sy, (O_C)(EXPR));                                                  \
}                                                                                          \
__kernel void NAME##_nd(int n, int nd, ew_layout L,                                        \
                        __global O_S* y, int yo,                                           \
                        __global const T_S* pa, int ao,                                    \
                        __global const T_S* pb, int bo,                                    \
                        __global const T_S* pc, int co, T_C v, T_C w)                      \
{                                                                                          \
    int inner = L.shape[nd - 1];                                                           \
    int nseg = (inner + EW_SEG - 1) / EW_SEG;                                              \
    int id = get_global_id(0);                                                             \
    int row = id / nseg, seg = id - row * nseg;                                            \
    if (row >= n / inner) return;                                                          \
    int iy = yo, ia = ao, ib = bo, ic = co, t = row;                                       \
    for (int d = nd - 2; d >= 0; --d) {                                                    \
        int q = t / L.shape[d];                                                            \
        int k = t - q * L.shape[d];                                                        \
        t = q;                                                                             \
        iy += k * L.sy[d]; ia += k * L.sa[d]; ib += k * L.sb[d]; ic += k * L.sc[d];        \
    }                                                                                      \
    int y1 = L.sy[nd - 1], a1 = L.sa[nd - 1], b1 = L.sb[nd - 1], c1 = L.sc[nd - 1];        \
    int j0 = seg * EW_SEG, j1 = min(j0 + EW_SEG, inner);                                   \
    for (int j = j0; j < j1; ++j) {                                                        \
        T_C a = T_LOAD(pa, ia + j * a1);                                                   \
        T_C b = T_LOAD(pb, ib + j * b1);                                                   \
        T_C c = T_LOAD(pc, ic + j * c1);                                                   \
        O_STORE(y, iy + j * y1, (O_C)(EXPR));                                              \
    }                                                                                      \
}

// Helpers used by expressions: NaN-propagating max/min (numpy.maximum semantics) and a
// division that cannot trap for integers. x86's idiv traps (SIGFPE) on both y == 0 and
// INT_MIN / -1, whose quotient overflows (undefined behaviour in OpenCL C; pocl survives the
// trap with its own signal handler, other runtimes need not): y == 0 gives 0, and y == -1
// negates with wrap-around (INT_MIN / -1 = INT_MIN, as numpy's int32 arithmetic gives).
#if T_IS_INT
#define EW_MAX(x, y) max((x), (y))
#define EW_MIN(x, y) min((x), (y))
#define EW_DIV(x, y) ((y) == 0 ? 0 : (y) == -1 ? as_int(0u - as_uint(x)) : (x) / (y))
#else
#define EW_MAX(x, y) (((x) >= (y) || (x) != (x)) ? (x) : (y))
#define EW_MIN(x, y) (((x) <= (y) || (x) != (x)) ? (x) : (y))
#define EW_DIV(x, y) ((x) / (y))
#endif
