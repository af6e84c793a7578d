"""Products, reductions, softmax and shape/indexing autograd operators.

Forward values against numpy (ONNX semantics where SINGA follows ONNX), gradients against
finite differences in float64, on index, broadcast and edge shapes.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_op, to_tensor
from hypothesis import given, settings
from hypothesis import strategies as st
from singa import autograd, tensor
from singa.errors import ShapeError
from singa.tensor import Tensor


def T(a, grad=False):
    return to_tensor(np.asarray(a), grad=grad)


# ---------------------------------------------------------------- matmul, add_bias, gemm
@pytest.mark.parametrize("sa,sb", [
    ((3, 4), (4, 5)), ((1, 4), (4, 1)), ((4,), (4, 3)), ((3, 4), (4,)), ((4,), (4,)),
    ((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (4, 2)), ((3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (3, 4, 2)), ((2, 2, 3, 4), (2, 2, 4, 3))])
def test_matmul(sa, sb, rng):
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    check_op(autograd.matmul, [a, b], np.matmul, fwd_rtol=1e-12)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("bshape", ["vector", "matrix"])
def test_add_bias(axis, bshape, rng):
    x = rng.standard_normal((3, 4))
    n = 4 if axis == 0 else 3
    b = rng.standard_normal((n,) if bshape == "vector" else ((1, n) if axis == 0 else (n, 1)))

    def ref(x, b):
        return x + (b.reshape(1, n) if axis == 0 else b.reshape(n, 1))

    check_op(lambda x, b: autograd.add_bias(x, b, axis), [x, b], ref)


def test_add_bias_does_not_modify_its_input():
    """SINGA's AddBias mutated x in place; here x keeps its values."""
    x = T(np.zeros((2, 3)))
    y = autograd.add_bias(x, T(np.ones(3)))
    np.testing.assert_array_equal(x.to_numpy(), 0.0)
    np.testing.assert_array_equal(y.to_numpy(), 1.0)


@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("tb", [0, 1])
@pytest.mark.parametrize("cshape", [None, "full", "row", "vector", "scalar"])
def test_gemm(ta, tb, cshape, rng):
    m, k, n = 3, 4, 2
    a = rng.standard_normal((k, m) if ta else (m, k))
    b = rng.standard_normal((n, k) if tb else (k, n))
    alpha, beta = 0.7, 1.3
    shapes = {"full": (m, n), "row": (1, n), "vector": (n,), "scalar": (1,)}

    def ref(a, b, c=None):
        y = alpha * (a.T if ta else a) @ (b.T if tb else b)
        return y if c is None else y + beta * c

    if cshape is None:
        check_op(lambda a, b: autograd.gemm(a, b, None, alpha, beta, ta, tb), [a, b], ref)
    else:
        c = rng.standard_normal(shapes[cshape])
        check_op(lambda a, b, c: autograd.gemm(a, b, c, alpha, beta, ta, tb), [a, b, c], ref)


# ---------------------------------------------------------------- softmax and reductions
def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape,axis", [((3, 5), 1), ((3, 5), 0), ((2, 3, 4), -1),
                                        ((2, 3, 4), 1), ((4,), 0)])
def test_softmax_and_log_softmax(shape, axis, rng):
    x = rng.standard_normal(shape) * 2
    check_op(lambda t: autograd.softmax(t, axis), [x], lambda x: _softmax(x, axis))
    check_op(lambda t: autograd.log_softmax(t, axis), [x],
             lambda x: np.log(_softmax(x, axis)))


def test_softmax_is_stable_for_large_logits():
    x = np.array([[1000.0, 1001.0, 999.0]])
    y = autograd.softmax(T(x)).to_numpy()
    np.testing.assert_allclose(y, _softmax(x, 1), rtol=1e-12)


@pytest.mark.parametrize("shape,axes", [((3, 4), None), ((3, 4), [0]), ((3, 4), [1]),
                                        ((2, 3, 4), [0, 2]), ((2, 3, 4), [-1]), ((5,), [0])])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_sum_and_mean(shape, axes, keepdims, rng):
    x = rng.standard_normal(shape)
    ax = None if axes is None else tuple(axes)
    out = check_op(lambda t: autograd.reduce_sum(t, axes, keepdims), [x],
                   lambda x: np.sum(x, axis=ax, keepdims=bool(keepdims)))
    check_op(lambda t: autograd.reduce_mean(t, axes, keepdims), [x],
             lambda x: np.mean(x, axis=ax, keepdims=bool(keepdims)))
    assert out["grads"][0].shape == shape


