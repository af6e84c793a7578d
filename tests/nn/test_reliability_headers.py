"""Issue 29: shapes from files and users, index dtypes and hyper-parameters.

One shape rule (``singa.tensor.check_shape``: integers only, never a bool or a float,
non-negative except one -1 where reshape infers it) for checkpoints' ``.npy`` headers,
``Tensor.reshape`` and ``Tensor(shape)``; gather refuses fractional indices; optimizers refuse
hyper-parameters outside their range, naming the value and the range, while schedules still
work as SINGA's API allows.
"""

from __future__ import annotations

import io
import math
import zipfile

import numpy as np
import pytest
from _shared_models import tiny
from singa import autograd, model, opt, tensor
from singa.errors import (
    CheckpointError,
    DtypeMismatchError,
    HyperparameterError,
    ShapeError,
    SingaError,
)


def _with_header_shape(path, shape):
    """Rewrite the checkpoint at ``path`` so the (4, 3) weight's .npy header says ``shape``
    (the data keeps its 12 float32 values)."""
    with zipfile.ZipFile(path) as zf:
        attrs = zf.read("states_attr.json")
        npz = zf.read("tensor_dict.npz")
    members = {}
    with zipfile.ZipFile(io.BytesIO(npz)) as z:
        for n in z.namelist():
            members[n] = z.read(n)
    name = next(n for n in members if np.load(io.BytesIO(members[n])).size == 12)
    arr = np.load(io.BytesIO(members[name]))
    header = np.lib.format.header_data_from_array_1_0(arr)
    header["shape"] = shape
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    members[name] = buf.getvalue() + arr.tobytes()
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        for n, data in members.items():
            z.writestr(n, data)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("tensor_dict.npz", inner.getvalue())
        zf.writestr("states_attr.json", attrs)
    return name[:-len(".npy")]


@pytest.mark.parametrize(("shape", "said"), [
    ((-4, -3), "dimension -4 at position 0"),
    ((True, 12), "must be an integer, got True (a bool)"),
    ((2, -1, -6), "dimension -1 at position 1"),
    ((2**62, 2**62, 0), "more elements than any array can index"),
])
def test_checkpoint_header_shapes_are_checkpoint_errors_naming_the_file(tmp_path, shape, said):
    m = tiny()
    path = tmp_path / "ck.zip"
    m.save_states(str(path))
    state = _with_header_shape(path, shape)
    with pytest.raises(CheckpointError) as err:
        m.load_states(str(path))
    msg = str(err.value)
    assert str(path) in msg and repr(state) in msg and said in msg, msg
    with pytest.raises(CheckpointError, match="header"):
        model.read_checkpoint(str(path))


def test_a_valid_checkpoint_still_loads(tmp_path):
    m = tiny()
    path = tmp_path / "ck.zip"
    m.save_states(str(path))
    m.load_states(str(path))


# ---------------------------------------------------------------- reshape and Tensor(shape)
@pytest.mark.parametrize(("shape", "said"), [
    ((-2, -3), "dimension -2 at position 0"),
    ((3.9, 2), "must be an integer, got 3.9"),
    ((3.0, 2), "must be an integer, got 3.0"),
    ((True, 6), "got True (a bool)"),
    ((-1, -1), "2 dimensions of -1"),
    ((4, -1), "cannot infer the -1"),
    ((7,), "holds 7 elements, not 6"),
    ((np.float32(6),), "must be an integer"),
    ("6", "sequence of integers"),
])
def test_reshape_refuses_what_tensor_refuses(shape, said):
    x = tensor.from_numpy(np.arange(6, dtype=np.float32))
    with pytest.raises(ShapeError) as err:
        x.reshape(shape)
    assert said in str(err.value) and "reshape" in str(err.value)
    with pytest.raises(ShapeError):
        tensor.reshape(x, shape)


@pytest.mark.parametrize("shape", [(-2, -3), (3.9, 2), (True, 6), (2.0, 3)])
def test_tensor_constructor_refuses_the_same_shapes(shape):
    with pytest.raises(ShapeError):
        tensor.Tensor(shape)


@pytest.mark.parametrize(("shape", "want"), [((2, 3), (2, 3)), ((-1,), (6,)), ((3, -1), (3, 2)),
                                             ((np.int64(2), np.int32(3)), (2, 3)),
                                             (np.array([1, 6]), (1, 6)), (6, (6,))])
def test_reshape_keeps_working(shape, want):
    x = tensor.from_numpy(np.arange(6, dtype=np.float32))
    y = x.reshape(shape)
    assert y.shape == want
    np.testing.assert_array_equal(tensor.to_numpy(y), np.arange(6).reshape(want))


def test_check_shape_is_public_for_extensions():
    assert tensor.check_shape([2, np.int64(3)]) == (2, 3)
    assert tensor.check_shape((2, -1), infer=True, size=8) == (2, 4)
    assert tensor.as_int(np.int16(4), "axis") == 4
    with pytest.raises(ShapeError, match="ONNX Reshape"):
        tensor.check_shape((1.5,), "ONNX Reshape")
    assert "check_shape" in tensor.__all__ and "as_int" in tensor.__all__


