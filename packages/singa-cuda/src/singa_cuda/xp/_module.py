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
    data_ptr:
        ``data_ptr(a)``: the address of an array's first element.
    """

    xp: Any
    erf: Callable
    add_at: Callable
    half_gemm_in_fp32: bool
    name: str
    data_ptr: Callable

    def same_view(self, a, b) -> bool:
        """Whether arrays ``a`` and ``b`` view exactly the same elements (address, shape,
        strides and dtype)."""
        return (a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype
                and self.data_ptr(a) == self.data_ptr(b))

    def alias_outputs(self, ins, outs) -> list:
        """``ins`` with each input that views exactly an output's elements replaced by that
        output array (graph mode's in-place reuse hands a kernel two array objects over one
        block). cupy's ufuncs copy an input that overlaps an output unless it is the output
        object itself: a copy kernel and a temporary per in-place op, measured as 17 extra
        launches per ResNet-18 step on an H100. Reading element i before writing it makes an
        exact alias safe without the copy, in numpy too."""
        res = list(ins)
        for k, a in enumerate(res):
            if not hasattr(a, "strides"):
                continue
            for o in outs:
                if a is not o and self.same_view(a, o):
                    res[k] = o
                    break
        return res

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

    return ArrayModule(np, _np_erf, _np_add_at, True, "numpy", lambda a: a.ctypes.data)


def cupy_module() -> ArrayModule:
    """The cupy array module (the CudaGPU device's kernels)."""
    import cupy
    import cupyx
    from cupyx.scipy import special

    def erf(x, out):
        special.erf(x, out=out)

    def add_at(a, index, values):
        cupyx.scatter_add(a, index, values)

    return ArrayModule(cupy, erf, add_at, False, "cupy", lambda a: a.data.ptr)
