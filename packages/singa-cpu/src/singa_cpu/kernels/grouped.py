"""Direct convolution for grouped layers with few input channels per group: depthwise
(``C / group == 1``: MobileNet, EfficientNet, ShuffleNet, ConvNeXt's 7x7; also with several
outputs per channel) and, up to ``MAX_GROUP_WIDTH``, narrow groups.

im2col + GEMM runs one GEMM per group there, each of ``C/group * kh * kw`` rows: a 3x3
depthwise layer is then C products of one row of 9 by 9 x (Ho*Wo), far from BLAS peak, after
an im2col that writes 9 times the input. Here each output plane is computed from its own input
planes directly::

    y[n, o, p, q] = b[o] + sum_{c < C/g, i, j} w[o, c, i, j]
                           * x[n, g(o)*C/g + c, p*sh + i*dh - pt, q*sw + j*dw - pl]

**Wide planes.** The input planes of one output plane are copied, zero-padded and split into
sh*sw stride phases, into rows of width ``wp = Wo + (kw-1)*dw // sw``. In that layout every
tap (c, i, j) reads its phase at one fixed offset from the output position, so the forward is,
per tap, one contiguous multiply-add ``yw[k] += w * xp[k + off]`` over whole rows of a *wide*
output (k = p*wp + q; the columns q >= Wo are computed and dropped): long vectorised loops even
on 7x7 maps, no bounds checks, in bands that stay in L1 (:func:`_forward_wide`). The
backward-data pass with stride 1 is that forward applied to dy with each group's weights
transposed and flipped; the backward-filter pass (:func:`_backward_w_wide`) multiplies a wide
copy of dy by the same shifted input rows into LANES partial sums per tap, summed at the end
(no reassociated float sums: the bits do not depend on the vector width).

**Rows.** Strided backward-data (:func:`_backward_x`: scatters ``w * dy`` rows into dx rows,
one (image, group) per iteration, so no two write the same plane) and the backward-filter of
small maps (:func:`_backward_w`, see WIDE_W_MIN_HW) work row by row, with the columns whose
input falls inside the image precomputed per tap.

Planes (forward), (image, group) pairs (backward-data) and output channels (backward-filter)
are split across the cores when a call has at least :data:`_threads.PARALLEL_MIN_MACS`
multiply-adds. Flat unsigned indices as in :mod:`.conv` (signed ones keep numba from
vectorising).
"""

from __future__ import annotations

import numpy as np

from . import _threads, depthwise
from ._jit import helper
from ._parallel import pjit
from ._threads import run_ranges
from .depthwise import ACT_HARDSWISH, ACT_RELU
from .elementwise import hard_swish_scalar, relu_scalar

prange = range  # numba.prange once compiled (see _parallel.pjit)
U = np.uint64

#: Grouped layers with at most this many input channels per group take the direct kernels;
#: wider groups keep im2col + one GEMM per group. Measured on AMD Zen 4, one thread, 32 groups
#: of 3x3 on 28x28 (forward / backward-data / backward-filter, ms): 2 channels a group, GEMM
#: 0.22 / 0.19 / 0.28, direct 0.11 / 0.12 / 0.18; 4 channels, GEMM 0.35 / 0.33 / 0.40, direct
#: 0.38 / 0.40 / 0.64.
MAX_GROUP_WIDTH = 2


def eligible(g) -> bool:
    """A grouped layer narrow enough for the direct kernels."""
    return g.group > 1 and g.c // g.group <= MAX_GROUP_WIDTH


#: Elements of one band of a wide output plane (see :func:`_forward_wide`): the band and the
#: input rows under it stay in L1 while every tap passes over them.
BAND_ELEMENTS = 2048
#: The wide output is computed in whole runs of this many elements (a multiple of any vector
#: width), so the tap loops have no remainder.
RUN = 64
#: Output planes of a call are processed in at most this many chunks, each with one scratch
#: allocation (an allocation per plane cost ~1/4 of a 576-channel 7x7 layer).
CHUNKS = 16


