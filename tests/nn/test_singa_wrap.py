"""``singa.singa_wrap``: the build flags and the CTensor surface SINGA user code calls, each
function checked against numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from singa import singa_wrap as singa
from singa.device import get_default_device
from singa.errors import DeviceUnavailableError

FLAGS = ("USE_CUDA", "USE_CUDNN", "USE_OPENCL", "USE_DIST", "USE_DNNL")


def CT(a, dtype=None):
    """A CTensor holding numpy array ``a`` (float32 unless ``dtype``)."""
    a = np.asarray(a, dtype=dtype or np.float32)
    code = {np.dtype(np.float32): singa.kFloat32, np.dtype(np.int32): singa.kInt,
            np.dtype(np.float64): singa.kDouble, np.dtype(np.float16): singa.kFloat16}[a.dtype]
    t = singa.Tensor(list(a.shape), get_default_device(), code)
    t.copy_from_numpy(a)
    return t


# ---------------------------------------------------------------- flags
def _usable(name):
    from singa.device import get_device

    try:
        get_device(name)
        return 1
    except DeviceUnavailableError:
        return 0


def test_flags_are_ints_that_say_whether_the_backend_is_usable():
    for f in FLAGS:
        assert getattr(singa, f) in (0, 1), f
    assert singa.USE_CUDA == _usable("cuda")
    assert singa.USE_CUDNN == singa.USE_CUDA
    assert singa.USE_OPENCL == _usable("opencl")
    assert singa.USE_DNNL == 0
    from singa.backend import registry

    usable = []
    for name in registry().communicators:
        try:
            registry().communicator(name)
            usable.append(name)
        except Exception:
            pass
    assert singa.USE_DIST == int(bool(usable))


def test_flags_follow_the_plugin_registry(monkeypatch):
    """Installed-and-usable decides each flag (a fake registry stands in for the plugins)."""
    from singa import _plugins

    class FakeRegistry:
        communicators = {"nccl": object()}

        def backend(self, name):
            if name != "opencl":
                raise DeviceUnavailableError(f"{name} unusable")

        def communicator(self, name):
            return object()

    monkeypatch.setattr(_plugins, "registry", lambda: FakeRegistry())
    assert (singa.USE_CUDA, singa.USE_CUDNN, singa.USE_OPENCL, singa.USE_DIST) == (0, 0, 1, 1)
    with pytest.raises(AttributeError):
        singa.USE_NOTHING  # noqa: B018


def test_version_and_enums():
    assert (singa.SINGA_MAJOR_VERSION, singa.SINGA_MINOR_VERSION) == (5, 1)
    assert (singa.kFloat32, singa.kFloat16, singa.kInt, singa.kChar, singa.kDouble) == \
        (0, 1, 2, 3, 4)
    assert singa.SizeOf(singa.kFloat32) == 4 and singa.SizeOf(singa.kDouble) == 8
    assert singa.Product([2, 3, 4]) == 24
    assert singa.VecTensor([1, 2]) == [1, 2]
    singa.InitLogging("")


# ---------------------------------------------------------------- the CTensor class
def test_ctensor_construction_and_introspection():
    t = singa.Tensor([2, 3])
    assert t.shape() == (2, 3) and t.shape(1) == 3 and t.nDim() == 2
    assert t.Size() == 6 and t.MemSize() == 24 and t.data_type() == singa.kFloat32
    assert t.device() is get_default_device() and not t.transpose()
    i = singa.Tensor([4], get_default_device(), singa.kInt)
    assert i.data_type() == singa.kInt and i.MemSize() == 16
    np.testing.assert_array_equal(t.GetFloatValue(6), np.zeros(6))  # zero-filled


def test_ctensor_values_in_and_out():
    t = singa.Tensor([2, 3])
    t.CopyFloatDataFromHostPtr(np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(t.GetFloatValue(6), np.arange(6))
    np.testing.assert_array_equal(t.GetFloatValue(2), [0, 1])
    t.SetFloatValue(2.5)
    np.testing.assert_array_equal(t.to_numpy(), np.full((2, 3), 2.5))
    i = singa.Tensor([3], get_default_device(), singa.kInt)
    i.CopyIntDataFromHostPtr(np.array([4, 5, 6], np.int32))
    np.testing.assert_array_equal(i.GetIntValue(3), [4, 5, 6])
    h = singa.Tensor([2], get_default_device(), singa.kFloat16)
    h.CopyHalfFloatDataFromHostPtr(np.array([0.5, 1.5], np.float16))
    np.testing.assert_array_equal(h.GetHalfFloatValue(2), [0.5, 1.5])
    u = singa.Tensor([2, 3])
    u.CopyData(t)
    np.testing.assert_array_equal(u.to_numpy(), t.to_numpy())


def test_ctensor_conversions_and_copies():
    a = np.array([[1.7, -2.2], [3.5, 0.0]], np.float32)
    t = CT(a)
    np.testing.assert_array_equal(t.AsType(singa.kInt).to_numpy(), a.astype(np.int32))
    c = t.Clone()
    c.SetFloatValue(0.0)
    np.testing.assert_array_equal(t.to_numpy(), a)  # a deep copy
    t.ToType(singa.kDouble)
    assert t.data_type() == singa.kDouble
    np.testing.assert_array_equal(t.to_numpy(), a.astype(np.float64))
    t.ToHost()
    t.ToDevice(get_default_device())
    r = CT([[1, 2], [3, 4]]).Repeat([2], 1)
    np.testing.assert_array_equal(r.to_numpy(), np.repeat([[1, 2], [3, 4]], 2, 1))
    z = singa.Tensor([1])
    z.ResetLike(CT(np.ones((3, 2))))
    assert z.shape() == (3, 2)
    x = CT([-3.0, 4.0])
    assert x.L1() == pytest.approx(3.5) and x.L2() == pytest.approx(2.5)


def test_ctensor_inplace_and_binary_operators():
    a, b = np.array([1.0, 2.0, 3.0], np.float32), np.array([4.0, 5.0, 6.0], np.float32)
    t = CT(a)
    t += CT(b)
    t -= 1.0
    t *= 2.0
    t /= CT([2.0, 2.0, 2.0])
    np.testing.assert_allclose(t.to_numpy(), a + b - 1)
    np.testing.assert_allclose((CT(a) + CT(b)).to_numpy(), a + b)
    np.testing.assert_allclose((CT(a) - CT(b)).to_numpy(), a - b)
    np.testing.assert_allclose((CT(a) * CT(b)).to_numpy(), a * b)
    np.testing.assert_allclose((CT(a) / CT(b)).to_numpy(), a / b)
    np.testing.assert_array_equal((CT(a) < CT([2, 2, 2])).to_numpy(), [1, 0, 0])


# ---------------------------------------------------------------- module functions
X = np.array([[0.3, -1.2, 2.0], [0.7, 0.1, -0.4]], np.float32)
P = np.array([[0.5, 0.9, 0.2], [0.7, 0.1, 0.4]], np.float32)  # in (0, 1)

UNARY = {
    "Abs": np.abs, "Ceil": np.ceil, "Floor": np.floor, "Exp": np.exp, "ReLU":
    lambda x: np.maximum(x, 0), "Sigmoid": lambda x: 1 / (1 + np.exp(-x)), "Sign": np.sign,
    "Square": np.square, "Tanh": np.tanh, "Cos": np.cos, "Cosh": np.cosh, "Sin": np.sin,
    "Sinh": np.sinh, "Tan": np.tan, "Atan": np.arctan, "Asinh": np.arcsinh,
    "SoftPlus": lambda x: np.log1p(np.exp(x)), "SoftSign": lambda x: x / (1 + np.abs(x)),
    "Round": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), "RoundE": np.rint,
    "Erf": np.vectorize(math.erf),
}
UNARY_POSITIVE = {"Log": np.log, "Sqrt": np.sqrt, "Reciprocal": np.reciprocal,
                  "Acos": np.arccos, "Asin": np.arcsin, "Atanh": np.arctanh}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_functions(name):
    np.testing.assert_allclose(getattr(singa, name)(CT(X)).to_numpy(), UNARY[name](X),
                               rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(UNARY_POSITIVE))
def test_unary_functions_on_their_domain(name):
    np.testing.assert_allclose(getattr(singa, name)(CT(P)).to_numpy(),
                               UNARY_POSITIVE[name](P), rtol=1e-6)


def test_acosh_and_relu_backward():
    y = np.array([1.5, 2.0, 3.0], np.float32)
    np.testing.assert_allclose(singa.Acosh(CT(y)).to_numpy(), np.arccosh(y), rtol=1e-6)
    dy = np.ones_like(X)
    np.testing.assert_array_equal(singa.ReLUBackward(CT(dy), CT(X)).to_numpy(),
                                  dy * (X > 0))


def test_reductions_and_softmax():
    np.testing.assert_allclose(singa.Sum(CT(X), 0).to_numpy(), X.sum(0), rtol=1e-6)
    np.testing.assert_allclose(singa.Sum(CT(X), 1).to_numpy(), X.sum(1), rtol=1e-6)
    np.testing.assert_allclose(singa.SumAll(CT(X)).to_numpy(), [X.sum()], rtol=1e-6)
    assert singa.SumAsFloat(CT(X)) == pytest.approx(X.sum(), rel=1e-6)
    np.testing.assert_allclose(singa.Average(CT(X), 0).to_numpy(), X.mean(0), rtol=1e-6)
    e = np.exp(X - X.max(1, keepdims=True))
    sm = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(singa.SoftMax(CT(X)).to_numpy(), sm, rtol=1e-6)
    np.testing.assert_allclose(singa.SoftMax(CT(X), 1).to_numpy(), sm, rtol=1e-6)
    dy = np.array([[1.0, 0.0, -1.0], [0.5, 0.5, 0.0]], np.float32)
    want = sm * (dy - (dy * sm).sum(1, keepdims=True))
    np.testing.assert_allclose(singa.SoftMaxBackward(CT(dy), 1, CT(sm)).to_numpy(), want,
                               rtol=1e-5, atol=1e-7)
    out = singa.Tensor([2])
    singa.SumColumns(CT(X), out)
    np.testing.assert_allclose(out.to_numpy(), X.sum(1), rtol=1e-6)
    np.testing.assert_allclose(singa.SumRows(CT(X)).to_numpy(), X.sum(0), rtol=1e-6)


def test_power_and_comparisons():
    e = np.array([[2.0, 0.5, 1.0], [3.0, 1.0, 2.0]], np.float32)
    np.testing.assert_allclose(singa.Pow(CT(P), CT(e)).to_numpy(), P ** e, rtol=1e-6)
    np.testing.assert_allclose(singa.PowFloat(CT(P), 2.0).to_numpy(), P ** 2, rtol=1e-6)
    ret = singa.Tensor([2, 3])
    singa.PowWithRet(CT(P), CT(e), ret)
    np.testing.assert_allclose(ret.to_numpy(), P ** e, rtol=1e-6)
    for name, ref in (("LT", np.less), ("LE", np.less_equal), ("GT", np.greater),
                      ("GE", np.greater_equal), ("EQ", np.equal)):
        np.testing.assert_array_equal(getattr(singa, f"{name}Float")(CT(X), 0.3).to_numpy(),
                                      ref(X, np.float32(0.3)).astype(np.float32), err_msg=name)
    np.testing.assert_array_equal(singa.__lt__(CT(X), CT(P)).to_numpy(), X < P)
    np.testing.assert_array_equal(singa.__ge__(CT(X), CT(P)).to_numpy(), X >= P)


def test_arithmetic_functions():
    a, b = CT(X), CT(P)
    for name, ref in (("Add", np.add), ("Sub", np.subtract), ("EltwiseMult", np.multiply),
                      ("Div", np.divide)):
        np.testing.assert_allclose(getattr(singa, name)(a, b).to_numpy(), ref(X, P), rtol=1e-6)
        ret = singa.Tensor([2, 3])
        getattr(singa, name)(a, b, ret)
        np.testing.assert_allclose(ret.to_numpy(), ref(X, P), rtol=1e-6)
    for name, ref in (("AddFloat", np.add), ("SubFloat", np.subtract),
                      ("MultFloat", np.multiply), ("DivFloat", np.divide)):
        np.testing.assert_allclose(getattr(singa, name)(a, 2.0).to_numpy(), ref(X, 2.0),
                                   rtol=1e-6)
        ret = singa.Tensor([2, 3])
        getattr(singa, name + "WithRet")(a, 2.0, ret)
        np.testing.assert_allclose(ret.to_numpy(), ref(X, 2.0), rtol=1e-6)
    np.testing.assert_allclose(singa.Div(1.0, b).to_numpy(), 1.0 / P, rtol=1e-6)
    np.testing.assert_allclose(singa.__add__(a, b).to_numpy(), X + P, rtol=1e-6)
    np.testing.assert_allclose(singa.__mul__(a, b).to_numpy(), X * P, rtol=1e-6)


def test_shape_functions():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    c = singa.ConcatOn(singa.VecTensor([CT(a), CT(a)]), 1)
    np.testing.assert_array_equal(c.to_numpy(), np.concatenate([a, a], 1))
    np.testing.assert_array_equal(singa.SliceOn(CT(a), 1, 3, 2).to_numpy(), a[:, :, 1:3])
    np.testing.assert_array_equal(singa.Reshape(CT(a), [6, 4]).to_numpy(), a.reshape(6, 4))
    t = singa.Transpose(CT(a), [2, 0, 1])
    assert t.transpose()  # a strided view
    np.testing.assert_array_equal(t.to_numpy(), a.transpose(2, 0, 1))
    assert not singa.Contiguous(t).transpose()
    np.testing.assert_array_equal(singa.DefaultTranspose(CT(a)).to_numpy(), a.T)


def test_random_fills():
    n = 50000
    t = singa.Tensor([n])
    singa.Gaussian(1.0, 2.0, t)
    v = t.to_numpy()
    assert abs(v.mean() - 1.0) < 5 * 2 / math.sqrt(n) and abs(v.std() - 2.0) < 0.05
    singa.Uniform(-1.0, 3.0, t)
    v = t.to_numpy()
    assert v.min() >= -1 and v.max() < 3 and abs(v.mean() - 1.0) < 0.05
    singa.Bernoulli(0.3, t)
    v = t.to_numpy()
    assert set(np.unique(v)) <= {0.0, 1.0} and abs(v.mean() - 0.3) < 0.01


def test_blas_like_functions():
    A = np.arange(6, dtype=np.float32).reshape(2, 3)
    B = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    v = np.array([1.0, -1.0, 2.0], np.float32)
    np.testing.assert_allclose(singa.Mult(CT(A), CT(B)).to_numpy(), A @ B, rtol=1e-6)
    np.testing.assert_allclose(singa.Mult(CT(A), CT(v)).to_numpy(), A @ v, rtol=1e-6)
    batched = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_allclose(singa.Mult(CT(batched), CT(batched.transpose(0, 2, 1).copy()))
                               .to_numpy(), batched @ batched.transpose(0, 2, 1), rtol=1e-6)
    ret = singa.Tensor([2, 4])
    singa.MultWithRet(CT(A), CT(B), ret)
    np.testing.assert_allclose(ret.to_numpy(), A @ B, rtol=1e-6)
    C = np.ones((2, 4), np.float32)
    c = CT(C)
    singa.MultWithScale(2.0, CT(A), CT(B), 0.5, c)
    np.testing.assert_allclose(c.to_numpy(), 2 * A @ B + 0.5 * C, rtol=1e-6)
    y = CT(np.ones(3))
    singa.Axpy(2.0, CT(v), y)
    np.testing.assert_allclose(y.to_numpy(), 1 + 2 * v)
    singa.Axpy(CT([0.5]), CT(v), y)  # alpha on the device
    np.testing.assert_allclose(y.to_numpy(), 1 + 2.5 * v)


def test_row_and_column_functions():
    m0 = np.arange(6, dtype=np.float32).reshape(2, 3)
    col, row = np.array([1.0, 2.0], np.float32), np.array([1.0, 2.0, 4.0], np.float32)
    for name, ref in (("AddColumn", lambda m: m + col[:, None]),
                      ("SubColumn", lambda m: m - col[:, None]),
                      ("MultColumn", lambda m: m * col[:, None]),
                      ("DivColumn", lambda m: m / col[:, None]),
                      ("AddRow", lambda m: m + row), ("SubRow", lambda m: m - row),
                      ("MultRow", lambda m: m * row), ("DivRow", lambda m: m / row)):
        m = CT(m0)
        getattr(singa, name)(CT(col if "Column" in name else row), m)
        np.testing.assert_allclose(m.to_numpy(), ref(m0), rtol=1e-6, err_msg=name)
    m = CT(m0)
    singa.AddColumnWithScale(2.0, 0.5, CT(col), m)
    np.testing.assert_allclose(m.to_numpy(), 2 * col[:, None] + 0.5 * m0)
    m = CT(m0)
    singa.AddRowWithScale(2.0, 0.5, CT(row), m)
    np.testing.assert_allclose(m.to_numpy(), 2 * row + 0.5 * m0)


@pytest.mark.parametrize("target", ["ids", "onehot"])
def test_cross_entropy_functions(target):
    p = P / P.sum(1, keepdims=True)
    ids = np.array([1, 2], np.int32)
    onehot = np.eye(3, dtype=np.float32)[ids]
    t = CT(ids, np.int32) if target == "ids" else CT(onehot)
    np.testing.assert_allclose(singa.CrossEntropyFwd(CT(p), t).to_numpy(),
                               -np.log(p[[0, 1], ids]), rtol=1e-6)
    np.testing.assert_allclose(singa.SoftmaxCrossEntropyBwd(CT(p), t).to_numpy(), p - onehot,
                               rtol=1e-6)


def test_copy_and_repeat_data():
    src = CT(np.arange(6))
    dst = CT(np.zeros(8))
    singa.CopyDataToFrom(dst, src, 3, 4, 1)
    np.testing.assert_array_equal(dst.to_numpy(), [0, 0, 0, 0, 1, 2, 3, 0])
    r = singa.Tensor([4, 2])
    singa.RepeatDataToFrom(False, [2], 0, r, CT([[1, 2], [3, 4]]), 8)
    np.testing.assert_array_equal(r.to_numpy(), [[1, 2], [1, 2], [3, 4], [3, 4]])


def test_handles_are_exported():
    x = singa.Tensor([2, 3, 5, 5])
    h = singa.ConvHandle(x, [3, 3], [1, 1], [1, 1], 3, 4, True, 1)
    assert (h.conv_height, h.conv_width, h.batchsize) == (5, 5, 2)
    p = singa.PoolingHandle(x, [2, 2], [2, 2], [0, 0], True)
    assert (p.pooled_height, p.pooled_width, p.is_max_pooling) == (2, 2, True)
    assert singa.CudnnConvHandle is singa.ConvHandle
    assert singa.BatchNormHandle(0.9, x).factor == 0.9
