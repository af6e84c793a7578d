"""2-D convolution kernels. Four paths, chosen per call from the geometry:

1. **Winograd F(4x4, 3x3) / F(2x2, 3x3)** (:mod:`.winograd`) for 3x3, stride-1, undilated,
   ungrouped layers with >= 16 channels (most of a ResNet): 4x / 2.25x fewer GEMM flops, for
   all three passes.
2. **1x1, stride 1, unpadded** (:func:`_is_pointwise`): the NCHW data already is the column
   matrix; one GEMM per image, or one over the batch on 1x1 maps (squeeze-excitation), in all
   three passes, on maps of every size; only the weight gradient of several images on maps
   under ``PER_IMAGE_MIN_HW`` pixels (but 1x1) takes the packed im2col layout below. In graph
   mode the forward is bound to the replay's arrays at every batch size (``bind``).
3. **Direct grouped kernels** (:mod:`.grouped`) for depthwise and other narrow grouped
   layers (at most ``grouped.MAX_GROUP_WIDTH`` input channels per group): per output plane,
   one multiply-add per tap over whole rows, no GEMM; depthwise layers with every tap
   written out in one loop (:mod:`.depthwise`), which also takes layers with few taps and
   outputs (``depthwise.eligible_dense``: the stems of MobileNet, EfficientNet, ShuffleNet,
   the seed CNN's first layer), blocks of output channels per pass over the input.
4. **im2col + GEMM** for everything else (5x5, strided, dilated, grouped, padded 1x1 ...),
   columns read from a zero-padded copy of a chunk of images (no bounds checks in the hot
   loop), in one of two layouts:

   - per image, ``col[n, (c, i, j), (p, q)]``, when an image has >= ``PER_IMAGE_MIN_HW`` output
     pixels: forward ``y[n] = W @ col[n]`` straight into y; backward-data
     ``dcol[n] = W.T @ dy[n]`` then col2im; backward-filter ``dW = sum_n dy[n] @ col[n].T``;
   - packed, ``col[(c, i, j), (n, p, q)]``, for small images (the late 4x4 layers of a ResNet,
     where a GEMM per image would be far from BLAS peak): one wide GEMM per chunk,
     ``out[O, nb*Ho*Wo] = W @ col`` unpacked into NCHW; dy packed to ``dyT[O, nb*Ho*Wo]`` for
     ``dcol = W.T @ dyT`` and ``dW += dyT @ col.T``.

Chunks bound the column buffer (``COL_BYTES``, about the L2 size) so that it is still in cache
when the GEMM reads it; the workspace (per device and thread, reused across calls) stays small.
Groups use row blocks of the same column buffer. Chunks run in parallel on the cores
(:func:`._threads.run_chunks`, single-threaded BLAS per chunk); the weight gradient sums one
partial dW per fixed group of chunks (:class:`._threads.ThreadSums`), so its bits do not depend
on which thread ran which chunk.
"""

from __future__ import annotations

import math

import numpy as np
from singa.backend import EMPTY, conv2d_geometry, kernel_attrs, pool2d_geometry

from . import _threads, depthwise, grouped, pool, winograd
from ._float16 import via_float32
from ._parallel import PARALLEL_MIN_ITEMS, pjit
from ._threads import ThreadSums, chunk_spans, run_chunks, run_ranges, single_threaded_blas
from ._workspace import Workspace
from .depthwise import ACT_HARDSWISH, ACT_NONE, ACT_RELU
from .elementwise import KERNELS as _ELEMENTWISE
from .elementwise import hard_swish_scalar, relu_scalar

prange = range  # numba.prange once compiled (see _parallel.pjit)
U = np.uint64  # unsigned flat indices in the jitted loops (see _im2col)

#: Upper bound of the column buffer of one chunk (bytes; about L2-sized, which measured
#: fastest); at least one image is processed.
COL_BYTES = 1 << 20
#: Output pixels per image from which the per-image column layout is used (see _per_image).
PER_IMAGE_MIN_HW = 64


@pjit()
def _pad_into(x, xp, n0, nb, pt, pl):
    """xp[n] = x[n0 + n] surrounded by zeros (top/left offsets pt, pl); both C-contiguous.
    Flat unsigned indices, as in _im2col: with 4-D indexing the row copies did not vectorise
    (AMD Zen 4, one 64x56x56 image padded by 1: 114 -> 30 us)."""
    c_in, h_in, w_in = x.shape[1], x.shape[2], x.shape[3]
    hp, wp = xp.shape[2], xp.shape[3]
    zero = xp.dtype.type(0)
    src = x.reshape(-1)
    dst = xp.reshape(-1)
    wc = min(w_in, wp - pl)  # columns of x inside the padded row
    for t in prange(nb * c_in):
        s0 = U((n0 * c_in + t) * h_in * w_in)
        d0 = U(t * hp * wp)
        for h in range(hp):
            hs = h - pt
            d = d0 + U(h * wp)
            if hs < 0 or hs >= h_in:
                for w in range(wp):
                    dst[d + U(w)] = zero
            else:
                s = s0 + U(hs * w_in)
                for w in range(pl):
                    dst[d + U(w)] = zero
                for w in range(wc):
                    dst[d + U(pl + w)] = src[s + U(w)]
                for w in range(pl + wc, wp):
                    dst[d + U(w)] = zero


