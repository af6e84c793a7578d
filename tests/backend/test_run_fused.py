"""``singa.ops.run_fused``: a fused pair's kernel run eagerly on the device under test.

Oracle: the two ops run one after the other on the same device, bitwise (what the conformance
kit asks of every fused kernel); a device without the fused kernel gets None (its caller runs
the two ops) and a name that is not a pair of ops of the table is refused.
"""

from __future__ import annotations

import numpy as np
import pytest
from singa import tensor
from singa.ops import FUSIONS, OPS, run, run_fused

ATTRS = {"stride": (2, 1), "pads": (1, 0, 2, 1), "dilation": (1, 1), "group": 1}


@pytest.mark.parametrize("name", ["Conv2d+ReLU", "Conv2d+HardSwish"])
@pytest.mark.parametrize("bias", [True, False])
def test_fused_conv_equals_its_two_ops(singa_device, name, bias):
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((2, 3, 9, 8)), rng.standard_normal((4, 3, 3, 3))]
    if bias:
        arrays.append(rng.standard_normal(4))
    ins = [tensor.from_numpy(a.astype(np.float32), singa_device).data for a in arrays]
    got = run_fused(name, ins, ATTRS)
    if name not in singa_device.kernels:
        assert got is None
        pytest.skip(f"{singa_device.name} has no {name} kernel: run_fused said so (None)")
    (y,) = run(OPS[FUSIONS[name].second], run(OPS["Conv2d"], ins, ATTRS))
    assert got[0].dims == y.dims == (2, 4, 4, 9)
    np.testing.assert_array_equal(tensor.to_numpy(tensor.Tensor(data=got[0])),
                                  tensor.to_numpy(tensor.Tensor(data=y)))


@pytest.mark.parametrize(("x_shape", "a_shape"),
                         [((2, 3, 4, 5), None), ((2, 3, 1, 1), (2, 3, 4, 5)),
                          ((2, 3, 4, 5), (3, 1, 1))], ids=["silu", "gate", "broadcast-other"])
def test_fused_sigmoid_mul_equals_its_two_ops(singa_device, x_shape, a_shape):
    """SiLU (x * sigmoid(x)), a squeeze-excitation gate (a map times sigmoid of its (N, C, 1, 1)
    gate) and another broadcast: the second op's other input decides the output's shape."""
    rng = np.random.default_rng(4)
    x = tensor.from_numpy(rng.standard_normal(x_shape).astype(np.float32), singa_device).data
    a = x if a_shape is None else tensor.from_numpy(
        rng.standard_normal(a_shape).astype(np.float32), singa_device).data
    got = run_fused("Sigmoid+Mul", [x, a])
    if "Sigmoid+Mul" not in singa_device.kernels:
        assert got is None
        pytest.skip(f"{singa_device.name} has no Sigmoid+Mul kernel: run_fused said so (None)")
    (y,) = run(OPS["Mul"], [a, run(OPS["Sigmoid"], [x])[0]])
    assert got[0].dims == y.dims == np.broadcast_shapes(x_shape, a_shape or x_shape)
    np.testing.assert_array_equal(tensor.to_numpy(tensor.Tensor(data=got[0])),
                                  tensor.to_numpy(tensor.Tensor(data=y)))


def test_shapes_the_second_op_refuses_raise_its_error(singa_device):
    x = tensor.from_numpy(np.ones((2, 3), np.float32), singa_device).data
    a = tensor.from_numpy(np.ones((4,), np.float32), singa_device).data
    if "Sigmoid+Mul" not in singa_device.kernels:
        pytest.skip(f"{singa_device.name} has no Sigmoid+Mul kernel")
    with pytest.raises(ValueError, match="Mul"):  # the Mul's broadcast rule: a ShapeError
        run_fused("Sigmoid+Mul", [x, a])
    with pytest.raises(ValueError, match="takes 2 inputs"):
        run_fused("Sigmoid+Mul", [x])


@pytest.mark.parametrize("name", ["Conv2d+ReLU+Pooling2d", "Conv2d+Tanh"])
def test_other_names_are_refused(singa_device, name):
    x = tensor.from_numpy(np.ones((1, 1, 4, 4), np.float32), singa_device).data
    with pytest.raises(ValueError, match="run_fused"):
        run_fused(name, [x, x], ATTRS)
