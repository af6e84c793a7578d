"""Convolution forward, backward-data and backward-filter through the packed GEMM.

The GEMM's B operand is packed straight from the image (implicit im2col: ``pack_b_im2col`` in
``cl/conv.cl``), so the forward pass and the filter gradient need no column buffer; the data
gradient computes the columns with one GEMM per image chunk and folds them with ``col2im``.
Work is split into chunks of images so that workspaces stay below :data:`WORKSPACE_BYTES`.
"""

from __future__ import annotations

import numpy as np
from singa.backend import conv2d_geometry

from .._build import CL_TYPES
from ..device import CLView
from ._common import make_kernel, roundup
from .linalg import Batch, _launch, gemm_call, gemm_program, pack_matrix_a, pack_matrix_b

#: Upper bound for one chunk's packed operands / column buffer.
WORKSPACE_BYTES = 64 << 20

_I = np.int32
CV_GEOM = np.dtype([(f, np.int32) for f in
                    ("C", "H", "W", "G", "cg", "kh", "kw", "sh", "sw", "pt", "pl", "dh", "dw",
                     "ho", "wo")])


def _geom_struct(g):
    return _struct(C=g.c, H=g.h, W=g.w, G=g.group, cg=g.c // g.group, kh=g.kh, kw=g.kw,
                   sh=g.sh, sw=g.sw, pt=g.pt, pl=g.pl, dh=g.dh, dw=g.dw, ho=g.ho, wo=g.wo)


def _flipped_geom_struct(g):
    """Geometry of dx = conv(dy, flipped W^T) for a stride-1 convolution: the image is dy
    (O channels, ho x wo), padded by d*(k-1) - pad, and the output plane is H x W."""
    return _struct(C=g.o, H=g.ho, W=g.wo, G=g.group, cg=g.o // g.group, kh=g.kh, kw=g.kw,
                   sh=1, sw=1, pt=g.dh * (g.kh - 1) - g.pt, pl=g.dw * (g.kw - 1) - g.pl,
                   dh=g.dh, dw=g.dw, ho=g.h, wo=g.w)


def _flipped_is_cheaper(g) -> bool:
    """Per image: the flipped convolution packs O/G*kh*kw*H*W values; the column route packs
    dy (O/G*P), writes and folds the columns (C/G*kh*kw*P, counted 3x for col2im's loop)."""
    og, cg, khw, p = g.o // g.group, g.c // g.group, g.kh * g.kw, g.ho * g.wo
    return og * khw * g.h * g.w < og * p + 3 * cg * khw * p


def _struct(**fields):
    s = np.zeros((), CV_GEOM)
    for f, v in fields.items():
        s[f] = v
    return s