def test_reduce_sum_gradient_is_ones_not_a_mean():
    """SINGA scaled ReduceSum's gradient like a mean; d sum(x) / dx = 1."""
    autograd.training = True
    x = Tensor(data=np.arange(6.0).reshape(2, 3), dtype=tensor.float64, stores_grad=True)
    y = autograd.reduce_sum(x, [1], 0)
    dy = Tensor(data=np.ones(2), dtype=tensor.float64, requires_grad=False)
    (_, g), = list(autograd.backward(y, dy))
    np.testing.assert_array_equal(g.to_numpy(), np.ones((2, 3)))


@pytest.mark.parametrize("fmt", ["channels_first", "channels_last"])
def test_globalaveragepool(fmt, rng):
    x = rng.standard_normal((2, 3, 4, 5))
    axes = (2, 3) if fmt == "channels_first" else (1, 2)
    check_op(lambda t: autograd.globalaveragepool(t, fmt), [x],
             lambda x: x.mean(axis=axes, keepdims=True))


# ---------------------------------------------------------------- pure shape ops
@pytest.mark.parametrize("shape,new,want", [
    ((2, 3, 4), (6, 4), (6, 4)), ((2, 3, 4), (0, -1), (2, 12)), ((2, 3, 4), (-1,), (24,)),
    ((2, 3, 4), (4, 0, 2), (4, 3, 2)), ((6,), (1, 6, 1), (1, 6, 1))])
def test_reshape(shape, new, want, rng):
    x = rng.standard_normal(shape)
    check_op(lambda t: autograd.reshape(t, new), [x], lambda x: x.reshape(want))


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1])
def test_flatten(axis, rng):
    x = rng.standard_normal((2, 3, 2, 2))
    ax = axis % 4 if axis < 0 else axis

    def ref(x):
        return x.reshape(int(np.prod(x.shape[:ax])), -1)

    check_op(lambda t: autograd.flatten(t, axis), [x], ref)


@pytest.mark.parametrize("axis,want", [(0, (1, 3, 4)), (-1, (3, 4, 1)), ([0, 3], (1, 3, 4, 1)),
                                       (1, (3, 1, 4))])
def test_unsqueeze(axis, want, rng):
    x = rng.standard_normal((3, 4))
    check_op(lambda t: autograd.unsqueeze(t, axis), [x], lambda x: x.reshape(want))


@pytest.mark.parametrize("axis,want", [([], (3, 4)), (0, (3, 1, 4)), ([0, 2], (3, 4)),
                                       (-2, (1, 3, 4))])
def test_squeeze(axis, want, rng):
    x = rng.standard_normal((1, 3, 1, 4))
    check_op(lambda t: autograd.squeeze(t, axis), [x], lambda x: x.reshape(want))


def test_squeeze_non_unit_axis_raises():
    with pytest.raises(ShapeError):
        autograd.squeeze(T(np.zeros((2, 3))), 0)


@pytest.mark.parametrize("perm", [None, (1, 0, 2), (2, 0, 1), (0, 1, 2)])
def test_transpose(perm, rng):
    x = rng.standard_normal((2, 3, 4))
    check_op(lambda t: autograd.transpose(t, perm), [x], lambda x: np.transpose(x, perm))


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_cat(axis, n, rng):
    xs = []
    for i in range(n):
        s = [2, 3, 2]
        s[axis] = i + 1
        xs.append(rng.standard_normal(s))
    check_op(lambda *ts: autograd.cat(ts, axis), xs, lambda *xs: np.concatenate(xs, axis))


@pytest.mark.parametrize("parts,num_output,axis", [([1, 2, 3], None, 1), ([2, 2], None, 0),
                                                  (None, 3, 1), ([6], None, 1)])
