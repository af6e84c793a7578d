"""Winograd F(2x2, 3x3) convolution for 3x3, stride-1, undilated, ungrouped layers.

Most of a ResNet's convolutions are of this kind. Winograd computes each 2x2 output tile
from a 4x4 input tile with 16 element-wise products instead of 36, so the GEMM part (16
batched GEMMs ``M[k] = U[k] @ V[k]`` over channels) needs 2.25x fewer flops than im2col;
the transforms are cheap, memory-bound loops::

    U = G g G^T  (weights, 4x4 per (o, c))      G   = [[1, 0, 0], [.5, .5, .5], [.5, -.5, .5],
    V = B^T d B  (input tile d, 4x4 per (c, t))        [0, 0, 1]]
    Y = A^T M A  (2x2 output tile)              B^T = [[1, 0, -1, 0], [0, 1, 1, 0],
                                                       [0, -1, 1, 0], [0, 1, 0, -1]]
                                                A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]

The backward pass for the input is the same convolution applied to dy with the weights
transposed (O <-> C) and flipped, and padding ``2 - pad`` on each side.
"""

from __future__ import annotations

import numpy as np

from ._parallel import pjit

prange = range  # numba.prange once compiled (see _parallel.pjit)

#: Target size of the transformed-input buffer of one batch chunk (bytes): small enough that
#: the transforms and the GEMMs of a chunk work in cache.
TILE_BYTES = 4 << 20
#: ... but at least this many tiles per chunk, so that the 16 GEMMs stay efficient.
MIN_TILES = 256

_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])


