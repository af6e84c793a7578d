"""The numpy references of the NN ops (singa.ops._nn_ops, _nn_index_ops) against independent
oracles: finite-difference VJPs, naive loop implementations and, where installed, PyTorch.

No backend is needed: references are plain numpy. Everything runs in float64.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from singa import _dtype
from singa.errors import DtypeMismatchError, ShapeError
from singa.ops import OPS

NN_OPS = [
    "Conv2d", "Conv2dBackwardX", "Conv2dBackwardW", "Pooling2d", "Pooling2dBackward",
    "BatchNormTrain", "BatchNormInfer", "BatchNormBackward", "SoftmaxCrossEntropy",
    "SoftmaxCrossEntropyBackward", "CrossEntropyFwd", "ScatterAdd", "Pad", "PadBackward",
    "Where", "OneHot", "ScatterElements", "GatherElements", "UpsampleNearest",
    "UpsampleNearestBackward",
]


def ref(name, *arrays, **attrs):
    return OPS[name].reference(*arrays, **attrs)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


class Meta:
    """What an op's shape rule sees of a CTensor."""

    def __init__(self, a):
        a = np.asarray(a)
        self.dims = tuple(a.shape)
        self.dtype_code = _dtype.code_of(a.dtype)


def infer(name, *arrays, **attrs):
    return OPS[name].infer([Meta(a) for a in arrays], attrs)


