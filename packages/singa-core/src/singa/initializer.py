"""``singa.initializer``: in-place parameter initialisers (Keras fan rules).

For a 2-D tensor (in, out): fan_in = in, fan_out = out. For a convolution kernel
(out, in, kh, kw): fan_in = in kh kw, fan_out = out kh kw.
"""

from __future__ import annotations

import math

import numpy as np

from .errors import ShapeError
from .tensor import Tensor

__all__ = ["he_uniform", "he_normal", "glorot_uniform", "glorot_normal", "lecun_uniform",
           "lecun_normal", "eye", "orthogonal", "gaussian", "uniform", "xavier", "glorot",
           "msra"]


def _fans(t: Tensor) -> tuple[float, float]:
    shape = t.shape
    if len(shape) < 1:
        raise ShapeError("initializers need a tensor with at least one dimension")
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _uniform(t, scale):
    limit = math.sqrt(3.0 * scale)
    return t.uniform(-limit, limit)


def _normal(t, scale):
    return t.gaussian(0.0, math.sqrt(scale))


def he_uniform(t: Tensor) -> Tensor:
    """U(-sqrt(6 / fan_in), sqrt(6 / fan_in))."""
    return _uniform(t, 2.0 / _fans(t)[0])


def he_normal(t: Tensor) -> Tensor:
    """N(0, 2 / fan_in)."""
    return _normal(t, 2.0 / _fans(t)[0])


def glorot_uniform(t: Tensor) -> Tensor:
    """U(-sqrt(6 / (fan_in + fan_out)), +...)."""
    fi, fo = _fans(t)
    return _uniform(t, 2.0 / (fi + fo))


def glorot_normal(t: Tensor) -> Tensor:
    """N(0, 2 / (fan_in + fan_out))."""
    fi, fo = _fans(t)
    return _normal(t, 2.0 / (fi + fo))


def lecun_uniform(t: Tensor) -> Tensor:
    """U(-sqrt(3 / fan_in), sqrt(3 / fan_in))."""
    return _uniform(t, 1.0 / _fans(t)[0])


def lecun_normal(t: Tensor) -> Tensor:
    """N(0, 1 / fan_in)."""
    return _normal(t, 1.0 / _fans(t)[0])


def eye(t: Tensor) -> Tensor:
    """The identity matrix (2-D tensors only; SINGA's check was inverted)."""
    if len(t.shape) != 2:
        raise ShapeError(f"eye() needs a 2-D tensor, got shape {t.shape}")
    t.copy_from_numpy(np.eye(*t.shape))
    return t


def orthogonal(t: Tensor, gain: float = 1.0) -> Tensor:
    """A (semi-)orthogonal matrix from the QR decomposition of a Gaussian one, times gain."""
    if len(t.shape) != 2:
        raise ShapeError(f"orthogonal() needs a 2-D tensor, got shape {t.shape}")
    rows, cols = t.shape
    # draw from the device's generator (seeded by SetRandSeed, advancing with every call)
    a = Tensor((max(rows, cols), min(rows, cols)), t.device, requires_grad=False)
    g = a.gaussian(0.0, 1.0).to_numpy().astype(np.float64)
    q, r = np.linalg.qr(g)
    q *= np.sign(np.diag(r))
    q = q if rows >= cols else q.T
    t.copy_from_numpy(gain * q[:rows, :cols])
    return t


def _deprecated_scale(t: Tensor, fan_in, fan_out) -> float:
    """``avg / (fan_in + fan_out)`` with avg = 2 when both fans are given, 1 otherwise."""
    if fan_in == 0 and fan_out == 0:
        fan_in, fan_out = _fans(t)
    if fan_in < 0 or fan_out < 0 or fan_in + fan_out == 0:
        raise ValueError(f"fan_in={fan_in} and fan_out={fan_out}: give at least one positive fan")
    avg = 2 if fan_in * fan_out else 1
    return avg / (fan_in + fan_out)


def gaussian(t: Tensor, fan_in=0, fan_out=0) -> Tensor:
    """Deprecated: N(0, 2 avg / (fan_in + fan_out)), avg = 2 with both fans, 1 with one.

    Both fans 0 (SINGA asserted) infers them from the shape.
    """
    return t.gaussian(0.0, math.sqrt(2.0 * _deprecated_scale(t, fan_in, fan_out)))


def uniform(t: Tensor, fan_in=0, fan_out=0) -> Tensor:
    """Deprecated: U(-x, x) with x = sqrt(3 avg / (fan_in + fan_out)) (avg as in gaussian)."""
    limit = math.sqrt(3.0 * _deprecated_scale(t, fan_in, fan_out))
    return t.uniform(-limit, limit)


def _rows_cols(t: Tensor, what: str) -> tuple[int, int]:
    if len(t.shape) != 2:
        raise ShapeError(f"{what}() needs a 2-D tensor, got shape {t.shape}")
    return t.shape


def xavier(t: Tensor) -> Tensor:
    """Deprecated: U(-sqrt(6 / (rows + cols)), +...) for a 2-D tensor."""
    rows, cols = _rows_cols(t, "xavier")
    limit = math.sqrt(6.0 / (rows + cols))
    return t.uniform(-limit, limit)


def glorot(t: Tensor) -> Tensor:
    """Deprecated: N(0, 2 / (rows + cols)) for a 2-D tensor."""
    rows, cols = _rows_cols(t, "glorot")
    return t.gaussian(0.0, math.sqrt(2.0 / (rows + cols)))


def msra(t: Tensor) -> Tensor:
    """Deprecated: N(0, 2 / rows) for a 2-D tensor (He et al.)."""
    rows, _ = _rows_cols(t, "msra")
    return t.gaussian(0.0, math.sqrt(2.0 / rows))
