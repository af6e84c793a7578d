"""Issue 15 items 11 and 12: values that do not fit, non-integer shapes, huge tensors,
big-endian arrays and bad layer arguments give singa errors naming the problem."""

from __future__ import annotations

import numpy as np
import pytest
from singa import autograd, device, layer, tensor
from singa.errors import DeviceMismatchError, OutOfMemoryError, ShapeError


# ---------------------------------------------------------------- item 11
@pytest.mark.parametrize("arr", [np.array([2**40], np.int64), np.array([-(2**31) - 1], np.int64),
                                 np.array([2**32 - 1], np.uint32), np.array([2**63], np.uint64)])
def test_from_numpy_refuses_ints_that_do_not_fit(arr):
    with pytest.raises(ShapeError, match="does not fit int32"):
        tensor.from_numpy(arr)


def test_from_numpy_keeps_ints_that_fit():
    arr = np.array([2**31 - 1, -(2**31), 0, 7], np.int64)
    np.testing.assert_array_equal(tensor.to_numpy(tensor.from_numpy(arr)), arr)
    u = np.array([0, 255], np.uint8)
    np.testing.assert_array_equal(tensor.to_numpy(tensor.from_numpy(u)), u)


def test_from_numpy_refuses_float64_that_would_become_inf():
    with pytest.raises(ShapeError, match="does not fit float32"):
        tensor.from_numpy(np.array([1e300]))
    got = tensor.to_numpy(tensor.from_numpy(np.array([np.inf, -1.5])))
    np.testing.assert_array_equal(got, np.array([np.inf, -1.5], np.float32))


def test_copy_from_numpy_refuses_wrapping_ints(cpu):
    t = tensor.Tensor((1,), cpu, tensor.int32)
    with pytest.raises(ShapeError, match="does not fit int32"):
        t.copy_from_numpy(np.array([2**40], np.int64))


@pytest.mark.parametrize("shape", [(2.5, 3), (2, "3"), (np.float32(1.5),)])
def test_non_integer_shapes_are_refused(shape):
    with pytest.raises(ShapeError):
        tensor.Tensor(shape)


def test_numpy_int_shapes_work_and_integral_floats_are_refused():
    """Issue 29: one shape rule (``singa.tensor.check_shape``) for Tensor, reshape and
    checkpoints: integers only. 2.0 is refused like 2.5 (as SINGA's SWIG layer refused it)."""
    assert tensor.Tensor((np.int32(2), np.int64(3))).shape == (2, 3)
    with pytest.raises(ShapeError, match="must be an integer, got 2.0"):
        tensor.Tensor((2.0, 3))


# ---------------------------------------------------------------- item 12
def test_tensor_larger_than_the_device_is_refused_at_creation():
    with pytest.raises(OutOfMemoryError, match="GiB"):
        tensor.Tensor((10**6, 10**6))


@pytest.mark.parametrize("dt", [">f4", ">i4", ">f8", ">i2"])
def test_big_endian_arrays_are_converted(dt):
    arr = np.array([[1.5, -2.0], [3.0, 4.0]]).astype(dt)
    got = tensor.to_numpy(tensor.from_numpy(arr))
    np.testing.assert_array_equal(got, arr.astype(arr.dtype.newbyteorder("=")))
    t = tensor.Tensor(arr.shape, dtype=got.dtype.type if got.dtype != np.int32 else tensor.int32)
    t.copy_from_numpy(arr)
    np.testing.assert_array_equal(tensor.to_numpy(t), got)


def _x(cpu, shape=(1, 2, 4, 4)):
    return tensor.from_numpy(np.ones(shape, np.float32), cpu)


@pytest.mark.parametrize("make, match", [
    (lambda: layer.MaxPool2d(2, 0), "stride"),
    (lambda: layer.AvgPool2d(0), "kernel_size"),
    (lambda: layer.Conv2d(3, 2, stride=0), "stride"),
    (lambda: layer.Conv2d(3, 0), "kernel_size"),
    (lambda: layer.Conv2d(3, 2, dilation=0), "dilation"),
    (lambda: layer.Conv2d(3, 2, padding=-1), "padding"),
    (lambda: layer.Conv2d(0, 2), "nb_kernels"),
])
def test_bad_window_arguments_are_shape_errors(make, match):
    with pytest.raises(ShapeError, match=match):
        make()


def test_conv_on_input_without_channels(cpu):
    with pytest.raises(ShapeError, match="no channels"):
        layer.Conv2d(3, 2)(_x(cpu, (1, 0, 4, 4)))


@pytest.mark.parametrize("shape", [(4,), (2, 3, 5)])
def test_linear_on_non_2d_input(cpu, shape):
    with pytest.raises(ShapeError, match="2-D input"):
        layer.Linear(4)(tensor.from_numpy(np.ones(shape, np.float32), cpu))


def test_rnn_on_empty_sequences(cpu):
    with pytest.raises(ShapeError, match="time step"):
        layer.LSTM(3, 4)([])
    for shape in [(0, 2, 3), (2, 0, 3)]:
        with pytest.raises(ShapeError, match="is empty"):
            layer.CudnnRNN(4)(tensor.from_numpy(np.ones(shape, np.float32), cpu))


def test_loss_target_on_another_device():
    dev = device.get_default_device()
    try:
        other = device.get_device("opencl")
    except Exception:  # noqa: BLE001
        other = None
    if other is None or other is dev:
        other = device.create_cpu_device()
    if other is dev:
        pytest.skip("needs a second device (install singa-opencl)")
    x = tensor.from_numpy(np.ones((3, 2), np.float32), dev)
    t = tensor.from_numpy(np.array([0, 1, 1], np.int32), other)
    with pytest.raises(DeviceMismatchError, match="to_device"):
        autograd.softmax_cross_entropy(x, t)


@pytest.mark.parametrize("axis", [[0], [-1], 0])
def test_squeeze_of_a_0d_tensor_by_axis(cpu, axis):
    # found by the hostile-arguments property test: an IndexError from inside Squeeze
    x = tensor.from_numpy(np.array(0.5, np.float32), cpu)
    with pytest.raises(ShapeError, match=r"0-[dD] tensor"):
        autograd.squeeze(x, axis)
    np.testing.assert_array_equal(tensor.to_numpy(autograd.squeeze(x)), np.array(0.5))  # numpy


@pytest.mark.parametrize("fn", [autograd.reduce_sum, autograd.reduce_mean])
def test_reduction_of_a_0d_tensor_over_axis_0_is_the_value(cpu, fn):
    # was an IndexError: a 0-d tensor accepts axis 0 and has no axis to reduce
    x = tensor.from_numpy(np.array(0.5, np.float32), cpu)
    y = fn(x, [0], 0)
    assert y.shape == ()
    np.testing.assert_array_equal(tensor.to_numpy(y), np.float32(0.5))
