"""The CPU backend's squeeze-excitation gate: a (N, C, 1, 1) gate times its (N, C, H, W) map,
in either operand order, as the Mul kernel and as the fused Sigmoid+Mul (graph mode fuses
``Mul(x, Sigmoid(s))`` and ``Mul(Sigmoid(s), x)``). Oracle: numpy's broadcast product, which
the one-pass row loop must equal bitwise (one multiply per element); the fused kernel must
equal the Sigmoid and Mul kernels run one after the other. The conformance kit draws such
shapes too (``sample_others`` of the fusion); these cases are the shapes of real nets."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def dev(singa_device):
    if singa_device.backend != "cpu":
        pytest.skip("the CPU backend's gate kernels")
    return singa_device


def _kernel(dev, name):
    return dev.kernels[name][0]


# (gate shape, map shape): EfficientNet-like gates at batch 1 and 3, a gate over the first
# axis only, and 1x1 maps (the gate then has the map's shape: the flat path)
GATES = [
    ((1, 24, 1, 1), (1, 24, 7, 9)),
    ((3, 16, 1, 1), (3, 16, 14, 14)),
    ((4, 1, 1), (4, 5, 6)),
    ((2, 8, 1, 1), (2, 8, 1, 1)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", GATES)
@pytest.mark.parametrize("gate_first", [False, True])
@pytest.mark.parametrize("in_place", [False, True])
def test_gate_times_map_is_numpys_product(dev, shapes, dtype, gate_first, in_place):
    rng = np.random.default_rng(2)
    gate = rng.standard_normal(shapes[0]).astype(dtype)
    x = rng.standard_normal(shapes[1]).astype(dtype)
    x.flat[:3] = [np.nan, -0.0, np.inf]
    want = gate * x if gate_first else x * gate
    out = x if in_place else np.full(x.shape, 7, dtype)
    _kernel(dev, "Mul")([gate, x] if gate_first else [x, gate], [out], {})
    np.testing.assert_array_equal(out, want)
    assert (np.signbit(out) == np.signbit(want)).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shapes", GATES)
@pytest.mark.parametrize("in_place", [False, True])
def test_fused_sigmoid_gate_equals_sigmoid_then_mul(dev, shapes, dtype, in_place):
    """Sigmoid+Mul with the gate's pre-activation first and the map second (the fused calling
    convention) gives bitwise Sigmoid then Mul in both orders, and the oracle's values; also
    written into the map's memory (graph mode may plan it so: the fusion's ``inplace``)."""
    rng = np.random.default_rng(3)
    s = (2 * rng.standard_normal(shapes[0])).astype(dtype)
    x = rng.standard_normal(shapes[1]).astype(dtype)
    out = np.empty(x.shape, dtype)
    if in_place:
        out[...] = x
        _kernel(dev, "Sigmoid+Mul")([s, out], [out], {})
    else:
        _kernel(dev, "Sigmoid+Mul")([s, x], [out], {})
    g = np.empty(s.shape, dtype)
    _kernel(dev, "Sigmoid")([s], [g], {})
    for ins in ([x, g], [g, x]):
        want = np.empty(x.shape, dtype)
        _kernel(dev, "Mul")(ins, [want], {})
        np.testing.assert_array_equal(out, want)
    oracle = x.astype(np.float64) / (1 + np.exp(-s.astype(np.float64)))
    tol = {np.float16: 2e-3, np.float32: 1e-6, np.float64: 1e-14}[dtype]
    np.testing.assert_allclose(out, oracle, rtol=tol, atol=tol)
