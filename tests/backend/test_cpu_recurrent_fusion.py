"""The CPU backend's Copy+Sigmoid, Copy+Tanh and Copy+Add fused kernels (the gate slices of an
unrolled LSTM/GRU cell, singa.ops.FUSIONS) on strided inputs.

Oracle: the device's own Copy kernel and then the op's kernel on the contiguous copy, bitwise
(what graph mode replaces), and numpy in float64 within float32/float16 rounding. Inputs:
column slices of a gates block (what the cells slice), special values (NaN, +-inf, -0.0, huge
and tiny), float16, and a large block (split across the cores by the op's kernel).
"""

from __future__ import annotations

import numpy as np
import pytest
from singa.ops import FUSIONS

SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30, -1e30, 1e-40, -88.7, 89.0])


@pytest.fixture
def rng():
    return np.random.default_rng(31)


@pytest.fixture
def kernels(singa_device):
    if singa_device.backend != "cpu":
        pytest.skip("CPU backend internals")
    return {name: fn for name, (fn, _, _) in singa_device.kernels.items()}


def gate_slice(rng, rows, hidden, dtype, gate=2, gates=4, special=False):
    """Columns ``gate * hidden : (gate + 1) * hidden`` of a (rows, gates * hidden) block."""
    block = (rng.standard_normal((rows, gates * hidden)) * 4).astype(dtype)
    if special:
        flat = block.reshape(-1)
        flat[rng.choice(flat.size, min(flat.size, 3 * SPECIAL.size), replace=False)] = \
            np.resize(SPECIAL, min(flat.size, 3 * SPECIAL.size)).astype(dtype)
    x = block[:, gate * hidden:(gate + 1) * hidden]
    assert rows == 1 or not x.flags.c_contiguous
    return x


def unfused(kernels, name, x, *others):
    """Copy into a new contiguous block, then the second op's kernel on it."""
    mid = np.empty(x.shape, x.dtype)
    kernels["Copy"]((x,), (mid,), {})
    second = FUSIONS[name].second
    ins = (mid, *others)
    shape = np.broadcast_shapes(*(a.shape for a in ins))
    out = np.empty(shape, x.dtype)
    kernels[second](ins, (out,), {})
    return out


def assert_bitwise(got, want):
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    same &= np.signbit(got) == np.signbit(want)
    assert same.all(), f"{(~same).sum()} of {got.size} differ, first at {np.argmin(same)}"


REFERENCE = {"Copy+Sigmoid": lambda x: 1 / (1 + np.exp(-x)), "Copy+Tanh": np.tanh}


@pytest.mark.parametrize("name", ["Copy+Sigmoid", "Copy+Tanh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("rows,hidden,special", [(1, 256, False), (8, 33, True),
                                                 (512, 1024, False)])
def test_copy_unary_equals_copy_then_op(kernels, rng, name, dtype, rows, hidden, special):
    x = gate_slice(rng, rows, hidden, dtype, special=special)
    got = np.empty(x.shape, dtype)
    with np.errstate(over="ignore"):
        kernels[name]((x,), (got,), {})
        assert_bitwise(got, unfused(kernels, name, x))
        if not special:
            ref = REFERENCE[name](x.astype(np.float64))
            tol = 2e-3 if dtype == np.float16 else 1e-6
            np.testing.assert_allclose(got, ref, atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("other_shape", ["same", "row", "bigger"])
def test_copy_add_equals_copy_then_add(kernels, rng, dtype, other_shape):
    x = gate_slice(rng, 8, 48, dtype, gate=1, gates=3, special=True)
    shape = {"same": x.shape, "row": (1, 48), "bigger": (3, 8, 48)}[other_shape]
    other = rng.standard_normal(shape).astype(dtype)
    got = np.empty(np.broadcast_shapes(x.shape, shape), dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        kernels["Copy+Add"]((x, other), (got,), {})
        assert_bitwise(got, unfused(kernels, "Copy+Add", x, other))
        want = x.astype(np.float64) + other
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-3 if dtype == np.float16
                               else 1e-6)


def test_copy_add_into_its_other_input(kernels, rng):
    """The output may be the other input's memory (an in-place add): it is read before the
    copy would overwrite it."""
    x = gate_slice(rng, 4, 16, np.float32, gates=3)
    other = rng.standard_normal((4, 16)).astype(np.float32)
    want = unfused(kernels, "Copy+Add", x, other.copy())
    kernels["Copy+Add"]((x, other), (other,), {})
    assert_bitwise(other, want)


def test_fusions_are_in_the_device_table(singa_device):
    if singa_device.backend != "cpu":
        pytest.skip("CPU backend internals")
    for name in ("Copy+Sigmoid", "Copy+Tanh", "Copy+Add"):
        assert name in FUSIONS and name in singa_device.kernels
