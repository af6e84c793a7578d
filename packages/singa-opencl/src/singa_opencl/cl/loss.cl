// Losses over (N, C) rows, contiguous. Targets are int32 class ids (ids != 0: `tid` is used)
// or a dense (N, C) distribution `tden` of the input's type.

inline T_C ls_target(int ids, __global const int* tid, __global const T_S* tden, int n, int C,
                     int c)
{
    return ids ? (T_C)(tid[n] == c) : T_LOAD(tden, n * C + c);
}

// probs = softmax(x), rowloss[n] = -sum_c t * log_softmax(x)
__kernel void sce_rows(int N, int C, int ids, __global const T_S* x, int xo,
                       __global const int* tid, int tio, __global const T_S* tden, int tdo,
                       __global O_S* probs, int po, __global T_C* rowloss)
{
    int n = get_global_id(0);
    if (n >= N) return;
    __global const T_S* row = x + xo + n * C;
    T_C m = T_LOAD(row, 0);
    for (int c = 1; c < C; ++c) m = fmax(m, T_LOAD(row, c));
    T_C s = 0;
    for (int c = 0; c < C; ++c) s += exp(T_LOAD(row, c) - m);
    T_C lse = m + log(s);
    T_C l = 0;
    for (int c = 0; c < C; ++c) {
        T_C lp = T_LOAD(row, c) - lse;
        O_STORE(probs, po + n * C + c, (O_C)exp(lp));
        l -= ls_target(ids, tid + tio, tden + tdo, n, C, c) * lp;
    }
    rowloss[n] = l;
}

__kernel void sce_total(int N, __global const T_C* rowloss, __global O_S* loss, int lo)
{
    if (get_global_id(0) != 0) return;
    T_C s = 0;
    for (int n = 0; n < N; ++n) s += rowloss[n];
    O_STORE(loss, lo, (O_C)(s / (T_C)N));
}

__kernel void sce_backward(int N, int C, int ids, __global const T_S* p, int po,
                           __global const int* tid, int tio, __global const T_S* tden, int tdo,
                           __global O_S* dx, int dxo)
{
    int i = get_global_id(0);
    if (i >= N * C) return;
    int n = i / C, c = i - n * C;
    T_C t = ls_target(ids, tid + tio, tden + tdo, n, C, c);
    O_STORE(dx, dxo + i, (O_C)((T_LOAD(p, po + i) - t) / (T_C)N));
}

__kernel void ce_fwd(int N, int C, int ids, __global const T_S* p, int po,
                     __global const int* tid, int tio, __global const T_S* tden, int tdo,
                     __global O_S* loss, int lo)
{
    int n = get_global_id(0);
    if (n >= N) return;
    T_C l = 0;
    for (int c = 0; c < C; ++c) {
        T_C t = ls_target(ids, tid + tio, tden + tdo, n, C, c);
        if (t != 0) l -= t * log(fmax(T_LOAD(p, po + n * C + c), (T_C)FLT_MIN));
    }
    O_STORE(loss, lo + n, (O_C)l);
}
