"""exp(-t) in float32 from multiplies, adds and selects, for loops that LLVM vectorises
(numba's ``math.exp`` is a scalar libm call there)."""

from __future__ import annotations

import numpy as np

from ._jit import helper

_f32 = np.float32


@helper(inline="always", error_model="numpy")
def neg_pow2_bits(kf):
    """The float32 bits of 2^-k, ``(127 - k) << 23``, for the k (a float, 0 <= k <= 126) of
    :func:`expm1_neg_parts32` / :func:`exp_neg_parts32`: the loops store them as int32 and
    read them back as float32 (a view), which LLVM vectorises."""
    return (np.int32(127) - np.int32(kf)) << np.int32(23)


@helper(inline="always", error_model="numpy")
def expm1_neg_parts32(t):
    """exp(-t) for float32 t >= 0 as (k, q), exp(-t) = 2^-k (1 + q): t clamped to 87 (2^-126,
    float32's smallest normal), k = round(t / ln 2) as a float, r = k ln 2 - t in [-ln2/2,
    ln2/2] (Cody-Waite: ln 2 split in two) and q = exp(r) - 1 by its Taylor polynomial of
    degree 7 (truncation < 3e-9), as ``r * p(r)``: accurate relative to q itself, so with
    k = 0 (t < ln2/2, where r = -t exactly) q is exp(-t) - 1 without cancellation (Tanh's
    small arguments). The caller writes 2^-k as float32 bits (:func:`neg_pow2_bits`)."""
    t = t if t < _f32(87.0) else _f32(87.0)
    kf = np.floor(t * _f32(1.4426950408889634) + _f32(0.5))
    r = (kf * _f32(0.693359375) - t) - kf * _f32(2.12194440e-4)
    p = _f32(1.0 / 5040.0)
    p = p * r + _f32(1.0 / 720.0)
    p = p * r + _f32(1.0 / 120.0)
    p = p * r + _f32(1.0 / 24.0)
    p = p * r + _f32(1.0 / 6.0)
    p = p * r + _f32(0.5)
    p = p * r + _f32(1.0)
    return kf, p * r


@helper(inline="always", error_model="numpy")
def exp_neg_parts32(t):
    """exp(-t) for float32 t >= 0 as (k, p), exp(-t) = 2^-k p: :func:`expm1_neg_parts32`'s
    k and 1 + q (its Taylor polynomial of degree 7 for exp(r), truncation < 3e-9). The
    caller writes 2^-k as float32 bits (:func:`neg_pow2_bits`)."""
    kf, q = expm1_neg_parts32(t)
    return kf, q + _f32(1.0)
