"""Winograd convolution for 3x3, stride-1, undilated, ungrouped layers: F(4x4, 3x3) on
feature maps of at least F4_MIN_HW pixels a side, F(2x2, 3x3) on smaller ones.

Most of a ResNet's convolutions are of this kind. F(m x m, 3x3) computes each m x m output
tile from a t x t input tile (t = m + 2) with t*t element-wise products: 16 per 4 outputs for
m = 2 (2.25x fewer than im2col), 36 per 16 outputs for m = 4 (4x fewer). The products over
channels are t*t batched GEMMs ``M[k] = U[k] @ V[k]``; the transforms are memory-bound loops::

    U = G g G^T  (weights, t x t per (o, c): one GEMM with K = kron(G, G) on the 9 taps)
    V = B^T d B  (input tile d, t x t per (c, tile))
    Y = A^T M A  (m x m output tile)

    m = 2: G   = [[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]]
           B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
           A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]
    m = 4: the matrices in _G4, _input_transform4 and _output_transform4 (Lavin & Gray).

The backward pass for the input is the same convolution applied to dy with the weights
transposed (O <-> C) and flipped, and padding ``2 - pad`` on each side. The backward pass for
the weights sums ``(A dY A^T) * (B^T d B)`` over tiles (GEMMs over the tile dimension) and
applies G's adjoint.

Batch chunks run in parallel on the cores (:mod:`._threads`), each with single-threaded BLAS.

Loop order. The transformed arrays are ``[point, channel, tile]`` with a chunk's tiles image
by image, so one channel's tiles over all the chunk's images are one contiguous run per
point. Each transform therefore works one channel at a time over all the chunk's images: a
per-image pass computes one direction of the transform into a small scratch with the tile's
columns apart (``q[row, column, tile]``), then the other direction runs as long loops over
the channel's tiles with one store each, which LLVM vectorises. (Before, each image plane
was transformed on its own, image-major: on ResNet's 8x8 and 4x4 maps a plane holds 1-4
tiles, the loops were a few iterations long, and consecutive planes wrote 16-byte pieces of
36 rows far apart. Single thread, AMD EPYC Zen 3, ResNet-18 CIFAR layers at their batch
chunks: input transform 5.7-17 ms -> 1.9-3.4 ms on the 16x16 and 8x8 layers, output 4-10 ->
0.8-2.0, gradient-output 5-14 -> 0.9-4.0.) The per-image passes index arrays directly
instead of taking row views (a view in an inner loop costs numba a reference count
increment and decrement each time) and are functions of their own rather than inlined
(measured 1.5-2.5x faster than the same loops inline). Calls on a single image (batch-1
inference) keep the per-plane input and output kernels (``_PLANES``, see :func:`_forward`).
"""

from __future__ import annotations

import numpy as np

from . import _threads
from ._jit import helper
from ._parallel import pjit
from ._threads import (
    ThreadSums,
    chunk_spans,
    run_chunks,
    run_ranges,
    split_spans,
)

prange = range  # numba.prange once compiled (see _parallel.pjit)

#: Target size of the transformed-input buffer of one batch chunk (bytes): small enough that
#: the transforms and the GEMMs of a chunk work in cache.
TILE_BYTES = 4 << 20
#: ... but at least this many tiles per chunk, so that the 16 GEMMs stay efficient.
MIN_TILES = 256
#: Weight transforms writing at least this many elements of U are split across the threads.
PARALLEL_MIN_ITEMS = 1 << 18

_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
#: F(4x4, 3x3)'s G (its B^T and A^T are written out in _bt4 and _at4 below).
_G4 = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]])
#: U = G g G^T as a matrix on the 9 taps: U[a*t + b] = sum_ij K[a*t + b, 3i + j] g[i, j],
#: per output tile size (2 or 4; t = tile + 2 is the input tile size).
_K = {2: np.kron(_G, _G), 4: np.kron(_G4, _G4)}
#: Output tile size 4 (36 products per 16 outputs instead of 16 per 4: 1.78x fewer GEMM flops
#: and less transformed data) from this output size on; smaller maps keep 2x2 tiles, whose
#: transforms waste less on padding and whose U is 2.25x smaller.
F4_MIN_HW = 8


