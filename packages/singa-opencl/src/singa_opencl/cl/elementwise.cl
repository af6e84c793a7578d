// Elementwise kernels. One template, instantiated once per op by the table in
// kernels/elementwise.py (EW_KERNEL(name, expression) lines appended to this file).
//
// Types come from the prelude: T_* is the input element type, O_* the output type; *_S is the
// storage type, *_C the compute type, *_LOAD/*_STORE read and write one element.
//
// Every kernel has one of two signatures, shared by all ops so that one launcher serves them:
//   NAME_flat: a 1-D layout with one stride per operand (contiguous, scalar-broadcast and any
//              view that collapses to one dimension);
//   NAME_nd:   up to EW_MAXD dimensions, with per-operand strides (zero for broadcast dims).
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

#define EW_KERNEL(NAME, EXPR)                                                               \
__kernel void NAME##_flat(int n, int sy, int sa, int sb, int sc,                           \
                          __global O_S* y, int yo,                                         \
                          __global const T_S* pa, int ao,                                  \
                          __global const T_S* pb, int bo,                                  \
                          __global const T_S* pc, int co, T_C v, T_C w)                    \
{                                                                                          \
    int i = get_global_id(0);                                                              \
    if (i >= n) return;                                                                    \
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
    int i = get_global_id(0);                                                              \
    if (i >= n) return;                                                                    \
    int iy = yo, ia = ao, ib = bo, ic = co;                                                \
    for (int d = nd - 1; d >= 0; --d) {                                                    \
        int q = i / L.shape[d];                                                            \
        int k = i - q * L.shape[d];                                                        \
        i = q;                                                                             \
        iy += k * L.sy[d]; ia += k * L.sa[d]; ib += k * L.sb[d]; ic += k * L.sc[d];        \
    }                                                                                      \
    T_C a = T_LOAD(pa, ia);                                                                \
    T_C b = T_LOAD(pb, ib);                                                                \
    T_C c = T_LOAD(pc, ic);                                                                \
    O_STORE(y, iy, (O_C)(EXPR));                                                           \
}

// Helpers used by expressions: NaN-propagating max/min (numpy.maximum semantics) and a
// division that cannot trap for integers.
#if T_IS_INT
#define EW_MAX(x, y) max((x), (y))
#define EW_MIN(x, y) min((x), (y))
#define EW_DIV(x, y) ((y) == 0 ? 0 : (x) / (y))
#else
#define EW_MAX(x, y) (((x) >= (y) || (x) != (x)) ? (x) : (y))
#define EW_MIN(x, y) (((x) <= (y) || (x) != (x)) ? (x) : (y))
#define EW_DIV(x, y) ((x) / (y))
#endif
