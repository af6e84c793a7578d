"""Random fills from the device's numpy Generator (reseeded by Device.SetRandSeed)."""

from __future__ import annotations

import numpy as np


def _draw(out, sampler):
    """Fill ``out`` with ``sampler(shape, dtype)``; generators only emit float32/float64."""
    if out.dtype in (np.float32, np.float64) and out.flags.c_contiguous:
        sampler(out.shape, out.dtype, out)
    else:
        tmp = np.empty(out.shape, np.float32)
        sampler(out.shape, np.float32, tmp)
        np.copyto(out, tmp, casting="unsafe")


def kernels(device) -> dict:
    def gaussian(ins, outs, attrs):
        out = outs[0]
        _draw(out, lambda s, d, o: device.rng.standard_normal(s, d, out=o))
        out *= attrs["std"]
        out += attrs["mean"]

    def uniform(ins, outs, attrs):
        out = outs[0]
        low, high = attrs["low"], attrs["high"]
        _draw(out, lambda s, d, o: device.rng.random(s, d, out=o))
        out *= high - low
        out += low

    def bernoulli(ins, outs, attrs):
        out = outs[0]
        _draw(out, lambda s, d, o: device.rng.random(s, d, out=o))
        np.less(out, attrs["p"], out=out, casting="unsafe")

    return {"Gaussian": gaussian, "Uniform": uniform, "Bernoulli": bernoulli}