@pjit()
def _im2col(xp, col, cs_n, cs_r, nb, kh, kw, sh, sw, dh, dw, p0, ho, wo):
    """col[n*cs_n + r*cs_r + p*Wo + q] = xp[n, c, (p0 + p)*sh + i*dh, q*sw + j*dw],
    r = (c, i, j), p < ho, for a padded chunk; ``col`` is the flat column buffer, with the
    per-image layout (``cs_n = C*kh*kw*Ho*Wo``, ``cs_r = Ho*Wo``) or the packed one
    (``cs_n = Ho*Wo``, ``cs_r = nb*Ho*Wo``). ``p0``, ``ho``: the band of output rows (all of
    them but in :func:`_band_forward`).

    Flat indices are unsigned (``U``): with signed ones numba checks every index for
    wraparound, which keeps the short row copies (Wo elements) from vectorising; measured 2.7x
    faster on a 5x5 layer with 8x8 outputs. Rows r = (c, i, j) in order, with one integer
    division per (c, i) rather than three per r (64-bit divisions cost tens of cycles: the
    seed CNN's batch-1 second layer, 500 rows of 8x8, 10.4 -> 7.2 us on AMD Zen 4)."""
    c_in, hp, wp = xp.shape[1], xp.shape[2], xp.shape[3]
    x = xp.reshape(-1)
    for t in prange(c_in * kh):
        c = t // kh
        i = t - c * kh
        for j in range(kw):
            r = t * kw + j
            for n in range(nb):
                d0 = U(n * cs_n + r * cs_r)
                s0 = U(((n * c_in + c) * hp + i * dh + p0 * sh) * wp + j * dw)
                for p in range(ho):
                    s = s0 + U(p * sh * wp)
                    d = d0 + U(p * wo)
                    if sw == 1:
                        for q in range(wo):
                            col[d + U(q)] = x[s + U(q)]
                    else:
                        for q in range(wo):
                            col[d + U(q)] = x[s + U(q * sw)]


@pjit()
def _col2im(dcol, cs_n, cs_r, dxp, dx, n0, nb, kh, kw, sh, sw, pt, pl, dh, dw, ho, wo):
    """dx[n0 + n] = the unpadded part of the sum of dcol's columns scattered back (adjoint of
    _pad_into + _im2col; ``dcol`` is flat with the strides of _im2col); dxp is a padded
    scratch buffer. Unsigned flat indices, as in _im2col."""
    c_in, h_in, w_in = dx.shape[1], dx.shape[2], dx.shape[3]
    hp, wp = dxp.shape[2], dxp.shape[3]
    zero = dxp.dtype.type(0)
    d = dxp.reshape(-1)
    out = dx.reshape(-1)
    plane = hp * wp
    for t in prange(nb * c_in):
        n = t // c_in
        c = t - n * c_in
        b = U(t * plane)
        for k in range(plane):
            d[b + U(k)] = zero
        for i in range(kh):
            for j in range(kw):
                s0 = U(n * cs_n + ((c * kh + i) * kw + j) * cs_r)
                for p in range(ho):
                    db = b + U((p * sh + i * dh) * wp + j * dw)
                    sb = s0 + U(p * wo)
                    if sw == 1:
                        for q in range(wo):
                            d[db + U(q)] += dcol[sb + U(q)]
                    else:
                        for q in range(wo):
                            d[db + U(q * sw)] += dcol[sb + U(q)]
        o = U(((n0 + n) * c_in + c) * h_in * w_in)
        for h in range(h_in):
            src = b + U((pt + h) * wp + pl)
            dst = o + U(h * w_in)
            for w in range(w_in):
                out[dst + U(w)] = d[src + U(w)]


@pjit()
def _unpack(out2, y3, b, has_bias, n0, nb):
    """y3[n0 + n, o, :] = out2[o, n*hw:(n+1)*hw] (+ b[o])."""
    o_ch, hw = y3.shape[1], y3.shape[2]
    for t in prange(nb * o_ch):
        n = t // o_ch
        o = t - n * o_ch
        bias = b[o] if has_bias else out2.dtype.type(0)
        for k in range(hw):
            y3[n0 + n, o, k] = out2[o, n * hw + k] + bias


