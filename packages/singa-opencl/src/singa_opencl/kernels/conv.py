"""Convolution forward, backward-data and backward-filter through the packed GEMM.

The GEMM's B operand is packed straight from the image (implicit im2col: ``pack_b_im2col`` in
``cl/conv.cl``), so the forward pass and the filter gradient need no column buffer; the data
gradient computes the columns with one GEMM per image chunk and folds them with ``col2im``.
Work is split into chunks of images so that workspaces stay below :data:`WORKSPACE_BYTES`.
"""

from __future__ import annotations

import numpy as np
from singa.ops._nn_ops import conv2d_geometry

from .._build import CL_TYPES
from ._common import make_kernel, roundup
from .linalg import batch_layout, gemm_call, gemm_program, pack_matrix_a

#: Upper bound for one chunk's packed operands / column buffer.
WORKSPACE_BYTES = 64 << 20

_I = np.int32
CV_GEOM = np.dtype([(f, np.int32) for f in
                    ("C", "H", "W", "G", "cg", "kh", "kw", "sh", "sw", "pt", "pl", "dh", "dw",
                     "ho", "wo")])


def _geom_struct(g):
    s = np.zeros((), CV_GEOM)
    for f, v in (("C", g.c), ("H", g.h), ("W", g.w), ("G", g.group), ("cg", g.c // g.group),
                 ("kh", g.kh), ("kw", g.kw), ("sh", g.sh), ("sw", g.sw), ("pt", g.pt),
                 ("pl", g.pl), ("dh", g.dh), ("dw", g.dw), ("ho", g.ho), ("wo", g.wo)):
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
        prg, mr, nr = gemm_program(device, "Conv2d", CL_TYPES[y.dt])
        geo = _geom_struct(g)
        pk = progs.kernel(prg, "pack_b_im2col", [_I, _I, None, None, _I, None])
        nn = _chunk(g.n, G * kc * roundup(P, nr) * 4)
        for n0 in range(0, g.n, nn):
            cnt = min(nn, g.n - n0)
            yv = y.with_layout(y.shape, y.strides, y.off + n0 * g.o * P)
            xo = x.off + n0 * g.c * g.h * g.w
            nb, nd, lay = batch_layout("Conv2d", (cnt, G),
                                       [(g.o * P, og * P), (0, og * kc), (0, 0), (0, og)])

            def pack_b(bp, k, n, np_, nb_, nd_, lay_, xo=xo, nb=nb):
                device.launch(pk, (np_, k, nb), None, k, n, geo, x.buf, xo, bp)

            gemm_call(device, "Conv2d", prg, mr, nr, yv, (P, 1), og, P, kc, nb, nd, lay,
                      pack_matrix_a(device, prg, w, (kc, 1)), pack_b, 1.0,
                      1.0 if bias is not None else 0.0, bias, (1, 0))

    def conv2d_backward_x(ins, outs, attrs):
        dy, w = ins
        dx = outs[0]
        g = conv2d_geometry("Conv2dBackwardX", tuple(attrs["x_shape"]), w.shape, attrs)
        G, og, cg = g.group, g.o // g.group, g.c // g.group
        kc, P = cg * g.kh * g.kw, g.ho * g.wo
        t = CL_TYPES[dx.dt]
        prg, mr, nr = gemm_program(device, "Conv2dBackwardX", t)
        geo = _geom_struct(g)
        c2i = progs.kernel(prg, "col2im", [_I, _I, None, None, None, _I])
        isz = max(np.dtype(t.scalar).itemsize, 4)
        nn = _chunk(g.n, G * roundup(kc, mr) * roundup(P, nr) * isz * 2)
        cols, free = device.workspace(nn * G * kc * P * isz)
        from ..device import CLView

        for n0 in range(0, g.n, nn):
            cnt = min(nn, g.n - n0)
            colv = CLView(cols, 0, (cnt, G, kc, P), (G * kc * P, kc * P, P, 1), dx.dt, True)
            dyv = dy.with_layout(dy.shape, dy.strides, dy.off + n0 * g.o * P)
            nb, nd, lay = batch_layout("Conv2dBackwardX", (cnt, G),
                                       [(G * kc * P, kc * P), (0, og * kc), (g.o * P, og * P),
                                        (0, 0)])
            from .linalg import pack_matrix_b

            gemm_call(device, "Conv2dBackwardX", prg, mr, nr, colv, (P, 1), kc, P, og, nb, nd,
                      lay, pack_matrix_a(device, prg, w, (1, kc)),
                      pack_matrix_b(device, prg, dyv, (P, 1)))
            total = cnt * g.c * g.h * g.w
            ls = device.local_size
            device.launch(c2i, (roundup(total, ls),), (ls,), cnt, n0, geo, cols, dx.buf,
                          dx.off)
        free()

    def conv2d_backward_w(ins, outs, attrs):
        dy, x = ins
        dw = outs[0]
        g = conv2d_geometry("Conv2dBackwardW", x.shape, tuple(attrs["w_shape"]), attrs)
        G, og, cg = g.group, g.o // g.group, g.c // g.group
        kc, P = cg * g.kh * g.kw, g.ho * g.wo
        prg, mr, nr = gemm_program(device, "Conv2dBackwardW", CL_TYPES[dw.dt])
        geo = _geom_struct(g)
        pk = progs.kernel(prg, "pack_b_im2col_t", [_I, _I, _I, _I, None, None, _I, None])
        nn = _chunk(g.n, G * P * roundup(kc, nr) * 4)
        for n0 in range(0, g.n, nn):
            cnt = min(nn, g.n - n0)
            first = n0 == 0
            dyv = dy.with_layout(dy.shape, dy.strides, dy.off + n0 * g.o * P)
            nb, nd, lay = batch_layout("Conv2dBackwardW", (G,),
                                       [(og * kc,), (og * P,), (0,), (og * kc,)])

            def pack_b(bp, k, n, np_, nb_, nd_, lay_, n0=n0):
                device.launch(pk, (np_, k, G), None, k, n, P, n0, geo, x.buf, x.off, bp)

            gemm_call(device, "Conv2dBackwardW", prg, mr, nr, dw, (kc, 1), og, kc, cnt * P,
                      nb, nd, lay, pack_matrix_a(device, prg, dyv, (P, 1), P, g.o * P), pack_b,
                      1.0, 0.0 if first else 1.0, None if first else dw, (kc, 1))

    return {
        "Conv2d": make_kernel(device, "Conv2d", conv2d, contiguous_inputs=True),
        "Conv2dBackwardX": make_kernel(device, "Conv2dBackwardX", conv2d_backward_x,
                                       contiguous_inputs=True),
        "Conv2dBackwardW": make_kernel(device, "Conv2dBackwardW", conv2d_backward_w,
                                       contiguous_inputs=True),
    }
