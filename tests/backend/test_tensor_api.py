"""``singa.tensor``: SINGA's section-2 Tensor API on the device under test, against numpy.

Runs on every backend (``--singa-backend``); float64 checks are skipped on a device whose
kernels lack float64.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from singa import autograd, tensor
from singa.errors import DeviceMismatchError, DtypeMismatchError, ShapeError
from singa.ops import OPS
from singa.tensor import Tensor


def supports(dev, op: str, dtype: int) -> bool:
    fn = dev.kernels.get(op)
    if fn is None:
        return bool(dev.host_fallback)
    return dtype in (fn[2] if fn[2] is not None else OPS[op].dtypes)


@pytest.fixture(scope="session")
def dev(singa_device):
    return singa_device


@pytest.fixture(scope="session")
def f64(dev):
    if not all(supports(dev, op, tensor.float64) for op in ("Add", "Matmul", "Sum", "Copy")):
        pytest.skip(f"{dev.name} has no float64 kernels")
    return tensor.float64


def T(a, dev, dtype=None):
    a = np.asarray(a)
    if dtype is None:
        dtype = {np.dtype(np.int32): tensor.int32, np.dtype(np.float64): tensor.float64,
                 np.dtype(np.float16): tensor.float16}.get(a.dtype, tensor.float32)
    return Tensor(data=a, device=dev, dtype=dtype)


A = np.array([[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]], np.float32)
B = np.array([[2.0, 1.0, -0.5], [3.0, -2.0, 1.0]], np.float32)


# ---------------------------------------------------------------- construction
def test_constructor_forms(dev):
    t = Tensor((2, 3), dev)
    assert t.shape == (2, 3) and t.device is dev and t.dtype == tensor.float32
    assert t.requires_grad and not t.stores_grad and t.is_dummy()
    np.testing.assert_array_equal(t.to_numpy(), np.zeros((2, 3)))  # reads as zeros
    assert Tensor(4, dev).shape == (4,)
    assert Tensor(device=dev).shape == () and Tensor(device=dev).is_empty()
    i = Tensor((3,), dev, tensor.int32)
    assert i.dtype == tensor.int32 and i.memsize() == 12
    d = Tensor(data=A, device=dev)
    np.testing.assert_array_equal(d.to_numpy(), A)
    w = Tensor(data=d.data)  # wraps a CTensor as is
    assert w.data is d.data
    named = Tensor((1,), dev, requires_grad=False, stores_grad=True, name="w")
    assert named.name == "w" and not named.is_dummy() and named.stores_grad
    assert tensor.PlaceHolder is Tensor
    assert isinstance(t.creator, autograd.Dummy)


def test_constructor_with_ctensor_on_another_device_is_an_error(dev):
    from singa.device import create_cpu_device

    cpu = create_cpu_device()
    if dev is cpu:
        pytest.skip("needs a second device")
    with pytest.raises(DeviceMismatchError, match="ToDevice"):
        Tensor(data=Tensor((2,), cpu).data, device=dev)


def test_numpy_dtype_conversions(dev):
    t = tensor.from_numpy(np.arange(4.0).reshape(2, 2), dev)  # float64 -> float32
    assert t.dtype == tensor.float32 and t.device is dev
    ti = tensor.from_numpy(np.arange(4, dtype=np.int64), dev)  # int64 -> int32
    assert ti.dtype == tensor.int32
    np.testing.assert_array_equal(tensor.to_numpy(ti), [0, 1, 2, 3])
    assert tensor.to_numpy(ti).dtype == np.int32
    with pytest.raises(TypeError, match="unsupported dtype"):
        tensor.from_numpy(np.array(["a"]))
    h = tensor.from_numpy(np.array([0.5, 1.5], np.float16), dev)
    assert h.dtype == tensor.float16
    np.testing.assert_array_equal(h.to_numpy(), [0.5, 1.5])


def test_tensors_are_unhashable_and_compare_elementwise(dev):
    t = T(A, dev)
    with pytest.raises(TypeError):
        hash(t)
    assert (t == None) is False  # noqa: E711
    np.testing.assert_array_equal((t == T(A, dev)).to_numpy(), np.ones_like(A))


def test_introspection(dev):
    t = T(np.zeros((2, 3, 4), np.float32), dev)
    assert t.ndim() == 3 and t.size() == 24 and t.memsize() == 96 and not t.is_empty()
    assert not t.is_transpose() and t.transpose((1, 0, 2)).is_transpose()
    assert repr(T(np.array([1.0, 2.0], np.float32), dev)) == "[1. 2.], float32"
    assert repr(T(np.array([1, 2], np.int32), dev)).endswith(", int32")


# ---------------------------------------------------------------- copies and fills
def test_copy_from_numpy_and_offset(dev):
    t = Tensor((2, 3), dev)
    t.copy_from_numpy(A)
    np.testing.assert_array_equal(t.to_numpy(), A)
    t.copy_from_numpy(np.array([9.0, 8.0], np.float32), offset=4)
    np.testing.assert_array_equal(t.to_numpy().reshape(-1), [1.5, -2, 3, 0.5, 9, 8])
    with pytest.raises(ShapeError, match="6"):
        t.copy_from_numpy(np.zeros(5, np.float32))
    u = Tensor((3, 2), dev)
    u.copy_data(t)
    np.testing.assert_array_equal(u.to_numpy().reshape(-1), t.to_numpy().reshape(-1))
    u.copy_from(np.zeros((3, 2), np.float32))
    u.copy_from(T(np.ones((3, 2), np.float32), dev))
    np.testing.assert_array_equal(u.to_numpy(), 1.0)
    ct = Tensor((2,), dev)
    tensor.copy_from_numpy(ct.data, np.array([3.0, 4.0], np.float32))
    np.testing.assert_array_equal(ct.to_numpy(), [3, 4])


def test_fills_return_self_and_refuse_out_of_place(dev):
    t = Tensor((2000,), dev)
    assert t.set_value(2.5) is t
    np.testing.assert_array_equal(t.to_numpy(), 2.5)
    assert t.gaussian(1.0, 0.5) is t and abs(t.to_numpy().mean() - 1.0) < 0.1
    assert t.uniform(-1.0, 1.0) is t
    v = t.to_numpy()
    assert v.min() >= -1 and v.max() < 1
    assert t.bernoulli(0.25) is t and set(np.unique(t.to_numpy())) <= {0.0, 1.0}
    for fill in (lambda: t.set_value(1, inplace=False), lambda: t.gaussian(0, 1, False),
                 lambda: t.uniform(0, 1, False), lambda: t.bernoulli(0.5, False)):
        with pytest.raises(NotImplementedError):
            fill()
    assert tensor.bernoulli(0.5, t) is t and tensor.gaussian(0, 1, t) is t
    assert tensor.uniform(0, 1, t) is t


def test_creation_functions(dev):
    t = T(A, dev)
    np.testing.assert_array_equal(tensor.zeros_like(t).to_numpy(), np.zeros_like(A))
    np.testing.assert_array_equal(tensor.ones_like(t).to_numpy(), np.ones_like(A))
    z = tensor.zeros((2, 2), dev)
    assert z.device is dev and np.all(z.to_numpy() == 0)
    assert np.all(tensor.ones((3,), dev).to_numpy() == 1)
    r = tensor.random((1000,), dev).to_numpy()
    assert r.min() >= 0 and r.max() < 1
    assert tensor.product((2, 3, 4)) == 24 and tensor.sizeof(tensor.float32) == 4


def test_clone_deepcopy_and_shallow_copy(dev):
    t = T(A, dev)
    for deep in (t.clone(), t.deepcopy(), copy.deepcopy(t)):
        deep.set_value(0.0)
        np.testing.assert_array_equal(t.to_numpy(), A)
    shallow = t.copy()
    shallow.data.SetFloatValue(7.0)  # shares the block
    np.testing.assert_array_equal(t.to_numpy(), 7.0)
    shallow.to_type(tensor.int32)  # but is its own tensor
    assert t.dtype == tensor.float32 and shallow.dtype == tensor.int32
    h = tensor.to_host(T(A, dev))
    np.testing.assert_array_equal(h.to_numpy(), A)
    assert h.device.id() == -1


def test_dtype_conversion(dev):
    t = T(np.array([1.7, -2.5, 3.0], np.float32), dev)
    i = t.as_type("int")
    assert i.dtype == tensor.int32 and t.dtype == tensor.float32
    np.testing.assert_array_equal(i.to_numpy(), [1, -2, 3])
    assert i.as_type("float").dtype == tensor.float32
    assert t.as_type(tensor.kInt).dtype == tensor.int32
    with pytest.raises(TypeError):
        t.as_type("complex")
    t.to_type(tensor.int32)
    assert t.dtype == tensor.int32
    np.testing.assert_array_equal(t.to_numpy(), [1, -2, 3])


def test_to_device_and_to_host_in_place(dev):
    from singa.device import create_cpu_device

    t = T(A, dev)
    assert t.to_host() is t and t.device is create_cpu_device()
    assert t.to_device(dev) is t and t.device is dev
    np.testing.assert_array_equal(t.to_numpy(), A)


def test_l1_and_l2_follow_singa(dev):
    """SINGA's l1() is the mean absolute value and l2() the Euclidean norm over the size."""
    t = T(A, dev)
    assert t.l1() == pytest.approx(np.abs(A).mean(), rel=1e-6)
    assert t.l2() == pytest.approx(np.linalg.norm(A) / A.size, rel=1e-6)
    assert isinstance(t.l1(), float)