@pjit()
def _epilogue(y3, b, c0, c1, has_bias, act):
    """y3[:, o, c0:c1] += b[o] (when ``has_bias``), then the activation ``act``
    (:data:`.depthwise.ACT_RELU`: max(., 0); :data:`.depthwise.ACT_HARDSWISH`): one pass over
    the convolution's output instead of numpy's two or three. The same arithmetic as the
    Conv2d and the activation's kernels: one float add, then numpy's maximum (NaN stays, -0.0
    becomes 0.0) or the HardSwish kernel's expression. ``y3`` is C-contiguous, read flat with
    unsigned indices and one loop per case (3-D indexing did not vectorise: the seed CNN's
    conv1 output, 20x576, 5.2 -> 1.2 us)."""
    ftype = y3.dtype.type
    zero = ftype(0)
    o_ch, hw = y3.shape[1], y3.shape[2]
    flat = y3.reshape(-1)
    for t in prange(y3.shape[0] * o_ch):
        bias = b[t % o_ch] if has_bias else zero
        lo, hi = U(t * hw + c0), U(t * hw + c1)
        if act == ACT_HARDSWISH:
            for k in range(lo, hi):
                flat[k] = hard_swish_scalar(flat[k] + bias if has_bias else flat[k], ftype)
        elif has_bias and act == ACT_RELU:
            for k in range(lo, hi):
                flat[k] = relu_scalar(flat[k] + bias, zero)
        elif has_bias:
            for k in range(lo, hi):
                flat[k] = flat[k] + bias
        elif act == ACT_RELU:
            for k in range(lo, hi):
                flat[k] = relu_scalar(flat[k], zero)


@pjit()
def _pack(dy3, dyt, n0, nb):
    """dyt[o, n*hw:(n+1)*hw] = dy3[n0 + n, o, :]."""
    o_ch, hw = dy3.shape[1], dy3.shape[2]
    for t in prange(nb * o_ch):
        o = t // nb
        n = t - o * nb
        for k in range(hw):
            dyt[o, n * hw + k] = dy3[n0 + n, o, k]


