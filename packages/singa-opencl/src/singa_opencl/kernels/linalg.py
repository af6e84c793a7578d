"""Matrix products: GEMM, Matmul (GEMV, GEMM and batched GEMM with broadcasting).

Everything reduces to one batched strided ``Y = alpha * op(A) @ op(B) + beta * C``
(:func:`gemm_call`): ``cl/gemm.cl`` packs A and B into register-blocking panels (the packing
kernels are pluggable, so convolution packs B straight from the image) and computes
GM_MR x GM_NR tiles per work-item.
"""

from __future__ import annotations

import math

import numpy as np
from singa import _dtype
from singa.errors import KernelError

from .._build import CL_TYPES, CLType, prelude, read_source
from ._common import EW_LAYOUT, bcast_strides, claim, collapse, make_kernel

GM_MAXD = 6
#: (rows per tile, vector width); a tile is MR x (2 * width): float 12 x 32 in 24 float16
#: accumulators, double 12 x 16 in 24 double8 (AVX-512: 24 of the 32 vector registers).
TILES = {"float": (12, 16), "double": (12, 8)}

_I = np.int32


def gemm_program(device, op: str, t: CLType):
    """``(program, MR, NR)``: gemm.cl and conv.cl built for type t."""
    mr, vw = TILES[t.compute]
    defs = (f"#define GM_MR {mr}\n#define GM_NR {2 * vw}\n"
            f"#define GM_VT {t.compute}{vw}\n#define GM_VLOAD vload{vw}\n"
            f"#define GM_VSTORE vstore{vw}\n")
    src = prelude(T=t, O=t) + defs + read_source("gemm.cl") + read_source("conv.cl")
    return device.programs.program(src, op, f"gemm[{t.name}]"), mr, 2 * vw


def batch_layout(op: str, batch_shape, sts):
    """``(nb, ndims, layout)`` of the batch dims with strides (y, a, b, c), collapsed."""
    cshape, csts = collapse(tuple(batch_shape), [tuple(s) for s in sts])
    if len(cshape) > GM_MAXD:
        raise KernelError(f"{op}: more than {GM_MAXD} non-mergeable batch dims")
    lay = np.zeros((), EW_LAYOUT)
    lay["shape"][:len(cshape)] = cshape
    for field, s in zip(("sy", "sa", "sb", "sc"), csts):
        lay[field][:len(cshape)] = s
    return math.prod(cshape), len(cshape), lay


def pack_matrix_a(device, prg, a, st, kdiv=None, s_hi=0):
    """Packer for A[i, k] at a.off + i*st[0] + (k // kdiv)*s_hi + (k % kdiv)*st[1]."""
    kern = device.programs.kernel(prg, "pack_a", [_I] * 3 + [None, None] + [_I] * 5 + [None])

    def pack(ap, m, k, mp, nb, nd, lay):
        device.launch(kern, (k, mp, nb), None, m, k, nd, lay, a.buf, a.off, st[0], st[1],
                      kdiv or k, s_hi, ap)

    return pack


def pack_matrix_b(device, prg, b, st, kdiv=None, s_hi=0):
    """Packer for B[k, j] at b.off + (k // kdiv)*s_hi + (k % kdiv)*st[0] + j*st[1]."""
    kern = device.programs.kernel(prg, "pack_b", [_I] * 3 + [None, None] + [_I] * 5 + [None])

    def pack(bp, k, n, np_, nb, nd, lay):
        device.launch(kern, (np_, k, nb), None, k, n, nd, lay, b.buf, b.off, st[0], st[1],
                      kdiv or k, s_hi, bp)

    return pack