# ---------------------------------------------------------------- views and shape
def test_reshape_transpose_contiguous(dev):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = T(x, dev)
    v = t.transpose((2, 0, 1))
    assert v.data.block is t.data.block  # a strided view, no copy
    np.testing.assert_array_equal(v.to_numpy(), x.transpose(2, 0, 1))
    r = v.reshape((4, 6))  # materialises the transposed data
    np.testing.assert_array_equal(r.to_numpy(), x.transpose(2, 0, 1).reshape(4, 6))
    c = tensor.contiguous(v)
    assert not c.is_transpose()
    np.testing.assert_array_equal(tensor.reshape(t, (6, 4)).to_numpy(), x.reshape(6, 4))
    np.testing.assert_array_equal(tensor.transpose(t).to_numpy(), x.T)
    np.testing.assert_array_equal(t.T().to_numpy(), x.T)
    with pytest.raises(ShapeError):
        t.reshape((5, 5))
    t2 = T(x, dev)
    t2.reset_like(T(np.zeros((3, 1), np.float32), dev))
    assert t2.shape == (3, 1)


@pytest.mark.parametrize("repeats,axis", [(2, None), (2, 0), ([1, 2, 3], 1), ([2], 1)])
def test_repeat(repeats, axis, dev):
    t = T(A, dev)
    want = np.repeat(A, repeats if not isinstance(repeats, list) or len(repeats) > 1
                     else repeats[0], axis)
    np.testing.assert_array_equal(t.repeat(repeats, axis).to_numpy(), want)
    np.testing.assert_array_equal(tensor.repeat(t, repeats, axis).to_numpy(), want)