# ---------------------------------------------------------------- index dtypes
@pytest.mark.parametrize("indices", [[1.9], np.array([0.0, 1.5]), [float("nan")],
                                     [float("inf")]])
def test_gather_refuses_fractional_indices(indices):
    x = tensor.from_numpy(np.arange(6, dtype=np.float32))
    with pytest.raises(DtypeMismatchError, match="not a whole number"):
        autograd.gather(x, 0, indices)


def test_gather_refuses_non_numeric_indices():
    x = tensor.from_numpy(np.arange(6, dtype=np.float32))
    with pytest.raises(DtypeMismatchError, match="indices must be integers"):
        autograd.gather(x, 0, ["a"])


@pytest.mark.parametrize("indices", [[1, 2], np.array([1, 2], np.int64), [1.0, 2.0],
                                     tensor.from_numpy(np.array([1.0, 2.0], np.float32))])
def test_gather_takes_integers_and_whole_floats(indices):
    x = tensor.from_numpy(np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(tensor.to_numpy(autograd.gather(x, 0, indices)), [1, 2])


# ---------------------------------------------------------------- hyper-parameters
BAD = [
    (lambda: opt.SGD(lr=-1), "lr=-1", "[0, inf)"),
    (lambda: opt.SGD(lr=float("nan")), "lr=nan", "[0, inf)"),
    (lambda: opt.SGD(lr=float("inf")), "lr=inf", "[0, inf)"),
    (lambda: opt.SGD(lr=0.1, momentum=-5), "momentum=-5", "[0, inf)"),
    (lambda: opt.SGD(0.1, 0.9, 1.5), "dampening=1.5", "[0, 1]"),
    (lambda: opt.SGD(0.1, weight_decay=-1e-4), "weight_decay=-0.0001", "[0, inf)"),
    (lambda: opt.Adam(beta_1=1.5), "beta_1=1.5", "[0, 1)"),
    (lambda: opt.Adam(beta_2=1.0), "beta_2=1.0", "[0, 1)"),
    (lambda: opt.Adam(epsilon=-1e-8), "epsilon=-1e-08", "[0, inf)"),
    (lambda: opt.AdamW(beta_1=-0.1), "beta_1=-0.1", "[0, 1)"),
    (lambda: opt.RMSProp(rho=1.1), "rho=1.1", "[0, 1]"),
    (lambda: opt.AdaGrad(lr=-0.1), "lr=-0.1", "[0, inf)"),
    (lambda: opt.SGD(lr=opt.ExponentialDecay(-0.1, 10, 0.5)), "lr=-0.1", "[0, inf)"),
    (lambda: opt.SGD(lr=opt.Constant(float("nan"))), "init_value=nan", ""),
    (lambda: opt.ExponentialDecay(0.1, 0, 0.5), "decay_steps=0", "(0, inf)"),
]


@pytest.mark.parametrize(("make", "value", "valid"), BAD)
def test_hyperparameters_out_of_range_name_the_value_and_the_range(make, value, valid):
    with pytest.raises(HyperparameterError) as err:
        make()
    msg = str(err.value)
    assert value in msg and valid in msg, msg
    assert isinstance(err.value, SingaError) and isinstance(err.value, ValueError)


def test_assigning_a_bad_learning_rate_later_is_refused_too():
    sgd = opt.SGD(lr=0.1)
    with pytest.raises(HyperparameterError, match=r"SGD: lr=-0\.5"):
        sgd.lr = -0.5
    with pytest.raises(TypeError, match="must be a number or a DecayScheduler"):  # SINGA's type
        sgd.lr = "0.1"


def test_legitimate_hyperparameters_and_schedules_still_work():
    opt.SGD(lr=0, momentum=0, dampening=1, weight_decay=0, nesterov=False)
    opt.SGD(0.1, 0.9, 1e-5)  # SINGA's examples: lr, momentum, dampening
    opt.SGD(lr=np.float32(0.05), momentum=np.float64(0.9), nesterov=True)
    opt.Adam(lr=1e-3, beta_1=0.0, beta_2=0.0, epsilon=0)
    opt.RMSProp(rho=1.0)
    sched = opt.ExponentialDecay(0.1, 100, 0.96, staircase=True)
    sgd = opt.SGD(lr=sched, momentum=opt.Constant(0.9))
    assert sgd.lr is sched
    np.testing.assert_allclose(tensor.to_numpy(sgd.lr_value), [0.1], rtol=1e-6)

    class Warmup(opt.DecayScheduler):  # a user's schedule without init_value still works
        def __init__(self):
            pass

        def __call__(self, step):
            return opt.Constant(0.01)(step)

    opt.SGD(lr=Warmup())
    assert math.isclose(opt.Constant(2).init_value, 2.0)


def test_nesterov_error_is_a_hyperparameter_error_and_a_value_error():
    with pytest.raises(ValueError, match="Nesterov"):
        opt.SGD(0.1, nesterov=True)
    with pytest.raises(HyperparameterError):
        opt.SGD(0.1, momentum=0.9, dampening=0.1, nesterov=True)
