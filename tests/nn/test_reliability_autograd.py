"""Issue 15 items 8 and 12 (autograd part): in-place changes to a saved output are caught;
bad arguments to autograd ops raise singa errors, not numpy or Python ones."""

from __future__ import annotations

import numpy as np
import pytest
from singa import autograd, tensor
from singa.errors import DtypeMismatchError, ShapeError, SingaError


@pytest.fixture(autouse=True)
def _training():
    autograd.training = True


@pytest.mark.parametrize("fn", [autograd.exp, autograd.sigmoid, autograd.tanh, autograd.sqrt])
def test_modified_saved_output_is_caught(cpu, fn):
    x = tensor.from_numpy(np.array([0.5, 1.0, 2.0], np.float32), cpu)
    x.requires_grad = x.stores_grad = True
    y = fn(x)
    y += 1
    with pytest.raises(SingaError, match="output 0.*modified in place"):
        list(autograd.backward(y, tensor.from_numpy(np.ones(3, np.float32), cpu)))


@pytest.mark.parametrize("fn", [autograd.exp, autograd.tanh])
def test_unmodified_output_still_gives_the_right_gradient(cpu, fn):
    xs = np.array([0.5, 1.0, 2.0], np.float32)
    x = tensor.from_numpy(xs, cpu)
    x.requires_grad = x.stores_grad = True
    y = fn(x)
    dy = tensor.from_numpy(np.ones(3, np.float32), cpu)
    grads = {id(p): tensor.to_numpy(g) for p, g in autograd.backward(y, dy)}
    want = np.exp(xs) if fn is autograd.exp else 1 - np.tanh(xs) ** 2
    np.testing.assert_allclose(grads[id(x)], want, rtol=1e-5)


@pytest.mark.parametrize("fn", [autograd.exp, autograd.sigmoid, autograd.tanh, autograd.log,
                                autograd.sqrt])
def test_float_math_on_int32_is_a_dtype_error(cpu, fn):
    x = tensor.from_numpy(np.array([1, 2, 3], np.int32), cpu)
    with pytest.raises(DtypeMismatchError, match="int32"):
        fn(x)


def test_cat_of_nothing(cpu):
    with pytest.raises(ShapeError, match="at least one"):
        autograd.cat([])
