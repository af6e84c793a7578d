// Batch normalisation over axis 1 of a contiguous x seen as (N, C, S). Per-channel statistics
// use one work-item per channel (two passes: mean, then centred variance); the elementwise
// parts run on a 2-D range (s, n * C + c) launched without a bounds guard, so the channel is
// uniform along dim 0 and pocl vectorises across s. Accumulation is in T_C (float for
// float16).

__kernel void bn_stats(int N, int C, int S, T_C momentum, T_C eps,
                       __global const T_S* x, int xo,
                       __global const T_S* rm, int rmo, __global const T_S* rv, int rvo,
                       __global O_S* mean_out, int mo, __global O_S* inv_out, int io,
                       __global O_S* rm_out, int rmoo, __global O_S* rv_out, int rvoo)
{
    int c = get_global_id(0);
    if (c >= C) return;
    int m = N * S;
    T_C s = 0;
    for (int n = 0; n < N; ++n)
        for (int k = 0; k < S; ++k)
            s += T_LOAD(x, xo + (n * C + c) * S + k);
    T_C mean = s / (T_C)m;
    T_C v = 0;
    for (int n = 0; n < N; ++n)
        for (int k = 0; k < S; ++k) {
            T_C d = T_LOAD(x, xo + (n * C + c) * S + k) - mean;
            v += d * d;
        }
    v /= (T_C)m;
    T_C unbiased = m > 1 ? v * (T_C)m / (T_C)(m - 1) : v;
    T_C old_m = T_LOAD(rm, rmo + c), old_v = T_LOAD(rv, rvo + c);  // outputs may alias these
    O_STORE(mean_out, mo + c, (O_C)mean);
    O_STORE(inv_out, io + c, (O_C)(1 / sqrt(v + (T_C)eps)));
    O_STORE(rm_out, rmoo + c, (O_C)(momentum * old_m + (1 - momentum) * mean));
    O_STORE(rv_out, rvoo + c, (O_C)(momentum * old_v + (1 - momentum) * unbiased));
}

// y = (x - mean[c]) * inv[c] * scale[c] + bias[c]; with from_var, inv = 1/sqrt(var[c] + eps)
__kernel void bn_apply(int C, int S, int from_var, T_C eps,
                       __global const T_S* x, int xo, __global const T_S* mean, int mo,
                       __global const T_S* inv, int io, __global const T_S* scale, int so,
                       __global const T_S* bias, int bo, __global O_S* y, int yo)
{
    int plane = get_global_id(1), c = plane % C;
    int i = plane * S + get_global_id(0);
    T_C r = T_LOAD(inv, io + c);
    if (from_var) r = 1 / sqrt(r + (T_C)eps);
    T_C v = (T_LOAD(x, xo + i) - T_LOAD(mean, mo + c)) * r * T_LOAD(scale, so + c)
            + T_LOAD(bias, bo + c);
    O_STORE(y, yo + i, (O_C)v);
}

__kernel void bn_bwd_stats(int N, int C, int S, __global const T_S* dy, int dyo,
                           __global const T_S* x, int xo, __global const T_S* mean, int mo,
                           __global const T_S* inv, int io,
                           __global O_S* dscale, int dso, __global O_S* dbias, int dbo)
{
    int c = get_global_id(0);
    if (c >= C) return;
    T_C mu = T_LOAD(mean, mo + c), r = T_LOAD(inv, io + c);
    T_C sb = 0, ss = 0;
    for (int n = 0; n < N; ++n)
        for (int k = 0; k < S; ++k) {
            int i = (n * C + c) * S + k;
            T_C d = T_LOAD(dy, dyo + i);
            sb += d;
            ss += d * (T_LOAD(x, xo + i) - mu) * r;
        }
    O_STORE(dscale, dso + c, (O_C)ss);
    O_STORE(dbias, dbo + c, (O_C)sb);
}

__kernel void bn_bwd_apply(int C, int S, int m, __global const T_S* dy, int dyo,
                           __global const T_S* x, int xo, __global const T_S* scale, int so,
                           __global const T_S* mean, int mo, __global const T_S* inv, int io,
                           __global const T_S* dscale, int dso, __global const T_S* dbias,
                           int dbo, __global O_S* dx, int dxo)
{
    int plane = get_global_id(1), c = plane % C;
    int i = plane * S + get_global_id(0);
    T_C r = T_LOAD(inv, io + c);
    T_C xhat = (T_LOAD(x, xo + i) - T_LOAD(mean, mo + c)) * r;
    T_C v = T_LOAD(scale, so + c) * r / (T_C)m
            * ((T_C)m * T_LOAD(dy, dyo + i) - T_LOAD(dbias, dbo + c)
               - xhat * T_LOAD(dscale, dso + c));
    O_STORE(dx, dxo + i, (O_C)v);
}