@pytest.mark.parametrize("key", [0, -1, (1, 2), (slice(None), 1), slice(0, 1),
                                 (slice(1, None), slice(0, 2)), (slice(None, None, 2),)])
def test_getitem_keeps_int_indexed_axes(key, dev):
    x = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    keys = key if isinstance(key, tuple) else (key,)
    np_key = tuple(slice(k, k + 1 if k != -1 else None) if isinstance(k, int) else k
                   for k in keys)
    got = T(x, dev)[key]
    np.testing.assert_array_equal(got.to_numpy(), x[np_key])
    assert got.ndim() == 3


def test_getitem_errors(dev):
    t = T(A, dev)
    with pytest.raises(IndexError):
        t[5]
    with pytest.raises(IndexError):
        t[0, 0, 0]


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenate(axis, dev):
    got = tensor.concatenate([T(A, dev), T(B, dev), T(A, dev)], axis)
    np.testing.assert_array_equal(got.to_numpy(), np.concatenate([A, B, A], axis))


def test_copy_data_to_from_with_offsets_across_devices(dev):
    from singa.device import create_cpu_device

    src = T(np.arange(10, dtype=np.float32), dev)
    dst = Tensor((3, 4), create_cpu_device())
    tensor.copy_data_to_from(dst, src, 5, dst_offset=6, src_offset=2)
    np.testing.assert_array_equal(dst.to_numpy().reshape(-1),
                                  [0, 0, 0, 0, 0, 0, 2, 3, 4, 5, 6, 0])
    with pytest.raises(ShapeError):
        tensor.copy_data_to_from(dst, src, 20)


# ---------------------------------------------------------------- arithmetic
OPS_BIN = [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
           ("truediv", np.divide)]


@pytest.mark.parametrize("name,ref", OPS_BIN)
@pytest.mark.parametrize("bshape", [(2, 3), (3,), (2, 1), (1, 3)])
def test_binary_operators_broadcast(name, ref, bshape, dev):
    b = B.reshape(-1)[: int(np.prod(bshape))].reshape(bshape) + np.float32(5.0)
    got = getattr(T(A, dev), f"__{name}__")(T(b, dev))
    np.testing.assert_allclose(got.to_numpy(), ref(A, b), rtol=1e-6)


