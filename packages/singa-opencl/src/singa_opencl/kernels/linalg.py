"""Matrix products: GEMM, Matmul (GEMV, GEMM, batched with broadcasting) and Axpy.

Both ops reduce to one batched strided ``Y = alpha * A @ B + beta * C``; ``cl/gemm.cl`` packs A
and B into register-blocking panels and computes GM_MR x GM_NR tiles per work-item.
"""

from __future__ import annotations

import math

import numpy as np
from singa import _dtype
from singa.errors import KernelError

from .._build import CL_TYPES, CLType, prelude, read_source
from ._common import EW_LAYOUT, bcast_strides, claim, collapse, make_kernel

GM_MAXD = 6
#: (rows per tile, vector width); a tile is MR x (2 * width). float: 12 x 32 in 24 float16
#: accumulators; double: 12 x 16 in 24 double8.
TILES = {"float": (12, 16), "double": (12, 8)}


def _program(device, op: str, t: CLType):
    mr, vw = TILES[t.compute]
    defs = (f"#define GM_MR {mr}\n#define GM_NR {2 * vw}\n"
            f"#define GM_VT {t.compute}{vw}\n#define GM_VLOAD vload{vw}\n"
            f"#define GM_VSTORE vstore{vw}\n")
    src = prelude(T=t, O=t) + defs + read_source("gemm.cl")
    return device.programs.program(src, op, f"gemm[{t.name}]"), mr, 2 * vw


def batched_gemm(device, op: str, y, a, b, batch_shape, sts, m, n, k, a_st, b_st,
                 alpha=1.0, beta=0.0, c=None, c_st=(0, 0)) -> None:
    """Y[bt] = alpha * A[bt] @ B[bt] + beta * C[bt] over the batch dims ``batch_shape``.

    ``sts`` are the batch strides of (y, a, b, c); ``a_st`` = (row, col) strides of op(A)
    (m x k), ``b_st`` of op(B) (k x n), ``c_st`` of C broadcast to (m, n), and y's own last two
    strides give the output layout.
    """
    if m == 0 or n == 0:
        return
    cshape, csts = collapse(tuple(batch_shape), [tuple(s) for s in sts])
    if len(cshape) > GM_MAXD:
        raise KernelError(f"{op}: more than {GM_MAXD} non-mergeable batch dims")
    nb = math.prod(cshape)
    if nb == 0:
        return
    lay = np.zeros((), EW_LAYOUT)
    lay["shape"][:len(cshape)] = cshape
    for field, s in zip(("sy", "sa", "sb", "sc"), csts):
        lay[field][:len(cshape)] = s
    t = CL_TYPES[y.dt]
    prg, mr, nr = _program(device, op, t)
    mp, np_ = -(-m // mr) * mr, -(-n // nr) * nr
    isz = np.dtype(t.scalar).itemsize
    progs = device.programs
    ap, free_a = device.workspace(nb * mp * max(k, 1) * isz)
    bp, free_b = device.workspace(nb * np_ * max(k, 1) * isz)
    sc = t.scalar
    if k > 0:
        pa = progs.kernel(prg, "pack_a", [np.int32] * 3 + [None, None] + [np.int32] * 3 + [None])
        device.launch(pa, (k, mp, nb), None, m, k, len(cshape), lay, a.buf, a.off,
                      a_st[0], a_st[1], ap)
        pb = progs.kernel(prg, "pack_b", [np.int32] * 3 + [None, None] + [np.int32] * 3 + [None])
        device.launch(pb, (np_, k, nb), None, k, n, len(cshape), lay, b.buf, b.off,
                      b_st[0], b_st[1], bp)
    g = progs.kernel(prg, "gemm_tile", [np.int32] * 4 + [None, None, None, sc, sc, np.int32,
                                                         None, np.int32, np.int32, np.int32,
                                                         None, np.int32, np.int32, np.int32])
    cv = c if c is not None else y
    device.launch(g, (np_ // nr, mp // mr, nb), (1, 1, 1), m, n, k, len(cshape), lay, ap, bp,
                  sc(alpha), sc(beta), int(c is not None and beta != 0.0), cv.buf, cv.off,
                  c_st[0], c_st[1], y.buf, y.off, y.strides[-2], y.strides[-1])
    free_a()
    free_b()


def kernels(device) -> dict:
    def matmul(ins, outs, attrs):
        a, b = ins
        y = outs[0]
        a1, b1 = a.ndim == 1, b.ndim == 1
        if a1 and b1:
            yv = y.with_layout((1, 1), (0, 0))
        elif a1:
            yv = y.with_layout(y.shape[:-1] + (1,) + y.shape[-1:],
                               y.strides[:-1] + (0,) + y.strides[-1:])
        elif b1:
            yv = y.with_layout(y.shape + (1,), y.strides + (0,))
        else:
            yv = y
        if a1:
            a = a.with_layout((1,) + a.shape, (0,) + a.strides)
        if b1:
            b = b.with_layout(b.shape + (1,), b.strides + (0,))
        m, k = a.shape[-2:]
        n = b.shape[-1]
        batch = yv.shape[:-2]
        sts = [yv.strides[:-2],
               bcast_strides(a.with_layout(a.shape[:-2], a.strides[:-2]), batch),
               bcast_strides(b.with_layout(b.shape[:-2], b.strides[:-2]), batch),
               (0,) * len(batch)]
        batched_gemm(device, "Matmul", yv, a, b, batch, sts, m, n, k, a.strides[-2:],
                     b.strides[-2:])

    def gemm(ins, outs, attrs):
        a, b, c = ins
        y = outs[0]
        a_st = a.strides[::-1] if attrs.get("transA") else a.strides
        b_st = b.strides[::-1] if attrs.get("transB") else b.strides
        m, n = y.shape
        k = a.shape[0] if attrs.get("transA") else a.shape[1]
        beta = float(attrs.get("beta", 0.0))
        batched_gemm(device, "GEMM", y, a, b, (), [(), (), (), ()], m, n, k, a_st, b_st,
                     float(attrs.get("alpha", 1.0)), beta, c if beta != 0.0 else None,
                     bcast_strides(c, (m, n)))

    float_dts = (_dtype.kFloat32, _dtype.kFloat16, _dtype.kDouble)
    return {
        "Matmul": make_kernel(device, "Matmul", matmul, claim(device, "Matmul", float_dts)),
        "GEMM": make_kernel(device, "GEMM", gemm, claim(device, "GEMM", float_dts)),
    }