def test_split(parts, num_output, axis, rng):
    x = rng.standard_normal((4, 6))
    n = x.shape[axis]
    sizes = parts if parts is not None else [n // num_output] * num_output
    cuts = np.cumsum(sizes)[:-1]
    check_op(lambda t: autograd.split(t, axis, parts, num_output), [x],
             lambda x: tuple(np.split(x, cuts, axis)))


def test_split_where_only_some_outputs_are_used(rng):
    """Unused split outputs get a zero gradient slice."""
    x = rng.standard_normal((4, 6))
    check_op(lambda t: autograd.split(t, 1, [2, 4])[1], [x], lambda x: x[:, 2:])


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([0, 1], [2, 3], None, None), ([1], [100], [1], None), ([-2], [-1], [0], None),
    ([0, 3], [3, 0], [0, 1], [2, -1]), ([3], [0], [1], [-2]), ([0], [1], [2], None)])
def test_slice(starts, ends, axes, steps, rng):
    x = rng.standard_normal((3, 4, 2))

    def ref(x):
        idx = [slice(None)] * x.ndim
        ax = axes if axes is not None else list(range(len(starts)))
        st = steps if steps is not None else [1] * len(starts)
        for a, s, e, p in zip(ax, starts, ends, st):
            idx[a] = slice(s, e, p)
        return x[tuple(idx)]

    check_op(lambda t: autograd.slice(t, starts, ends, axes, steps), [x], ref)


@pytest.mark.parametrize("axis,indices", [(0, [2, 0]), (1, [[0, 2], [1, 1]]), (-1, [-1, 0, 0]),
                                          (0, [1])])
def test_gather(axis, indices, rng):
    x = rng.standard_normal((3, 4, 3))
    out = check_op(lambda t: autograd.gather(t, axis, indices), [x],
                   lambda x: np.take(x, np.asarray(indices), axis))
    assert out["grads"][0].shape == x.shape


@pytest.mark.parametrize("shape,reps", [((2, 3), [2, 1]), ((2, 3), [1, 3]), ((3,), [2]),
                                        ((2, 3), [2, 2, 2])])
def test_tile(shape, reps, rng):
    x = rng.standard_normal(shape)
    check_op(lambda t: autograd.tile(t, reps), [x], lambda x: np.tile(x, reps))


@pytest.mark.parametrize("shape,target", [((3, 1), (3, 4)), ((1, 3), (2, 1, 3)),
                                          ((3,), (2, 3)), ((2, 1), (1,))])
def test_expand(shape, target, rng):
    x = rng.standard_normal(shape)

    def ref(x):
        return np.broadcast_to(x, np.broadcast_shapes(x.shape, target)).copy()

    check_op(lambda t: autograd.expand(t, target), [x], ref)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("pads", [[0, 1, 2, 0], [1, 0, 1, 2], [2, 2, 2, 2]])
def test_pad(mode, pads, rng):
    x = rng.standard_normal((3, 4))
    nd = x.ndim
    width = list(zip(pads[:nd], pads[nd:]))

    def ref(x):
        if mode == "constant":
            return np.pad(x, width, mode="constant", constant_values=0.5)
        return np.pad(x, width, mode=mode)

    check_op(lambda t: autograd.pad(t, mode, pads, 0.5), [x], ref)


@pytest.mark.parametrize("scales", [(1, 1, 2, 2), (1, 2, 1, 3), (2, 1, 1, 1)])
def test_upsample_nearest(scales, rng):
    x = rng.standard_normal((1, 2, 2, 3))

    def ref(x):
        for ax, s in enumerate(scales):
            x = np.repeat(x, s, axis=ax)
        return x

    check_op(lambda t: autograd.upsample(t, "nearest", scales), [x], ref)


