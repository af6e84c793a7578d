"""Building the per-dtype programs of the NN kernels (pool.cl, batchnorm.cl, loss.cl, ...)."""

from __future__ import annotations

import numpy as np

from .._build import CL_TYPES, prelude, read_source
from ._common import roundup


def nn_program(device, op: str, source: str, dt: int):
    t = CL_TYPES[dt]
    return device.programs.program(prelude(T=t, O=t) + read_source(source), op,
                                   f"{source}[{t.name}]")


def launch_1d(device, kern, n: int, *args) -> None:
    """Launch ``kern`` over n work-items (rounded up to the local size; kernels check n)."""
    if n <= 0:
        return
    ls = device.local_size
    device.launch(kern, (roundup(n, ls),), (ls,), *args)


I = np.int32  # noqa: E741  (the type of int kernel arguments)
