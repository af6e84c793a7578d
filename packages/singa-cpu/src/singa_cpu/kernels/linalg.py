"""Matrix products through numpy's BLAS."""

from __future__ import annotations

import numpy as np


def _matmul(ins, outs, attrs):
    a, b = ins
    out = outs[0]
    if out.ndim == 0:
        out[...] = np.dot(a, b)
    else:
        np.matmul(a, b, out=out)


def _gemm(ins, outs, attrs):
    a, b, c = ins
    out = outs[0]
    if attrs.get("transA"):
        a = a.T
    if attrs.get("transB"):
        b = b.T
    alpha = attrs.get("alpha", 1.0)
    beta = attrs.get("beta", 0.0)
    if beta == 0.0:
        np.matmul(a, b, out=out)
        if alpha != 1.0:
            out *= alpha
        return
    prod = np.matmul(a, b)  # out may alias c: form the product before touching out
    if alpha != 1.0:
        prod *= alpha
    np.multiply(c, beta, out=out)
    out += prod


def _axpy(ins, outs, attrs):
    alpha, x, y = ins
    np.add(y, x * alpha.reshape(()), out=outs[0])


KERNELS = {"Matmul": _matmul, "GEMM": _gemm, "Axpy": _axpy}