def _spans(g, itemsize) -> list[tuple[int, int]]:
    """(first image, count) of each batch chunk: columns of at most COL_BYTES (at least one
    image), and at least one chunk per thread (see _threads)."""
    per_image = g.c * g.kh * g.kw * g.ho * g.wo * itemsize
    return chunk_spans(g.n, max(1, min(g.n, COL_BYTES // max(per_image, 1))))


def _pointwise(a, b, out, n):
    """out[i] = a @ b[i] for the n images, image ranges on the threads (with fewer images
    than threads, e.g. batch-1 inference, each product is split across them instead)."""
    if n < _threads.num_threads():
        for i in range(n):
            _threads.matmul(a, b[i], out[i])
        return
    run_ranges(lambda lo, hi: np.matmul(a, b[lo:hi], out=out[lo:hi]), n)


def _pointwise_forward(x, w, b, y, g, act):
    """The forward of a 1x1 layer (:func:`_is_pointwise` geometry ``g``) on exactly these
    arrays, as a function of no arguments: the GEMM over the channels straight into y (one
    image: ``W @ x[0]``; 1x1 maps: ``x @ W.T`` over the batch; else one per image), then the
    bias and the activation ``act`` in one pass. The views, the GEMM's form and the
    epilogue's compilation are resolved here; the general kernel builds it per call, a graph's
    bound kernel once (the weights' values change between replays, so nothing is computed
    from them here)."""
    hw = g.ho * g.wo
    w2 = w.reshape(g.o, g.c)
    y3 = y.reshape(g.n, g.o, hw)
    if hw == 1:  # y[n, o] = sum_c x[n, c] w[o, c]: one GEMM over the batch
        a, m, out = x.reshape(g.n, g.c), w2.T, y.reshape(g.n, g.o)
    elif g.n == 1:  # split across the threads when big (see _threads.matmul)
        a, m, out = w2, x.reshape(g.c, hw), y.reshape(g.o, hw)
    else:
        a, m, out = w2, x.reshape(g.n, g.c, hw), y3
    per_image = hw > 1 and g.n > 1
    has_bias = b is not None
    bias = b if has_bias else np.zeros(1, x.dtype)
    epilogue = (has_bias or act) and (
        _epilogue if y.size >= PARALLEL_MIN_ITEMS else _epilogue.serial())

    def run():
        if per_image:
            with single_threaded_blas():  # bound, it runs without the kernel's decorator
                _pointwise(a, m, out, g.n)
        else:
            _threads.matmul(a, m, out)
        if epilogue:
            epilogue(y3, bias, 0, hw, has_bias, act)

    return run


def _is_pointwise(g) -> bool:
    """1x1, stride 1, no padding, one group: the NCHW data is already the column matrix, on
    maps of every size. On small maps a narrow GEMM per image still beats im2col's packed
    layout, whose copy in and out costs more than the narrow products lose (measured on 1
    thread, batch 8, forward / backward-data, ms: 96 -> 576 on 7x7 0.655 / 0.643 -> 0.518 /
    0.514, 64 -> 64 on 4x4 0.041 / 0.047 -> 0.021 / 0.018), except for the weight gradient of
    several images (see ``conv2d_backward_w``)."""
    return (g.kh == g.kw == 1 and g.sh == g.sw == 1 and g.pt == g.pb == g.pl == g.pr == 0
            and g.group == 1)


def _bands(g, itemsize):
    """Bands ``[(p0, p1), ...]`` of output rows for :func:`_band_forward`, or None when the
    batch is not banded: it is when it has fewer images than threads and one image's columns
    exceed COL_BYTES. As many bands as the columns need to fit COL_BYTES, and at least one per
    thread: every band packs the whole weight matrix for its GEMM, so more bands than that
    cost (measured on 2 cores, batch 1, 4 bands -> 2: ResNet-18's 14x14 layer 1.42 -> 1.21
    ms, its 56->28 strided layer 0.87 -> 0.82 ms, the stem's 8 bands unchanged). Band heights
    are even, so that a fused 2x2 pooling pools each band's own rows; and the same with the
    pooling fused or not, because BLAS's last bits depend on how many columns a product has
    (the fused kernels equal the unfused ones bitwise)."""
    threads = _threads.num_threads()
    if g.n >= threads:
        return None
    col = g.c * g.kh * g.kw * g.ho * g.wo * itemsize
    if col <= COL_BYTES:
        return None
    step = -(-g.ho // max(threads, -(-col // COL_BYTES)))
    step += step % 2
    return [(p0, min(p0 + step, g.ho)) for p0 in range(0, g.ho, step)]


def _padded_shape(g, m):
    """Padded chunk shape; rows/cols past the last window's reach are never read."""
    hp = max(g.h + g.pt, (g.ho - 1) * g.sh + (g.kh - 1) * g.dh + 1)
    wp = max(g.w + g.pl, (g.wo - 1) * g.sw + (g.kw - 1) * g.dw + 1)
    return (m, g.c, hp, wp)


def _per_image(g) -> bool:
    """Per-image column layout (one GEMM per image, written straight into y): wins when an
    image has enough output pixels for an efficient GEMM; else one packed GEMM per chunk."""
    return g.ho * g.wo >= PER_IMAGE_MIN_HW


def _col_strides(rows, hw, m, per_image) -> tuple[int, int]:
    """(image, row) strides of the flat column buffer in elements (see _im2col)."""
    return (rows * hw, hw) if per_image else (hw, m * hw)


def _columns(ws, x, g, n0, m, per_image):
    """Columns of images n0 .. n0+m-1 in the workspace: ``(m, C*kh*kw, Ho*Wo)`` per image, or
    packed ``(C*kh*kw, m*Ho*Wo)``."""
    shape = _padded_shape(g, m)
    if shape[2:] == x.shape[2:]:  # no padding is read: use the images in place
        xp = x[n0:n0 + m]
    else:
        xp = ws.get("xpad", shape, x.dtype)
        _pad_into(x, xp, n0, m, g.pt, g.pl)
    rows, hw = g.c * g.kh * g.kw, g.ho * g.wo
    col = ws.get("col", (m, rows, hw) if per_image else (rows, m * hw), x.dtype)
    cs_n, cs_r = _col_strides(rows, hw, m, per_image)
    _im2col(xp, col.reshape(-1), cs_n, cs_r, m, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, 0, g.ho,
            g.wo)
    return col


def _lean(g, itemsize) -> bool:
    """One small image whose columns fit COL_BYTES and whose GEMM stays on one thread (the
    batch-1 inference of a small net): the forward runs without the chunk machinery."""
    rows, hw = g.c * g.kh * g.kw, g.ho * g.wo
    return (g.n == 1 and _per_image(g) and g.group == 1 and rows * hw * itemsize <= COL_BYTES
            and g.o * rows * hw < _threads.PARALLEL_MIN_MACS)


def _lean_forward(ws, x, w, b, y, g, act, pooled):
    """The forward of :func:`_lean` geometry ``g`` on exactly these arrays, as a function of no
    arguments: the padding and column shapes, the views and the compiled loops resolved here,
    per call only the padding, im2col, the GEMM (single-threaded BLAS), the epilogue (bias,
    the activation ``act``) and, with ``pooled``, a 2x2 max pooling. The general kernel calls
    it once per call; a graph's bound kernel builds it once and calls it every replay."""
    dt = x.dtype
    rows, hw = g.c * g.kh * g.kw, g.ho * g.wo
    pad_shape = _padded_shape(g, 1)
    padded = pad_shape[2:] != x.shape[2:]
    pad_size = math.prod(pad_shape)
    pad, im2col = _pad_into.serial(), _im2col.serial()
    epilogue, pool2 = _epilogue.serial(), pool.max_2x2_serial()
    w2, y2, y3 = w.reshape(g.o, rows), y.reshape(g.o, hw), y.reshape(1, g.o, hw)
    has_bias = b is not None
    bias = b if has_bias else np.zeros(1, dt)
    geometry = (g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, 0, g.ho, g.wo)
    pt, pl, ho = g.pt, g.pl, pooled.shape[2] if pooled is not None else 0

    def run():
        if padded:
            xp = ws.flat("xpad", pad_size, dt).reshape(pad_shape)
            pad(x, xp, 0, 1, pt, pl)
        else:
            xp = x
        col = ws.flat("col", rows * hw, dt)
        im2col(xp, col, rows * hw, hw, 1, *geometry)
        _threads.serial_matmul(w2, col.reshape(rows, hw), y2)
        if has_bias or act:
            epilogue(y3, bias, 0, hw, has_bias, act)
        if pooled is not None:
            pool2(y, pooled, 0, ho)

    return run


def _forward_path(g) -> str:
    """The forward's path for geometry ``g`` (module docstring), in the order the general
    kernel tries them: "winograd", "grouped", "pointwise", "direct" (few taps and outputs,
    :mod:`.depthwise`) or "im2col". A bound kernel takes the same path, so the same bits."""
    if winograd.eligible(g):
        return "winograd"
    if grouped.eligible(g):
        return "grouped"
    if _is_pointwise(g):
        return "pointwise"
    if depthwise.eligible_dense(g):
        return "direct"
    return "im2col"


def _bind_forward(ws, ins, outs, attrs, act, pooled):
    """The forward bound to exactly these arrays (see ``bind`` in docs/plugin-authoring.md):
    a 1x1 layer's (:func:`_pointwise_forward`, unpooled), a depthwise or few-tap layer's
    (:func:`.depthwise.prepared`, then the pooling) or the lean one (:func:`_lean_forward`),
    or None when the general kernel takes another path. The same code as the general
    kernel's, so the same bits. A depthwise layer at batch 1 spent ~10 us per call on the
    general kernel's way to its loop (geometry, path, the loop's lookup: 11 layers of
    MobileNetV3-small)."""
    x, w, y = ins[0], ins[1], outs[0]
    b = ins[2] if len(ins) > 2 else None
    dt = x.dtype
    if (dt not in (np.float32, np.float64) or any(a.dtype != dt for a in (*ins, *outs))
            or not all(a.flags.c_contiguous for a in (*ins, *outs))):
        return None
    g = conv2d_geometry("Conv2d", x.shape, w.shape, attrs)
    path = _forward_path(g)
    if path == "pointwise" and pooled is None:
        run = _pointwise_forward(x, w, b, y, g, act)
        return lambda _ins, _outs, _attrs: run()
    if path == "direct" or (path == "grouped" and depthwise.eligible(g)):
        run = depthwise.prepared(x, w, b, y, g, act)
        if pooled is None:
            return lambda _ins, _outs, _attrs: run()
        pooling, second = pool.KERNELS["Pooling2d"], attrs.get("second", EMPTY)

        def run_pooled(_ins, _outs, _attrs):
            run()
            pooling([y], [pooled], second)

        return run_pooled
    if path != "im2col" or not _lean(g, x.itemsize):
        return None
    if pooled is not None and not pool.is_2x2_max(
            pool2d_geometry("Pooling2d", y.shape, attrs.get("second", EMPTY))):
        return None
    run = _lean_forward(ws, x, w, b, y, g, act, pooled)
    return lambda _ins, _outs, _attrs: run()


def kernels(device) -> dict:
    """Convolution kernels bound to ``device``'s workspace."""
    ws = device.workspace("conv", Workspace)
    act_kernels = {ACT_RELU: _ELEMENTWISE["ReLU"], ACT_HARDSWISH: _ELEMENTWISE["HardSwish"]}

    def forward(ins, outs, attrs, act: int, pooled=None):
        """y = act(conv(x, w) + b), ``act`` :data:`.depthwise.ACT_NONE`, ``ACT_RELU`` (the
        fused Conv2d+ReLU) or ``ACT_HARDSWISH`` (Conv2d+HardSwish), and with ``pooled`` also
        the pooling of y (Conv2d+ReLU+Pooling2d, the pooling's attributes in
        ``attrs["second"]``). On every path but Winograd the bias and the activation are
        applied as y is written (each im2col chunk right after its GEMM, while it is in
        cache), and on the im2col paths a 2x2 max pooling too; the same arithmetic as the
        Conv2d, activation and Pooling2d kernels."""
        x, w = ins[0], ins[1]
        b = ins[2] if len(ins) > 2 else None
        y = outs[0]
        g = conv2d_geometry("Conv2d", x.shape, w.shape, attrs)
        w2 = w.reshape(g.o, -1)
        pool_attrs = attrs.get("second", EMPTY)
        path = _forward_path(g)
        if path == "winograd":
            winograd.conv3x3(ws, x, w, b, y, (g.pt, g.pb, g.pl, g.pr), _pad_into)
        elif path == "grouped":
            grouped.forward(x, w, b, y, g, act)
            act = ACT_NONE
        elif path == "pointwise":
            _pointwise_forward(x, w, b, y, g, act)()
            act = ACT_NONE
        elif path == "direct":
            depthwise.forward(x, w, b, y, g, act)
            act = ACT_NONE
        else:  # im2col: what the chunks can do, they do in cache
            chunk_pool = pooled is not None and pool.is_2x2_max(
                pool2d_geometry("Pooling2d", y.shape, pool_attrs))
            _im2col_forward(x, w2, b, y, g, act, pooled if chunk_pool else None)
            act = ACT_NONE
            if chunk_pool:
                pooled = None
        if act:
            act_kernels[act]([y], [y], EMPTY)
        if pooled is not None:
            pool.KERNELS["Pooling2d"]([y], [pooled], pool_attrs)

    def _im2col_forward(x, w2, b, y, g, act, pooled):
        hw = g.ho * g.wo
        y3 = y.reshape(g.n, g.o, hw)
        bias = b if b is not None else np.zeros(1, x.dtype)
        rows = g.c * g.kh * g.kw
        og, rg = g.o // g.group, rows // g.group
        per_image = _per_image(g)
        if _lean(g, x.itemsize):
            # one small image (batch-1 inference of a small net): the chunk below, without
            # the chunk machinery (spans, a section, the split decision): ~10 us per call
            _lean_forward(ws, x, w2, b, y, g, act, pooled)()
            return
        bands = _bands(g, x.itemsize) if per_image else None
        if bands:
            _band_forward(x, w2, b, y, g, act, pooled, bands)
            return

        def chunk(span):
            n0, m = span
            col = _columns(ws, x, g, n0, m, per_image)
            if per_image:  # y[n] = W @ col[n], straight into y
                for k in range(g.group):
                    if m == 1:  # one image (batch-1 inference): the product is split across
                        _threads.matmul(  # the threads unless this runs in a chunk
                            w2[k * og:(k + 1) * og], col[0, k * rg:(k + 1) * rg],
                            y3[n0, k * og:(k + 1) * og])
                    else:
                        np.matmul(w2[k * og:(k + 1) * og], col[:, k * rg:(k + 1) * rg],
                                  out=y3[n0:n0 + m, k * og:(k + 1) * og])
                if b is not None or act:
                    _epilogue(y3[n0:n0 + m], bias, 0, hw, b is not None, act)
            else:
                out2 = ws.get("out", (g.o, m * hw), x.dtype)
                for k in range(g.group):  # split across the threads unless in a chunk
                    _threads.matmul(w2[k * og:(k + 1) * og], col[k * rg:(k + 1) * rg],
                                    out2[k * og:(k + 1) * og])
                _unpack(out2, y3, bias, b is not None, n0, m)
                if act:
                    _epilogue(y3[n0:n0 + m], bias, 0, hw, False, act)
            if pooled is not None:
                pool.max_2x2(y[n0:n0 + m], pooled[n0:n0 + m])

        run_chunks(chunk, _spans(g, x.itemsize))

    def _band_forward(x, w2, b, y, g, act, pooled, bands):
        """The per-image im2col forward of fewer images than threads whose columns exceed
        COL_BYTES (a large image at batch 1: an ImageNet stem's columns are 7 MiB): the
        images are padded once, then every (image, band of output rows) runs as one chunk on
        the threads, its columns in cache, its epilogue (bias, ReLU, 2x2 pooling) right after
        its GEMM. The same products as the whole image's, column block by column block."""
        hw = g.ho * g.wo
        y3 = y.reshape(g.n, g.o, hw)
        bias = b if b is not None else np.zeros(1, x.dtype)
        rows = g.c * g.kh * g.kw
        og, rg = g.o // g.group, rows // g.group
        shape = _padded_shape(g, g.n)
        if shape[2:] == x.shape[2:]:
            xp = x
        else:
            xp = ws.get("xpad", shape, x.dtype)
            _pad_into(x, xp, 0, g.n, g.pt, g.pl)

        def band(item):
            n, p0, p1 = item
            cols = (p1 - p0) * g.wo
            col = ws.get("col", (rows, cols), x.dtype)
            _im2col(xp[n:n + 1], col.reshape(-1), 0, cols, 1, g.kh, g.kw, g.sh, g.sw, g.dh,
                    g.dw, p0, p1 - p0, g.wo)
            out = y3[n, :, p0 * g.wo:p1 * g.wo]
            for k in range(g.group):
                np.matmul(w2[k * og:(k + 1) * og], col[k * rg:(k + 1) * rg],
                          out=out[k * og:(k + 1) * og])
            if b is not None or act:
                _epilogue(y3[n:n + 1], bias, p0 * g.wo, p1 * g.wo, b is not None, act)
            if pooled is not None:
                pool.max_2x2(y[n:n + 1], pooled[n:n + 1], (p0 // 2, p1 // 2))

        run_chunks(band, [(n, p0, p1) for n in range(g.n) for p0, p1 in bands])

    @kernel_attrs(contiguous_inputs=True)
    @via_float32
    @single_threaded_blas()
    def conv2d(ins, outs, attrs):
        forward(ins, outs, attrs, ACT_NONE)

    @kernel_attrs(contiguous_inputs=True)
    @via_float32
    @single_threaded_blas()
    def conv2d_relu(ins, outs, attrs):
        """The fused Conv2d+ReLU of graph mode (see singa.ops.FUSIONS)."""
        forward(ins, outs, attrs, ACT_RELU)

    # float32 and float64 only (``dtypes``): in float16 the ops one after the other round to
    # float16 between them (the convolution before the HardSwish, the ReLU's output before an
    # average pooling), which one pass computed in float32 would not; graph mode runs float16
    # unfused (singa.graph._fusion.fuse_pairs honours a fused kernel's dtypes).
    @kernel_attrs(contiguous_inputs=True, dtypes=(np.float32, np.float64))
    @single_threaded_blas()
    def conv2d_relu_pool(ins, outs, attrs):
        """The fused Conv2d+ReLU+Pooling2d of graph mode: outputs the ReLU's (kept) and the
        pooling's."""
        forward(ins, outs[:1], attrs, ACT_RELU, outs[1])

    @kernel_attrs(contiguous_inputs=True, dtypes=(np.float32, np.float64))
    @single_threaded_blas()
    def conv2d_hardswish(ins, outs, attrs):
        """The fused Conv2d+HardSwish of graph mode (see singa.ops.FUSIONS)."""
        forward(ins, outs, attrs, ACT_HARDSWISH)

    conv2d.bind = lambda ins, outs, attrs: _bind_forward(ws, ins, outs, attrs, ACT_NONE, None)
    conv2d_relu.bind = lambda ins, outs, attrs: _bind_forward(
        ws, ins, outs, attrs, ACT_RELU, None)
    conv2d_relu_pool.bind = lambda ins, outs, attrs: _bind_forward(
        ws, ins, outs[:1], attrs, ACT_RELU, outs[1])
    conv2d_hardswish.bind = lambda ins, outs, attrs: _bind_forward(
        ws, ins, outs, attrs, ACT_HARDSWISH, None)

    @kernel_attrs(contiguous_inputs=True)
    @via_float32
    @single_threaded_blas()
    def conv2d_backward_x(ins, outs, attrs):
        dy, w = ins
        dx = outs[0]
        g = conv2d_geometry("Conv2dBackwardX", attrs["x_shape"], w.shape, attrs)
        w2 = w.reshape(g.o, -1)
        if winograd.eligible_backward_x(g):
            winograd.conv3x3_backward_x(ws, dy, w, dx, (g.pt, g.pb, g.pl, g.pr), _pad_into)
            return
        if grouped.eligible(g):
            grouped.backward_x(dy, w, dx, g)
            return
        if _is_pointwise(g):
            if g.ho * g.wo == 1:  # dx[n, c] = sum_o dy[n, o] w[o, c]
                _threads.matmul(dy.reshape(g.n, g.o), w2, dx.reshape(g.n, g.c))
            else:
                _pointwise(w2.T, dy.reshape(g.n, g.o, -1), dx.reshape(g.n, g.c, -1), g.n)
            return
        hw = g.ho * g.wo
        dy3 = dy.reshape(g.n, g.o, hw)
        rows = g.c * g.kh * g.kw
        og, rg = g.o // g.group, rows // g.group
        per_image = _per_image(g)

        def chunk(span):
            n0, m = span
            if per_image:  # dcol[n] = W.T @ dy[n]
                dcol = ws.get("col", (m, rows, hw), dy.dtype)
                for k in range(g.group):
                    np.matmul(w2[k * og:(k + 1) * og].T, dy3[n0:n0 + m, k * og:(k + 1) * og],
                              out=dcol[:, k * rg:(k + 1) * rg])
            else:
                dyt = ws.get("dyt", (g.o, m * hw), dy.dtype)
                dcol = ws.get("col", (rows, m * hw), dy.dtype)
                _pack(dy3, dyt, n0, m)
                for k in range(g.group):
                    np.matmul(w2[k * og:(k + 1) * og].T, dyt[k * og:(k + 1) * og],
                              out=dcol[k * rg:(k + 1) * rg])
            dxp = ws.get("xpad", _padded_shape(g, m), dy.dtype)
            cs_n, cs_r = _col_strides(rows, hw, m, per_image)
            _col2im(dcol.reshape(-1), cs_n, cs_r, dxp, dx, n0, m, g.kh, g.kw, g.sh, g.sw,
                    g.pt, g.pl, g.dh, g.dw, g.ho, g.wo)

        run_chunks(chunk, _spans(g, dy.itemsize))

    @kernel_attrs(contiguous_inputs=True)
    @via_float32
    @single_threaded_blas()
    def conv2d_backward_w(ins, outs, attrs):
        dy, x = ins
        dw = outs[0]
        g = conv2d_geometry("Conv2dBackwardW", x.shape, attrs["w_shape"], attrs)
        if winograd.eligible(g):
            winograd.conv3x3_backward_w(ws, dy, x, dw, (g.pt, g.pb, g.pl, g.pr), _pad_into)
            return
        if grouped.eligible(g):
            grouped.backward_w(dy, x, dw, g)
            return
        hw = g.ho * g.wo
        dy3 = dy.reshape(g.n, g.o, hw)
        dw2 = dw.reshape(g.o, -1)
        rows = g.c * g.kh * g.kw
        og, rg = g.o // g.group, rows // g.group
        pointwise = _is_pointwise(g)
        if pointwise and (g.n == 1 or hw == 1):  # dW = dy[0] @ x[0].T, or dy.T @ x
            a, b = (dy3[0], x.reshape(g.c, hw).T) if g.n == 1 else (
                dy.reshape(g.n, g.o).T, x.reshape(g.n, g.c))
            _threads.matmul(a, b, dw2)
            return
        per_image = _per_image(g)
        # 1x1 on maps under PER_IMAGE_MIN_HW of several images: packed columns, one GEMM
        # (a product per image, each summed into dW, measured up to 2x slower when the
        # weights are big: batch 8, 256 -> 512 on 2x2 0.16 -> 0.31 ms, 320 -> 1280 on 7x7
        # 3.6 -> 4.6 ms)
        in_place = pointwise and per_image
        sums = ThreadSums(dw2, lambda g: ws.get(f"dw_acc{g}", dw2.shape, x.dtype))

        def chunk(span):
            n0, m = span
            if in_place:  # the images are the columns
                col = x.reshape(g.n, g.c, hw)[n0:n0 + m]
            else:
                col = _columns(ws, x, g, n0, m, per_image)
            target, acc = sums.target(lambda: ws.get("dw", dw2.shape, x.dtype))
            if per_image:  # dW = sum_n dy[n] @ col[n].T
                part = ws.get("dw_images", (m, og, rg), x.dtype)
                for k in range(g.group):
                    np.matmul(dy3[n0:n0 + m, k * og:(k + 1) * og],
                              col[:, k * rg:(k + 1) * rg].transpose(0, 2, 1), out=part)
                    np.sum(part, axis=0, out=target[k * og:(k + 1) * og])
            else:
                dyt = ws.get("dyt", (g.o, m * hw), x.dtype)
                _pack(dy3, dyt, n0, m)
                for k in range(g.group):
                    np.matmul(dyt[k * og:(k + 1) * og], col[k * rg:(k + 1) * rg].T,
                              out=target[k * og:(k + 1) * og])
            if acc is not None:
                acc += target

        sums.run(chunk, _spans(g, x.itemsize))
        sums.finish()

    return {
        "Conv2d": conv2d,
        "Conv2d+ReLU": conv2d_relu,
        "Conv2d+HardSwish": conv2d_hardswish,
        "Conv2d+ReLU+Pooling2d": conv2d_relu_pool,
        "Conv2dBackwardX": conv2d_backward_x,
        "Conv2dBackwardW": conv2d_backward_w,
    }