@helper()
def _tap_offsets(cg, kh, kw, sh, sw, dh, dw, hp, wp):
    """Tap (c, i, j) -> its offset in the phase planes of :func:`_fill_phases` (phase (i*dh %
    sh, j*dw % sw), row i*dh // sh, column j*dw // sw)."""
    offs = np.empty(cg * kh * kw, np.int64)
    for c in range(cg):
        for i in range(kh):
            for j in range(kw):
                ri, cj = i * dh, j * dw
                offs[(c * kh + i) * kw + j] = ((((c * sh + ri % sh) * sw + cj % sw) * hp
                                                + ri // sh) * wp + cj // sw)
    return offs


@helper()
def _fill_phases(xp, xf, first, cg, h_in, w_in, sh, sw, pt, pl, hp, wp):
    """``xp[c, a, e, r, col] = x[first + c, r*sh + a - pt, col*sw + e - pl]``, zero outside
    the input planes (``xf``, flat); phase planes of hp rows of width wp."""
    zero = xp.dtype.type(0)
    plane = hp * wp
    for c in range(cg):
        src = (first + c) * h_in
        for a in range(sh):
            for e in range(sw):
                # columns col with 0 <= col*sw + e - pl < w_in: [c0, c1)
                c0 = min(wp, max(0, -((e - pl) // sw)))
                c1 = max(c0, min(wp, (w_in - 1 - e + pl) // sw + 1))
                d0 = ((c * sh + a) * sw + e) * plane
                for r in range(hp):
                    d = d0 + r * wp
                    hs = r * sh + a - pt
                    c1r = c0 if (hs < 0 or hs >= h_in) else c1
                    s = (src + hs) * w_in + e - pl
                    for k in range(c0):
                        xp[U(d + k)] = zero
                    if sw == 1:
                        for k in range(c0, c1r):
                            xp[U(d + k)] = xf[U(s + k)]
                    else:
                        for k in range(c0, c1r):
                            xp[U(d + k)] = xf[U(s + k * sw)]
                    for k in range(c1r, wp):
                        xp[U(d + k)] = zero


@helper()
def _tap_columns(kw, sw, dw, pl, wo, w_in):
    """Per kernel column j, the output columns [q0s[j], q1s[j]) whose input column q*sw +
    j*dw - pl falls inside the image."""
    q0s = np.empty(kw, np.int64)
    q1s = np.empty(kw, np.int64)
    for j in range(kw):
        off = j * dw - pl
        q0 = max(0, -(off // sw))
        q0s[j] = q0
        q1s[j] = max(q0, min(wo, (w_in - 1 - off) // sw + 1))
    return q0s, q1s


@pjit()
def _forward_wide(x, w, b, y, has_bias, act, og, sh, sw, dh, dw, pt, pl, t0, t1):
    """Output planes t = n*O + o for t in [t0, t1), each on zero-padded copies of its input
    planes split into sh*sw phases (``xp[c, a, e, r, col] = x[c, r*sh + a - pt, col*sw + e -
    pl]``, zero outside x; ``pt``, ``pl`` may be negative: then the copy crops), of width
    ``wp = Wo + (kw-1)*dw // sw``. In that layout tap (c, i, j) reads phase (i*dh % sh,
    j*dw % sw) at a fixed offset from the output, so it adds ``w * xp[k + off(c, i, j)]`` to
    the *wide* output ``yw[k]``, k = p*wp + q: one contiguous loop over a band of whole rows
    (the columns q >= Wo are never read out). Short rows (7x7, 14x14 maps) and strides no
    longer cut the loops into pieces shorter than a vector. ``act``: the activation applied
    as the rows are written (:data:`.depthwise.ACT_NONE`, ...)."""
    c_in, h_in, w_in = x.shape[1], x.shape[2], x.shape[3]
    o_ch, ho, wo = y.shape[1], y.shape[2], y.shape[3]
    cg, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    wp = wo + (kw - 1) * dw // sw
    hp = ho + (kh - 1) * dh // sh
    plane = hp * wp
    xf, wf, yf = x.reshape(-1), w.reshape(-1), y.reshape(-1)
    ftype = y.dtype.type
    zero = ftype(0)
    # wide outputs computed: up to the last real one, rounded up to whole runs of RUN (no
    # scalar remainder loops); the input copy has RUN zeros more, for the last run's reads
    last = (ho - 1) * wp + wo
    span = -(-last // RUN) * RUN
    band = max(RUN, BAND_ELEMENTS // RUN * RUN)
    planes = cg * sh * sw * plane
    taps = cg * kh * kw
    offs = _tap_offsets(cg, kh, kw, sh, sw, dh, dw, hp, wp)
    count = t1 - t0
    chunks = min(count, CHUNKS)
    for chunk in prange(chunks):
        xp = np.empty(planes + RUN, y.dtype)  # scratch of the chunk's planes
        yw = np.empty(span, y.dtype)
        for k in range(RUN):
            xp[U(planes + k)] = zero
        for t in range(t0 + chunk * count // chunks, t0 + (chunk + 1) * count // chunks):
            n = t // o_ch
            o = t - n * o_ch
            g0 = (o // og) * cg
            _fill_phases(xp, xf, n * c_in + g0, cg, h_in, w_in, sh, sw, pt, pl, hp, wp)
            bias = b[o] if has_bias else zero
            for k0 in range(0, span, band):
                k1 = min(span, k0 + band)
                for k in range(k0, k1):
                    yw[U(k)] = bias
                for tap in range(taps):
                    wv = wf[U(o * taps + tap)]
                    off = offs[tap]
                    for k in range(k0, k1):
                        yw[U(k)] += wv * xp[U(k + off)]
            ybase = t * ho * wo
            for p in range(ho):
                for q in range(wo):
                    v = yw[U(p * wp + q)]
                    if act == ACT_RELU:
                        v = relu_scalar(v, zero)
                    elif act == ACT_HARDSWISH:
                        v = hard_swish_scalar(v, ftype)
                    yf[U(ybase + p * wo + q)] = v


@pjit()
def _backward_x(dy, w, dx, og, sh, sw, dh, dw, pt, pl, t0, t1):
    """dx planes of (image, group) t = n*G + g for t in [t0, t1): zeroed, then every output
    channel's ``w * dy`` rows scattered into them."""
    c_in, h_in, w_in = dx.shape[1], dx.shape[2], dx.shape[3]
    o_ch, ho, wo = dy.shape[1], dy.shape[2], dy.shape[3]
    cg, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    groups = c_in // cg
    dyf, wf, dxf = dy.reshape(-1), w.reshape(-1), dx.reshape(-1)
    zero = dx.dtype.type(0)
    q0s, q1s = _tap_columns(kw, sw, dw, pl, wo, w_in)
    for t in prange(t0, t1):
        n = t // groups
        gi = t - n * groups
        base = (n * c_in + gi * cg) * h_in * w_in
        for k in range(cg * h_in * w_in):
            dxf[U(base + k)] = zero
        for oo in range(og):
            o = gi * og + oo
            dyplane = (n * o_ch + o) * ho * wo
            for c in range(cg):
                xplane = (n * c_in + gi * cg + c) * h_in
                for p in range(ho):
                    dyrow = dyplane + p * wo
                    for i in range(kh):
                        h = p * sh + i * dh - pt
                        if h < 0 or h >= h_in:
                            continue
                        xrow = (xplane + h) * w_in - pl
                        wrow = ((o * cg + c) * kh + i) * kw
                        for j in range(kw):
                            wv = wf[U(wrow + j)]
                            xs = xrow + j * dw
                            if sw == 1:
                                for q in range(q0s[j], q1s[j]):
                                    dxf[U(xs + q)] += wv * dyf[U(dyrow + q)]
                            else:
                                for q in range(q0s[j], q1s[j]):
                                    dxf[U(xs + q * sw)] += wv * dyf[U(dyrow + q)]


@pjit()
def _backward_w(dy, x, dwt, og, sh, sw, dh, dw, pt, pl, t0, t1):
    """dw[o] for output channels o in [t0, t1): per tap (c, i, j) a lane row ``acc[q] +=
    dy[n, o, p, q] * x[n, c', h, q*sw + j*dw - pl]`` over the images and rows, then its sum."""
    c_in, h_in, w_in = x.shape[1], x.shape[2], x.shape[3]
    o_ch, ho, wo = dy.shape[1], dy.shape[2], dy.shape[3]
    n_img = x.shape[0]
    cg, kh, kw = dwt.shape[1], dwt.shape[2], dwt.shape[3]
    taps = cg * kh * kw
    dyf, xf, dwf = dy.reshape(-1), x.reshape(-1), dwt.reshape(-1)
    q0s, q1s = _tap_columns(kw, sw, dw, pl, wo, w_in)
    for o in prange(t0, t1):
        c0 = (o // og) * cg
        acc = np.zeros(taps * wo, dwt.dtype)
        for n in range(n_img):
            dyplane = (n * o_ch + o) * ho * wo
            for p in range(ho):
                dyrow = dyplane + p * wo
                for c in range(cg):
                    xplane = (n * c_in + c0 + c) * h_in
                    for i in range(kh):
                        h = p * sh + i * dh - pt
                        if h < 0 or h >= h_in:
                            continue
                        xrow = (xplane + h) * w_in - pl
                        for j in range(kw):
                            a = ((c * kh + i) * kw + j) * wo
                            xs = xrow + j * dw
                            if sw == 1:
                                for q in range(q0s[j], q1s[j]):
                                    acc[U(a + q)] += dyf[U(dyrow + q)] * xf[U(xs + q)]
                            else:
                                for q in range(q0s[j], q1s[j]):
                                    acc[U(a + q)] += dyf[U(dyrow + q)] * xf[U(xs + q * sw)]
        for r in range(taps):
            s = dwt.dtype.type(0)
            for q in range(wo):
                s += acc[U(r * wo + q)]
            dwf[U(o * taps + r)] = s


#: Lanes of the weight gradient's partial sums per tap (see :func:`_backward_w_wide`).
LANES = 64
#: Output planes of at least this many pixels take :func:`_backward_w_wide`; smaller ones
#: :func:`_backward_w`, since rounding a wide plane up to whole runs of LANES wastes more
#: there (measured on AMD Zen 4, one thread, best of 30, ms by rows / wide: 576 channels 5x5
#: on 7x7 0.42 / 0.58; 96 channels 3x3 on 10x10 0.049 / 0.050; 240 channels 5x5 on 14x14
#: 0.40 / 0.35).
WIDE_W_MIN_HW = 100


@pjit()
def _backward_w_wide(dy, x, dwt, og, sh, sw, dh, dw, pt, pl, t0, t1):
    """dw[o] for output channels o in [t0, t1), in the layout of :func:`_forward_wide`: per
    image, dy copied into a wide plane (zeros in the columns q >= Wo and up to a multiple of
    LANES) and the padded input planes split into phases, then per tap (c, i, j)
    ``acc[tap, l] += dyw[k] * xp[k + off(c, i, j)]`` with l = k mod LANES, in contiguous runs
    of LANES; the lanes are summed at the end."""
    c_in, h_in, w_in = x.shape[1], x.shape[2], x.shape[3]
    o_ch, ho, wo = dy.shape[1], dy.shape[2], dy.shape[3]
    n_img = x.shape[0]
    cg, kh, kw = dwt.shape[1], dwt.shape[2], dwt.shape[3]
    taps = cg * kh * kw
    wp = wo + (kw - 1) * dw // sw
    hp = ho + (kh - 1) * dh // sh
    plane = hp * wp
    last = (ho - 1) * wp + wo
    runs = -(-last // LANES)
    dyf, xf, dwf = dy.reshape(-1), x.reshape(-1), dwt.reshape(-1)
    zero = dwt.dtype.type(0)
    offs = _tap_offsets(cg, kh, kw, sh, sw, dh, dw, hp, wp)
    for o in prange(t0, t1):
        g0 = (o // og) * cg
        acc = np.zeros(taps * LANES, dwt.dtype)
        dyw = np.zeros(runs * LANES, dwt.dtype)
        # the tail past the planes stays 0: the last run reads up to LANES - 1 beyond them
        xp = np.zeros(cg * sh * sw * plane + LANES, dwt.dtype)
        for n in range(n_img):
            src = (n * o_ch + o) * ho * wo
            for p in range(ho):
                for q in range(wo):
                    dyw[U(p * wp + q)] = dyf[U(src + p * wo + q)]
            _fill_phases(xp, xf, n * c_in + g0, cg, h_in, w_in, sh, sw, pt, pl, hp, wp)
            for run in range(runs):
                k0 = run * LANES
                for tap in range(taps):
                    a = tap * LANES
                    off = k0 + offs[tap]
                    for lane in range(LANES):
                        acc[U(a + lane)] += dyw[U(k0 + lane)] * xp[U(off + lane)]
        for r in range(taps):
            total = zero
            for lane in range(LANES):
                total += acc[U(r * LANES + lane)]
            dwf[U(o * taps + r)] = total


def _split(fn, items: int, macs: int) -> None:
    """``fn(lo, hi)`` over ``range(items)``, split across the threads when the call has at
    least PARALLEL_MIN_MACS multiply-adds (a parallel section costs tens of microseconds)."""
    run_ranges(fn, items, parallel=macs >= _threads.PARALLEL_MIN_MACS)


def _macs(g) -> int:
    return g.n * g.o * g.ho * g.wo * (g.c // g.group) * g.kh * g.kw


def forward(x, w, b, y, g, act: int) -> None:
    """y = act(conv(x, w) (+ b)) (``act``: :data:`.depthwise.ACT_NONE`, ...); geometry ``g``
    (see :func:`eligible`). Depthwise layers take :mod:`.depthwise`'s kernel (every tap
    written out)."""
    if depthwise.eligible(g):
        depthwise.forward(x, w, b, y, g, act)
        return
    has_bias = b is not None
    bias = b if has_bias else np.zeros(1, x.dtype)
    og = g.o // g.group
    act = int(act)
    _split(lambda lo, hi: _forward_wide(x, w, bias, y, has_bias, act, og, g.sh, g.sw, g.dh,
                                        g.dw, g.pt, g.pl, lo, hi), g.n * g.o, _macs(g))


def backward_x(dy, w, dx, g) -> None:
    """dx = the adjoint of :func:`forward` (without bias) applied to dy. With stride 1 that
    is the wide forward (:func:`_forward_wide`) of dy with the weights of each group
    transposed (O/g <-> C/g) and flipped, padded by ``(k-1)*d - pad`` (negative: cropped);
    for a depthwise layer with one output per channel, :mod:`.depthwise`'s kernel on the
    same operands."""
    og = g.o // g.group
    if g.sh == g.sw == 1:
        cg = g.c // g.group
        wt = np.ascontiguousarray(w.reshape(g.group, og, cg, g.kh, g.kw).transpose(
            0, 2, 1, 3, 4)[..., ::-1, ::-1]).reshape(g.c, og, g.kh, g.kw)
        pt, pl = (g.kh - 1) * g.dh - g.pt, (g.kw - 1) * g.dw - g.pl
        if cg == og == 1 and depthwise.ENABLED:
            depthwise.conv(dy, wt, None, dx, (1, 1), (g.dh, g.dw), (pt, pl),
                           depthwise.ACT_NONE)
            return
        none = np.zeros(1, dx.dtype)
        _split(lambda lo, hi: _forward_wide(dy, wt, none, dx, False, depthwise.ACT_NONE, cg, 1,
                                            1, g.dh, g.dw, pt, pl, lo, hi), g.n * g.c, _macs(g))
        return
    _split(lambda lo, hi: _backward_x(dy, w, dx, og, g.sh, g.sw, g.dh, g.dw, g.pt, g.pl, lo,
                                      hi), g.n * g.group, _macs(g))


def backward_w(dy, x, dw, g) -> None:
    """dw[o, c, i, j] = sum over images and output pixels of dy * the input under tap (c, i,
    j)."""
    og = g.o // g.group
    if g.ho * g.wo >= WIDE_W_MIN_HW:
        _split(lambda lo, hi: _backward_w_wide(dy, x, dw, og, g.sh, g.sw, g.dh, g.dw, g.pt,
                                               g.pl, lo, hi), g.o, _macs(g))
        return
    _split(lambda lo, hi: _backward_w(dy, x, dw, og, g.sh, g.sw, g.dh, g.dw, g.pt, g.pl, lo,
                                      hi), g.o, _macs(g))