def _spans(n: int, per_image: int, tiles_per_image: int) -> list[tuple[int, int]]:
    """(first image, count) of each batch chunk: about TILE_BYTES of transformed input but at
    least MIN_TILES tiles each, and at least one chunk per thread (see _threads)."""
    nb = min(n, max(TILE_BYTES // per_image, -(-MIN_TILES // tiles_per_image), 1))
    return chunk_spans(n, nb)


def _by_points(n: int, tiles_per_image: int) -> int:
    """Threads to split the weight gradient's products by Winograd point instead of by batch
    chunk (0: do not). When the batch has fewer than MIN_TILES tiles per thread (ResNet's 8x8
    and 4x4 layers at batch 32: 64 per thread), each thread's chunk ends in its own full-size
    partial dU (9-16 MiB there, past L2) that is then added to the others'; split by point,
    each thread computes its points' share of dU in one GEMM over all tiles, with no partial
    sums, and the result no longer depends on which thread ran which chunk. Measured on 2
    cores (AMD EPYC, best of 12 interleaved): r18.l3 0.82x, r18.l4 0.90x the chunked time. The
    forward and backward-data passes measured the same either way and keep their chunks."""
    t = _threads.num_threads()
    return t if t > 1 and n * tiles_per_image < t * MIN_TILES else 0


def _transform_images(n, t, fn):
    """``fn(first image, count)`` over ``t`` image ranges, in parallel."""
    def part(span):
        n0, m_ = span
        fn(n0, m_)

    run_chunks(part, split_spans(n, t), t)


#: Batches with fewer output tiles than this (over all images) take im2col instead. Every
#: call transforms the weights, t*t*9 multiply-adds per (o, c): what a direct convolution
#: spends on t*t output pixels (36 for F4). And the t*t products have as many columns as
#: there are tiles, too few for BLAS to run near its peak. Measured at batch 1 on 2 cores
#: (``python benchmarks/conv_layers.py --winograd-min-tiles 1`` against 100000, on an AMD
#: EPYC and an AVX-512 Xeon): ResNet-18's 7x7 layer (4 F4 tiles) 3.0-5.9 ms Winograd
#: against 1.7-2.4 ms im2col, its 14x14 layer (16 tiles) 2.7-2.8 against 2.1-2.4; its 28x28
#: layer (49 tiles) 1.3 against 1.5-2.1 and its 56x56 one (196) 1.2-1.4 against 1.7-2.9.
MIN_BATCH_TILES = 32


def eligible(g) -> bool:
    """Whether the convolution of geometry ``g`` runs (faster) through Winograd."""
    if not (g.kh == g.kw == 3 and g.sh == g.sw == 1 and g.dh == g.dw == 1 and g.group == 1
            and g.c >= 16 and g.o >= 16):
        return False
    m = _tile(g.ho, g.wo)
    return g.n * -(-g.ho // m) * -(-g.wo // m) >= MIN_BATCH_TILES


def eligible_backward_x(g) -> bool:
    return eligible(g) and max(g.pt, g.pb, g.pl, g.pr) <= 2


def _weight_transform(ws, w, o, c, flip, tile=2):
    """U[k = a*t + b, o, c] = (G g G^T)[a, b] for g = w[o, c] as one GEMM ``K @ w9.T`` with
    ``K = kron(G, G)``; with ``flip`` the kernel of the backward-data convolution,
    g[i, j] = w[c, o, 2 - i, 2 - j], i.e. the 9 taps reversed (returned as a transposed
    view, which BLAS reads as such)."""
    k = _K[tile].astype(w.dtype, copy=False)
    u = ws.get("wino_u", (len(k), o * c), w.dtype)
    a = k if not flip else k[:, ::-1]
    w9 = w.reshape(o * c, 9).T
    # split by columns of U across the threads: on a 512x512 layer 3.4 ms on one core, 2.0 on
    # two (split by U's 16 rows instead, BLAS's skinny 8-row products gained nothing)
    run_ranges(lambda lo, hi: np.matmul(a, w9[:, lo:hi], out=u[:, lo:hi]), u.shape[1],
               parallel=u.size >= PARALLEL_MIN_ITEMS)
    if not flip:
        return u.reshape(len(k), o, c)
    return u.reshape(len(k), c, o).transpose(0, 2, 1)


@helper(inline="always")
def _bt2(d0, d1, d2, d3):
    """B^T d for one column d = (d0 .. d3) of a 4x4 tile, with F(2x2, 3x3)'s B^T."""
    return d0 - d2, d1 + d2, d2 - d1, d1 - d3


@helper(inline="always")
def _at2(m0, m1, m2, m3):
    """A^T m for one column m = (m0 .. m3), with F(2x2, 3x3)'s A^T."""
    return m0 + m1 + m2, m1 - m2 - m3


@helper(inline="always")
def _a2(y0, y1):
    """A y for one column y = (y0, y1) of a 2x2 gradient tile (the adjoint of :func:`_at2`)."""
    return y0, y0 + y1, y0 - y1, -y1


@helper()
def _bt2_columns(xp, q, n, c, th, tw):
    """q[i, s, (n*th + ty)*tw + tx] = (B^T d)[i] of column s of the 4x4 tile of plane
    xp[n, c] at (2ty, 2tx): the first half of _input_transform, one plane (its own
    function as :func:`_bt4_columns`)."""
    for ty in range(th):
        h = 2 * ty
        base = (n * th + ty) * tw
        for s in range(4):
            for tx in range(tw):
                w = 2 * tx + s
                j = base + tx
                q[0, s, j], q[1, s, j], q[2, s, j], q[3, s, j] = _bt2(
                    xp[n, c, h, w], xp[n, c, h + 1, w], xp[n, c, h + 2, w], xp[n, c, h + 3, w])


@helper()
def _at2_rows(tt, y, bias, n0, nb, o, th, tw):
    """y[n0 + n, o] = T A (+ bias) for the chunk's images from tt (rows r of T = A^T M),
    clipped to y's extent: the second half of _output_transform, one output channel."""
    ho, wo = y.shape[2], y.shape[3]
    tw_full = wo // 2  # tiles whose two columns both lie inside y
    for n in range(nb):
        for ty in range(th):
            base = (n * th + ty) * tw
            for r in range(2):
                h = 2 * ty + r
                if h >= ho:
                    break
                for tx in range(tw_full):
                    q = base + tx
                    e0, e1 = _at2(tt[r, 0, q], tt[r, 1, q], tt[r, 2, q], tt[r, 3, q])
                    y[n0 + n, o, h, 2 * tx] = e0 + bias
                    y[n0 + n, o, h, 2 * tx + 1] = e1 + bias
                if tw_full < tw:
                    q = base + tw - 1
                    y[n0 + n, o, h, wo - 1] = _at2(tt[r, 0, q], tt[r, 1, q], tt[r, 2, q],
                                                   tt[r, 3, q])[0] + bias


@helper()
def _a2_columns(dy, r, n0, n, o, th, tw):
    """r[a, s, (n*th + ty)*tw + tx] = (A dY)[a] of column s of the 2x2 tile of
    dy[n0 + n, o] at (2ty, 2tx), zero past dy's extent: the first half of
    _grad_output_transform, one plane."""
    ho, wo = dy.shape[2], dy.shape[3]
    zero = dy.dtype.type(0)
    for ty in range(th):
        h = 2 * ty
        base = (n * th + ty) * tw
        for s in range(2):
            for tx in range(tw):
                w = 2 * tx + s
                j = base + tx
                y0 = dy[n0 + n, o, h, w] if w < wo else zero
                y1 = dy[n0 + n, o, h + 1, w] if w < wo and h + 1 < ho else zero
                r[0, s, j], r[1, s, j], r[2, s, j], r[3, s, j] = _a2(y0, y1)


@pjit()
def _input_transform(xp, v, nb, th, tw):
    """v[k, c, (n*th + ty)*tw + tx] = (B^T d B)[k] of the 4x4 tile of xp at (2ty, 2tx).

    One channel at a time, over the chunk's images (see the module's "Loop order"): first
    q[i, s, tile] = (B^T d)[i] of the tile's column s, then each row i of q times B as long
    runs over every tile of the channel."""
    c_in = xp.shape[1]
    nt = nb * th * tw
    for c in prange(c_in):
        q = np.empty((4, 4, nt), xp.dtype)
        for n in range(nb):
            _bt2_columns(xp, q, n, c, th, tw)
        for i in range(4):
            a0, a1, a2, a3 = q[i, 0], q[i, 1], q[i, 2], q[i, 3]
            v0, v1, v2, v3 = v[4 * i, c], v[4 * i + 1, c], v[4 * i + 2, c], v[4 * i + 3, c]
            for j in range(nt):  # one store per loop: these vectorise
                v0[j] = _bt2(a0[j], a1[j], a2[j], a3[j])[0]
            for j in range(nt):
                v1[j] = _bt2(a0[j], a1[j], a2[j], a3[j])[1]
            for j in range(nt):
                v2[j] = _bt2(a0[j], a1[j], a2[j], a3[j])[2]
            for j in range(nt):
                v3[j] = _bt2(a0[j], a1[j], a2[j], a3[j])[3]


@pjit()
def _output_transform(m, y, b, has_bias, n0, nb, th, tw):
    """y[n0 + n, o, 2ty + i, 2tx + j] = (A^T M A)[i, j] (+ b[o]), clipped to y's extent.

    One output channel at a time: T = A^T M as long runs over the chunk's tiles, then each
    row of T times A into y's rows."""
    o_ch = y.shape[1]
    nt = nb * th * tw
    for o in prange(o_ch):
        bias = b[o] if has_bias else m.dtype.type(0)
        tt = np.empty((2, 4, nt), m.dtype)  # tt[r, j, tile]: row r of T, column j
        for j in range(4):
            m0, m1, m2, m3 = m[j, o], m[4 + j, o], m[8 + j, o], m[12 + j, o]
            ta, tb = tt[0, j], tt[1, j]
            for q in range(nt):
                ta[q] = _at2(m0[q], m1[q], m2[q], m3[q])[0]
            for q in range(nt):
                tb[q] = _at2(m0[q], m1[q], m2[q], m3[q])[1]
        _at2_rows(tt, y, bias, n0, nb, o, th, tw)


@pjit()
def _grad_output_transform(dy, z, n0, nb, th, tw):
    """z[k, o, (n*th + ty)*tw + tx] = (A dY A^T)[k] for the 2x2 tile of dy at (2ty, 2tx)
    (cells past dy's extent count as 0); the adjoint of _output_transform.

    One output channel at a time: r[a, s, tile] = (A dY)[a] of the tile's column s, then
    each row a of r times A^T as long runs over the chunk's tiles."""
    o_ch = dy.shape[1]
    nt = nb * th * tw
    for o in prange(o_ch):
        r = np.empty((4, 2, nt), dy.dtype)
        for n in range(nb):
            _a2_columns(dy, r, n0, n, o, th, tw)
        for a in range(4):
            q0, q1 = r[a, 0], r[a, 1]
            z0, z1, z2, z3 = z[4 * a, o], z[4 * a + 1, o], z[4 * a + 2, o], z[4 * a + 3, o]
            for j in range(nt):
                z0[j] = _a2(q0[j], q1[j])[0]
            for j in range(nt):
                z1[j] = _a2(q0[j], q1[j])[1]
            for j in range(nt):
                z2[j] = _a2(q0[j], q1[j])[2]
            for j in range(nt):
                z3[j] = _a2(q0[j], q1[j])[3]


def _weight_grad_transform(du, dw):
    """dw[o, c] = G^T dU[:, o, c] G (the adjoint of _weight_transform): ``dU^T @ K``."""
    o, c = dw.shape[:2]
    k = _K[2 if len(du) == 16 else 4].astype(du.dtype, copy=False)
    np.matmul(du.reshape(len(k), o * c).T, k, out=dw.reshape(o * c, 9))


@helper(inline="always")
def _bt4(d0, d1, d2, d3, d4, d5, k2, k4, k5):
    """B^T d for one column d = (d0 .. d5) of a 6x6 tile, with F(4x4, 3x3)'s B^T (in
    _input_transform4's docstring); k2, k4, k5: 2, 4, 5 in the tile's dtype."""
    return (k4 * d0 - k5 * d2 + d4, d3 + d4 - k4 * (d1 + d2), d4 - d3 + k4 * (d1 - d2),
            d4 - d2 + k2 * (d3 - d1), d4 - d2 - k2 * (d3 - d1), k4 * d1 - k5 * d3 + d5)


@helper(inline="always")
def _at4(m0, m1, m2, m3, m4, m5, k2, k4, k8):
    """A^T m for one column m = (m0 .. m5), with F(4x4, 3x3)'s A^T (in _output_transform4's
    docstring); k2, k4, k8: 2, 4, 8 in the tile's dtype."""
    s12, d12 = m1 + m2, m1 - m2
    s34, d34 = m3 + m4, m3 - m4
    return m0 + s12 + s34, d12 + k2 * d34, s12 + k4 * s34, d12 + k8 * d34 + m5


@helper(inline="always")
def _a4(y0, y1, y2, y3, k2, k4, k8):
    """A y for one column y = (y0 .. y3) of a 4x4 gradient tile (the adjoint of
    :func:`_at4`); k2, k4, k8: 2, 4, 8 in the tile's dtype."""
    return (y0, y0 + y1 + y2 + y3, y0 - y1 + y2 - y3, y0 + k2 * y1 + k4 * y2 + k8 * y3,
            y0 - k2 * y1 + k4 * y2 - k8 * y3, y3)


@helper()
def _bt4_columns(xp, q, n, c, th, tw, k2, k4, k5):
    """q[i, s, (n*th + ty)*tw + tx] = (B^T d)[i] of column s of the 6x6 tile of plane
    xp[n, c] at (4ty, 4tx): the first half of _input_transform4, one plane. Its own function
    (not inlined): measured 1.5-2.5x faster than the same loops inline in the kernel."""
    for ty in range(th):
        h = 4 * ty
        base = (n * th + ty) * tw
        for s in range(6):
            for tx in range(tw):
                w = 4 * tx + s
                j = base + tx
                e0, e1, e2, e3, e4, e5 = _bt4(
                    xp[n, c, h, w], xp[n, c, h + 1, w], xp[n, c, h + 2, w],
                    xp[n, c, h + 3, w], xp[n, c, h + 4, w], xp[n, c, h + 5, w], k2, k4, k5)
                q[0, s, j], q[1, s, j], q[2, s, j] = e0, e1, e2
                q[3, s, j], q[4, s, j], q[5, s, j] = e3, e4, e5


@helper()
def _at4_rows(tt, y, bias, n0, n, o, th, tw, k2, k4, k8):
    """y[n0 + n, o] = T A (+ bias) for image n's tiles of tt (rows i of T = A^T M), clipped
    to y's extent: the second half of _output_transform4, one plane (its own function as
    :func:`_bt4_columns`)."""
    ho, wo = y.shape[2], y.shape[3]
    full = wo // 4  # tiles whose 4 columns all lie inside y
    for ty in range(th):
        for i in range(4):  # y row 4ty + i = T[i] A
            h = 4 * ty + i
            if h >= ho:
                break
            for tx in range(tw):
                q = (n * th + ty) * tw + tx
                r0, r1, r2, r3 = _at4(tt[i, 0, q], tt[i, 1, q], tt[i, 2, q], tt[i, 3, q],
                                      tt[i, 4, q], tt[i, 5, q], k2, k4, k8)
                r0, r1, r2, r3 = r0 + bias, r1 + bias, r2 + bias, r3 + bias
                w = 4 * tx
                if tx < full:
                    y[n0 + n, o, h, w] = r0
                    y[n0 + n, o, h, w + 1] = r1
                    y[n0 + n, o, h, w + 2] = r2
                    y[n0 + n, o, h, w + 3] = r3
                else:  # the last, clipped tile
                    y[n0 + n, o, h, w] = r0
                    if w + 1 < wo:
                        y[n0 + n, o, h, w + 1] = r1
                    if w + 2 < wo:
                        y[n0 + n, o, h, w + 2] = r2


@helper()
def _a4_columns(dy, r, n0, n, o, th, tw, k2, k4, k8):
    """r[a, s, (n*th + ty)*tw + tx] = (A dY)[a] of column s of the 4x4 tile of
    dy[n0 + n, o] at (4ty, 4tx), zero past dy's extent: the first half of
    _grad_output_transform4, one plane (its own function as :func:`_bt4_columns`)."""
    ho, wo = dy.shape[2], dy.shape[3]
    zero = dy.dtype.type(0)
    for ty in range(th):
        h = 4 * ty
        rows = min(4, ho - h)
        base = (n * th + ty) * tw
        for s in range(4):
            for tx in range(tw):
                w = 4 * tx + s
                j = base + tx
                if w < wo:
                    y0 = dy[n0 + n, o, h, w]
                    y1 = dy[n0 + n, o, h + 1, w] if rows > 1 else zero
                    y2 = dy[n0 + n, o, h + 2, w] if rows > 2 else zero
                    y3 = dy[n0 + n, o, h + 3, w] if rows > 3 else zero
                    e0, e1, e2, e3, e4, e5 = _a4(y0, y1, y2, y3, k2, k4, k8)
                else:  # past dy's last column: a zero column of A dY
                    e0 = e1 = e2 = e3 = e4 = e5 = zero
                r[0, s, j], r[1, s, j], r[2, s, j] = e0, e1, e2
                r[3, s, j], r[4, s, j], r[5, s, j] = e3, e4, e5


@pjit()
def _input_transform4(xp, v, nb, th, tw):
    """v[k, c, (n*th + ty)*tw + tx] = (B^T d B)[k] of the 6x6 tile of xp at (4ty, 4tx), for
    F(4x4, 3x3): B^T = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
    [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]].

    One channel at a time, over the chunk's images (the module's "Loop order"): first
    q[i, s, tile] = (B^T d)[i] of the tile's column s, then each row i of q times B as long
    runs over every tile of the channel."""
    c_in = xp.shape[1]
    k2, k4, k5 = xp.dtype.type(2), xp.dtype.type(4), xp.dtype.type(5)  # no float64 promotion
    nt = nb * th * tw
    for c in prange(c_in):
        q = np.empty((6, 6, nt), xp.dtype)
        for n in range(nb):
            _bt4_columns(xp, q, n, c, th, tw, k2, k4, k5)
        for i in range(6):
            a0, a1, a2, a3, a4, a5 = q[i, 0], q[i, 1], q[i, 2], q[i, 3], q[i, 4], q[i, 5]
            v0, v1 = v[6 * i, c], v[6 * i + 1, c]
            v2, v3 = v[6 * i + 2, c], v[6 * i + 3, c]
            v4, v5 = v[6 * i + 4, c], v[6 * i + 5, c]
            for j in range(nt):  # one store per loop: these vectorise
                v0[j] = _bt4(a0[j], a1[j], a2[j], a3[j], a4[j], a5[j], k2, k4, k5)[0]
            for j in range(nt):
                v1[j] = _bt4(a0[j], a1[j], a2[j], a3[j], a4[j], a5[j], k2, k4, k5)[1]
            for j in range(nt):
                v2[j] = _bt4(a0[j], a1[j], a2[j], a3[j], a4[j], a5[j], k2, k4, k5)[2]
            for j in range(nt):
                v3[j] = _bt4(a0[j], a1[j], a2[j], a3[j], a4[j], a5[j], k2, k4, k5)[3]
            for j in range(nt):
                v4[j] = _bt4(a0[j], a1[j], a2[j], a3[j], a4[j], a5[j], k2, k4, k5)[4]
            for j in range(nt):
                v5[j] = _bt4(a0[j], a1[j], a2[j], a3[j], a4[j], a5[j], k2, k4, k5)[5]


@pjit()
def _output_transform4(m, y, b, has_bias, n0, nb, th, tw):
    """y[n0 + n, o, 4ty + i, 4tx + j] = (A^T M A)[i, j] (+ b[o]), clipped to y's extent, for
    F(4x4, 3x3): A^T = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
    [0, 1, -1, 8, -8, 1]]. One output channel at a time: T = A^T M as long runs over the
    chunk's tiles, then each row of T times A into y's rows."""
    o_ch = y.shape[1]
    k2, k4, k8 = m.dtype.type(2), m.dtype.type(4), m.dtype.type(8)  # no float64 promotion
    nt = nb * th * tw
    for o in prange(o_ch):
        bias = b[o] if has_bias else m.dtype.type(0)
        tt = np.empty((4, 6, nt), m.dtype)  # tt[i, j, tile]: row i of T, column j
        for j in range(6):
            m0, m1, m2 = m[j, o], m[6 + j, o], m[12 + j, o]
            m3, m4, m5 = m[18 + j, o], m[24 + j, o], m[30 + j, o]
            t0, t1, t2, t3 = tt[0, j], tt[1, j], tt[2, j], tt[3, j]
            for q in range(nt):
                t0[q] = _at4(m0[q], m1[q], m2[q], m3[q], m4[q], m5[q], k2, k4, k8)[0]
            for q in range(nt):
                t1[q] = _at4(m0[q], m1[q], m2[q], m3[q], m4[q], m5[q], k2, k4, k8)[1]
            for q in range(nt):
                t2[q] = _at4(m0[q], m1[q], m2[q], m3[q], m4[q], m5[q], k2, k4, k8)[2]
            for q in range(nt):
                t3[q] = _at4(m0[q], m1[q], m2[q], m3[q], m4[q], m5[q], k2, k4, k8)[3]
        for n in range(nb):
            _at4_rows(tt, y, bias, n0, n, o, th, tw, k2, k4, k8)


@pjit()
def _grad_output_transform4(dy, z, n0, nb, th, tw):
    """z[k, o, (n*th + ty)*tw + tx] = (A dY A^T)[k] for the 4x4 tile of dy at (4ty, 4tx)
    (cells past dy's extent count as 0); the adjoint of _output_transform4. One output
    channel at a time: r[a, s, tile] = (A dY)[a] of the tile's column s, then each row a of
    r times A^T as long runs over the chunk's tiles."""
    o_ch = dy.shape[1]
    k2, k4, k8 = dy.dtype.type(2), dy.dtype.type(4), dy.dtype.type(8)  # no float64 promotion
    nt = nb * th * tw
    for o in prange(o_ch):
        r = np.empty((6, 4, nt), dy.dtype)
        for n in range(nb):
            _a4_columns(dy, r, n0, n, o, th, tw, k2, k4, k8)
        for a in range(6):  # Z row a = R[a] A^T, one tile per (ty, tx)
            q0, q1, q2, q3 = r[a, 0], r[a, 1], r[a, 2], r[a, 3]
            z0, z1 = z[6 * a, o], z[6 * a + 1, o]
            z2, z3 = z[6 * a + 2, o], z[6 * a + 3, o]
            z4, z5 = z[6 * a + 4, o], z[6 * a + 5, o]
            for j in range(nt):
                z0[j] = _a4(q0[j], q1[j], q2[j], q3[j], k2, k4, k8)[0]
            for j in range(nt):
                z1[j] = _a4(q0[j], q1[j], q2[j], q3[j], k2, k4, k8)[1]
            for j in range(nt):
                z2[j] = _a4(q0[j], q1[j], q2[j], q3[j], k2, k4, k8)[2]
            for j in range(nt):
                z3[j] = _a4(q0[j], q1[j], q2[j], q3[j], k2, k4, k8)[3]
            for j in range(nt):
                z4[j] = _a4(q0[j], q1[j], q2[j], q3[j], k2, k4, k8)[4]
            for j in range(nt):
                z5[j] = _a4(q0[j], q1[j], q2[j], q3[j], k2, k4, k8)[5]


@pjit()
def _input_planes(xp, v, nb, th, tw):
    """_input_transform one image plane at a time (see :func:`_forward`): P = B^T d per band
    of 4 rows as one loop over the row, then V = P B per tile."""
    c_in, wp = xp.shape[1], xp.shape[3]
    for t in prange(nb * c_in):
        n = t // c_in
        c = t - n * c_in
        p = np.empty((4, wp), xp.dtype)
        for ty in range(th):
            h = 2 * ty
            d0, d1, d2, d3 = xp[n, c, h], xp[n, c, h + 1], xp[n, c, h + 2], xp[n, c, h + 3]
            for w in range(wp):  # P = B^T d for the whole band of 4 rows
                p[0, w] = d0[w] - d2[w]
                p[1, w] = d1[w] + d2[w]
                p[2, w] = d2[w] - d1[w]
                p[3, w] = d1[w] - d3[w]
            base = (n * th + ty) * tw
            for i in range(4):  # V = P B, one tile per tx
                pi = p[i]
                v0, v1 = v[4 * i, c], v[4 * i + 1, c]
                v2, v3 = v[4 * i + 2, c], v[4 * i + 3, c]
                for tx in range(tw):
                    w = 2 * tx
                    v0[base + tx] = pi[w] - pi[w + 2]
                    v1[base + tx] = pi[w + 1] + pi[w + 2]
                    v2[base + tx] = pi[w + 2] - pi[w + 1]
                    v3[base + tx] = pi[w + 1] - pi[w + 3]


@pjit()
def _output_planes(m, y, b, has_bias, n0, nb, th, tw):
    """_output_transform one image plane at a time (see :func:`_forward`)."""
    o_ch, ho, wo = y.shape[1], y.shape[2], y.shape[3]
    tw_full = wo // 2  # tiles whose two columns both lie inside y
    for t in prange(nb * o_ch):
        n = t // o_ch
        o = t - n * o_ch
        bias = b[o] if has_bias else m.dtype.type(0)
        ta = np.empty((4, tw), m.dtype)
        tb = np.empty((4, tw), m.dtype)
        for ty in range(th):
            base = (n * th + ty) * tw
            for j in range(4):  # T = A^T M: rows a (ta) and b (tb) of every tile
                m0, m1 = m[j, o, base:base + tw], m[4 + j, o, base:base + tw]
                m2, m3 = m[8 + j, o, base:base + tw], m[12 + j, o, base:base + tw]
                for tx in range(tw):
                    ta[j, tx] = m0[tx] + m1[tx] + m2[tx]
                    tb[j, tx] = m1[tx] - m2[tx] - m3[tx]
            h = 2 * ty
            y0 = y[n0 + n, o, h]
            for tx in range(tw_full):  # Y = T A
                y0[2 * tx] = ta[0, tx] + ta[1, tx] + ta[2, tx] + bias
                y0[2 * tx + 1] = ta[1, tx] - ta[2, tx] - ta[3, tx] + bias
            if tw_full < tw:
                y0[wo - 1] = ta[0, tw - 1] + ta[1, tw - 1] + ta[2, tw - 1] + bias
            if h + 1 < ho:
                y1 = y[n0 + n, o, h + 1]
                for tx in range(tw_full):
                    y1[2 * tx] = tb[0, tx] + tb[1, tx] + tb[2, tx] + bias
                    y1[2 * tx + 1] = tb[1, tx] - tb[2, tx] - tb[3, tx] + bias
                if tw_full < tw:
                    y1[wo - 1] = tb[0, tw - 1] + tb[1, tw - 1] + tb[2, tw - 1] + bias


@pjit()
def _input_planes4(xp, v, nb, th, tw):
    """_input_transform4 one image plane at a time (see :func:`_forward`): P = B^T d for
    every band of 6 rows first, then each row i of every band's P times B gives the 6 outputs
    k = 6i .. 6i + 5, written as whole-plane runs."""
    c_in, wp = xp.shape[1], xp.shape[3]
    k2, k4, k5 = xp.dtype.type(2), xp.dtype.type(4), xp.dtype.type(5)  # no float64 promotion
    tiles = th * tw
    for t in prange(nb * c_in):
        n = t // c_in
        c = t - n * c_in
        p = np.empty((6, th, wp), xp.dtype)
        for ty in range(th):
            h = 4 * ty
            d0, d1, d2 = xp[n, c, h], xp[n, c, h + 1], xp[n, c, h + 2]
            d3, d4, d5 = xp[n, c, h + 3], xp[n, c, h + 4], xp[n, c, h + 5]
            for w in range(wp):
                e0, e1, e2, e3, e4, e5 = _bt4(d0[w], d1[w], d2[w], d3[w], d4[w], d5[w],
                                              k2, k4, k5)
                p[0, ty, w], p[1, ty, w], p[2, ty, w] = e0, e1, e2
                p[3, ty, w], p[4, ty, w], p[5, ty, w] = e3, e4, e5
        b0 = n * tiles
        for i in range(6):
            v0, v1 = v[6 * i, c, b0:b0 + tiles], v[6 * i + 1, c, b0:b0 + tiles]
            v2, v3 = v[6 * i + 2, c, b0:b0 + tiles], v[6 * i + 3, c, b0:b0 + tiles]
            v4, v5 = v[6 * i + 4, c, b0:b0 + tiles], v[6 * i + 5, c, b0:b0 + tiles]
            for ty in range(th):
                pi = p[i, ty]
                for tx in range(tw):
                    w = 4 * tx
                    j = ty * tw + tx
                    v0[j], v1[j], v2[j], v3[j], v4[j], v5[j] = _bt4(
                        pi[w], pi[w + 1], pi[w + 2], pi[w + 3], pi[w + 4], pi[w + 5], k2, k4, k5)


@pjit()
def _output_planes4(m, y, b, has_bias, n0, nb, th, tw):
    """_output_transform4 one image plane at a time (see :func:`_forward`): T = A^T M for
    all the plane's tiles, then each row of T times A."""
    o_ch, ho, wo = y.shape[1], y.shape[2], y.shape[3]
    k2, k4, k8 = m.dtype.type(2), m.dtype.type(4), m.dtype.type(8)  # no float64 promotion
    tiles = th * tw
    full = wo // 4  # tiles whose 4 columns all lie inside y
    for t in prange(nb * o_ch):
        n = t // o_ch
        o = t - n * o_ch
        bias = b[o] if has_bias else m.dtype.type(0)
        tt = np.empty((4, 6, tiles), m.dtype)
        b0 = n * tiles
        for j in range(6):  # T = A^T M, column j of every tile
            m0, m1 = m[j, o, b0:b0 + tiles], m[6 + j, o, b0:b0 + tiles]
            m2, m3 = m[12 + j, o, b0:b0 + tiles], m[18 + j, o, b0:b0 + tiles]
            m4, m5 = m[24 + j, o, b0:b0 + tiles], m[30 + j, o, b0:b0 + tiles]
            for q in range(tiles):
                tt[0, j, q], tt[1, j, q], tt[2, j, q], tt[3, j, q] = _at4(
                    m0[q], m1[q], m2[q], m3[q], m4[q], m5[q], k2, k4, k8)
        for ty in range(th):
            for i in range(4):  # y row 4ty + i = T[i] A
                h = 4 * ty + i
                if h >= ho:
                    break
                t0, t1, t2 = tt[i, 0], tt[i, 1], tt[i, 2]
                t3, t4, t5 = tt[i, 3], tt[i, 4], tt[i, 5]
                yr = y[n0 + n, o, h]
                for tx in range(tw):
                    q = ty * tw + tx
                    r0, r1, r2, r3 = _at4(t0[q], t1[q], t2[q], t3[q], t4[q], t5[q], k2, k4, k8)
                    r0, r1, r2, r3 = r0 + bias, r1 + bias, r2 + bias, r3 + bias
                    w = 4 * tx
                    if tx < full:
                        yr[w] = r0
                        yr[w + 1] = r1
                        yr[w + 2] = r2
                        yr[w + 3] = r3
                    else:  # the last, clipped tile
                        yr[w] = r0
                        if w + 1 < wo:
                            yr[w + 1] = r1
                        if w + 2 < wo:
                            yr[w + 2] = r2


def _tile(ho, wo) -> int:
    """Output tile size for a layer with this output size (see F4_MIN_HW)."""
    return 4 if min(ho, wo) >= F4_MIN_HW else 2


#: (input, output, gradient-output) transforms per output tile size.
_TRANSFORMS = {2: (_input_transform, _output_transform, _grad_output_transform),
               4: (_input_transform4, _output_transform4, _grad_output_transform4)}
#: (input, output) transforms one image plane at a time, per output tile size.
_PLANES = {2: (_input_planes, _output_planes), 4: (_input_planes4, _output_planes4)}


def _forward(m: int, nb: int):
    """The (input, output) transforms for a call on ``nb`` images: with one image, the
    per-plane kernels, whose first pass runs along whole rows (the per-channel kernels' first
    pass goes column by column, which costs more on a big map than their long second pass
    saves when there is only one image's worth of tiles). Measured on one thread (AMD EPYC
    Zen 3; ``_planes`` / per-channel): one image of 56x56, 28x28 and 14x14 ResNet maps, input
    0.33 / 0.43, 0.31 / 0.36, 0.36 / 0.35 ms and output 0.25 / 0.35, 0.16 / 0.25, 0.16 /
    0.26; 2-8 images of 32x32 and 16x16 maps, input 0.34 / 0.28, 0.87 / 0.42, 1.69 / 1.33
    and output 0.18 / 0.22, 0.38 / 0.30, 0.97 / 0.91."""
    return _PLANES[m] if nb == 1 else _TRANSFORMS[m][:2]


#: One image's transforms run in channel ranges on the threads from this many transformed
#: elements (k x C x tiles) on; below, on the caller (a parallel section costs ~70 us of
#: thread wake-up on these VMs, as much as half the transforms of ResNet-18's 28x28 layer).
SPLIT_CHANNELS_MIN_ITEMS = 1 << 18


def _one_image_by_channels(ws, x, y, u, v, mm, b, bias, pads, pad_into, m, t):
    """conv3x3's batch-1 path for big maps: the padding and input transform in ranges of
    input channels, the products in ranges of Winograd points, the output transform in
    ranges of output channels, each on the threads (every transform is per channel, so the
    result does not depend on the split). Measured on 2 cores, AMD Zen 4, ResNet-18's 56x56
    layer: the serial transforms took 0.19 + 0.24 ms of its 1.33."""
    c, o = x.shape[1], y.shape[1]
    th, tw = -(-y.shape[2] // m), -(-y.shape[3] // m)
    forward_in, forward_out = _PLANES[m]
    xp = ws.get("xpad", (1, c, m * th + 2, m * tw + 2), x.dtype)  # this thread's, shared
    pt, _, pl, _ = pads

    def transform_in(lo, hi):
        pad_into(x[:, lo:hi], xp[:, lo:hi], 0, 1, pt, pl)
        forward_in(xp[:, lo:hi], v[:, lo:hi], 1, th, tw)

    def transform_out(lo, hi):
        forward_out(mm[:, lo:hi], y[:, lo:hi], bias[lo:hi] if b is not None else bias,
                    b is not None, 0, 1, th, tw)

    run_ranges(transform_in, c, threads=t)
    run_ranges(lambda lo, hi: np.matmul(u[lo:hi], v[lo:hi], out=mm[lo:hi]), len(u),
               threads=t)
    run_ranges(transform_out, o, threads=t)


def conv3x3(ws, x, w, b, y, pads, pad_into, flip=False):
    """y = conv2d(x, w) (+ b) for 3x3 stride-1 kernels; ``pads`` = (top, bottom, left, right).

    ``pad_into(x, xp, n0, nb, pt, pl)`` copies images into the zero-padded chunk buffer. With
    ``flip``, the kernel is w transposed (O <-> C) and rotated by 180 degrees. Batch chunks
    run on the cores in parallel (pad, input transform, GEMMs, output transform each).
    """
    n, c = x.shape[:2]
    o, ho, wo = y.shape[1:]
    m = _tile(ho, wo)
    k = (m + 2) ** 2
    th, tw = -(-ho // m), -(-wo // m)
    u = _weight_transform(ws, w, o, c, flip, m)
    bias = b if b is not None else np.zeros(1, x.dtype)
    pt, _, pl, _ = pads
    tiles = th * tw
    t = _threads.num_threads()
    if 1 < t and n < t:  # fewer images than threads (batch-1 inference): a batch chunk per
        # thread would leave threads idle, so the products are split by Winograd point
        v = ws.get("wino_v_all", (k, c, n * tiles), x.dtype)
        mm = ws.get("wino_m_all", (k, o, n * tiles), x.dtype)
        if n == 1 and v.size >= SPLIT_CHANNELS_MIN_ITEMS:
            _one_image_by_channels(ws, x, y, u, v, mm, b, bias, pads, pad_into, m, t)
            return

        def transform_in(n0, m_):
            xp = ws.get("xpad", (m_, c, m * th + 2, m * tw + 2), x.dtype)
            pad_into(x, xp, n0, m_, pt, pl)
            _forward(m, m_)[0](xp, v[:, :, n0 * tiles:(n0 + m_) * tiles], m_, th, tw)

        _transform_images(n, t, transform_in)
        run_ranges(lambda lo, hi: np.matmul(u[lo:hi], v[lo:hi], out=mm[lo:hi]), k, threads=t)
        _transform_images(n, t, lambda n0, m_: _forward(m, m_)[1](
            mm[:, :, n0 * tiles:(n0 + m_) * tiles], y, bias, b is not None, n0, m_, th, tw))
        return

    def chunk(span):
        n0, m_ = span
        forward_in, forward_out = _forward(m, m_)
        xp = ws.get("xpad", (m_, c, m * th + 2, m * tw + 2), x.dtype)
        pad_into(x, xp, n0, m_, pt, pl)
        v = ws.get("wino_v", (k, c, m_ * th * tw), x.dtype)
        forward_in(xp, v, m_, th, tw)
        mm = ws.get("wino_m", (k, o, m_ * th * tw), x.dtype)
        np.matmul(u, v, out=mm)
        forward_out(mm, y, bias, b is not None, n0, m_, th, tw)

    run_chunks(chunk, _spans(n, k * c * th * tw * x.itemsize, th * tw))


def conv3x3_backward_x(ws, dy, w, dx, pads, pad_into):
    """dx of a 3x3 stride-1 convolution: the convolution of dy with flipped, transposed w."""
    pt, pb, pl, pr = pads
    conv3x3(ws, dy, w, None, dx, (2 - pt, 2 - pb, 2 - pl, 2 - pr), pad_into, flip=True)


def conv3x3_backward_w(ws, dy, x, dw, pads, pad_into):
    """dW of a 3x3 stride-1 convolution: dW = G^T [sum_t (A dY_t A^T) * (B^T d_t B)] G, i.e.
    GEMMs ``dU[k] = Z[k] @ V[k].T`` whose inner dimension is the number of tiles. The chunks
    of images are summed in a fixed group per thread (:class:`._threads.ThreadSums`), each into
    its own dU; those partial sums are added in group order at the end."""
    n, c = x.shape[:2]
    o, ho, wo = dy.shape[1:]
    m = _tile(ho, wo)
    k = (m + 2) ** 2
    grad_out = _TRANSFORMS[m][2]
    th, tw = -(-ho // m), -(-wo // m)
    pt, _, pl, _ = pads
    tiles = th * tw
    t = _by_points(n, tiles)
    if t:  # transforms by image range, one product over all tiles per point: no partial sums
        v = ws.get("wino_v_all", (k, c, n * tiles), x.dtype)
        z = ws.get("wino_m_all", (k, o, n * tiles), x.dtype)

        def transform(n0, m_):
            xp = ws.get("xpad", (m_, c, m * th + 2, m * tw + 2), x.dtype)
            pad_into(x, xp, n0, m_, pt, pl)
            part = slice(n0 * tiles, (n0 + m_) * tiles)
            _forward(m, m_)[0](xp, v[:, :, part], m_, th, tw)
            grad_out(dy, z[:, :, part], n0, m_, th, tw)

        _transform_images(n, t, transform)
        du = ws.get("wino_du", (k, o, c), x.dtype)
        run_ranges(lambda lo, hi: np.matmul(z[lo:hi], v[lo:hi].transpose(0, 2, 1),
                                            out=du[lo:hi]), k, threads=t)
        _weight_grad_transform(du, dw)
        return
    sums = ThreadSums(ws.get("wino_du", (k, o, c), x.dtype),  # a buffer per group
                      lambda g: ws.get(f"wino_du{g}", (k, o, c), x.dtype))

    def chunk(span):
        n0, m_ = span
        xp = ws.get("xpad", (m_, c, m * th + 2, m * tw + 2), x.dtype)
        pad_into(x, xp, n0, m_, pt, pl)
        v = ws.get("wino_v", (k, c, m_ * th * tw), x.dtype)
        _forward(m, m_)[0](xp, v, m_, th, tw)
        z = ws.get("wino_m", (k, o, m_ * th * tw), x.dtype)
        grad_out(dy, z, n0, m_, th, tw)
        target, acc = sums.target(lambda: ws.get("wino_du_part", (k, o, c), x.dtype))
        np.matmul(z, v.transpose(0, 2, 1), out=target)
        if acc is not None:
            acc += target

    sums.run(chunk, _spans(n, k * max(c, o) * th * tw * x.itemsize, th * tw))
    _weight_grad_transform(sums.finish(), dw)
