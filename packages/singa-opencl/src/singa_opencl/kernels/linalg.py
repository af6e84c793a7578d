"""Matrix products: GEMM, Matmul (GEMV, GEMM and batched GEMM with broadcasting).

Everything reduces to one batched strided ``Y = alpha * op(A) @ op(B) + beta * C``
(:func:`gemm_call`): ``cl/gemm.cl`` packs A and B into register-blocking panels (the packing
kernels are pluggable, so convolution packs B straight from the image) and computes
GM_MR x GM_NR tiles per work-item.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from singa import backend as sb
from singa.backend import KernelError

from .._build import CL_TYPES, CLType, prelude, read_source
from ._common import bcast_strides, claim, collapse, make_kernel

GM_MAXD = 6
#: Tile visiting blocks (A panels x B panels) and K chunk length; see cl/gemm.cl.
GM_BI, GM_BJ = 16, 8
K_CHUNK = 1024
#: (rows per tile, vector width); a tile is MR x (2 * width): float 12 x 32 in 24 float16
#: accumulators, double 12 x 16 in 24 double8 (AVX-512: 24 of the 32 vector registers).
TILES = {"float": (12, 16), "double": (12, 8)}

_I = np.int32


@dataclass(frozen=True)
class GemmProgram:
    """A built gemm.cl + conv.cl program and its tile: ``mr`` rows by ``nr`` columns."""

    program: object
    mr: int
    nr: int


def gemm_program(device, op: str, t: CLType):
    """gemm.cl and conv.cl built for type t, with the tile shape they were built for."""
    mr, vw = TILES[t.compute]
    defs = (f"#define GM_MR {mr}\n#define GM_NR {2 * vw}\n"
            f"#define GM_VT {t.compute}{vw}\n#define GM_VLOAD vload{vw}\n"
            f"#define GM_VSTORE vstore{vw}\n")
    src = prelude(T=t, O=t) + defs + read_source("gemm.cl") + read_source("conv.cl")
    return GemmProgram(device.programs.program(src, op, f"gemm[{t.name}]"), mr, 2 * vw)


GM_BATCH = np.dtype([(f, np.int32, GM_MAXD) for f in ("shape", "sy", "sa", "sb", "sc", "pa",
                                                     "pb")])
GM_PACK = np.dtype([("shape", np.int32, GM_MAXD), ("st", np.int32, GM_MAXD)])


class Batch:
    """The batch dims of one GEMM call, collapsed, with each operand's strides.

    ``sts`` are the strides of (Y, A, B, C) per batch dim. A dim along which A (or B) has
    stride 0 is packed once for all its batches (:meth:`packing`).
    """

    def __init__(self, op: str, shape, sts):
        cshape, csts = collapse(tuple(shape), [tuple(s) for s in sts])
        if len(cshape) > GM_MAXD:
            raise KernelError(f"{op}: more than {GM_MAXD} non-mergeable batch dims")
        self.shape, self.sts = cshape, csts
        self.nd = len(cshape)
        self.count = math.prod(cshape)

    def packing(self, which: int, panel: int):
        """``(count, gm_pack layout, packed strides)`` of operand 1 (A) or 2 (B)."""
        st = self.sts[which]
        dims = [d for d in range(self.nd) if st[d] != 0]
        packed = [0] * self.nd
        acc = panel
        for d in reversed(dims):
            packed[d] = acc
            acc *= self.shape[d]
        lay = np.zeros((), GM_PACK)
        lay["shape"][:len(dims)] = [self.shape[d] for d in dims]
        lay["st"][:len(dims)] = [st[d] for d in dims]
        return acc // panel, len(dims), lay, packed


def pack_matrix_a(device, gp: GemmProgram, a, st, kdiv=None, s_hi=0):
    """Packer for A[i, k] at a.offset + i*st[0] + (k // kdiv)*s_hi + (k % kdiv)*st[1]."""
    kern = device.programs.kernel(gp.program, "pack_a", [_I] * 3 + [None, None] + [_I] * 5 + [None])

    def pack(ap, m, k, count, nd, lay):
        total = count * -(-m // gp.mr) * k
        _launch(device, kern, total, m, k, nd, lay, a.buf, a.offset, st[0], st[1], kdiv or k,
                s_hi, ap)

    return pack


def pack_matrix_b(device, gp: GemmProgram, b, st, kdiv=None, s_hi=0):
    """Packer for B[k, j] at b.offset + (k // kdiv)*s_hi + (k % kdiv)*st[0] + j*st[1]."""
    kern = device.programs.kernel(gp.program, "pack_b", [_I] * 3 + [None, None] + [_I] * 5 + [None])

    def pack(bp, k, n, count, nd, lay):
        total = count * -(-n // gp.nr) * k
        _launch(device, kern, total, k, n, nd, lay, b.buf, b.offset, st[0], st[1], kdiv or k,
                s_hi, bp)

    return pack


def _launch(device, kern, total, *args) -> None:
    """Launch a packing kernel over exactly ``total`` rows (the kernels have no guard)."""
    if total > 0:
        device.launch_exact(kern, total, *args)


def gemm_call(device, op: str, gp: GemmProgram, y, y_st, m: int, n: int, k: int, batch: Batch,
              pack_a, pack_b, alpha=1.0, beta=0.0, c=None, c_st=(0, 0)) -> None:
    """Y[b] = alpha * A[b] @ B[b] + beta * C[b] for every batch b of ``batch``.

    ``pack_a(ap, m, k, count, nd, layout)`` and ``pack_b(bp, k, n, count, nd, layout)`` enqueue
    the packing of the operand's distinct batches (see :meth:`Batch.packing`); ``y_st``/``c_st``
    are the (row, col) strides of Y and of C broadcast to (m, n). C may alias Y (each element
    is read before it is written, by the same work-item).
    """
    if m == 0 or n == 0 or batch.count == 0:
        return
    mr, nr = gp.mr, gp.nr
    t = CL_TYPES[y.dtype_code]
    sc = t.scalar
    mp, np_ = -(-m // mr) * mr, -(-n // nr) * nr
    isz = np.dtype(sc).itemsize
    # k = 0 (an empty inner axis) is legal: Y = beta C; the panels must not be 0 wide
    na, nda, lay_a, pa = batch.packing(1, mp * max(k, 1))
    nbb, ndb, lay_b, pb = batch.packing(2, np_ * max(k, 1))
    ap, free_a = device.workspace(na * mp * max(k, 1) * isz)
    bp, free_b = device.workspace(nbb * np_ * max(k, 1) * isz)
    if k > 0:
        pack_a(ap, m, k, na, nda, lay_a)
        pack_b(bp, k, n, nbb, ndb, lay_b)
    nd = batch.nd
    lay = np.zeros((), GM_BATCH)
    lay["shape"][:nd] = batch.shape
    for field, s in zip(("sy", "sa", "sb", "sc", "pa", "pb"), (*batch.sts, pa, pb)):
        lay[field][:nd] = s
    g = device.programs.kernel(gp.program, "gemm_tile", [_I] * 6 + [None, None, None, sc, sc, _I,
                                                             None, _I, _I, _I,
                                                             None, _I, _I, _I])
    # a long K runs in chunks that accumulate into Y, unless Y is stored as half (rounding
    # every partial sum to half would lose precision)
    kc = k if t.storage == "half" or k <= K_CHUNK else K_CHUNK
    nblk = -(-(mp // mr) // GM_BI) * -(-(np_ // nr) // GM_BJ)
    gsize = (nblk * GM_BI * GM_BJ, batch.count)
    has_c = int(c is not None and beta != 0.0)
    cv = c if c is not None else y
    acc_lay = None
    for k0 in range(0, max(k, 1), max(kc, 1)):
        n_k = min(kc, k - k0)
        if k0 == 0:
            device.launch(g, gsize, (1, 1), m, n, k, k0, n_k, nd, lay, ap, bp, sc(alpha),
                          sc(beta), has_c, cv.buf, cv.offset, c_st[0], c_st[1], y.buf, y.offset,
                          y_st[0], y_st[1])
            continue
        if acc_lay is None:
            acc_lay = lay.copy()
            acc_lay["sc"] = lay["sy"]
        device.launch(g, gsize, (1, 1), m, n, k, k0, n_k, nd, acc_lay, ap, bp, sc(alpha),
                      sc(1.0), 1, y.buf, y.offset, y_st[0], y_st[1], y.buf, y.offset, y_st[0],
                      y_st[1])
    free_a()
    free_b()


def gemv(device, gp: GemmProgram, y, y_st, m, n, k, a, a_st, b, b_st, alpha=1.0, beta=0.0,
         c=None, c_st=(0, 0)) -> bool:
    """Y = alpha * A @ B + beta * C by row dot products when m or n is 1; False otherwise."""
    if n == 1:  # y[i] = A[i, :] . B[:, 0]
        rows, mat, mst, vec, vst, ys, cs = m, a, a_st, b, b_st[0], y_st[0], c_st[0]
    elif m == 1:  # y[j] = B[:, j] . A[0, :]: rows of B^T
        rows, mat, mst, vec, vst, ys, cs = n, b, b_st[::-1], a, a_st[1], y_st[1], c_st[1]
    else:
        return False
    if y.buf is mat.buf or y.buf is vec.buf:  # out aliases an input: the GEMM packs first
        return False
    if rows == 0:
        return True
    sc = CL_TYPES[y.dtype_code].scalar
    kern = device.programs.kernel(gp.program, "gemv_rows",
                                  [_I, _I, None, _I, _I, _I, None, _I, _I, sc, sc, _I, None,
                                   _I, _I, None, _I, _I])
    cv = c if c is not None else y
    _launch(device, kern, rows, rows, k, mat.buf, mat.offset, mst[0], mst[1], vec.buf, vec.offset,
            vst, sc(alpha), sc(beta), int(c is not None and beta != 0.0), cv.buf, cv.offset, cs,
            y.buf, y.offset, ys)
    return True


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
        gp = gemm_program(device, "Matmul", CL_TYPES[y.dtype_code])
        if not batch and gemv(device, gp, y, y.strides[-2:], m, n, k, a, a.strides[-2:], b,
                              b.strides[-2:]):
            return
        gemm_call(device, "Matmul", gp, y, y.strides[-2:], m, n, k, Batch("Matmul", batch, sts),
                  pack_matrix_a(device, gp, a, a.strides[-2:]),
                  pack_matrix_b(device, gp, b, b.strides[-2:]))

    def gemm(ins, outs, attrs):
        a, b, c = ins
        y = outs[0]
        a_st = a.strides[::-1] if attrs.get("transA") else a.strides
        b_st = b.strides[::-1] if attrs.get("transB") else b.strides
        m, n = y.shape
        k = a.shape[0] if attrs.get("transA") else a.shape[1]
        beta = float(attrs.get("beta", 0.0))
        gp = gemm_program(device, "GEMM", CL_TYPES[y.dtype_code])
        alpha, c_st = float(attrs.get("alpha", 1.0)), bcast_strides(c, (m, n))
        if gemv(device, gp, y, y.strides, m, n, k, a, a_st, b, b_st, alpha, beta,
                c if beta != 0.0 else None, c_st):
            return
        gemm_call(device, "GEMM", gp, y, y.strides, m, n, k, Batch("GEMM", (), [()] * 4),
                  pack_matrix_a(device, gp, a, a_st), pack_matrix_b(device, gp, b, b_st),
                  alpha, beta, c if beta != 0.0 else None, c_st)

    float_dts = (sb.kFloat32, sb.kFloat16, sb.kDouble)
    return {
        "Matmul": make_kernel(device, "Matmul", matmul, claim(device, "Matmul", float_dts)),
        "GEMM": make_kernel(device, "GEMM", gemm, claim(device, "GEMM", float_dts)),
    }
