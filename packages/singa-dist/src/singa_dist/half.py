"""float32 <-> float16 conversions of the half-precision all-reduce, compiled with numba.

numpy converts float16 one element at a time through a generic cast loop (~3 ns an element on
the machines this was measured on, against ~0.5 ns for a float32 copy), and the half
all-reduce converts every element once into the wire buffer and once per rank out of the
gathered one, so the conversions are what it costs. These loops do the same conversions in
compiled code:

* :func:`to_half`: numpy's own rounding (``npy_floatbits_to_halfbits``: round to nearest
  even, overflow to infinity, subnormals, NaN payloads kept quiet) on the bit patterns, so the
  result is bitwise ``src.astype(np.float16)`` (tested on every float16 value's rounding
  boundaries and millions of random patterns);
* :func:`accumulate`: ``out = Σ_r float32(recv[r])`` in rank order, each float16 widened
  exactly through a 65536-entry table that numpy made, so the sum is bitwise the one of
  ``out[...] = recv[0]; out += recv[1]; ...``.

numba is optional (it comes with singa-cpu and with the ``".[dist]"`` extra); without it the
communicator keeps numpy's conversions. One thread: each rank of a data-parallel job owns its
cores.
"""

from __future__ import annotations

import numpy as np

__all__ = ["available", "to_half", "accumulate"]

_K = None


def _kernels():
    global _K
    if _K is None:
        try:
            from numba import njit
        except ImportError:
            _K = False
            return _K

        @njit(cache=True, nogil=True)
        def f32_to_f16_bits(src, dst):
            # every case computed, one selected: no branch, so the loop stays simple
            for i in range(src.size):
                f = np.int64(src[i])
                h_sgn = (f >> 16) & 0x8000
                f_exp = f & 0x7F800000
                f_man = f & 0x007FFFFF
                # normal range: rebias the exponent, round the mantissa to 10 bits (ties to
                # even); a carry out of the mantissa bumps the exponent, up to infinity
                s = f_man + (0x1000 if (f_man & 0x3FFF) != 0x1000 else 0)
                normal = ((f_exp - 0x38000000) >> 13) + (s >> 13)
                # float16 subnormals: the significand with its hidden bit, shifted into place;
                # the shift may drop up to 11 sticky bits, which break a tie
                fs = (0x00800000 + f_man) >> min(max(113 - (f_exp >> 23), 0), 31)
                fs += 0x1000 if ((fs & 0x3FFF) != 0x1000 or (f & 0x7FF) != 0) else 0
                sub = fs >> 13
                # overflow and infinity; a NaN keeps the top of its payload and stays a NaN
                nan = 0x7C00 + (f_man >> 13)
                nan += 1 if nan == 0x7C00 else 0
                big = nan if (f_exp == 0x7F800000 and f_man != 0) else 0x7C00
                r = big if f_exp >= 0x47800000 else (
                    normal if f_exp > 0x38000000 else (sub if f_exp >= 0x33000000 else 0))
                dst[i] = h_sgn + r

        @njit(cache=True, nogil=True)
        def widen_sum(recv, table, out):
            n, m = recv.shape
            for i in range(m):
                acc = table[recv[0, i]]
                for r in range(1, n):
                    acc += table[recv[r, i]]
                out[i] = acc

        table = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32)
        _K = (f32_to_f16_bits, widen_sum, table)
    return _K


def available() -> bool:
    """Whether numba is importable (else the communicator uses numpy's conversions)."""
    return bool(_kernels())


def to_half(src, dst) -> None:
    """``dst[...] = src`` for contiguous 1-D float32 ``src`` and float16 ``dst``."""
    _kernels()[0](src.view(np.uint32), dst.view(np.uint16))


def accumulate(recv, out) -> None:
    """``out = Σ_r float32(recv[r])`` in rank order: ``recv`` contiguous float16 of shape
    ``(ranks, m)``, ``out`` float32 of ``m``."""
    f, g, table = _kernels()
    g(recv.view(np.uint16), table, out)