def numeric_grad(f, x, eps=1e-6):
    """Central differences of scalar ``f`` with respect to every element of ``x`` (in place)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        hi = f()
        x[i] = old - eps
        lo = f()
        x[i] = old
        g[i] = (hi - lo) / (2 * eps)
    return g


# ============================================================== samplers and shape rules
@pytest.mark.parametrize("name", NN_OPS)
def test_sampler_cases_satisfy_rule_and_reference(name):
    from singa.testing.cases import sample_cases

    op = OPS[name]
    for dt in op.dtypes:
        for arrays, attrs in sample_cases(op, dt, n=15, seed=3):
            specs = op.infer([Meta(a) for a in arrays], attrs)
            assert len(specs) == op.nout
            ins = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
            out = op.reference(*ins, **attrs)
            out = out if isinstance(out, tuple) else (out,)
            for o, (shape, _) in zip(out, specs):
                assert o.shape == shape
                assert np.all(np.isfinite(o))


def test_sampler_sizes_are_tiny():
    from singa.testing.cases import sample_cases

    for name in NN_OPS:
        for arrays, _ in sample_cases(OPS[name], _dtype.kFloat32, n=20, seed=5):
            assert sum(a.size for a in arrays) <= 1200, name


def test_every_nn_op_is_documented():
    for name in NN_OPS:
        assert len(OPS[name].doc) > 80, name


@pytest.mark.parametrize("bad, match", [
    (dict(x=(2, 3, 5, 5), w=(4, 4, 3, 3)), r"Conv2d: input has 3 channels but W .* expects 4"),
    (dict(x=(2, 4, 5, 5), w=(3, 2, 3, 3), group=2), r"not a multiple of group=2"),
    (dict(x=(2, 4, 2, 2), w=(4, 4, 3, 3)), r"does not fit the padded input"),
    (dict(x=(4, 5, 5), w=(4, 4, 3, 3)), r"x must be 4-D"),
])
def test_conv_shape_errors_name_the_op_and_fix(bad, match):
    x, w = np.zeros(bad["x"]), np.zeros(bad["w"])
    with pytest.raises(ShapeError, match=match):
        infer("Conv2d", x, w, group=bad.get("group", 1))


def test_shape_rule_errors():
    x = np.zeros((2, 3, 4, 4), np.float32)
    with pytest.raises(ShapeError, match="bias must have shape"):
        infer("Conv2d", x, np.zeros((5, 3, 3, 3), np.float32), np.zeros(4, np.float32))
    with pytest.raises(DtypeMismatchError, match="Conv2d: input 0 is float32 but input 1"):
        infer("Conv2d", x, np.zeros((5, 3, 3, 3)))
    with pytest.raises(ShapeError, match="Conv2dBackwardX: dy has shape"):
        infer("Conv2dBackwardX", np.zeros((2, 5, 3, 3), np.float32),
              np.zeros((5, 3, 3, 3), np.float32), x_shape=(2, 3, 4, 4))
    with pytest.raises(ShapeError, match="smaller than the kernel"):
        infer("Pooling2d", x, kernel=(2, 2), pads=(2, 0, 0, 0))
    with pytest.raises(ShapeError, match="running_var has shape"):
        infer("BatchNormTrain", x, *[np.zeros(3, np.float32)] * 3, np.zeros(4, np.float32))
    with pytest.raises(DtypeMismatchError, match="SoftmaxCrossEntropy: input is float32"):
        infer("SoftmaxCrossEntropy", np.zeros((2, 3), np.float32), np.zeros((2, 3)))
    with pytest.raises(ShapeError, match=r"class ids must have shape \(2,\)"):
        infer("SoftmaxCrossEntropy", np.zeros((2, 3), np.float32), np.zeros(3, np.int32))
    with pytest.raises(ShapeError, match="ScatterAdd: src has shape"):
        infer("ScatterAdd", np.zeros(3, np.int32), np.zeros((4, 2)), shape=(5, 2))
    with pytest.raises(ShapeError, match="reflect padding"):
        infer("Pad", np.zeros((2, 3)), pads=(0, 3, 0, 0), mode="reflect")
    with pytest.raises(DtypeMismatchError, match="must be int32"):
        infer("GatherElements", np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(ShapeError, match="one positive integer per axis"):
        infer("UpsampleNearest", np.zeros((2, 3)), scales=(2,))


def test_geometry_accepts_ints_and_pairs():
    from singa.ops._nn_ops import conv2d_geometry, pool2d_geometry

    g = conv2d_geometry("Conv2d", (1, 2, 7, 7), (3, 2, 3, 3),
                        {"stride": 2, "pads": (1, 2), "dilation": 1})
    assert (g.sh, g.sw, g.pt, g.pb, g.pl, g.pr, g.ho, g.wo) == (2, 2, 1, 1, 2, 2, 4, 5)
    p = pool2d_geometry("Pooling2d", (1, 1, 5, 5), {"kernel": 2})
    assert (p.sh, p.sw, p.ho, p.wo, p.is_max, p.count_include_pad) == (2, 2, 2, 2, True, True)


# ============================================================== convolution
def naive_conv2d(x, w, b, stride, pads, dilation, group):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    sh, sw = stride
    pt, pb, pl, pr = pads
    dh, dw = dilation
    ho = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    og = o // group
    y = np.zeros((n, o, ho, wo))
    for ni, oi, p, q in itertools.product(range(n), range(o), range(ho), range(wo)):
        acc = 0.0 if b is None else b[oi]
        g = oi // og
        for ci, i, j in itertools.product(range(cg), range(kh), range(kw)):
            hh = p * sh - pt + i * dh
            ww = q * sw - pl + j * dw
            if 0 <= hh < h and 0 <= ww < wd:
                acc += w[oi, ci, i, j] * x[ni, g * cg + ci, hh, ww]
        y[ni, oi, p, q] = acc
    return y


CONV_CASES = [
    dict(x=(2, 3, 6, 5), w=(4, 3, 3, 2), stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1),
         group=1),
    dict(x=(1, 4, 7, 7), w=(6, 2, 3, 3), stride=(2, 1), pads=(1, 0, 2, 1), dilation=(1, 2),
         group=2),
    dict(x=(2, 3, 5, 6), w=(3, 1, 2, 2), stride=(2, 2), pads=(1, 1, 1, 1), dilation=(2, 1),
         group=3),
    dict(x=(1, 2, 4, 4), w=(2, 2, 1, 1), stride=(3, 2), pads=(2, 0, 0, 3), dilation=(1, 1),
         group=1),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_matches_naive_loops(case, rng):
    x, w = rng.standard_normal(case["x"]), rng.standard_normal(case["w"])
    b = rng.standard_normal(case["w"][0])
    attrs = {k: case[k] for k in ("stride", "pads", "dilation", "group")}
    np.testing.assert_allclose(ref("Conv2d", x, w, b, **attrs),
                               naive_conv2d(x, w, b, **attrs), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ref("Conv2d", x, w, **attrs),
                               naive_conv2d(x, w, None, **attrs), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_backward_refs_are_finite_difference_vjps(case, rng):
    x, w = rng.standard_normal(case["x"]), rng.standard_normal(case["w"])
    attrs = {k: case[k] for k in ("stride", "pads", "dilation", "group")}
    dy = rng.standard_normal(ref("Conv2d", x, w, **attrs).shape)
    f = lambda: np.sum(dy * ref("Conv2d", x, w, **attrs))  # noqa: E731
    dx = ref("Conv2dBackwardX", dy, w, x_shape=x.shape, **attrs)
    dw = ref("Conv2dBackwardW", dy, x, w_shape=w.shape, **attrs)
    np.testing.assert_allclose(dx, numeric_grad(f, x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dw, numeric_grad(f, w), rtol=1e-6, atol=1e-7)


# ============================================================== pooling
def naive_pool(x, kernel, stride, pads, mode, count_include_pad, ceil_mode):
    n, c, h, w = x.shape
    kh, kw = kernel
    sh, sw = stride
    pt, pb, pl, pr = pads

    def out_size(size, k, s, lo, hi):
        if not ceil_mode:
            return (size + lo + hi - k) // s + 1
        o = int(np.ceil((size + lo + hi - k) / s)) + 1
        return o - 1 if (o - 1) * s >= size + lo else o

    ho, wo = out_size(h, kh, sh, pt, pb), out_size(w, kw, sw, pl, pr)
    y = np.zeros((n, c, ho, wo))
    for ni, ci, p, q in itertools.product(range(n), range(c), range(ho), range(wo)):
        vals, cells = [], 0
        for i, j in itertools.product(range(kh), range(kw)):
            hh, ww = p * sh - pt + i, q * sw - pl + j
            inside_padded = -pt <= hh < h + pb and -pl <= ww < w + pr
            if 0 <= hh < h and 0 <= ww < w:
                vals.append(x[ni, ci, hh, ww])
            if inside_padded if count_include_pad else (0 <= hh < h and 0 <= ww < w):
                cells += 1
        y[ni, ci, p, q] = max(vals) if mode == "max" else sum(vals) / cells
    return y


POOL_CASES = [
    dict(kernel=(2, 2), stride=(2, 2), pads=(0, 0, 0, 0)),
    dict(kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1)),
    dict(kernel=(3, 2), stride=(1, 2), pads=(2, 0, 0, 1)),
    dict(kernel=(2, 3), stride=(3, 2), pads=(1, 1, 2, 0)),
]


@pytest.mark.parametrize("geo", POOL_CASES)
@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("cip", [True, False])
@pytest.mark.parametrize("ceil", [False, True])
def test_pooling2d_matches_naive_loops(geo, mode, cip, ceil, rng):
    x = rng.standard_normal((2, 2, 7, 6))
    attrs = dict(geo, mode=mode, count_include_pad=cip, ceil_mode=ceil)
    np.testing.assert_allclose(ref("Pooling2d", x, **attrs), naive_pool(x, **attrs),
                               rtol=1e-12)


@pytest.mark.parametrize("geo", POOL_CASES)
@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("ceil", [False, True])
def test_pooling2d_backward_is_finite_difference_vjp(geo, mode, ceil, rng):
    x = rng.standard_normal((2, 2, 7, 6))  # continuous values: no ties, max is smooth here
    attrs = dict(geo, mode=mode, count_include_pad=False, ceil_mode=ceil)
    y = ref("Pooling2d", x, **attrs)
    dy = rng.standard_normal(y.shape)
    f = lambda: np.sum(dy * ref("Pooling2d", x, **attrs))  # noqa: E731
    dx = ref("Pooling2dBackward", dy, x, y, **attrs)
    np.testing.assert_allclose(dx, numeric_grad(f, x), rtol=1e-6, atol=1e-7)


def test_max_pool_backward_ties_go_to_first_maximum():
    x = np.array([[[[1.0, 3.0, 3.0], [3.0, 0.0, 3.0]]]])
    attrs = dict(kernel=(2, 3), stride=(1, 1), mode="max")
    y = ref("Pooling2d", x, **attrs)
    dx = ref("Pooling2dBackward", np.ones_like(y), x, y, **attrs)
    np.testing.assert_array_equal(dx, [[[[0, 1, 0], [0, 0, 0]]]])


def test_max_pool_padding_never_wins():
    x = -np.ones((1, 1, 2, 2))
    y = ref("Pooling2d", x, kernel=(2, 2), stride=(1, 1), pads=(1, 1, 1, 1), mode="max")
    np.testing.assert_array_equal(y, -np.ones((1, 1, 3, 3)))


# ============================================================== batch normalisation
def test_batchnorm_train_values_and_running_stats(rng):
    x = rng.standard_normal((4, 3, 2, 5)) * 2 + 1
    scale, bias = rng.standard_normal(3), rng.standard_normal(3)
    rm, rv = rng.standard_normal(3), rng.random(3) + 0.5
    y, mean, inv, nrm, nrv = ref("BatchNormTrain", x, scale, bias, rm, rv, momentum=0.8,
                                 eps=1e-3)
    for c in range(3):
        v = x[:, c].ravel()
        mu, var = v.sum() / v.size, ((v - v.mean()) ** 2).sum() / v.size
        np.testing.assert_allclose(mean[c], mu)
        np.testing.assert_allclose(inv[c], 1 / np.sqrt(var + 1e-3))
        np.testing.assert_allclose(y[:, c], (x[:, c] - mu) / np.sqrt(var + 1e-3) * scale[c]
                                   + bias[c])
        np.testing.assert_allclose(nrm[c], 0.8 * rm[c] + 0.2 * mu)
        np.testing.assert_allclose(nrv[c], 0.8 * rv[c] + 0.2 * v.var(ddof=1))


def test_batchnorm_2d_input_and_infer(rng):
    x = rng.standard_normal((6, 4))
    s, b, rm, rv = rng.standard_normal(4), rng.standard_normal(4), rng.standard_normal(4), \
        rng.random(4) + 0.5
    y = ref("BatchNormTrain", x, s, b, rm, rv)[0]
    np.testing.assert_allclose(y, (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5) * s + b)
    np.testing.assert_allclose(ref("BatchNormInfer", x, s, b, rm, rv, eps=1e-4),
                               (x - rm) / np.sqrt(rv + 1e-4) * s + b)


@pytest.mark.parametrize("shape", [(5, 3), (3, 2, 3, 2)])
def test_batchnorm_backward_is_finite_difference_vjp(shape, rng):
    x = rng.standard_normal(shape)
    c = shape[1]
    scale, bias = rng.standard_normal(c), rng.standard_normal(c)
    rm, rv = np.zeros(c), np.ones(c)
    y, mean, inv, _, _ = ref("BatchNormTrain", x, scale, bias, rm, rv)
    dy = rng.standard_normal(shape)
    f = lambda: np.sum(dy * ref("BatchNormTrain", x, scale, bias, rm, rv)[0])  # noqa: E731
    dx, dscale, dbias = ref("BatchNormBackward", dy, x, scale, mean, inv)
    np.testing.assert_allclose(dx, numeric_grad(f, x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dscale, numeric_grad(f, scale), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dbias, numeric_grad(f, bias), rtol=1e-5, atol=1e-7)


# ============================================================== losses
def _one_hot(ids, c):
    t = np.zeros((ids.size, c))
    t[np.arange(ids.size), ids] = 1
    return t


def test_softmax_cross_entropy_ids_dense_and_stability(rng):
    x = rng.standard_normal((4, 5)) * 3
    ids = np.array([0, 4, 2, 2], np.int32)
    loss, p = ref("SoftmaxCrossEntropy", x, ids)
    naive = np.mean([-np.log(np.exp(x[n, ids[n]]) / np.exp(x[n]).sum()) for n in range(4)])
    np.testing.assert_allclose(loss, [naive])
    np.testing.assert_allclose(p.sum(1), 1)
    loss_dense, _ = ref("SoftmaxCrossEntropy", x, _one_hot(ids, 5))
    np.testing.assert_allclose(loss_dense, loss)
    big, _ = ref("SoftmaxCrossEntropy", x + 1e4, ids)  # shift-invariant, no overflow
    np.testing.assert_allclose(big, loss)


@pytest.mark.parametrize("dense", [False, True])
def test_softmax_cross_entropy_backward_is_gradient_of_loss(dense, rng):
    x = rng.standard_normal((3, 4))
    t = rng.random((3, 4)) if dense else np.array([1, 3, 0], np.int32)
    if dense:
        t /= t.sum(1, keepdims=True)
    _, p = ref("SoftmaxCrossEntropy", x, t)
    f = lambda: ref("SoftmaxCrossEntropy", x, t)[0][0]  # noqa: E731
    np.testing.assert_allclose(ref("SoftmaxCrossEntropyBackward", p, t), numeric_grad(f, x),
                               rtol=1e-6, atol=1e-8)


def test_cross_entropy_fwd(rng):
    p = rng.random((3, 4)) + 0.1
    p /= p.sum(1, keepdims=True)
    ids = np.array([3, 0, 1], np.int32)
    np.testing.assert_allclose(ref("CrossEntropyFwd", p, ids), -np.log(p[[0, 1, 2], ids]))
    np.testing.assert_allclose(ref("CrossEntropyFwd", p, _one_hot(ids, 4)),
                               -np.log(p[[0, 1, 2], ids]))
    p[0, 3] = 0.0  # clamped at FLT_MIN: finite
    assert np.isclose(ref("CrossEntropyFwd", p, ids)[0], -np.log(np.finfo(np.float32).tiny))


# ============================================================== indexing, padding, resampling
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_scatter_add_is_adjoint_of_take(axis, rng):
    shape = (4, 3, 5)
    idx = rng.integers(-shape[axis], shape[axis], (2, 3)).astype(np.int32)
    x = rng.standard_normal(shape)
    src_shape = shape[:axis] + idx.shape + shape[axis + 1:]
    f = lambda: np.sum(dy * np.take(x, idx, axis))  # noqa: E731
    dy = rng.standard_normal(src_shape)
    out = ref("ScatterAdd", idx, dy, shape=shape, axis=axis)
    np.testing.assert_allclose(out, numeric_grad(f, x), rtol=1e-7, atol=1e-8)


def test_scatter_add_duplicates_accumulate():
    out = ref("ScatterAdd", np.array([1, 1, -1], np.int32), np.array([[1.0], [2.0], [4.0]]),
              shape=(3, 1))
    np.testing.assert_array_equal(out, [[0], [3], [4]])


PAD_CASES = [((3, 4), (1, 2, 2, 0)), ((2, 3, 4), (0, 1, 2, 1, 0, 3)), ((5,), (2, 3))]


@pytest.mark.parametrize("shape, pads", PAD_CASES)
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_matches_index_definition(shape, pads, mode, rng):
    x = rng.standard_normal(shape)
    y = ref("Pad", x, pads=pads, mode=mode, value=2.5)
    nd = len(shape)
    for pos in np.ndindex(y.shape):
        src = []
        for ax, k in enumerate(pos):
            i, n = k - pads[ax], shape[ax]
            if mode == "edge":
                i = min(max(i, 0), n - 1)
            elif mode == "reflect":
                i = -i if i < 0 else (2 * (n - 1) - i if i >= n else i)
            src.append(i)
        inside = all(0 <= i < n for i, n in zip(src, shape))
        assert y[pos] == (x[tuple(src)] if inside else 2.5)
    assert y.shape == tuple(d + pads[a] + pads[nd + a] for a, d in enumerate(shape))


@pytest.mark.parametrize("shape, pads", PAD_CASES)
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_backward_is_finite_difference_vjp(shape, pads, mode, rng):
    x = rng.standard_normal(shape)
    dy = rng.standard_normal(ref("Pad", x, pads=pads, mode=mode).shape)
    f = lambda: np.sum(dy * ref("Pad", x, pads=pads, mode=mode))  # noqa: E731
    np.testing.assert_allclose(ref("PadBackward", dy, pads=pads, mode=mode, x_shape=shape),
                               numeric_grad(f, x), rtol=1e-7, atol=1e-8)


def test_where_broadcasts_and_treats_nonzero_as_true():
    cond = np.array([[0.0], [np.nan], [-2.0]])
    out = ref("Where", cond, np.arange(3.0), np.full((3, 1), -1.0))
    np.testing.assert_array_equal(out, [[-1, -1, -1], [0, 1, 2], [0, 1, 2]])


def test_onehot_axes_negative_and_out_of_range():
    idx = np.array([[0, -1], [5, 2]], np.int32)
    out = ref("OneHot", idx, depth=3, on_value=2.0, off_value=-1.0)
    assert out.dtype == np.float32 and out.shape == (2, 2, 3)
    np.testing.assert_array_equal(out[0, 0], [2, -1, -1])
    np.testing.assert_array_equal(out[0, 1], [-1, -1, 2])
    np.testing.assert_array_equal(out[1, 0], [-1, -1, -1])
    out0 = ref("OneHot", idx, depth=3, axis=0, dtype=_dtype.kInt)
    assert out0.shape == (3, 2, 2) and out0.dtype == np.int32
    np.testing.assert_array_equal(out0[:, 1, 1], [0, 0, 1])


def test_gather_and_scatter_elements_match_loops(rng):
    x = rng.standard_normal((3, 4, 2))
    for axis in range(3):
        ishape = tuple(min(d, 2) if a != axis else 3 for a, d in enumerate(x.shape))
        idx = rng.integers(-x.shape[axis], x.shape[axis], ishape).astype(np.int32)
        got = ref("GatherElements", x, idx, axis=axis)
        upd = rng.standard_normal(ishape)
        added = ref("ScatterElements", x, idx, upd, axis=axis, reduction="add")
        want, want_add = np.empty(ishape), x.copy()
        for p in np.ndindex(ishape):
            q = list(p)
            q[axis] = idx[p] % x.shape[axis]
            want[p] = x[tuple(q)]
            want_add[tuple(q)] += upd[p]
        np.testing.assert_array_equal(got, want)
        np.testing.assert_allclose(added, want_add)
    idx = np.array([[1, 0]], np.int32)  # distinct targets: "none" replaces
    out = ref("ScatterElements", np.zeros((2, 2)), idx, np.array([[5.0, 6.0]]), axis=0)
    np.testing.assert_array_equal(out, [[0, 6], [5, 0]])


def test_upsample_nearest_and_backward(rng):
    x = rng.standard_normal((2, 3, 2))
    y = ref("UpsampleNearest", x, scales=(1, 2, 3))
    for p in np.ndindex(y.shape):
        assert y[p] == x[p[0], p[1] // 2, p[2] // 3]
    dy = rng.standard_normal(y.shape)
    f = lambda: np.sum(dy * ref("UpsampleNearest", x, scales=(1, 2, 3)))  # noqa: E731
    np.testing.assert_allclose(
        ref("UpsampleNearestBackward", dy, scales=(1, 2, 3), x_shape=x.shape),
        numeric_grad(f, x), rtol=1e-7, atol=1e-8)


# ============================================================== PyTorch cross-checks
@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


TORCH_CONV = [
    dict(x=(2, 4, 9, 8), w=(6, 2, 3, 2), stride=(2, 1), pad=(1, 2), dilation=(2, 1), group=2),
    dict(x=(3, 3, 10, 10), w=(5, 3, 5, 5), stride=(1, 1), pad=(0, 0), dilation=(1, 1),
         group=1),
    dict(x=(1, 6, 7, 7), w=(6, 1, 3, 3), stride=(2, 2), pad=(1, 1), dilation=(1, 1), group=6),
    dict(x=(2, 8, 5, 6), w=(4, 8, 1, 1), stride=(2, 2), pad=(0, 0), dilation=(1, 1), group=1),
]


@pytest.mark.parametrize("case", TORCH_CONV)
def test_conv_against_torch(case, torch, rng):
    F = torch.nn.functional
    x, w = rng.standard_normal(case["x"]), rng.standard_normal(case["w"])
    b = rng.standard_normal(case["w"][0])
    ph, pw = case["pad"]
    attrs = dict(stride=case["stride"], pads=(ph, ph, pw, pw), dilation=case["dilation"],
                 group=case["group"])
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ty = F.conv2d(tx, tw, tb, stride=case["stride"], padding=case["pad"],
                  dilation=case["dilation"], groups=case["group"])
    np.testing.assert_allclose(ref("Conv2d", x, w, b, **attrs), ty.detach().numpy(),
                               rtol=1e-10, atol=1e-10)
    dy = rng.standard_normal(ty.shape)
    ty.backward(torch.tensor(dy))
    np.testing.assert_allclose(ref("Conv2dBackwardX", dy, w, x_shape=x.shape, **attrs),
                               tx.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ref("Conv2dBackwardW", dy, x, w_shape=w.shape, **attrs),
                               tw.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dy.sum(axis=(0, 2, 3)), tb.grad.numpy())


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("cip", [True, False])
@pytest.mark.parametrize("ceil", [False, True])
def test_symmetric_pooling_against_torch(mode, cip, ceil, torch, rng):
    F = torch.nn.functional
    x = rng.standard_normal((2, 3, 9, 8))
    attrs = dict(kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1), mode=mode,
                 count_include_pad=cip, ceil_mode=ceil)
    tx = torch.tensor(x, requires_grad=True)
    if mode == "max":
        ty = F.max_pool2d(tx, 3, 2, 1, ceil_mode=ceil)
    else:
        ty = F.avg_pool2d(tx, 3, 2, 1, ceil_mode=ceil, count_include_pad=cip)
    y = ref("Pooling2d", x, **attrs)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12)
    dy = rng.standard_normal(y.shape)
    ty.backward(torch.tensor(dy))
    np.testing.assert_allclose(ref("Pooling2dBackward", dy, x, y, **attrs), tx.grad.numpy(),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["max", "avg"])
def test_asymmetric_pads_against_torch_explicit_padding(mode, torch, rng):
    """torch pools only with symmetric padding: pad explicitly (with -inf for max, zeros for
    an average that counts padding) and pool without padding."""
    F = torch.nn.functional
    x = rng.standard_normal((2, 2, 7, 6))
    pads = (2, 0, 1, 2)  # top, bottom, left, right
    attrs = dict(kernel=(3, 3), stride=(2, 1), pads=pads, mode=mode, count_include_pad=True)
    tx = torch.tensor(x, requires_grad=True)
    xp = F.pad(tx, (pads[2], pads[3], pads[0], pads[1]),
               value=-float("inf") if mode == "max" else 0.0)
    pool = F.max_pool2d if mode == "max" else F.avg_pool2d
    ty = pool(xp, (3, 3), (2, 1))
    y = ref("Pooling2d", x, **attrs)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12)
    dy = rng.standard_normal(y.shape)
    ty.backward(torch.tensor(dy))
    np.testing.assert_allclose(ref("Pooling2dBackward", dy, x, y, **attrs), tx.grad.numpy(),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(4, 3), (3, 5, 4, 2)])
def test_batchnorm_against_torch(shape, torch, rng):
    F = torch.nn.functional
    c = shape[1]
    x = rng.standard_normal(shape) * 3 + 1
    scale, bias = rng.standard_normal(c), rng.standard_normal(c)
    rm, rv = rng.standard_normal(c), rng.random(c) + 0.5
    trm, trv = torch.tensor(rm), torch.tensor(rv)
    tx, ts, tb = (torch.tensor(a, requires_grad=True) for a in (x, scale, bias))
    ty = F.batch_norm(tx, trm, trv, ts, tb, training=True, momentum=0.25, eps=1e-4)
    y, mean, inv, nrm, nrv = ref("BatchNormTrain", x, scale, bias, rm, rv, momentum=0.75,
                                 eps=1e-4)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(nrm, trm.numpy(), rtol=1e-12)  # torch momentum = 1 - ours
    np.testing.assert_allclose(nrv, trv.numpy(), rtol=1e-12)
    dy = rng.standard_normal(shape)
    ty.backward(torch.tensor(dy))
    dx, dscale, dbias = ref("BatchNormBackward", dy, x, scale, mean, inv)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(dscale, ts.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(dbias, tb.grad.numpy(), rtol=1e-10)
    ti = F.batch_norm(torch.tensor(x), torch.tensor(rm), torch.tensor(rv), torch.tensor(scale),
                      torch.tensor(bias), training=False, eps=1e-4)
    np.testing.assert_allclose(ref("BatchNormInfer", x, scale, bias, rm, rv, eps=1e-4),
                               ti.numpy(), rtol=1e-10, atol=1e-12)


def test_losses_against_torch(torch, rng):
    F = torch.nn.functional
    x = rng.standard_normal((5, 4)) * 2
    ids = np.array([0, 3, 3, 1, 2], np.int32)
    soft = rng.random((5, 4))
    soft /= soft.sum(1, keepdims=True)
    for t, tt in ((ids, torch.tensor(ids, dtype=torch.long)), (soft, torch.tensor(soft))):
        loss, p = ref("SoftmaxCrossEntropy", x, t)
        np.testing.assert_allclose(loss[0], F.cross_entropy(torch.tensor(x), tt).item())
        np.testing.assert_allclose(p, torch.softmax(torch.tensor(x), 1).numpy())
    pr = torch.softmax(torch.tensor(x), 1)
    np.testing.assert_allclose(ref("CrossEntropyFwd", pr.numpy(), ids),
                               F.nll_loss(pr.log(), torch.tensor(ids, dtype=torch.long),
                                          reduction="none").numpy())


def test_index_ops_against_torch(torch, rng):
    F = torch.nn.functional
    x = rng.standard_normal((2, 3, 4, 5))
    for mode, tmode in (("reflect", "reflect"), ("edge", "replicate"), ("constant", "constant")):
        pads = (0, 0, 2, 1, 0, 0, 1, 3)  # ONNX order: begins of 4 axes, then ends
        want = F.pad(torch.tensor(x), (1, 3, 2, 1), mode=tmode)
        np.testing.assert_allclose(ref("Pad", x, pads=pads, mode=mode), want.numpy())
    np.testing.assert_allclose(
        ref("UpsampleNearest", x, scales=(1, 1, 2, 3)),
        F.interpolate(torch.tensor(x), scale_factor=(2, 3), mode="nearest").numpy())
    idx = rng.integers(0, 3, (2, 3, 4, 5)).astype(np.int32)
    np.testing.assert_allclose(
        ref("GatherElements", x, idx, axis=1),
        torch.gather(torch.tensor(x), 1, torch.tensor(idx, dtype=torch.long)).numpy())
    upd = rng.standard_normal(idx.shape)
    np.testing.assert_allclose(
        ref("ScatterElements", x, idx, upd, axis=1, reduction="add"),
        torch.tensor(x).scatter_add(1, torch.tensor(idx, dtype=torch.long),
                                    torch.tensor(upd)).numpy())
    ids = rng.integers(0, 6, (3, 2)).astype(np.int32)
    np.testing.assert_array_equal(
        ref("OneHot", ids, depth=6, dtype=_dtype.kInt),
        F.one_hot(torch.tensor(ids, dtype=torch.long), 6).numpy())
