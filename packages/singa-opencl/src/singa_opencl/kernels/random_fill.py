"""Random fills (Gaussian, Uniform, Bernoulli) from a counter-based Philox generator.

The device holds the key (its seed) and a stream counter that every fill advances when it
runs, so a replayed graph draws new numbers each iteration and results never depend on the
work-group layout (see ``cl/philox.cl``).
"""

from __future__ import annotations

import math

import numpy as np

from .._build import CL_TYPES, prelude, read_source
from ._common import EW_LAYOUT, EW_MAXD, collapse, make_kernel, roundup

KINDS = {"Uniform": 0, "Gaussian": 1, "Bernoulli": 2}


def _fill(device, op: str, y, kind: int, a: float, b: float) -> None:
    n = math.prod(y.shape)
    stream = device.rng_calls
    device.rng_calls += 1
    if n == 0:
        return
    shape, (st,) = collapse(y.shape, [y.strides])
    if len(shape) > EW_MAXD:
        raise ValueError(f"{op}: output has too many strided dims")
    lay = np.zeros((), EW_LAYOUT)
    lay["shape"][:len(shape)] = shape
    lay["sy"][:len(shape)] = st
    t = CL_TYPES[y.dtype_code]
    prg = device.programs.program(prelude(T=t, O=t) + read_source("philox.cl"), op,
                                  f"philox[{t.name}]")
    k = device.programs.kernel(prg, "random_fill",
                               [np.int32, np.int32, None, np.int32, np.float32, np.float32]
                               + [np.uint32] * 4 + [None, np.int32])
    key = device.rng_key
    ls = device.local_size
    device.launch(k, (roundup(n, ls),), (ls,), n, len(shape), lay, kind, a, b,
                  key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF, stream & 0xFFFFFFFF,
                  (stream >> 32) & 0xFFFFFFFF, y.buf, y.offset)


def kernels(device) -> dict:
    def gaussian(ins, outs, attrs):
        _fill(device, "Gaussian", outs[0], 1, attrs["mean"], attrs["std"])

    def uniform(ins, outs, attrs):
        _fill(device, "Uniform", outs[0], 0, attrs["low"], attrs["high"])

    def bernoulli(ins, outs, attrs):
        _fill(device, "Bernoulli", outs[0], 2, attrs["p"], 0.0)

    return {
        "Gaussian": make_kernel(device, "Gaussian", gaussian),
        "Uniform": make_kernel(device, "Uniform", uniform),
        "Bernoulli": make_kernel(device, "Bernoulli", bernoulli),
    }
