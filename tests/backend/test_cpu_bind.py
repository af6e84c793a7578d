"""The CPU backend's graph-mode kernel binding (the ``bind`` kernel attribute; see
``singa.ops._registry``): the batch-1 convolutions, small products and ReLUs of a replay run
kernels bound once to their arrays. Every bound kernel must give bitwise what the general
kernel gives on the same arrays, on two different contents (a replay rewrites the inputs);
and bind must decline (None) what its bound code does not cover, so that the general kernel
runs. The conformance kit's ``test_bound`` checks the same property on drawn cases, which
rarely fall on the batch-1 convolution path; these cases do."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def dev(singa_device):
    if singa_device.backend != "cpu":
        pytest.skip("the CPU backend's bound kernels")
    return singa_device


def _kernel(dev, name):
    return dev.kernels[name][0]


def _check_bound(dev, name, ins, out_shapes, attrs, rng):
    """Bind ``name``'s kernel to ``ins`` and fresh outputs; compare with the general kernel on
    the inputs and on new values written into the same arrays."""
    kernel = _kernel(dev, name)
    dt = ins[0].dtype
    outs = [np.full(s, np.nan, dt) for s in out_shapes]
    bound = kernel.bind(ins, outs, attrs)
    assert bound is not None, f"{name} did not bind {[a.shape for a in ins]}"
    for _ in range(2):
        want = [np.full(s, np.nan, dt) for s in out_shapes]
        kernel(ins, want, attrs)
        bound(ins, outs, attrs)
        for k, (o, w) in enumerate(zip(outs, want)):
            assert np.array_equal(o, w, equal_nan=True), f"{name} output {k} differs"
            assert not np.isnan(o).any()
        for a in ins:  # the next replay's inputs, in the same arrays
            a[...] = rng.standard_normal(a.shape)
    return bound


def _conv_attrs(stride=1, pad=0, dilation=1, pool=False):
    attrs = {"stride": (stride, stride), "pads": (pad,) * 4, "dilation": (dilation,) * 2,
             "group": 1}
    if pool:
        attrs["second"] = {"kernel": (2, 2), "stride": (2, 2), "pads": (0, 0, 0, 0),
                           "mode": "max", "count_include_pad": False}
    return attrs


def _out_side(h, k, stride, pad, dilation):
    return (h + 2 * pad - dilation * (k - 1) - 1) // stride + 1


# (input shape, weight shape, stride, pad, dilation): the seed CNN's two layers at batch 1,
# and padded, strided and dilated small layers
CONV_CASES = [
    ((1, 1, 28, 28), (20, 1, 5, 5), 1, 0, 1),
    ((1, 20, 12, 12), (50, 20, 5, 5), 1, 0, 1),
    ((1, 3, 16, 16), (8, 3, 5, 5), 1, 2, 1),
    ((1, 4, 23, 23), (6, 4, 3, 3), 2, 1, 1),
    ((1, 2, 20, 20), (5, 2, 3, 3), 1, 0, 2),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("name", ["Conv2d", "Conv2d+ReLU", "Conv2d+ReLU+Pooling2d",
                                  "Conv2d+HardSwish"])
def test_batch1_convolutions_bind_bitwise(dev, name, case, bias, dtype):
    rng = np.random.default_rng(5)
    xs, ws, stride, pad, dil = case
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    ins = [x, w] + ([rng.standard_normal(ws[0]).astype(dtype)] if bias else [])
    ho = _out_side(xs[2], ws[2], stride, pad, dil)
    y = (1, ws[0], ho, ho)
    shapes = [y, (1, ws[0], ho // 2, ho // 2)] if name.endswith("Pooling2d") else [y]
    attrs = _conv_attrs(stride, pad, dil, pool=name.endswith("Pooling2d"))
    _check_bound(dev, name, ins, shapes, attrs, rng)


# 1x1 layers (stride 1, unpadded: the pointwise GEMM, no im2col), input and weight shapes: one
# image, several images (one GEMM each), 1x1 maps (squeeze-excitation: one GEMM over the
# batch) of one and of several images, and a product big enough to split across threads
POINTWISE_CASES = [
    ((1, 16, 7, 9), (24, 16, 1, 1)),
    ((3, 16, 5, 5), (8, 16, 1, 1)),
    ((1, 40, 1, 1), (10, 40, 1, 1)),
    ((4, 40, 1, 1), (10, 40, 1, 1)),
    ((1, 64, 64, 64), (64, 64, 1, 1)),
]


def _pointwise_oracle(x, w, b, act):
    """numpy's 1x1 convolution: y[n, o] = sum_c w[o, c] x[n, c] (+ b[o]), then ``act``
    ("ReLU", "HardSwish" or None) in float64."""
    y = np.einsum("oc,nchw->nohw", w[:, :, 0, 0].astype(np.float64), x.astype(np.float64))
    if b is not None:
        y += b[:, None, None]
    if act == "ReLU":
        return np.maximum(y, 0)
    if act == "HardSwish":
        return np.where(y <= -3, 0.0, np.where(y >= 3, y, y * (y + 3) / 6))
    return y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", POINTWISE_CASES)
@pytest.mark.parametrize("name", ["Conv2d", "Conv2d+ReLU", "Conv2d+HardSwish"])
def test_pointwise_convolutions_bind_bitwise(dev, name, case, bias, dtype):
    """1x1 layers bind at every batch size (the GEMM's form and the views resolved once), and
    give the numpy oracle's values and bitwise the general kernel's."""
    rng = np.random.default_rng(11)
    xs, ws = case
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype) if bias else None
    ins = [x, w] + ([b] if bias else [])
    want = _pointwise_oracle(x, w, b, name.partition("+")[2] or None)
    y = np.zeros((xs[0], ws[0], xs[2], xs[3]), dtype)
    _kernel(dev, name)(ins, [y], _conv_attrs())
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol * np.abs(want).max())
    _check_bound(dev, name, ins, [y.shape], _conv_attrs(), rng)


# depthwise layers (MobileNetV3's 3x3 stride 2 and 5x5, a channel multiplier of 2), one image
# and several: x shape, w shape, stride, pad
DEPTHWISE_CASES = [
    ((1, 16, 28, 28), (16, 1, 3, 3), 2, 1),
    ((1, 24, 14, 14), (24, 1, 5, 5), 1, 2),
    ((3, 8, 9, 9), (16, 1, 3, 3), 1, 1),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", DEPTHWISE_CASES)
@pytest.mark.parametrize("name", ["Conv2d", "Conv2d+ReLU", "Conv2d+HardSwish"])
def test_depthwise_convolutions_bind_bitwise(dev, name, case, dtype):
    """Depthwise layers bind at every batch size (the depthwise loop, its arguments resolved
    once) and give bitwise the general kernel's values."""
    rng = np.random.default_rng(13)
    xs, ws, stride, pad = case
    ins = [rng.standard_normal(s).astype(dtype) for s in (xs, ws, (ws[0],))]
    ho = _out_side(xs[2], ws[2], stride, pad, 1)
    attrs = {**_conv_attrs(stride, pad), "group": xs[1]}
    _check_bound(dev, name, ins, [(xs[0], ws[0], ho, ho)], attrs, rng)


def test_convolution_bind_declines_other_paths(dev):
    """Batches, Winograd layers, float16 and pooling other than 2x2 max keep the general
    kernel."""
    conv = _kernel(dev, "Conv2d")
    f = np.float32

    def bind(xs, ws, dtype=f, name="Conv2d", attrs=None, pooled=None):
        x, w = np.zeros(xs, dtype), np.zeros(ws, dtype)
        ho = xs[2] - ws[2] + 1
        outs = [np.zeros((xs[0], ws[0], ho, ho), dtype)] + ([pooled] if pooled is not None
                                                            else [])
        return _kernel(dev, name).bind([x, w], outs, attrs or _conv_attrs())

    assert bind((1, 20, 12, 12), (50, 20, 5, 5)) is not None
    assert bind((2, 20, 12, 12), (50, 20, 5, 5)) is None  # a batch: chunks and threads
    assert bind((1, 20, 12, 12), (50, 20, 5, 5), np.float16) is None
    assert bind((1, 64, 58, 58), (64, 64, 3, 3)) is None  # Winograd
    assert bind((1, 16, 12, 12), (16, 16, 3, 3)) is not None  # too few tiles for Winograd
    assert bind((1, 8, 16, 16), (8, 8, 1, 1)) is not None  # 1x1: the pointwise GEMM
    assert bind((2, 8, 16, 16), (8, 8, 1, 1)) is not None  # a batch of 1x1s too
    assert bind((1, 8, 16, 16), (8, 8, 1, 1), np.float16) is None
    assert bind((1, 8, 16, 16), (8, 8, 1, 1), name="Conv2d+ReLU+Pooling2d",
                attrs=_conv_attrs(pool=True), pooled=np.zeros((1, 8, 8, 8), f)) is None
    assert bind((1, 16, 60, 60), (8, 16, 5, 5)) is None  # columns over COL_BYTES: bands
    avg = _conv_attrs(pool=True)
    avg["second"] = {**avg["second"], "mode": "avg"}
    assert bind((1, 20, 12, 12), (50, 20, 5, 5), name="Conv2d+ReLU+Pooling2d", attrs=avg,
                pooled=np.zeros((1, 50, 4, 4), f)) is None
    assert conv.bind is not None


def test_products_and_relus_bind_bitwise(dev):
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        a = rng.standard_normal((1, 800)).astype(dtype)
        b = rng.standard_normal((800, 500)).astype(dtype)
        _check_bound(dev, "Matmul", [a, b], [(1, 500)], {}, rng)
        _check_bound(dev, "Matmul", [rng.standard_normal((7, 9)).astype(dtype),
                                     rng.standard_normal((9, 4)).astype(dtype)],
                     [(7, 4)], {}, rng)
        x = rng.standard_normal((3, 500)).astype(dtype)
        _check_bound(dev, "Add+ReLU", [x, rng.standard_normal((3, 500)).astype(dtype)],
                     [(3, 500)], {}, rng)
        _check_bound(dev, "Add+ReLU", [x, rng.standard_normal(500).astype(dtype)],
                     [(3, 500)], {}, rng)  # a bias over the rows
        _check_bound(dev, "ReLU", [x], [(3, 500)], {}, rng)
    matmul = _kernel(dev, "Matmul")
    big = np.zeros((512, 512), np.float32)
    assert matmul.bind([big, big], [big.copy()], {}) is None  # split across the threads
    batched = np.zeros((2, 3, 3), np.float32)
    assert matmul.bind([batched, batched], [batched.copy()], {}) is None
    strided = np.zeros((4, 6), np.float32)[:, ::2]
    assert _kernel(dev, "ReLU").bind([strided], [np.zeros((4, 3), np.float32)], {}) is None


def test_bound_matmul_keeps_blas_single_threaded(dev):
    """Outside a replay (no around_replay stage), a bound product still runs BLAS on one
    thread and restores the thread count."""
    from singa_cpu.kernels import _threads

    blas = _threads._find_blas()
    if not blas:
        pytest.skip("numpy's BLAS thread count cannot be read here")
    a, b = np.ones((4, 8), np.float32), np.ones((8, 3), np.float32)
    out = np.zeros((4, 3), np.float32)
    before = blas[0]()
    _kernel(dev, "Matmul").bind([a, b], [out], {})([a, b], [out], {})
    assert blas[0]() == before
    assert np.array_equal(out, np.full((4, 3), 8, np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gates_and_hard_activations_bind_bitwise(dev, dtype):
    """A squeeze-excitation gate times its map (Mul, either order, out of place and in the
    map's memory as graph mode runs it) and HardSigmoid / HardSwish bind to their loops and
    give bitwise the general kernels' values; float16 and a strided input keep the general
    kernels."""
    rng = np.random.default_rng(17)
    gate = rng.standard_normal((1, 24, 1, 1)).astype(dtype)
    fmap = rng.standard_normal((1, 24, 7, 7)).astype(dtype)
    mul = _kernel(dev, "Mul")
    for ins in ([gate, fmap], [fmap, gate]):
        bound = _check_bound(dev, "Mul", ins, [fmap.shape], {}, rng)
        assert getattr(bound, "__name__", "") == "<lambda>"  # the row loop, not _mul
    want = np.empty_like(fmap)
    mul([gate, fmap], [want], {})
    in_place = fmap.copy()
    bound = mul.bind([gate, in_place], [in_place], {})
    bound([gate, in_place], [in_place], {})
    assert np.array_equal(in_place, want)
    x = rng.standard_normal((1, 24, 7, 7)).astype(dtype) * 4
    _check_bound(dev, "HardSigmoid", [gate], [gate.shape], {"alpha": 1 / 6, "gamma": 0.5},
                 rng)
    _check_bound(dev, "HardSwish", [x], [x.shape], {}, rng)
    half = x.astype(np.float16)
    assert _kernel(dev, "HardSwish").bind([half], [half.copy()], {}) is None
    assert _kernel(dev, "HardSwish").bind([x[..., ::2]], [x[..., ::2].copy()], {}) is None


@pytest.mark.parametrize("name", ["ReduceMean", "Sum"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reductions_over_trailing_axes_bind_bitwise(dev, name, dtype):
    """Global average pooling and a squeeze-excitation squeeze (over the trailing axes, one
    leading row: the mean's division in the same pass) and a bias gradient (over the leading
    and trailing axes) bind bitwise; a reduction over the last kept axis, or a strided input,
    is declined."""
    rng = np.random.default_rng(5)
    kernel = _kernel(dev, name)
    for shape, axes, out in [((1, 96, 14, 14), (2, 3), (1, 96, 1, 1)),
                             ((8, 40, 7, 7), (-2, -1), (8, 40)),
                             ((4, 6, 5, 3), (0, 2, 3), (6,))]:
        x = rng.standard_normal(shape).astype(dtype)
        attrs = {"axes": axes, "keepdims": len(out) == len(shape)}
        _check_bound(dev, name, [x], [out], attrs, rng)
    x = rng.standard_normal((3, 5, 4)).astype(dtype)
    assert kernel.bind([x], [np.zeros((5, 4), dtype)], {"axes": (0,)}) is None
    strided = rng.standard_normal((2, 8, 6, 6)).astype(dtype)[:, ::2]
    assert kernel.bind([strided], [np.zeros((2, 4), dtype)], {"axes": (2, 3)}) is None


def test_sigmoid_mul_binds_bitwise(dev):
    """Sigmoid+Mul binds in float32: SiLU (x times its own sigmoid, out of place and in x's
    memory as graph mode runs it) to the one-pass loop, a squeeze-excitation gate (sigmoid of
    an (N, C, 1, 1) x over its map, and a map's sigmoid times an (N, C, 1, 1) tensor; out of
    place and in the map's memory) to the sigmoid loop into its own scratch and the bound row
    loop; each gives bitwise the general kernel's values. float64, float16, a strided x and an
    output of PARALLEL_MIN_ITEMS elements keep the general kernel."""
    from singa_cpu.kernels import elementwise

    rng = np.random.default_rng(23)
    kernel = _kernel(dev, "Sigmoid+Mul")
    x = (4 * rng.standard_normal((2, 24, 7, 7))).astype(np.float32)
    gate = rng.standard_normal((2, 24, 1, 1)).astype(np.float32)
    fmap = rng.standard_normal((2, 24, 7, 7)).astype(np.float32)
    for ins in ([x, x], [gate, fmap], [fmap, gate]):
        bound = _check_bound(dev, "Sigmoid+Mul", ins, [fmap.shape], {}, rng)
        assert getattr(bound, "__name__", "") in ("<lambda>", "gate")  # not the general kernel
    for x_, a in ((x, x), (gate, fmap), (fmap, gate)):  # in place, as graph mode runs them
        big = x_ if x_.size > a.size else a
        want = np.empty_like(big)
        kernel([x_, a], [want], {})
        x_, a = x_.copy(), a.copy()
        out = x_ if x_.size > a.size else a
        bound = kernel.bind([x_, a], [out], {})
        bound([x_, a], [out], {})
        assert np.array_equal(out, want)
    for ins in ([x.astype(np.float64)] * 2, [x.astype(np.float16)] * 2,
                [fmap[..., ::2], fmap[..., ::2]]):
        assert kernel.bind(ins, [np.empty(ins[0].shape, ins[0].dtype)], {}) is None
    n = elementwise.PARALLEL_MIN_ITEMS
    big = np.zeros(n, np.float32)
    assert kernel.bind([big, big], [big], {}) is None
