"""``singa.initializer``: distributions (bounds and moments within sampling error of the
fan rules), eye and orthogonal (exact properties), deprecated helpers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from singa import initializer, tensor
from singa.device import get_default_device
from singa.errors import ShapeError
from singa.tensor import Tensor

# (shape, fan_in, fan_out): dense (in, out) and convolution (out, in, kh, kw) layouts
SHAPES = [((300, 200), 300, 200), ((64, 16, 3, 3), 16 * 9, 64 * 9), ((500,), 500, 500)]


def _check_uniform(v, limit):
    assert v.min() >= -limit and v.max() <= limit
    n = v.size
    # variance of U(-a, a) is a^2 / 3; its sample estimate has sd ~ sqrt(4/45 a^4 / n)
    assert abs(v.var() - limit ** 2 / 3) < 5 * math.sqrt(4 / 45 * limit ** 4 / n)
    assert v.max() > 0.95 * limit and v.min() < -0.95 * limit


def _check_normal(v, std):
    n = v.size
    assert abs(v.mean()) < 5 * std / math.sqrt(n)
    assert abs(v.std() - std) < 5 * std / math.sqrt(2 * n)


@pytest.mark.parametrize("shape,fan_in,fan_out", SHAPES)
@pytest.mark.parametrize("name", ["he", "glorot", "lecun"])
def test_fan_rules(shape, fan_in, fan_out, name):
    scale = {"he": 2.0 / fan_in, "glorot": 2.0 / (fan_in + fan_out), "lecun": 1.0 / fan_in}[name]
    u = getattr(initializer, f"{name}_uniform")(Tensor(shape)).to_numpy()
    _check_uniform(u, math.sqrt(3 * scale))
    g = getattr(initializer, f"{name}_normal")(Tensor(shape)).to_numpy()
    _check_normal(g, math.sqrt(scale))


def test_initializers_work_in_place_and_return_the_tensor():
    t = Tensor((20, 30))
    assert initializer.he_normal(t) is t
    assert np.any(t.to_numpy() != 0)


@pytest.mark.parametrize("shape", [(3, 3), (3, 5), (5, 3)])
def test_eye(shape):
    """SINGA's eye raised for every 2-D tensor (its check was inverted)."""
    t = initializer.eye(Tensor(shape))
    np.testing.assert_array_equal(t.to_numpy(), np.eye(*shape))


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5)])
@pytest.mark.parametrize("gain", [1.0, 0.5])
def test_orthogonal(shape, gain):
    q = initializer.orthogonal(Tensor(shape, dtype=tensor.float64), gain).to_numpy()
    rows, cols = shape
    gram = q.T @ q if rows >= cols else q @ q.T
    np.testing.assert_allclose(gram, gain ** 2 * np.eye(min(shape)), atol=1e-12)


def test_orthogonal_draws_differ_and_follow_the_device_seed():
    dev = get_default_device()
    dev.SetRandSeed(7)
    a = initializer.orthogonal(Tensor((4, 4))).to_numpy()
    b = initializer.orthogonal(Tensor((4, 4))).to_numpy()
    assert not np.allclose(a, b)  # two layers never get the same matrix
    dev.SetRandSeed(7)
    np.testing.assert_array_equal(initializer.orthogonal(Tensor((4, 4))).to_numpy(), a)


@pytest.mark.parametrize("fn", [initializer.eye, initializer.orthogonal])
def test_eye_and_orthogonal_reject_non_matrices(fn):
    with pytest.raises(ShapeError, match="2-D"):
        fn(Tensor((2, 2, 2)))


def test_deprecated_helpers():
    shape = (400, 100)
    _check_normal(initializer.gaussian(Tensor(shape), 400, 100).to_numpy(),
                  math.sqrt(4.0 / 500))
    _check_normal(initializer.gaussian(Tensor(shape), 400, 0).to_numpy(), math.sqrt(2.0 / 400))
    _check_uniform(initializer.uniform(Tensor(shape), 400, 100).to_numpy(), math.sqrt(6 / 500))
    _check_uniform(initializer.xavier(Tensor(shape)).to_numpy(), math.sqrt(6.0 / 500))
    _check_normal(initializer.glorot(Tensor(shape)).to_numpy(), math.sqrt(2.0 / 500))
    _check_normal(initializer.msra(Tensor(shape)).to_numpy(), math.sqrt(2.0 / 400))
    with pytest.raises(ValueError):
        initializer.gaussian(Tensor(shape), -1, 0)
