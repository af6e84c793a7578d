// Random fills from the counter-based Philox4x32-10 generator (Salmon et al., SC'11).
//
// Element i of a fill draws block (i, 0, stream_lo, stream_hi) under key (key_lo, key_hi): its
// value depends only on the seed, the call's stream number and i, never on how the runtime
// groups work-items. `stream` counts the device's random calls since the last seed.
// kind 0: uniform [a, b); 1: normal N(a, b^2) (Box-Muller); 2: bernoulli(a).
// The output layout L (ew_layout) maps the linear index i to the (strided) output element.

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

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

inline uint4 philox4x32_10(uint4 c, uint2 k)
{
    for (int r = 0; r < 10; ++r) {
        uint hi0 = mul_hi(PHILOX_M0, c.x), lo0 = PHILOX_M0 * c.x;
        uint hi1 = mul_hi(PHILOX_M1, c.z), lo1 = PHILOX_M1 * c.z;
        c = (uint4)(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k += (uint2)(PHILOX_W0, PHILOX_W1);
    }
    return c;
}

// a uniform float in [0, 1) from the top 24 bits
inline float u01(uint x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

__kernel void random_fill(int n, int nd, ew_layout L, int kind, float a, float b,
                          uint key_lo, uint key_hi, uint stream_lo, uint stream_hi,
                          __global O_S* y, int yo)
{
    int i = get_global_id(0);
    if (i >= n) return;
    uint4 r = philox4x32_10((uint4)((uint)i, 0u, stream_lo, stream_hi),
                            (uint2)(key_lo, key_hi));
    float v;
    if (kind == 0) {
        v = a + (b - a) * u01(r.x);
    } else if (kind == 1) {
        float u1 = ((float)(r.x >> 8) + 1.0f) * (1.0f / 16777216.0f);  // (0, 1]
        float u2 = u01(r.y);
        v = a + b * sqrt(-2.0f * log(u1)) * cospi(2.0f * u2);
    } else {
        v = u01(r.x) < a ? 1.0f : 0.0f;
    }
    int iy = yo, t = i;
    for (int d = nd - 1; d >= 0; --d) {
        int q = t / L.shape[d];
        iy += (t - q * L.shape[d]) * L.sy[d];
        t = q;
    }
    O_STORE(y, iy, (O_C)v);
}
