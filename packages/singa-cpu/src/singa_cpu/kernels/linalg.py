"""Matrix products through numpy's BLAS."""

from __future__ import annotations

import numpy as np

from ._float16 import via_float32
from ._threads import matmul, single_threaded_blas, split_flat

#: Axpy on at least this many elements is split across the cores (measured on 2 cores: 1M
#: floats 145 us on one thread vs 176 us split; 2M floats 502 vs 300 us).
PARALLEL_MIN_ITEMS = 1 << 21


def _matmul(ins, outs, attrs):
    a, b = ins
    out = outs[0]
    if out.ndim == 0:
        with single_threaded_blas():
            out[...] = np.dot(a, b)
    else:
        matmul(a, b, out)


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
        matmul(a, b, out)
        if alpha != 1.0:
            out *= alpha
        return
    prod = np.empty(out.shape, out.dtype)  # out may alias c: form the product first
    matmul(a, b, prod)
    if alpha != 1.0:
        prod *= alpha
    np.multiply(c, beta, out=out)
    out += prod


def _axpy_serial(ins, outs, attrs):
    alpha, x, y = ins
    np.add(y, x * alpha.reshape(()), out=outs[0])


# float16: computed in float32 and rounded once (two numpy passes would round twice)
_axpy = split_flat(via_float32(_axpy_serial), lambda: PARALLEL_MIN_ITEMS, whole=(0,))


# float16 GEMM: the product, alpha and beta in float32, rounded once (three float16 passes
# would round three times; the kit compares float16 within one ulp)
KERNELS = {"Matmul": _matmul, "GEMM": via_float32(_gemm), "Axpy": _axpy}