def _chunk(n: int, per_image: int) -> int:
    return max(1, min(n, WORKSPACE_BYTES // max(per_image, 1)))


def kernels(device) -> dict:
    progs = device.programs

    def conv2d(ins, outs, attrs):
        x, w = ins[0], ins[1]
        bias = ins[2] if len(ins) > 2 else None
        y = outs[0]
        g = conv2d_geometry("Conv2d", x.shape, w.shape, attrs)
        G, og, cg = g.group, g.o // g.group, g.c // g.group
        kc, P = cg * g.kh * g.kw, g.ho * g.wo
        gp = gemm_program(device, "Conv2d", CL_TYPES[y.dtype_code])
        nr = gp.nr
        geo = _geom_struct(g)
        pk = progs.kernel(gp.program, "pack_b_im2col", [_I] * 3 + [None, None, _I, None])
        nn = _chunk(g.n, G * kc * roundup(P, nr) * 4)
        for n0 in range(0, g.n, nn):
            cnt = min(nn, g.n - n0)
            yv = y.with_layout(y.shape, y.strides, y.offset + n0 * g.o * P)
            # batch (image, group); B's strides only mark both dims as varying
            batch = Batch("Conv2d", (cnt, G),
                          [(g.o * P, og * P), (0, og * kc), (G, 1), (0, og)])

            def pack_b(bp, k, n, count, nd, lay, n0=n0):
                total = count * -(-n // nr) * k
                _launch(device, pk, total, k, n, n0, geo, x.buf, x.offset, bp)

            gemm_call(device, "Conv2d", gp, yv, (P, 1), og, P, kc, batch,
                      pack_matrix_a(device, gp, w, (kc, 1)), pack_b, 1.0,
                      1.0 if bias is not None else 0.0, bias, (1, 0))

    def conv2d_backward_x(ins, outs, attrs):
        dy, w = ins
        dx = outs[0]
        g = conv2d_geometry("Conv2dBackwardX", tuple(attrs["x_shape"]), w.shape, attrs)
        t = CL_TYPES[dx.dtype_code]
        gp = gemm_program(device, "Conv2dBackwardX", t)
        if g.sh == 1 and g.sw == 1 and _flipped_is_cheaper(g):
            _backward_x_as_conv(gp, g, dy, w, dx)
        else:
            _backward_x_col2im(gp, g, dy, w, dx, t)

    def _backward_x_as_conv(gp, g, dy, w, dx):
        """Stride 1: dx is the convolution of dy with the flipped, transposed filters, so the
        GEMM packs dy with implicit im2col and writes dx directly (no column buffer)."""
        G, og, cg = g.group, g.o // g.group, g.c // g.group
        khw = g.kh * g.kw
        hw = g.h * g.w
        nr = gp.nr
        geo = _flipped_geom_struct(g)
        pk = progs.kernel(gp.program, "pack_b_im2col", [_I] * 3 + [None, None, _I, None])
        # A[c, (o, r)] = W[g*og + o, c, khw - 1 - r]: a two-level K with a reversed inner part
        wf = w.with_layout(w.shape, w.strides, w.offset + khw - 1)
        nn = _chunk(g.n, G * og * khw * roundup(hw, nr) * 4)
        for n0 in range(0, g.n, nn):
            cnt = min(nn, g.n - n0)
            yv = dx.with_layout(dx.shape, dx.strides, dx.offset + n0 * g.c * hw)
            batch = Batch("Conv2dBackwardX", (cnt, G),
                          [(g.c * hw, cg * hw), (0, og * cg * khw), (G, 1), (0, 0)])

            def pack_b(bp, k, n, count, nd, lay, n0=n0):
                _launch(device, pk, count * -(-n // nr) * k, k, n, n0, geo, dy.buf, dy.offset,
                        bp)

            gemm_call(device, "Conv2dBackwardX", gp, yv, (hw, 1), cg, hw, og * khw, batch,
                      pack_matrix_a(device, gp, wf, (khw, -1), khw, cg * khw), pack_b)

    def _backward_x_col2im(gp, g, dy, w, dx, t):
        G, og, cg = g.group, g.o // g.group, g.c // g.group
        kc, P = cg * g.kh * g.kw, g.ho * g.wo
        mr, nr = gp.mr, gp.nr
        geo = _geom_struct(g)
        c2i = progs.kernel(gp.program, "col2im", [_I, _I, None, None, None, _I])
        isz = max(np.dtype(t.scalar).itemsize, 4)
        nn = _chunk(g.n, G * roundup(kc, mr) * roundup(P, nr) * isz * 2)
        cols, free = device.workspace(nn * G * kc * P * isz)
        for n0 in range(0, g.n, nn):
            cnt = min(nn, g.n - n0)
            colv = CLView(cols, 0, (cnt, G, kc, P), (G * kc * P, kc * P, P, 1), dx.dtype_code, True)
            dyv = dy.with_layout(dy.shape, dy.strides, dy.offset + n0 * g.o * P)
            batch = Batch("Conv2dBackwardX", (cnt, G),
                          [(G * kc * P, kc * P), (0, og * kc), (g.o * P, og * P), (0, 0)])
            gemm_call(device, "Conv2dBackwardX", gp, colv, (P, 1), kc, P, og, batch,
                      pack_matrix_a(device, gp, w, (1, kc)),
                      pack_matrix_b(device, gp, dyv, (P, 1)))
            total = cnt * g.c * g.h * g.w
            ls = device.local_size
            device.launch(c2i, (roundup(total, ls),), (ls,), cnt, n0, geo, cols, dx.buf,
                          dx.offset)
        free()

    def conv2d_backward_w(ins, outs, attrs):
        dy, x = ins
        dw = outs[0]
        g = conv2d_geometry("Conv2dBackwardW", x.shape, tuple(attrs["w_shape"]), attrs)
        G, og, cg = g.group, g.o // g.group, g.c // g.group
        kc, P = cg * g.kh * g.kw, g.ho * g.wo
        gp = gemm_program(device, "Conv2dBackwardW", CL_TYPES[dw.dtype_code])
        nr = gp.nr
        geo = _geom_struct(g)
        pk = progs.kernel(gp.program, "pack_b_im2col_t", [_I] * 4 + [None, None, _I, None])
        nn = _chunk(g.n, G * P * roundup(kc, nr) * 4)
        for n0 in range(0, g.n, nn):
            cnt = min(nn, g.n - n0)
            first = n0 == 0
            dyv = dy.with_layout(dy.shape, dy.strides, dy.offset + n0 * g.o * P)
            batch = Batch("Conv2dBackwardW", (G,), [(og * kc,), (og * P,), (1,), (og * kc,)])

            def pack_b(bp, k, n, count, nd, lay, n0=n0):
                total = count * -(-n // nr) * k
                _launch(device, pk, total, k, n, P, n0, geo, x.buf, x.offset, bp)

            gemm_call(device, "Conv2dBackwardW", gp, dw, (kc, 1), og, kc, cnt * P, batch,
                      pack_matrix_a(device, gp, dyv, (P, 1), P, g.o * P), pack_b,
                      1.0, 0.0 if first else 1.0, None if first else dw, (kc, 1))

    return {
        "Conv2d": make_kernel(device, "Conv2d", conv2d, contiguous_inputs=True),
        "Conv2dBackwardX": make_kernel(device, "Conv2dBackwardX", conv2d_backward_x,
                                       contiguous_inputs=True),
        "Conv2dBackwardW": make_kernel(device, "Conv2dBackwardW", conv2d_backward_w,
                                       contiguous_inputs=True),
    }
