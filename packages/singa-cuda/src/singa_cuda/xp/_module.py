"""The array module a shared kernel computes with: numpy in CI, cupy on a GPU."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from singa.backend import check_indices


@dataclass(frozen=True)
class ArrayModule:
    """An array namespace and the functions numpy and cupy spell differently.

    Attributes
    ----------
    xp:
        ``numpy`` or ``cupy``.
    erf:
        ``erf(x, out)``: the error function elementwise (numpy has none; cupy's is
        ``cupyx.scipy.special.erf``).
    add_at:
        ``add_at(a, index, values)``: unbuffered ``a[index] += values`` where repeated indices
        accumulate (``numpy.add.at`` / ``cupyx.scatter_add``).
    half_gemm_in_fp32:
        True where float16 products must be widened by hand to accumulate in float32 (numpy
        multiplies half matrices in half); False where the library already accumulates in
        float32 (cuBLAS through cupy, with tensor cores).
    name:
        ``"numpy"`` or ``"cupy"``, for messages.
    """

    xp: Any
    erf: Callable
    add_at: Callable
    half_gemm_in_fp32: bool
    name: str

    def check_indices(self, op: str, idx, n: int, negative: bool = True,
                      what: str = "index") -> None:
        """Refuse indices outside ``[-n, n)`` (or ``[0, n)``) before anything reads or writes
        with them: the same check and message as every other backend (``singa.backend``). On
        cupy it reads a host copy of the indices, as the OpenCL backend does."""
        host = idx if self.name == "numpy" else self.xp.asnumpy(idx)
        check_indices(op, host, n, negative=negative, what=what)

    def acc_dtype(self, dtype):
        """Accumulation dtype of a reduction over ``dtype`` (float32 for float16)."""
        xp = self.xp
        return xp.float32 if xp.dtype(dtype) == xp.float16 else None


def _np_erf(x, out):
    import numpy as np

    wide = np.asarray(x, np.float64)
    res = np.asarray(np.frompyfunc(math.erf, 1, 1)(wide), np.float64)
    np.copyto(out, res, casting="unsafe")


def _np_add_at(a, index, values):
    import numpy as np

    np.add.at(a, index, values)


def numpy_module() -> ArrayModule:
    """The numpy array module (CI runs the shared kernels on it)."""
    import numpy as np

    return ArrayModule(np, _np_erf, _np_add_at, True, "numpy")


def cupy_module() -> ArrayModule:
    """The cupy array module (the CudaGPU device's kernels)."""
    import cupy
    import cupyx
    from cupyx.scipy import special

    def erf(x, out):
        special.erf(x, out=out)

    def add_at(a, index, values):
        cupyx.scatter_add(a, index, values)

    return ArrayModule(cupy, erf, add_at, False, "cupy")