def _chunk(n: int, per_image: int, tiles_per_image: int) -> int:
    nb = max(TILE_BYTES // per_image, -(-MIN_TILES // tiles_per_image), 1)
    return min(n, nb)


def eligible(g) -> bool:
    """Whether the convolution of geometry ``g`` runs (faster) through Winograd."""
    return (g.kh == g.kw == 3 and g.sh == g.sw == 1 and g.dh == g.dw == 1 and g.group == 1
            and g.c >= 16 and g.o >= 16)


def eligible_backward_x(g) -> bool:
    return eligible(g) and max(g.pt, g.pb, g.pl, g.pr) <= 2


@pjit()
def _weight_transform(w, u, flip):
    """u[a, b, o, c] = (G g G^T)[a, b] with g = w[o, c], or with ``flip`` the kernel of the
    backward-data convolution, g[i, j] = w[c, o, 2 - i, 2 - j]."""
    o_ch, c_in = u.shape[2], u.shape[3]
    half = w.dtype.type(0.5)
    for o in prange(o_ch):
        for c in range(c_in):
            if flip:
                g00, g01, g02 = w[c, o, 2, 2], w[c, o, 2, 1], w[c, o, 2, 0]
                g10, g11, g12 = w[c, o, 1, 2], w[c, o, 1, 1], w[c, o, 1, 0]
                g20, g21, g22 = w[c, o, 0, 2], w[c, o, 0, 1], w[c, o, 0, 0]
            else:
                g00, g01, g02 = w[o, c, 0, 0], w[o, c, 0, 1], w[o, c, 0, 2]
                g10, g11, g12 = w[o, c, 1, 0], w[o, c, 1, 1], w[o, c, 1, 2]
                g20, g21, g22 = w[o, c, 2, 0], w[o, c, 2, 1], w[o, c, 2, 2]
            # R = G g (4x3), row by row
            r10 = half * (g00 + g10 + g20)
            r11 = half * (g01 + g11 + g21)
            r12 = half * (g02 + g12 + g22)
            r20 = half * (g00 - g10 + g20)
            r21 = half * (g01 - g11 + g21)
            r22 = half * (g02 - g12 + g22)
            # U = R G^T, row a from (q0, q1, q2) = R[a]
            u[0, 0, o, c] = g00
            u[0, 1, o, c] = half * (g00 + g01 + g02)
            u[0, 2, o, c] = half * (g00 - g01 + g02)
            u[0, 3, o, c] = g02
            u[1, 0, o, c] = r10
            u[1, 1, o, c] = half * (r10 + r11 + r12)
            u[1, 2, o, c] = half * (r10 - r11 + r12)
            u[1, 3, o, c] = r12
            u[2, 0, o, c] = r20
            u[2, 1, o, c] = half * (r20 + r21 + r22)
            u[2, 2, o, c] = half * (r20 - r21 + r22)
            u[2, 3, o, c] = r22
            u[3, 0, o, c] = g20
            u[3, 1, o, c] = half * (g20 + g21 + g22)
            u[3, 2, o, c] = half * (g20 - g21 + g22)
            u[3, 3, o, c] = g22


@pjit()
def _input_transform(xp, v, nb, th, tw):
    """v[k, c, (n*th + ty)*tw + tx] = (B^T d B)[k] of the 4x4 tile of xp at (2ty, 2tx)."""
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
def _output_transform(m, y, b, has_bias, n0, nb, th, tw):
    """y[n0 + n, o, 2ty + i, 2tx + j] = (A^T M A)[i, j] (+ b[o]), clipped to y's extent."""
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
def _grad_output_transform(dy, z, n0, nb, th, tw):
    """z[k, o, (n*th + ty)*tw + tx] = (A dY A^T)[k] for the 2x2 tile of dy at (2ty, 2tx)
    (cells past dy's extent count as 0); the adjoint of _output_transform."""
    o_ch, ho, wo = dy.shape[1], dy.shape[2], dy.shape[3]
    for t in prange(nb * o_ch):
        n = t // o_ch
        o = t - n * o_ch
        r0 = np.zeros(2 * tw, dy.dtype)  # rows 2ty, 2ty + 1 of dy, zero past wo / ho
        r1 = np.zeros(2 * tw, dy.dtype)
        for ty in range(th):
            h = 2 * ty
            for w in range(wo):
                r0[w] = dy[n0 + n, o, h, w]
            if h + 1 < ho:
                for w in range(wo):
                    r1[w] = dy[n0 + n, o, h + 1, w]
            else:
                r1[:] = 0
            base = (n * th + ty) * tw
            # R = A Y has rows Y0, Y0 + Y1, Y0 - Y1, -Y1; each row (q0, q1) gives Z's row
            # (q0, q0 + q1, q0 - q1, -q1)
            for i in range(4):
                z0, z1, z2, z3 = z[4 * i, o], z[4 * i + 1, o], z[4 * i + 2, o], z[4 * i + 3, o]
                for tx in range(tw):
                    a = 2 * tx
                    if i == 0:
                        q0, q1 = r0[a], r0[a + 1]
                    elif i == 1:
                        q0, q1 = r0[a] + r1[a], r0[a + 1] + r1[a + 1]
                    elif i == 2:
                        q0, q1 = r0[a] - r1[a], r0[a + 1] - r1[a + 1]
                    else:
                        q0, q1 = -r1[a], -r1[a + 1]
                    z0[base + tx] = q0
                    z1[base + tx] = q0 + q1
                    z2[base + tx] = q0 - q1
                    z3[base + tx] = -q1


@pjit()
def _weight_grad_transform(du, dw):
    """dw[o, c] = G^T du[:, :, o, c] G (the adjoint of _weight_transform)."""
    o_ch, c_in = dw.shape[0], dw.shape[1]
    half = du.dtype.type(0.5)
    for o in prange(o_ch):
        r = np.empty((3, 4), du.dtype)
        for c in range(c_in):
            for b in range(4):  # R = G^T dU, column b
                q0, q1, q2, q3 = du[0, b, o, c], du[1, b, o, c], du[2, b, o, c], du[3, b, o, c]
                r[0, b] = q0 + half * (q1 + q2)
                r[1, b] = half * (q1 - q2)
                r[2, b] = half * (q1 + q2) + q3
            for i in range(3):  # dW = R G, row i
                q0, q1, q2, q3 = r[i, 0], r[i, 1], r[i, 2], r[i, 3]
                dw[o, c, i, 0] = q0 + half * (q1 + q2)
                dw[o, c, i, 1] = half * (q1 - q2)
                dw[o, c, i, 2] = half * (q1 + q2) + q3


def conv3x3(ws, x, w, b, y, pads, pad_into, flip=False):
    """y = conv2d(x, w) (+ b) for 3x3 stride-1 kernels; ``pads`` = (top, bottom, left, right).

    ``pad_into(x, xp, n0, nb, pt, pl)`` copies images into the zero-padded chunk buffer. With
    ``flip``, the kernel is w transposed (O <-> C) and rotated by 180 degrees.
    """
    n, c = x.shape[:2]
    o, ho, wo = y.shape[1:]
    th, tw = (ho + 1) // 2, (wo + 1) // 2
    u = ws.get("wino_u", (4, 4, o, c), x.dtype)
    _weight_transform(w, u, flip)
    u = u.reshape(16, o, c)
    nb = _chunk(n, 16 * c * th * tw * x.itemsize, th * tw)
    bias = b if b is not None else np.zeros(1, x.dtype)
    pt, _, pl, _ = pads
    for n0 in range(0, n, nb):
        m_ = min(nb, n - n0)
        xp = ws.get("xpad", (m_, c, 2 * th + 2, 2 * tw + 2), x.dtype)
        pad_into(x, xp, n0, m_, pt, pl)
        v = ws.get("wino_v", (16, c, m_ * th * tw), x.dtype)
        _input_transform(xp, v, m_, th, tw)
        mm = ws.get("wino_m", (16, o, m_ * th * tw), x.dtype)
        np.matmul(u, v, out=mm)
        _output_transform(mm, y, bias, b is not None, n0, m_, th, tw)


def conv3x3_backward_x(ws, dy, w, dx, pads, pad_into):
    """dx of a 3x3 stride-1 convolution: the convolution of dy with flipped, transposed w."""
    pt, pb, pl, pr = pads
    conv3x3(ws, dy, w, None, dx, (2 - pt, 2 - pb, 2 - pl, 2 - pr), pad_into, flip=True)


def conv3x3_backward_w(ws, dy, x, dw, pads, pad_into):
    """dW of a 3x3 stride-1 convolution: dW = G^T [sum_t (A dY_t A^T) * (B^T d_t B)] G, i.e.
    16 GEMMs ``dU[k] = Z[k] @ V[k].T`` whose inner dimension is the number of tiles."""
    n, c = x.shape[:2]
    o, ho, wo = dy.shape[1:]
    th, tw = (ho + 1) // 2, (wo + 1) // 2
    nb = _chunk(n, 16 * max(c, o) * th * tw * x.itemsize, th * tw)
    du = ws.get("wino_u", (4, 4, o, c), x.dtype)
    du16 = du.reshape(16, o, c)
    pt, _, pl, _ = pads
    for n0 in range(0, n, nb):
        m_ = min(nb, n - n0)
        xp = ws.get("xpad", (m_, c, 2 * th + 2, 2 * tw + 2), x.dtype)
        pad_into(x, xp, n0, m_, pt, pl)
        v = ws.get("wino_v", (16, c, m_ * th * tw), x.dtype)
        _input_transform(xp, v, m_, th, tw)
        z = ws.get("wino_m", (16, o, m_ * th * tw), x.dtype)
        _grad_output_transform(dy, z, n0, m_, th, tw)
        if n0 == 0:
            np.matmul(z, v.transpose(0, 2, 1), out=du16)
        else:
            part = ws.get("wino_du", (16, o, c), x.dtype)
            np.matmul(z, v.transpose(0, 2, 1), out=part)
            du16 += part
    _weight_grad_transform(du, dw)