def _d2s_ref(x, b, mode):
    n, c, h, w = x.shape
    if mode == "DCR":
        t = x.reshape(n, b, b, c // b ** 2, h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // b ** 2, b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // b ** 2, h * b, w * b)


def _s2d_ref(x, b):
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_and_back(mode, rng):
    x = rng.standard_normal((2, 8, 2, 3))
    check_op(lambda t: autograd.depth_to_space(t, 2, mode), [x], lambda x: _d2s_ref(x, 2, mode))
    y = rng.standard_normal((2, 2, 4, 6))
    if mode == "DCR":  # ONNX SpaceToDepth
        check_op(lambda t: autograd.space_to_depth(t, 2, mode), [y], lambda y: _s2d_ref(y, 2))
    else:  # CRD is the inverse of DepthToSpace CRD
        back = autograd.space_to_depth(autograd.depth_to_space(T(x), 2, mode), 2, mode)
        np.testing.assert_array_equal(back.to_numpy(), x)
        check_op(lambda t: autograd.space_to_depth(t, 2, mode), [y])


@pytest.mark.parametrize("cond_kind", ["list", "ndarray", "tensor"])
def test_where(cond_kind, rng):
    a = rng.standard_normal((3, 4))
    b = rng.standard_normal((4,))
    cond = rng.uniform(size=(3, 4)) > 0.5
    c = {"list": cond.tolist(), "ndarray": cond,
         "tensor": Tensor(data=cond.astype(np.float64), dtype=tensor.float64,
                          requires_grad=False)}[cond_kind]
    check_op(lambda x, y: autograd.where(x, y, c), [a, b], lambda a, b: np.where(cond, a, b))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements(axis, rng):
    x = rng.standard_normal((3, 4))
    ax = axis % 2
    idx_shape = (2, 4) if ax == 0 else (3, 2)
    n = x.shape[ax]
    # distinct indices along the axis so that no cell is written twice
    idx = np.stack([rng.permutation(n)[:idx_shape[ax]] for _ in range(idx_shape[1 - ax])],
                   axis=1 - ax).astype(np.int32)
    upd = rng.standard_normal(idx_shape)

    def ref(x):
        out = x.copy()
        np.put_along_axis(out, idx, upd, ax)
        return out

    out = check_op(lambda t: autograd.scatter_elements(t, idx, upd, axis), [x], ref)
    # the gradient is dy with the overwritten cells zeroed
    mask = np.ones_like(x)
    np.put_along_axis(mask, idx, 0.0, ax)
    assert np.all(out["grads"][0][mask == 0] == 0)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_onehot(axis):
    idx = np.array([[0, 2], [1, -1]], np.int32)
    depth, values = 3, [-1.0, 4.0]
    y = autograd.onehot(axis, Tensor(data=idx, dtype=tensor.int32, requires_grad=False),
                        depth, values).to_numpy()
    eye = np.eye(depth)[np.where(idx < 0, idx + depth, idx)]  # (2, 2, depth)
    want = np.moveaxis(eye, -1, axis if axis >= 0 else eye.ndim - 1)
    np.testing.assert_array_equal(y, np.where(want == 1, 4.0, -1.0))


def test_shape_constant_of_shape_nonzero():
    x = T(np.array([[0.0, 1.5, 0.0], [2.0, 0.0, 3.0]]))
    s = autograd.shape(x)
    assert s.dtype == tensor.int32
    np.testing.assert_array_equal(s.to_numpy(), [2, 3])
    c = autograd.constant_of_shape(s, 2.5)
    np.testing.assert_array_equal(c.to_numpy(), np.full((2, 3), 2.5))
    nz = autograd.nonzero(x)
    np.testing.assert_array_equal(nz.to_numpy(), np.array(np.nonzero(x.to_numpy())))


def test_cossim(rng):
    a = rng.standard_normal((4, 5))
    b = rng.standard_normal((4, 5))

    def ref(a, b):
        return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))

    check_op(autograd.cossim, [a, b], ref)


@pytest.mark.parametrize("ids", [[0, 2, 2, 1], [[1, 0], [3, 3]]])
def test_embedding(ids, rng):
    w = rng.standard_normal((4, 3))
    ids = np.asarray(ids, np.int32)
    out = check_op(lambda i, w: autograd.embedding(i, w), [ids, w], lambda i, w: w[i])
    # repeated ids accumulate their gradients
    assert out["grads"][1].shape == w.shape


@settings(max_examples=10, deadline=None)
@given(st.data())
def test_transpose_reshape_chain_generated(data):
    """Random permutations followed by reshapes: strided views stay correct in both passes."""
    nd = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.integers(1, 3), min_size=nd, max_size=nd)))
    perm = data.draw(st.permutations(range(nd)))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    x = rng.standard_normal(shape)

    def fn(t):
        return autograd.mul(autograd.reshape(autograd.transpose(t, perm), (-1,)),
                            autograd.reshape(autograd.transpose(t, perm), (-1,)))

    check_op(fn, [x], lambda x: np.transpose(x, perm).reshape(-1) ** 2)