@pytest.mark.parametrize("name,ref", OPS_BIN)
def test_scalar_and_reflected_operators(name, ref, dev):
    t = T(A, dev)
    np.testing.assert_allclose(getattr(t, f"__{name}__")(2.0).to_numpy(), ref(A, 2.0),
                               rtol=1e-6)
    np.testing.assert_allclose(getattr(t, f"__r{name}__")(2.0).to_numpy(), ref(2.0, A),
                               rtol=1e-6)


def test_floor_division_and_inplace_operators(dev):
    t = T(A, dev)
    np.testing.assert_array_equal((t // 2.0).to_numpy(), np.floor(A / 2.0))
    t += T(B, dev)
    t -= 1.0
    t *= T(B, dev)
    t /= 2
    np.testing.assert_allclose(t.to_numpy(), (A + B - 1) * B / 2, rtol=1e-6)
    u = T(A, dev)
    u += T(np.array([1.0, 2.0, 3.0], np.float32), dev)  # broadcast into the left shape
    np.testing.assert_allclose(u.to_numpy(), A + [1, 2, 3])
    with pytest.raises(ShapeError):
        u += T(np.ones((3, 3), np.float32), dev)


def test_comparisons_return_float_masks(dev):
    t, u = T(A, dev), T(B, dev)
    for op, ref in (("__lt__", np.less), ("__le__", np.less_equal), ("__gt__", np.greater),
                    ("__ge__", np.greater_equal)):
        got = getattr(t, op)(u)
        assert got.dtype == tensor.float32
        np.testing.assert_array_equal(got.to_numpy(), ref(A, B).astype(np.float32))
        np.testing.assert_array_equal(getattr(t, op)(1.0).to_numpy(), ref(A, 1.0))
    for fn, ref in ((tensor.lt, np.less), (tensor.le, np.less_equal), (tensor.gt, np.greater),
                    (tensor.ge, np.greater_equal), (tensor.eq, np.equal)):
        np.testing.assert_array_equal(fn(t, 1.5).to_numpy(), ref(A, 1.5))
    i = T(np.array([1, 5], np.int32), dev)
    assert (i < 3).dtype == tensor.float32


def test_int_and_float_scalar_promotion(dev):
    """SINGA: int tensor (op) float scalar gives float32; int with int stays int."""
    i = T(np.array([1, 2, 3], np.int32), dev)
    r = i + 1.5
    assert r.dtype == tensor.float32
    np.testing.assert_array_equal(r.to_numpy(), [2.5, 3.5, 4.5])
    assert (i * 2).dtype == tensor.int32
    np.testing.assert_array_equal((i * 2).to_numpy(), [2, 4, 6])
    assert (3.0 / i).dtype == tensor.float32


def test_mixing_dtypes_in_place_names_both_and_the_fix(dev):
    """int32 + float32 promotes to float32 (test_dtype_promotion.py); writing that float
    result into the int32 tensor in place is refused, as numpy and PyTorch refuse it."""
    i = T(np.ones((2, 3), np.int32), dev)
    with pytest.raises(DtypeMismatchError, match="int32.*float32|float32.*int32") as info:
        i += T(A, dev)
    assert "as_type" in str(info.value)
    np.testing.assert_array_equal(i.to_numpy(), np.ones((2, 3)))


def test_mixing_devices_names_both_and_the_fix(dev):
    from singa.device import create_cpu_device

    cpu = create_cpu_device()
    if dev is cpu:
        pytest.skip("needs a second device")
    with pytest.raises(DeviceMismatchError) as info:
        T(A, dev) + T(A, cpu)
    msg = str(info.value)
    assert dev.name in msg and "cpu" in msg and "to_device" in msg


def test_module_arithmetic_with_ret(dev):
    t, u = T(A, dev), T(B, dev)
    for fn, ref in ((tensor.add, np.add), (tensor.sub, np.subtract),
                    (tensor.eltwise_mult, np.multiply), (tensor.div, np.divide)):
        np.testing.assert_allclose(fn(t, u).to_numpy(), ref(A, B), rtol=1e-6)
        ret = Tensor((2, 3), dev)
        assert fn(t, u, ret) is ret
        np.testing.assert_allclose(ret.to_numpy(), ref(A, B), rtol=1e-6)
    y = T(B, dev)
    assert tensor.axpy(2.0, t, y) is y
    np.testing.assert_allclose(y.to_numpy(), B + 2 * A, rtol=1e-6)


def test_elementwise_math(dev):
    x = np.abs(A) + 0.5
    t = T(x, dev)
    for fn, ref in ((tensor.abs, np.abs), (tensor.exp, np.exp), (tensor.ceil, np.ceil),
                    (tensor.log, np.log), (tensor.sigmoid, lambda v: 1 / (1 + np.exp(-v))),
                    (tensor.sign, np.sign), (tensor.sqrt, np.sqrt), (tensor.square, np.square),
                    (tensor.tanh, np.tanh)):
        np.testing.assert_allclose(fn(t).to_numpy(), ref(x), rtol=1e-5)
    np.testing.assert_allclose(tensor.pow(t, 2.0).to_numpy(), x ** 2, rtol=1e-6)
    np.testing.assert_allclose(tensor.pow(t, T(B, dev)).to_numpy(), x ** B, rtol=1e-5)
    out = Tensor((2, 3), dev)
    assert tensor.pow(t, 0.5, out) is out
    np.testing.assert_allclose(out.to_numpy(), np.sqrt(x), rtol=1e-6)


# ---------------------------------------------------------------- products and reductions
@pytest.mark.parametrize("sa,sb", [((2, 3), (3, 4)), ((2, 3), (3,)), ((2, 2, 3), (2, 3, 4)),
                                   ((2, 2, 2, 3), (2, 2, 3, 2)), ((2, 2, 3), (3, 4))])
def test_mult_gemv_gemm_batched(sa, sb, dev, rng):
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    np.testing.assert_allclose(tensor.mult(T(a, dev), T(b, dev)).to_numpy(), a @ b, rtol=1e-5,
                               atol=1e-6)


def test_mult_with_c_alpha_beta(dev, rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    c0 = rng.standard_normal((2, 4)).astype(np.float32)
    c = T(c0, dev)
    assert tensor.mult(T(a, dev), T(b, dev), c, 2.0, 0.5) is c
    np.testing.assert_allclose(c.to_numpy(), 2 * a @ b + 0.5 * c0, rtol=1e-5, atol=1e-6)
    bb = rng.standard_normal((2, 3, 4)).astype(np.float32)
    aa = rng.standard_normal((2, 2, 3)).astype(np.float32)
    cc0 = rng.standard_normal((2, 2, 4)).astype(np.float32)
    cc = T(cc0, dev)
    tensor.mult(T(aa, dev), T(bb, dev), cc, 1.5, 2.0)
    np.testing.assert_allclose(cc.to_numpy(), 1.5 * aa @ bb + 2 * cc0, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("spec,sa,sb", [
    ("ij,jk->ik", (2, 3), (3, 4)), ("bij,bjk->bik", (2, 2, 3), (2, 3, 4)),
    ("i,j->ij", (3,), (4,)), ("ij,ij->i", (2, 3), (2, 3)), ("ij,kj->ik", (2, 3), (4, 3)),
    ("ijk,ik->j", (2, 3, 4), (2, 4)), ("ij,jk", (2, 3), (3, 4)), ("ij,ji->", (2, 3), (3, 2))])
def test_einsum(spec, sa, sb, dev, rng):
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    np.testing.assert_allclose(tensor.einsum(spec, T(a, dev), T(b, dev)).to_numpy(),
                               np.einsum(spec, a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axes", [0, 1, 2, ([1, 0], [0, 1]), ([2], [0]), ((0, 2), (1, 2))])
def test_tensordot(axes, dev, rng):
    a = rng.standard_normal((3, 2, 4)).astype(np.float32)
    b = {0: (5, 6), 1: (4, 5), 2: (2, 4, 5), 2.5: None}.get(axes if isinstance(axes, int)
                                                            else 2.5)
    if b is None:
        b = {str(([1, 0], [0, 1])): (2, 3, 5), str(([2], [0])): (4, 5),
             str(((0, 2), (1, 2))): (5, 3, 4)}[str(axes)]
    b = rng.standard_normal(b).astype(np.float32)
    np.testing.assert_allclose(tensor.tensordot(T(a, dev), T(b, dev), axes).to_numpy(),
                               np.tensordot(a, b, axes), rtol=1e-5, atol=1e-5)


def test_sum_average_softmax(dev):
    t = T(A, dev)
    s = tensor.sum(t)  # SINGA: a Tensor of shape (1, 1) (a tensordot with a ones tensor)
    assert isinstance(s, Tensor) and s.shape == (1, 1)
    np.testing.assert_allclose(tensor.to_numpy(s), [[A.sum()]], rtol=1e-6)
    np.testing.assert_allclose(tensor.sum(t, 0).to_numpy(), A.sum(0))
    assert tensor.sum(t, (0, 1)).shape == (1, 1)
    np.testing.assert_allclose(tensor.sum(t, (0, 1)).to_numpy(), A.sum())
    out = Tensor((3,), dev)
    assert tensor.sum(t, 0, out) is out
    v = T(np.array([1.0, 2.0, 6.0], np.float32), dev)
    assert tensor.average(v) == pytest.approx(3.0)
    np.testing.assert_allclose(tensor.average(t, 1).to_numpy(), A.mean(1), rtol=1e-6)
    np.testing.assert_allclose(tensor.average(t).to_numpy(), A.mean(0), rtol=1e-6)
    e = np.exp(A - A.max(1, keepdims=True))
    np.testing.assert_allclose(tensor.softmax(t).to_numpy(), e / e.sum(1, keepdims=True),
                               rtol=1e-6)
    e1 = np.exp(A[0] - A[0].max())
    np.testing.assert_allclose(tensor.softmax(T(A[0], dev)).to_numpy(), e1 / e1.sum(),
                               rtol=1e-6)
    np.testing.assert_allclose(tensor.sum_columns(t).to_numpy(), A.sum(1, keepdims=True))
    np.testing.assert_allclose(tensor.sum_rows(t).to_numpy(), A.sum(0, keepdims=True))


def test_row_and_column_helpers(dev):
    col, row = np.array([1.0, 2.0], np.float32), np.array([1.0, 2.0, 4.0], np.float32)
    m = T(A, dev)
    tensor.add_column(2.0, T(col, dev), 0.5, m)
    np.testing.assert_allclose(m.to_numpy(), 2 * col[:, None] + 0.5 * A)
    m = T(A, dev)
    tensor.add_row(2.0, T(row, dev), 0.5, m)
    np.testing.assert_allclose(m.to_numpy(), 2 * row + 0.5 * A)
    for meth, ref in (("add_column", A + col[:, None]), ("div_column", A / col[:, None]),
                      ("mult_column", A * col[:, None]), ("add_row", A + row),
                      ("div_row", A / row), ("mult_row", A * row)):
        m = T(A, dev)
        getattr(m, meth)(T(col if "column" in meth else row, dev))
        np.testing.assert_allclose(m.to_numpy(), ref, rtol=1e-6, err_msg=meth)


def test_raw_tensor_wrappers(dev):
    cts = [T(A, dev).data, T(B, dev).data]
    ts = tensor.from_raw_tensors(cts)
    assert all(t.data is c for t, c in zip(ts, cts))
    np.testing.assert_array_equal(tensor.from_raw_tensor(cts[0]).to_numpy(), A)
    from singa import singa_wrap

    r = tensor._call_singa_func(singa_wrap.Abs, cts[0])
    np.testing.assert_array_equal(r.to_numpy(), np.abs(A))


# ---------------------------------------------------------------- float64 (where supported)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_float64_broadcast_arithmetic_generated(data, dev, f64):
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=1, max_dims=3,
                                                         max_side=3))
    sa, sb = shapes.input_shapes
    a = data.draw(hnp.arrays(np.float64, sa, elements=st.floats(-4, 4)))
    b = data.draw(hnp.arrays(np.float64, sb, elements=st.floats(0.5, 4)))
    ta, tb = T(a, dev, f64), T(b, dev, f64)
    np.testing.assert_allclose((ta + tb).to_numpy(), a + b, rtol=1e-15)
    np.testing.assert_allclose((ta * tb).to_numpy(), a * b, rtol=1e-15)
    np.testing.assert_allclose((ta / tb).to_numpy(), a / b, rtol=1e-15)
    np.testing.assert_allclose((ta - tb).to_numpy(), a - b, rtol=1e-15, atol=1e-15)


def test_float64_matmul_and_sum(dev, f64, rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    np.testing.assert_allclose(tensor.mult(T(a, dev, f64), T(b, dev, f64)).to_numpy(), a @ b,
                               rtol=1e-12)
    assert tensor.sum(T(a, dev, f64)).to_numpy().item() == pytest.approx(a.sum(), rel=1e-12)


@pytest.fixture
def rng():
    return np.random.default_rng(7)