def gemm_call(device, op: str, prg, mr: int, nr: int, y, y_st, m: int, n: int, k: int,
              nb: int, nd: int, lay, pack_a, pack_b, alpha=1.0, beta=0.0, c=None,
              c_st=(0, 0)) -> None:
    """Y[b] = alpha * A[b] @ B[b] + beta * C[b] for the nb batches of ``lay``.

    ``pack_a(ap, m, k, mp, nb, nd, lay)`` and ``pack_b(bp, k, n, np, nb, nd, lay)`` enqueue the
    packing of A and B; ``y_st``/``c_st`` are the (row, col) strides of Y and of C broadcast to
    (m, n). C may alias Y (it is read before Y is written, element by element).
    """
    if m == 0 or n == 0 or nb == 0:
        return
    t = CL_TYPES[y.dt]
    sc = t.scalar
    mp, np_ = -(-m // mr) * mr, -(-n // nr) * nr
    isz = np.dtype(sc).itemsize
    ap, free_a = device.workspace(nb * mp * max(k, 1) * isz)
    bp, free_b = device.workspace(nb * np_ * max(k, 1) * isz)
    if k > 0:
        pack_a(ap, m, k, mp, nb, nd, lay)
        pack_b(bp, k, n, np_, nb, nd, lay)
    g = device.programs.kernel(prg, "gemm_tile", [_I] * 4 + [None, None, None, sc, sc, _I,
                                                             None, _I, _I, _I,
                                                             None, _I, _I, _I])
    cv = c if c is not None else y
    device.launch(g, (np_ // nr, mp // mr, nb), (1, 1, 1), m, n, k, nd, lay, ap, bp,
                  sc(alpha), sc(beta), int(c is not None and beta != 0.0), cv.buf, cv.off,
                  c_st[0], c_st[1], y.buf, y.off, y_st[0], y_st[1])
    free_a()
    free_b()


def _sub(v, shape, strides):
    return v.with_layout(shape, strides)


def kernels(device) -> dict:
    def matmul(ins, outs, attrs):
        a, b = ins
        y = outs[0]
        a1, b1 = a.ndim == 1, b.ndim == 1
        # 1-D operands become (1, k) / (k, 1) matrices; the output gets the matching unit dim
        if a1 and b1:
            y = y.with_layout((1, 1), (0, 0))
        elif a1:
            y = y.with_layout(y.shape[:-1] + (1,) + y.shape[-1:],
                              y.strides[:-1] + (0,) + y.strides[-1:])
        elif b1:
            y = y.with_layout(y.shape + (1,), y.strides + (0,))
        if a1:
            a = a.with_layout((1,) + a.shape, (0,) + a.strides)
        if b1:
            b = b.with_layout(b.shape + (1,), b.strides + (0,))
        m, k = a.shape[-2:]
        n = b.shape[-1]
        batch = y.shape[:-2]
        sts = [y.strides[:-2], bcast_strides(_sub(a, a.shape[:-2], a.strides[:-2]), batch),
               bcast_strides(_sub(b, b.shape[:-2], b.strides[:-2]), batch), (0,) * len(batch)]
        nb, nd, lay = batch_layout("Matmul", batch, sts)
        prg, mr, nr = gemm_program(device, "Matmul", CL_TYPES[y.dt])
        gemm_call(device, "Matmul", prg, mr, nr, y, y.strides[-2:], m, n, k, nb, nd, lay,
                  pack_matrix_a(device, prg, a, a.strides[-2:]),
                  pack_matrix_b(device, prg, b, b.strides[-2:]))

    def gemm(ins, outs, attrs):
        a, b, c = ins
        y = outs[0]
        a_st = a.strides[::-1] if attrs.get("transA") else a.strides
        b_st = b.strides[::-1] if attrs.get("transB") else b.strides
        m, n = y.shape
        k = a.shape[0] if attrs.get("transA") else a.shape[1]
        beta = float(attrs.get("beta", 0.0))
        nb, nd, lay = batch_layout("GEMM", (), [(), (), (), ()])
        prg, mr, nr = gemm_program(device, "GEMM", CL_TYPES[y.dt])
        gemm_call(device, "GEMM", prg, mr, nr, y, y.strides, m, n, k, nb, nd, lay,
                  pack_matrix_a(device, prg, a, a_st), pack_matrix_b(device, prg, b, b_st),
                  float(attrs.get("alpha", 1.0)), beta, c if beta != 0.0 else None,
                  bcast_strides(c, (m, n)))

    float_dts = (_dtype.kFloat32, _dtype.kFloat16, _dtype.kDouble)
    return {
        "Matmul": make_kernel(device, "Matmul", matmul, claim(device, "Matmul", float_dts)),
        "GEMM": make_kernel(device, "GEMM", gemm, claim(device, "GEMM", float_dts)),
    }
