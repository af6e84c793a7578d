"""exp(-t) in float32 from multiplies, adds and selects, for loops that LLVM vectorises
(numba's ``math.exp`` is a scalar libm call there)."""

from __future__ import annotations

import numpy as np

from ._jit import helper

_f32 = np.float32


@helper(inline="always", error_model="numpy")
def exp_neg_parts32(t):
    """exp(-t) for float32 t >= 0 as (k, p), exp(-t) = 2^-k p: t clamped to 87 (2^-126,
    float32's smallest normal), k = round(t / ln 2) as a float, r = k ln 2 - t in [-ln2/2,
    ln2/2] (Cody-Waite: ln 2 split in two) and p = exp(r) by its Taylor polynomial of degree 7
    (truncation < 3e-9). The caller writes 2^-k as float32 bits, ``(127 - k) << 23``."""
    one = _f32(1.0)
    t = t if t < _f32(87.0) else _f32(87.0)
    kf = np.floor(t * _f32(1.4426950408889634) + _f32(0.5))
    r = (kf * _f32(0.693359375) - t) - kf * _f32(2.12194440e-4)
    p = _f32(1.0 / 5040.0)
    p = p * r + _f32(1.0 / 720.0)
    p = p * r + _f32(1.0 / 120.0)
    p = p * r + _f32(1.0 / 24.0)
    p = p * r + _f32(1.0 / 6.0)
    p = p * r + _f32(0.5)
    p = p * r + one
    return kf, p * r + one
