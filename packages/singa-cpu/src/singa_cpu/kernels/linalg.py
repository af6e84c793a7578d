"""Matrix products through numpy's BLAS."""

from __future__ import annotations

import numpy as np
from singa.backend import Kernel

from . import _threads
from ._float16 import via_float32
from ._threads import matmul, single_threaded_blas, split_flat

#: Axpy on at least this many elements is split across the cores (measured on 2 cores: 1M
#: floats 145 us on one thread vs 176 us split; 2M floats 502 vs 300 us).
PARALLEL_MIN_ITEMS = 1 << 21


def _as_rows(a, b, out):
    """``a (..., K) @ b (K, N)`` as one 2-D product of ``M = prod(a.shape[:-1])`` rows when
    ``a`` and ``out`` are C-contiguous (a Linear layer on NHWC activations, as in ConvNeXt):
    numpy's matmul runs one GEMM per slice of the leading axes, each packing all of ``b``
    again; on one AMD Zen 4 core, (1, 7, 7, 768) @ (768, 3072) took 22.4 ms so and 3.3 ms as
    (49, 768) @ (768, 3072), (1, 14, 14, 384) @ (384, 1536) 3.7 -> 2.3 ms. Else the operands
    unchanged."""
    if (a.ndim > 2 and b.ndim == 2 and out.ndim == a.ndim and a.flags.c_contiguous
            and out.flags.c_contiguous):
        return a.reshape(-1, a.shape[-1]), b, out.reshape(-1, out.shape[-1])
    return a, b, out


def _matmul(ins, outs, attrs):
    a, b = ins
    out = outs[0]
    if out.ndim == 0:
        with single_threaded_blas():
            out[...] = np.dot(a, b)
    else:
        matmul(*_as_rows(a, b, out))


def _bind_matmul(ins, outs, attrs):
    """A product that is 2-D (or one as :func:`_as_rows`) and that :func:`._threads.matmul`
    would not split (see ``bind`` in docs/plugin-authoring.md): numpy's matmul on the bound
    arrays, nothing decided per call."""
    a, b, out = _as_rows(*ins, outs[0])
    if (out.ndim != 2 or a.ndim != 2 or b.ndim != 2
            or out.size * a.shape[-1] >= _threads.PARALLEL_MIN_MACS):
        return None

    return lambda _ins, _outs, _attrs: _threads.serial_matmul(a, b, out)


_matmul = Kernel(_matmul, bind=_bind_matmul)


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


#: Axpy on more than two blocks of this many elements runs block by block: ``alpha * x`` of a
#: block stays in cache until it is added to y (numpy has no one-pass ``a*x + y``; the whole
#: temporary went to memory and back). The same two roundings, so the same bits. Measured on a
#: 2-vCPU Intel Xeon, float32: 401408 elements 212 -> 119 us, 262144 87 -> 63 us; blocks of
#: 4096 were slower than no blocks (Python per block), 16384 in between.
AXPY_BLOCK = 1 << 16


def _axpy_serial(ins, outs, attrs):
    alpha, x, y = ins
    out = outs[0]
    a = alpha.reshape(())
    n = out.size
    if (n <= 2 * AXPY_BLOCK or x.shape != out.shape or y.shape != out.shape
            or not (x.flags.c_contiguous and y.flags.c_contiguous and out.flags.c_contiguous)
            or (out is not y and out is not x
                and (np.may_share_memory(out, x) or np.may_share_memory(out, y)))):
        np.add(y, x * a, out=out)
        return
    # every block reads its own elements of x and y before writing the same ones of out, so
    # out may be x or y itself
    xf, yf, of = x.reshape(-1), y.reshape(-1), out.reshape(-1)
    tmp = np.empty(AXPY_BLOCK, np.result_type(x, a))
    for lo in range(0, n, AXPY_BLOCK):
        hi = min(lo + AXPY_BLOCK, n)
        t = tmp[:hi - lo]
        np.multiply(xf[lo:hi], a, out=t)
        np.add(yf[lo:hi], t, out=of[lo:hi])


# float16: computed in float32 and rounded once (two numpy passes would round twice)
_axpy = split_flat(via_float32(_axpy_serial), lambda: PARALLEL_MIN_ITEMS, whole=(0,))


# float16 GEMM: the product, alpha and beta in float32, rounded once (three float16 passes
# would round three times; the kit compares float16 within one ulp)
KERNELS = {"Matmul": _matmul, "GEMM": via_float32(_gemm), "Axpy": _axpy}
