"""NN kernels against their numpy references on realistic shapes (larger than the conformance
kit draws): the seed CNN's and ResNet-18's layers, grouped/depthwise and dilated convolutions,
stride 2, asymmetric padding, batch-norm running statistics updated in place, big losses and
index ops.

Runs on the device under test (``--singa-backend``, default cpu); ops without a kernel there
are skipped. Tests of CPU internals (workspace chunking) run on the CPU backend only.
"""

from __future__ import annotations

import numpy as np
import pytest
from singa import _dtype
from singa.ops import OPS, run
from singa.tensor import CTensor

TOL = {np.float32: (2e-4, 2e-4), np.float64: (1e-10, 1e-10), np.float16: (2e-2, 5e-2)}


@pytest.fixture
def dev(singa_device):
    return singa_device


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def upload(dev, a):
    t = CTensor(a.shape, dev, _dtype.code_of(a.dtype))
    t.copy_from_numpy(a)
    return t


def run_op(dev, name, arrays, attrs, outs=None):
    if name not in dev.kernels:
        pytest.skip(f"{dev.name} has no {name} kernel")
    ins = [upload(dev, a) for a in arrays]
    res = run(OPS[name], ins, attrs, outs)
    return [r.to_numpy() for r in res]


def check(dev, name, arrays, attrs, scale_atol=True, max_rel=None):
    """Run ``name`` on the device and compare every output with the float64 reference
    (``max_rel``: instead, the largest error relative to the largest reference value)."""
    got = run_op(dev, name, arrays, attrs)
    ins64 = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    want = OPS[name].reference(*ins64, **attrs)
    want = want if isinstance(want, tuple) else (want,)
    dt = next((a.dtype.type for a in arrays if a.dtype.kind == "f"), np.float32)
    rtol, atol = TOL[dt]
    for g, w in zip(got, want):
        assert g.shape == w.shape
        if max_rel is not None:
            err = float(np.abs(g.astype(np.float64) - w).max() / max(np.abs(w).max(), 1e-30))
            assert err < max_rel, f"{name}: error {err:.2e} relative to max |reference|"
            continue
        # accumulated sums grow with the reduction length: scale atol by the output magnitude
        tol_a = atol * max(1.0, float(np.abs(w).max())) if scale_atol else atol
        np.testing.assert_allclose(g.astype(np.float64), w, rtol=rtol, atol=tol_a)
    return got


def randn(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# ============================================================== convolution
# x shape, (O, C/group, kh, kw), attrs
CONV = {
    "cnn.conv1": ((16, 1, 28, 28), (20, 1, 5, 5), {}),
    "cnn.conv2": ((16, 20, 12, 12), (50, 20, 5, 5), {}),
    "r18.stem": ((4, 3, 32, 32), (64, 3, 3, 3), {"pads": (1, 1, 1, 1)}),
    "r18.l1": ((2, 64, 16, 16), (64, 64, 3, 3), {"pads": (1, 1, 1, 1)}),
    "r18.down": ((3, 64, 16, 16), (128, 64, 3, 3), {"stride": (2, 2), "pads": (1, 1, 1, 1)}),
    "r18.shortcut": ((3, 64, 16, 16), (128, 64, 1, 1), {"stride": (2, 2)}),
    "r18.l4": ((8, 128, 4, 4), (128, 128, 3, 3), {"pads": (1, 1, 1, 1)}),
    "imagenet.stem7x7": ((2, 3, 40, 40), (16, 3, 7, 7), {"stride": (2, 2),
                                                          "pads": (3, 3, 3, 3)}),
    "pointwise": ((4, 32, 12, 12), (48, 32, 1, 1), {}),
    "group4": ((3, 16, 11, 9), (12, 4, 3, 3), {"group": 4, "pads": (1, 1, 1, 1)}),
    "depthwise": ((2, 12, 10, 10), (12, 1, 3, 3), {"group": 12, "stride": (2, 2),
                                                   "pads": (1, 1, 1, 1)}),
    # depthwise layers of MobileNet, EfficientNet and ConvNeXt (the CPU's direct kernels)
    "depthwise 5x5": ((2, 24, 14, 14), (24, 1, 5, 5), {"group": 24, "pads": (2, 2, 2, 2)}),
    "depthwise 7x7 batch 8": ((8, 16, 9, 9), (16, 1, 7, 7), {"group": 16,
                                                              "pads": (3, 3, 3, 3)}),
    "depthwise stride 2 non-square": ((3, 8, 13, 10), (8, 1, 3, 5),
                                      {"group": 8, "stride": (2, 2), "pads": (1, 0, 2, 1)}),
    "depthwise dilated": ((2, 6, 12, 11), (6, 1, 3, 3), {"group": 6, "dilation": (2, 3),
                                                         "pads": (2, 2, 3, 3)}),
    "depthwise multiplier 2": ((2, 4, 9, 8), (8, 1, 3, 3), {"group": 4, "stride": (1, 2),
                                                            "pads": (1, 1, 0, 2)}),
    "depthwise multiplier 3": ((2, 4, 12, 10), (12, 1, 3, 3), {"group": 4,
                                                              "pads": (1, 1, 1, 1)}),
    "depthwise 5x3 stride 2x3 dilated": ((2, 6, 23, 28), (6, 1, 5, 3),
                                         {"group": 6, "stride": (2, 3), "dilation": (1, 2),
                                          "pads": (2, 1, 2, 2)}),
    "depthwise big pads": ((1, 3, 4, 5), (3, 1, 2, 2), {"group": 3, "pads": (3, 2, 4, 1)}),
    # more channels than one block of the CPU's channels-last kernel (singa_cpu.kernels.
    # depthwise), the last block partial
    "depthwise 5x5 40 channels on 7x7": ((3, 40, 7, 7), (40, 1, 5, 5),
                                         {"group": 40, "pads": (2, 2, 2, 2)}),
    "depthwise 7x7 stride 2 on 14x14": ((2, 35, 14, 13), (35, 1, 7, 7),
                                        {"group": 35, "stride": (2, 2), "pads": (3, 2, 3, 1)}),
    # column stride 2 on even widths: float32 rows split into their column phases a pair
    # of columns at a time; here the last input column falls outside the padded row
    "depthwise stride 2 pairs, last column dropped": ((2, 6, 9, 12), (6, 1, 2, 2), {
        "group": 6, "stride": (2, 2), "pads": (1, 0, 1, 0)}),
    "group4 width 2": ((2, 8, 12, 11), (8, 2, 3, 3), {"group": 4, "pads": (1, 1, 1, 1)}),
    # few taps and outputs per group (the CPU's few-tap kernel: a stem on RGB images; blocks
    # of 4, 2 and 1 outputs per pass)
    "few taps stem": ((2, 3, 19, 17), (16, 3, 3, 3), {"stride": (2, 2), "pads": (1, 1, 1, 1)}),
    "few taps 6 outputs": ((2, 2, 11, 9), (6, 2, 3, 3), {"pads": (1, 0, 2, 1)}),
    "few taps grouped": ((2, 9, 10, 10), (6, 3, 2, 3), {"group": 3, "stride": (1, 2),
                                                        "pads": (0, 1, 1, 1)}),
    "few taps dilated 5 outputs": ((1, 1, 13, 9), (5, 1, 3, 3), {"dilation": (2, 1)}),
    "dilated": ((2, 8, 15, 13), (6, 8, 3, 3), {"dilation": (2, 3), "pads": (2, 2, 3, 3)}),
    "asymmetric": ((2, 5, 13, 10), (7, 5, 4, 3), {"stride": (2, 3), "pads": (0, 3, 2, 1)}),
    "big pads": ((1, 2, 3, 3), (3, 2, 2, 2), {"pads": (3, 2, 4, 1)}),
    # 3x3 stride-1 layers with >= 16 channels and >= winograd.MIN_BATCH_TILES output tiles
    # in the batch take the Winograd path on the CPU
    "winograd odd": ((6, 16, 9, 7), (24, 16, 3, 3), {"pads": (0, 2, 1, 2)}),
    "winograd pad3": ((3, 20, 6, 5), (16, 20, 3, 3), {"pads": (3, 0, 1, 2)}),
    "winograd nopad": ((5, 32, 7, 8), (32, 32, 3, 3), {}),
}


def _conv_arrays(rng, xs, ws, dtype=np.float32):
    x, w = randn(rng, xs, dtype), randn(rng, ws, dtype)
    return x, w, randn(rng, (ws[0],), dtype)


def conv_all_passes(dev, rng, case):
    """Conv2d (with bias), Conv2dBackwardX and Conv2dBackwardW of CONV[case] vs float64."""
    xs, ws, attrs = CONV[case]
    x, w, b = _conv_arrays(rng, xs, ws)
    y = check(dev, "Conv2d", [x, w, b], attrs)[0]
    dy = randn(rng, y.shape)
    check(dev, "Conv2dBackwardX", [dy, w], {**attrs, "x_shape": xs})
    check(dev, "Conv2dBackwardW", [dy, x], {**attrs, "w_shape": ws})


# float32 Conv2dBackwardW cases for which cuDNN 9.19 on an H100 chose, even at
# float32_precision "highest" (no TF32 or FFT engines), an engine with about 1e-3 error
# relative to the largest output (direct engines: 2e-7; see
# singa_cuda.cudnn_conv.full_float32_exclusions): checked there against that bound instead
CUDNN_LOOSE_WGRAD = {"cnn.conv2": 2e-3}


@pytest.mark.parametrize("case", list(CONV))
def test_conv2d_forward_and_backward(dev, rng, case):
    xs, ws, attrs = CONV[case]
    x, w, b = _conv_arrays(rng, xs, ws)
    y = check(dev, "Conv2d", [x, w, b], attrs)[0]
    check(dev, "Conv2d", [x, w], attrs)
    dy = randn(rng, y.shape)
    check(dev, "Conv2dBackwardX", [dy, w], {**attrs, "x_shape": xs})
    loose = CUDNN_LOOSE_WGRAD.get(case) if dev.backend == "cuda" else None
    check(dev, "Conv2dBackwardW", [dy, x], {**attrs, "w_shape": ws}, max_rel=loose)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
@pytest.mark.parametrize("case", ["r18.down", "group4", "pointwise", "winograd odd",
                                  "depthwise stride 2 non-square",
                                  "depthwise 5x5 40 channels on 7x7", "few taps stem"])
def test_conv2d_other_dtypes(dev, rng, case, dtype):
    xs, ws, attrs = CONV[case]
    x, w, b = (a * 0.5 for a in _conv_arrays(rng, xs, ws, dtype))
    x, w, b = x.astype(dtype), w.astype(dtype), b.astype(dtype)
    y = check(dev, "Conv2d", [x, w, b], attrs)[0]
    dy = randn(rng, y.shape, dtype)
    check(dev, "Conv2dBackwardX", [dy, w], {**attrs, "x_shape": xs})
    check(dev, "Conv2dBackwardW", [dy, x], {**attrs, "w_shape": ws})


def test_conv2d_batch_chunks_cover_every_image(dev, rng, monkeypatch):
    """Force the im2col workspace to hold a few images so the batch runs in chunks."""
    if dev.backend != "cpu":
        pytest.skip("CPU workspace internals")
    from singa_cpu.kernels import conv

    xs, ws, attrs = (7, 6, 9, 9), (4, 3, 3, 3), {"pads": (1, 0, 1, 2), "group": 2}
    x, w, b = _conv_arrays(rng, xs, ws)
    per_image = 6 * 9 * 9 * 9 * 4
    monkeypatch.setattr(conv, "COL_BYTES", 2 * per_image + 1)
    y = check(dev, "Conv2d", [x, w, b], attrs)[0]
    dy = randn(rng, y.shape)
    check(dev, "Conv2dBackwardX", [dy, w], {**attrs, "x_shape": xs})
    check(dev, "Conv2dBackwardW", [dy, x], {**attrs, "w_shape": ws})


DEPTHWISE = [case for case in CONV if case.startswith("depthwise")]


@pytest.mark.parametrize("case", [*DEPTHWISE, "group4 width 2", "group4"])
def test_conv2d_direct_grouped_kernels(dev, rng, monkeypatch, case):
    """The CPU's direct grouped kernels (singa_cpu.kernels.grouped) take every depthwise case
    and 2 input channels per group, and with the width limit raised the group4 case (4 input
    channels per group) too; with their work split across the threads however small."""
    if dev.backend != "cpu":
        pytest.skip("CPU kernel selection")
    from singa.backend import conv2d_geometry
    from singa_cpu.kernels import _threads, grouped

    xs, ws, attrs = CONV[case]
    if case == "group4":
        monkeypatch.setattr(grouped, "MAX_GROUP_WIDTH", 4)
    assert grouped.eligible(conv2d_geometry("Conv2d", xs, ws, attrs))
    monkeypatch.setattr(_threads, "PARALLEL_MIN_MACS", 0)
    conv_all_passes(dev, rng, case)


BIG_MAP = ((2, 20, 24, 24), (20, 1, 5, 5), {"group": 20, "pads": (2, 2, 2, 2)})


@pytest.mark.parametrize("case", [*DEPTHWISE, "depthwise 5x5 on 24x24"])
@pytest.mark.parametrize("fused", [None, "Conv2d+ReLU", "Conv2d+HardSwish"])
def test_depthwise_kernel_is_the_wide_kernel_bitwise(dev, rng, monkeypatch, case, fused):
    """Depthwise layers (the forward, alone or with its activation fused, and backward-data
    at stride 1 with one output per channel) take the CPU's depthwise kernel
    (singa_cpu.kernels.depthwise, every tap written out); switched off, the wide rows of
    singa_cpu.kernels.grouped with a loop per tap. Both sum the taps in the same order and
    apply the activation as they write a row, so they give the same bits, NaN and infinity
    included: strides, dilations, crops, multipliers, small and large maps."""
    if dev.backend != "cpu":
        pytest.skip("CPU kernel selection")
    from singa.backend import conv2d_geometry
    from singa_cpu.kernels import depthwise

    xs, ws, attrs = CONV.get(case) or BIG_MAP
    assert depthwise.eligible(conv2d_geometry("Conv2d", xs, ws, attrs))
    x, w, b = _conv_arrays(rng, xs, ws)
    x[0, 0, xs[2] // 2, xs[3] // 2], x[-1, -1, -1, -1] = np.nan, np.inf
    y_shape = run_op(dev, "Conv2d", [x, w, b], attrs)[0].shape
    dy = randn(rng, y_shape)
    dy[0, 0, y_shape[2] // 2, y_shape[3] // 2], dy[-1, -1, -1, -1] = np.nan, np.inf

    def passes():
        if fused:
            y = run_fused(dev, fused, [x, w, b], attrs, y_shape)
        else:
            y = run_op(dev, "Conv2d", [x, w, b], attrs)[0]
        return y, run_op(dev, "Conv2dBackwardX", [dy, w], {**attrs, "x_shape": xs})[0]

    got = passes()
    monkeypatch.setattr(depthwise, "ENABLED", False)
    want = passes()
    for g, w_, what in zip(got, want, ("forward", "backward-data")):
        assert np.isnan(g).any(), what
        diff = np.count_nonzero(g.view(np.uint32) != w_.view(np.uint32))
        assert diff == 0, f"{case} {what}: {diff} of {g.size} elements differ"


FEW_TAPS = ["cnn.conv1", "big pads", *[case for case in CONV if case.startswith("few taps")]]


@pytest.mark.parametrize("case", FEW_TAPS)
def test_few_tap_layers_take_the_direct_kernel(dev, rng, monkeypatch, case):
    """Layers with at most 27 taps and 32 outputs per group (the stems of MobileNet,
    EfficientNet and ShuffleNet, the seed CNN's first layer) take the CPU's direct kernel
    (singa_cpu.kernels.depthwise, blocks of 4, 2 or 1 outputs per pass): against float64 with
    and without bias, the fused Conv2d+ReLU bitwise the Conv2d then the ReLU, every block size
    the same bits, and split across the threads however small the same bits too."""
    if dev.backend != "cpu":
        pytest.skip("CPU kernel selection")
    from singa.backend import conv2d_geometry
    from singa_cpu.kernels import _threads, depthwise

    xs, ws, attrs = CONV[case]
    g = conv2d_geometry("Conv2d", xs, ws, attrs)
    assert depthwise.eligible_dense(g) and not depthwise.eligible(g)
    x, w, b = _conv_arrays(rng, xs, ws)
    y = check(dev, "Conv2d", [x, w, b], attrs)[0]
    check(dev, "Conv2d", [x, w], attrs)
    relu = run_op(dev, "ReLU", [y], {})[0]
    fused = run_fused(dev, "Conv2d+ReLU", [x, w, b], attrs, y.shape)
    assert np.array_equal(fused, relu)
    hard_swish = run_op(dev, "HardSwish", [y], {})[0]
    assert_bitwise(run_fused(dev, "Conv2d+HardSwish", [x, w, b], attrs, y.shape), hard_swish,
                   f"Conv2d+HardSwish {case}")
    blocks = [ob for ob in (1, 2, 4) if (g.o // g.group) % ob == 0]
    assert depthwise.block(g) == blocks[-1]
    for ob in blocks:
        got = np.full(y.shape, np.nan, np.float32)
        depthwise.conv(x, w, b, got, (g.sh, g.sw), (g.dh, g.dw), (g.pt, g.pl), False, ob)
        assert np.array_equal(got, y), f"{case}: block {ob} differs"
    monkeypatch.setattr(_threads, "PARALLEL_MIN_MACS", 0)
    monkeypatch.setattr(_threads, "num_threads", lambda: 3)
    assert np.array_equal(run_op(dev, "Conv2d", [x, w, b], attrs)[0], y)
    monkeypatch.setattr(depthwise, "MAX_DENSE_TAPS", 0)  # im2col + GEMM: not the same bits
    assert not depthwise.eligible_dense(g)
    np.testing.assert_allclose(run_op(dev, "Conv2d", [x, w, b], attrs)[0], y, rtol=1e-5,
                               atol=1e-5 * float(np.abs(y).max()))


@pytest.mark.parametrize("hw", [1, 2, 7])
@pytest.mark.parametrize("n", [1, 8])
@pytest.mark.parametrize("split", [False, True])
def test_conv2d_1x1_on_small_maps(dev, rng, monkeypatch, hw, n, split):
    """1x1 convolutions on small maps (squeeze-excitation on 1x1 maps, the last 7x7 stage of
    a MobileNet), batch 1 and 8, with bias, all three passes against float64, and the fused
    Conv2d+ReLU bitwise the Conv2d then the ReLU; ``split``: every product split across the
    threads however small. On the CPU they take the direct GEMM path (the weight gradient
    of batch 8 on 2x2 and 7x7 maps: packed im2col)."""
    xs, ws, attrs = (n, 24, hw, hw), (40, 24, 1, 1), {}
    if dev.backend == "cpu":
        from singa.backend import conv2d_geometry
        from singa_cpu.kernels import _threads, conv

        assert conv._is_pointwise(conv2d_geometry("Conv2d", xs, ws, attrs))
        if split:
            monkeypatch.setattr(_threads, "PARALLEL_MIN_MACS", 0)
    elif split:
        pytest.skip("CPU threading")
    x, w, b = _conv_arrays(rng, xs, ws)
    y = check(dev, "Conv2d", [x, w, b], attrs)[0]
    dy = randn(rng, y.shape)
    check(dev, "Conv2dBackwardX", [dy, w], {**attrs, "x_shape": xs})
    check(dev, "Conv2dBackwardW", [dy, x], {**attrs, "w_shape": ws})
    for act in ("ReLU", "HardSwish"):
        want = run_op(dev, act, [y], {})[0]
        assert_bitwise(run_fused(dev, f"Conv2d+{act}", [x, w, b], attrs, y.shape), want,
                       f"Conv2d+{act} 1x1 on {hw}x{hw}, batch {n}")


def test_conv2d_workspace_is_reused(dev, rng):
    if dev.backend != "cpu":
        pytest.skip("CPU workspace internals")
    xs, ws, attrs = CONV["r18.down"]
    x, w, _ = _conv_arrays(rng, xs, ws)
    run_op(dev, "Conv2d", [x, w], attrs)
    held = dev.conv_workspace.nbytes()
    run_op(dev, "Conv2d", [x, w], attrs)
    assert dev.conv_workspace.nbytes() == held > 0


# ============================================================== pooling
POOL = {
    "cnn.pool1": ((16, 20, 24, 24), dict(kernel=(2, 2), stride=(2, 2))),
    "cnn.pool2": ((16, 50, 8, 8), dict(kernel=(2, 2), stride=(2, 2))),
    "odd 2x2": ((2, 3, 7, 9), dict(kernel=(2, 2), stride=(2, 2))),
    "r18.stem.pool": ((4, 64, 32, 32), dict(kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1))),
    "global avg": ((8, 128, 4, 4), dict(kernel=(4, 4), stride=(1, 1))),
    "asymmetric": ((3, 5, 13, 11), dict(kernel=(3, 4), stride=(2, 3), pads=(2, 0, 1, 3))),
    "overlap ceil": ((2, 4, 10, 9), dict(kernel=(3, 3), stride=(2, 2), pads=(1, 1, 0, 2),
                                         ceil_mode=True)),
}


@pytest.mark.parametrize("case", list(POOL))
@pytest.mark.parametrize("mode, cip", [("max", True), ("avg", True), ("avg", False)])
def test_pooling_forward_and_backward(dev, rng, case, mode, cip):
    xs, geo = POOL[case]
    attrs = dict(geo, mode=mode, count_include_pad=cip)
    x = randn(rng, xs)
    y = check(dev, "Pooling2d", [x], attrs)[0]
    check(dev, "Pooling2dBackward", [randn(rng, y.shape), x, y], attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("case", ["r18.stem.pool", "cnn.pool1", "odd 2x2"])
def test_pooling_other_dtypes_and_ties(dev, rng, dtype, case):
    xs, geo = POOL[case]
    x = (np.round(randn(rng, xs)) / 2).astype(dtype)  # many ties: first maximum wins
    attrs = dict(geo, mode="max")
    y = check(dev, "Pooling2d", [x], attrs)[0]
    check(dev, "Pooling2dBackward", [randn(rng, y.shape, dtype), x, y], attrs)


# ============================================================== fused kernels (graph mode)
def run_fused(dev, name, arrays, attrs, *out_shapes):
    """The device's fused kernel ``name`` (singa.ops.FUSIONS) on ``arrays``; an array given
    twice (the same object) is uploaded once, so the kernel sees one buffer twice. Returns
    the output (or outputs, for several ``out_shapes``)."""
    if name not in dev.kernels:
        pytest.skip(f"{dev.name} has no fused {name} kernel")
    if not takes(dev, name, arrays[0].dtype):
        pytest.skip(f"{dev.name}'s {name} takes no {arrays[0].dtype}: graph mode runs its ops "
                    "unfused (test_graph_fuses_only_in_the_fused_kernels_dtypes)")
    from singa.ops import KernelCall

    uploaded = {}
    ins = [uploaded.setdefault(id(a), upload(dev, a)) for a in arrays]
    outs = [CTensor(shape, dev, _dtype.code_of(arrays[0].dtype)) for shape in out_shapes]
    for o in outs:  # poisoned: the pool may hand back the block of an earlier, right result
        o.copy_from_numpy(np.full(o.shape(), np.nan, arrays[0].dtype))
    dev.exec(KernelCall(dev, dev.kernels[name][0], ins, outs, attrs),
             [x.block for x in ins], [o.block for o in outs], name)
    res = [o.to_numpy() for o in outs]
    return res[0] if len(res) == 1 else res


def takes(dev, name, dtype) -> bool:
    """Whether the device has a kernel ``name`` for ``dtype`` (its declared ``dtypes``)."""
    entry = dev.kernels.get(name)
    return entry is not None and (entry[2] is None or _dtype.code_of(dtype) in entry[2])


def assert_bitwise(got, want, what):
    assert got.shape == want.shape, what
    same = (got == want) & (np.signbit(got) == np.signbit(want))
    assert same.all(), f"{what}: {np.count_nonzero(~same)} of {got.size} elements differ"


def _edge_values(rng, shape, dtype):
    """Random values with NaN, signed zeros, infinities and the smallest subnormals mixed in
    (where a ReLU's comparisons and a sum's signed zero differ between formulas)."""
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind != "f":
        return (a * 10).astype(dtype)
    a = a.astype(dtype)
    tiny = np.finfo(dtype).smallest_subnormal
    special = np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, -tiny, tiny, -1.0], dtype)
    flat = a.reshape(-1)
    flat[rng.choice(flat.size, size=min(flat.size, 64), replace=False)] = np.resize(special, 64)[
        :min(flat.size, 64)]
    return a


def assert_same_bits(got, want, what):
    """Bit patterns equal (NaN payloads and signed zeros included)."""
    assert got.shape == want.shape and got.dtype == want.dtype, what
    u = np.dtype(f"u{got.dtype.itemsize}")
    diff = got.view(u) != want.view(u)
    assert not diff.any(), f"{what}: {np.count_nonzero(diff)} of {got.size} elements differ"


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32])
@pytest.mark.parametrize("layout", ["flat", "broadcast"])
def test_relu_kernels_are_numpys_formulas_bitwise(dev, rng, dtype, layout):
    """ReLU, ReLUBackward and the fused Add+ReLU (numba loops for contiguous float32/float64,
    numpy otherwise) give bitwise numpy's ``maximum(x, 0)``, ``dy * (x > 0)`` and
    ``maximum(a + b, 0)``, signed zeros and NaN included; -0.0 sums (``-0.0 + -0.0``) and
    ``-0.0`` inputs become +0.0. The CPU backend's contract (its kernels are numpy's
    formulas); other backends' ReLU may keep -0.0 (OpenCL's does), which the conformance kit
    accepts as equal."""
    if dev.backend != "cpu":
        pytest.skip("numpy's exact formulas (signed zeros, NaN payloads) are the CPU "
                    "backend's contract")
    shape = (3, 5, 67)
    x = _edge_values(rng, shape, dtype)
    dy = _edge_values(rng, shape, dtype)
    if np.dtype(dtype).kind == "f":
        x.reshape(-1)[:2] = -0.0
        dy.reshape(-1)[:2] = -0.0  # -0.0 + -0.0 = -0.0 before the ReLU
    b = dy if layout == "flat" else _edge_values(rng, shape[-1:], dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        assert_same_bits(run_op(dev, "ReLU", [x], {})[0], np.maximum(x, 0), "ReLU")
        if np.dtype(dtype).kind == "f":
            assert_same_bits(run_op(dev, "ReLUBackward", [dy, x], {})[0], dy * (x > 0),
                             "ReLUBackward")
        want = np.maximum(x + b, 0)
        got = run_fused(dev, "Add+ReLU", [x, b], {}, shape)
    assert_same_bits(got, want, f"Add+ReLU {layout}")
    if np.dtype(dtype).kind == "f":
        assert np.isnan(got).any() and (got == 0).any()  # the edge values were in play


@pytest.mark.parametrize("name, lo, hi", [("Sigmoid", -120.0, 120.0), ("Erf", -8.0, 8.0)])
@pytest.mark.parametrize("size", [1, 1023, 1025, 5000])
@pytest.mark.parametrize("in_place", [False, True])
def test_sigmoid_and_erf_over_their_whole_range(dev, name, lo, hi, size, in_place):
    """float32 Sigmoid and Erf (one-pass loops on the CPU, blocks of 1024) on an even grid
    of their whole range, where the kit samples (-4, 4) and (-2, 2) only: within the kit's
    float32 tolerance of the float64 reference, into a fresh output and in place."""
    x = np.linspace(lo, hi, size, dtype=np.float32)
    t = upload(dev, x)
    out = t if in_place else None
    got = run(OPS[name], [t], {}, None if out is None else [out])[0].to_numpy()
    want = OPS[name].reference(x.astype(np.float64))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["cnn.conv1", "cnn.conv2", "r18.l4", "pointwise", "group4",
                                  "winograd odd", "asymmetric", "depthwise 5x5"])
@pytest.mark.parametrize("bias", [True, False])
def test_fused_conv_relu_is_conv_then_relu(dev, rng, case, bias):
    """Conv2d+ReLU (each im2col chunk and 1x1 product rectified in cache; Winograd after)
    is bitwise the Conv2d kernel followed by the ReLU kernel, and near the float64 oracle."""
    xs, ws, attrs = CONV[case]
    x, w, b = _conv_arrays(rng, xs, ws)
    arrays = [x, w, b] if bias else [x, w]
    y = run_op(dev, "Conv2d", arrays, attrs)[0]
    want = run_op(dev, "ReLU", [y], {})[0]
    got = run_fused(dev, "Conv2d+ReLU", arrays, attrs, y.shape)
    assert_bitwise(got, want, f"Conv2d+ReLU {case}")
    ref = np.maximum(OPS["Conv2d"].reference(*(a.astype(np.float64) for a in arrays), **attrs),
                     0)
    np.testing.assert_allclose(got, ref, rtol=2e-4, atol=2e-4 * max(1.0, np.abs(ref).max()))
    assert (got == 0).any() and (got > 0).any()  # the ReLU did cut


def _hard_swish64(y):
    """HardSwish in float64: 0 for y <= -3, y for y >= 3, y (y + 3) / 6 between."""
    return np.where(y <= -3, 0.0, np.where(y >= 3, y, y * (y + 3) / 6))


@pytest.mark.parametrize("case", ["cnn.conv1", "cnn.conv2", "r18.l4", "pointwise", "group4",
                                  "winograd odd", "asymmetric", "depthwise 5x5", "r18.down",
                                  "group4 width 2"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_conv_hardswish_is_conv_then_hardswish(dev, rng, case, bias, dtype):
    """Conv2d+HardSwish (MobileNetV3's activation applied as each 1x1 product, depthwise
    row, im2col chunk is written; Winograd after) is bitwise the Conv2d kernel followed by
    the HardSwish kernel, in the dtypes the fused kernel takes (float32, float64: in float16
    graph mode runs the two kernels, test_graph_fuses_only_in_the_fused_kernels_dtypes),
    and near the float64 oracle; the inputs are scaled so that all three pieces of
    HardSwish (0, x (x + 3) / 6, x) are taken."""
    if "Conv2d+HardSwish" not in dev.kernels:
        pytest.skip(f"{dev.name} has no fused Conv2d+HardSwish kernel")
    xs, ws, attrs = CONV[case]
    x, w, b = _conv_arrays(rng, xs, ws)
    ref = OPS["Conv2d"].reference(*(a.astype(np.float64) for a in (x, w, b)), **attrs)
    scale = 6.0 / np.abs(ref).max()
    x, b = (x * scale), (b * scale)
    arrays = [a.astype(dtype) for a in ((x, w, b) if bias else (x, w))]
    y = run_op(dev, "Conv2d", arrays, attrs)[0]
    want = run_op(dev, "HardSwish", [y], {})[0]
    got = run_fused(dev, "Conv2d+HardSwish", arrays, attrs, y.shape)
    assert_bitwise(got, want, f"Conv2d+HardSwish {case} {np.dtype(dtype).name}")
    ref = OPS["Conv2d"].reference(*(a.astype(np.float64) for a in arrays), **attrs)
    assert (ref <= -3).any() and (ref >= 3).any() and (np.abs(ref) < 3).any()
    tol = {np.float32: 2e-4, np.float64: 1e-10}[dtype]
    np.testing.assert_allclose(got.astype(np.float64), _hard_swish64(ref), rtol=tol,
                               atol=tol * max(1.0, np.abs(ref).max()))


@pytest.mark.parametrize("case", ["cnn.conv1", "cnn.conv2", "winograd nopad", "pointwise",
                                  "asymmetric"])
@pytest.mark.parametrize("pool", ["2x2 max", "3x3 max", "avg"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_conv_relu_pool_is_the_three_kernels(dev, rng, case, pool, dtype, monkeypatch):
    """Conv2d+ReLU+Pooling2d (2x2 max pooling of each chunk in cache; other poolings after)
    gives bitwise the Conv2d, ReLU and Pooling2d kernels' outputs: the ReLU's and the
    pooling's; also in many small chunks; in the dtypes the fused kernel takes (float32,
    float64: in float16 graph mode runs Conv2d+ReLU, then the pooling on its rounded output,
    test_graph_fuses_only_in_the_fused_kernels_dtypes)."""
    if dev.backend == "cpu":
        from singa_cpu.kernels import conv

        monkeypatch.setattr(conv, "COL_BYTES", 1)  # one image per chunk
    xs, ws, attrs = CONV[case]
    pattrs = {"2x2 max": dict(kernel=(2, 2), stride=(2, 2), mode="max"),
              "3x3 max": dict(kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1), mode="max"),
              "avg": dict(kernel=(2, 2), stride=(2, 2), mode="avg")}[pool]
    x, w, b = (a.astype(dtype) for a in _conv_arrays(rng, xs, ws))
    y = run_op(dev, "ReLU", [run_op(dev, "Conv2d", [x, w, b], attrs)[0]], {})[0]
    pooled = run_op(dev, "Pooling2d", [y], pattrs)[0]
    got_y, got_p = run_fused(dev, "Conv2d+ReLU+Pooling2d", [x, w, b],
                             {**attrs, "second": pattrs}, y.shape, pooled.shape)
    assert_bitwise(got_y, y, f"{case} ReLU output")
    assert_bitwise(got_p, pooled, f"{case} {pool} pooling")


def _graph_and_eager(dev, body, arrays):
    """``body(*tensors)``'s outputs (numpy) recorded in graph mode and replayed twice, the plan's
    step names, and the same body's outputs run eagerly; only the outputs are kept, so graph
    mode may fuse the ops between them."""
    import gc

    eager = [t.to_numpy() for t in body(*(upload(dev, a) for a in arrays))]
    ins = [upload(dev, a) for a in arrays]
    dev.EnableGraph(True)
    try:
        outs = body(*ins)
    finally:
        dev.EnableGraph(False)
    gc.collect()
    for _ in range(2):
        dev.RunGraph()
    names = [n.name for n in dev._graph.plan.steps]
    got = [t.to_numpy() for t in outs]
    dev.ResetGraph()
    return got, names, eager


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_graph_fuses_only_in_the_fused_kernels_dtypes(dev, rng, dtype):
    """Graph mode fuses Conv2d and HardSwish, and Conv2d, ReLU and an average Pooling2d, only
    in the dtypes the fused kernels take (their ``dtypes``; on the CPU float32 and float64: in
    float16 the ops one after the other round between them); otherwise it runs the ops as
    separate calls. Either way the replay gives bitwise the eager run's values."""
    xs, ws, attrs = CONV["cnn.conv2"]
    x, w, b = (a.astype(dtype) for a in _conv_arrays(rng, xs, ws))
    avg = dict(kernel=(2, 2), stride=(2, 2), mode="avg")

    def body(x, w, b):
        h = run(OPS["HardSwish"], run(OPS["Conv2d"], [x, w, b], attrs))[0]
        r = run(OPS["ReLU"], run(OPS["Conv2d"], [x, w, b], attrs))[0]
        return h, run(OPS["Pooling2d"], [r], avg)[0]

    if not all(name in dev.kernels for name in ("Conv2d", "HardSwish", "ReLU", "Pooling2d")):
        pytest.skip(f"{dev.name} lacks one of the ops")
    got, names, eager = _graph_and_eager(dev, body, [x, w, b])
    want = (["Conv2d+HardSwish"] if takes(dev, "Conv2d+HardSwish", dtype)
            else ["Conv2d", "HardSwish"])
    if takes(dev, "Conv2d+ReLU+Pooling2d", dtype):
        want.append("Conv2d+ReLU+Pooling2d")
    else:
        want += ["Conv2d+ReLU" if takes(dev, "Conv2d+ReLU", dtype) else "Conv2d", "Pooling2d"]
        if not takes(dev, "Conv2d+ReLU", dtype):
            want.append("ReLU")
    assert sorted(names) == sorted(want), names
    if dev.backend == "cpu":  # the case this test is for: float16 runs unfused
        assert ("Conv2d+HardSwish" in names) == ("Conv2d+ReLU+Pooling2d" in names) == (
            dtype != np.float16), names
    for g, e, what in zip(got, eager, ("HardSwish", "pooling")):
        assert_bitwise(g, e, f"graph vs eager {what} {np.dtype(dtype).name}")


@pytest.mark.parametrize("case", list(POOL))
@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("mask", ["relu output", "other"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_pool_relu_backward(dev, rng, case, mode, mask, dtype):
    """Pooling2dBackward+ReLUBackward is bitwise the pooling gradient masked by the ReLU's
    gradient. ``relu output``: the pooling reads the ReLU's output (conv -> ReLU -> pool, the
    fast path), with many all-zero windows and ties; ``other``: an unrelated mask."""
    xs, geo = POOL[case]
    attrs = dict(geo, mode=mode)
    x = np.maximum(np.round(randn(rng, xs, dtype) * 2) / 2, 0).astype(dtype)
    y = run_op(dev, "Pooling2d", [x], attrs)[0]
    dy = randn(rng, y.shape, dtype)
    r = x if mask == "relu output" else randn(rng, xs, dtype)
    dx = run_op(dev, "Pooling2dBackward", [dy, x, y], attrs)[0]
    want = run_op(dev, "ReLUBackward", [dx, r], {})[0]
    got = run_fused(dev, "Pooling2dBackward+ReLUBackward", [dy, x, y, r], attrs, xs)
    assert_bitwise(got, want, f"Pooling2dBackward+ReLUBackward {case} {mode} {mask}")
    if mode == "max" and mask == "relu output":  # windows whose maximum is 0 pass nothing
        assert np.count_nonzero(dx != want) > 0


# ============================================================== batch normalisation
BN_SHAPES = [(32, 64, 8, 8), (16, 128, 4, 4), (64, 500), (4, 3, 17, 5)]


@pytest.mark.parametrize("shape", BN_SHAPES)
def test_batchnorm_train_infer_backward(dev, rng, shape):
    c = shape[1]
    x = (randn(rng, shape) * 2 + 0.5).astype(np.float32)
    scale, bias, rm = randn(rng, (c,)), randn(rng, (c,)), randn(rng, (c,))
    rv = (rng.random(c) + 0.5).astype(np.float32)
    attrs = {"momentum": 0.9, "eps": 1e-5}
    _, mean, inv, _, _ = check(dev, "BatchNormTrain", [x, scale, bias, rm, rv], attrs)
    check(dev, "BatchNormInfer", [x, scale, bias, rm, rv], {"eps": 1e-3})
    check(dev, "BatchNormBackward", [randn(rng, shape), x, scale, mean, inv], {})


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_batchnorm_updates_running_stats_in_place(dev, rng, dtype):
    """The autograd layer passes outs[3], outs[4] aliasing ins[3], ins[4]."""
    if "BatchNormTrain" not in dev.kernels:
        pytest.skip(f"{dev.name} has no BatchNormTrain kernel")
    shape = (8, 16, 5, 5)
    x = randn(rng, shape, dtype)
    scale, bias, rm = randn(rng, (16,), dtype), randn(rng, (16,), dtype), randn(rng, (16,), dtype)
    rv = (rng.random(16) + 0.5).astype(dtype)
    ins = [upload(dev, a) for a in (x, scale, bias, rm, rv)]
    outs = [CTensor(shape, dev, ins[0].dtype_code)] + [CTensor((16,), dev, ins[0].dtype_code)
                                               for _ in range(2)] + ins[3:]
    res = run(OPS["BatchNormTrain"], ins, {"momentum": 0.7, "eps": 1e-5}, outs)
    assert res[3] is ins[3] and res[4] is ins[4]
    want = OPS["BatchNormTrain"].reference(*(a.astype(np.float64) for a in
                                             (x, scale, bias, rm, rv)), momentum=0.7, eps=1e-5)
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(ins[3].to_numpy(), want[3], rtol=rtol, atol=atol)
    np.testing.assert_allclose(ins[4].to_numpy(), want[4], rtol=rtol, atol=atol)
    np.testing.assert_allclose(res[0].to_numpy(), want[0], rtol=rtol, atol=atol * 10)


# ============================================================== bias-gradient sums
@pytest.mark.parametrize("shape, axes, keepdims", [
    ((64, 20, 24, 24), (0, 2, 3), False),   # the seed CNN's conv1 bias gradient
    ((16, 50, 8, 8), (0, 2, 3), True),
    ((3, 7, 5), (0, 2), False),
    ((4, 3, 2, 5, 6), (0, 3, 4), False),     # two kept axes
    ((5, 6, 7), (1, 2), False),              # no leading axis
    ((64, 500), (0,), False),                # no trailing axis: numpy's own reduction
    ((6, 4, 1), (0, 2), False),              # a trailing axis of one element
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_over_outer_axes(dev, rng, shape, axes, keepdims, dtype):
    x = (randn(rng, shape, dtype) + 0.25).astype(dtype)
    check(dev, "Sum", [x], {"axes": axes, "keepdims": keepdims})


# ============================================================== losses
@pytest.mark.parametrize("dense", [False, True])
def test_losses_on_a_training_batch(dev, rng, dense):
    n, c = 64, 10
    logits = randn(rng, (n, c)) * 4
    ids = rng.integers(0, c, n).astype(np.int32)
    t = np.eye(c, dtype=np.float32)[ids] if dense else ids
    loss, probs = check(dev, "SoftmaxCrossEntropy", [logits, t], {})
    check(dev, "SoftmaxCrossEntropyBackward", [probs, t], {})
    check(dev, "CrossEntropyFwd", [probs, t], {})
    big = check(dev, "SoftmaxCrossEntropy", [logits * 100, t], {})[0]  # no overflow
    assert np.isfinite(big).all() and np.isfinite(loss).all()


# ============================================================== index, pad, resample
def test_scatter_add_embedding_gradient(dev, rng):
    idx = rng.integers(-1000, 1000, (16, 20)).astype(np.int32)  # many duplicates
    src = randn(rng, (16, 20, 32))
    check(dev, "ScatterAdd", [idx, src], {"shape": (1000, 32)})
    src1 = randn(rng, (4, 16, 20, 3))
    check(dev, "ScatterAdd", [idx, src1], {"shape": (4, 1000, 3), "axis": 1})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_and_backward_on_images(dev, rng, mode):
    x = randn(rng, (4, 8, 20, 17))
    attrs = {"pads": (0, 0, 3, 1, 0, 0, 2, 4), "mode": mode, "value": 0.5}
    y = check(dev, "Pad", [x], attrs)[0]
    check(dev, "PadBackward", [randn(rng, y.shape)],
          {"pads": attrs["pads"], "mode": mode, "x_shape": x.shape})


def test_where_onehot_gather_scatter_upsample(dev, rng):
    a, b = randn(rng, (8, 1, 30)), randn(rng, (6, 30))
    check(dev, "Where", [(rng.random((8, 6, 1)) < 0.5).astype(np.int32), a, b], {})
    check(dev, "OneHot", [rng.integers(-12, 12, (64, 3)).astype(np.int32)],
          {"depth": 10, "axis": 1, "on_value": 1.0, "off_value": 0.0,
           "dtype": _dtype.kFloat32})
    x = randn(rng, (16, 40, 7))
    idx = rng.integers(-40, 40, (16, 25, 7)).astype(np.int32)
    check(dev, "GatherElements", [x, idx], {"axis": 1})
    check(dev, "ScatterElements", [x, idx, randn(rng, idx.shape)],
          {"axis": 1, "reduction": "add"})
    perm = np.argsort(rng.random((16, 40, 7)), axis=1)[:, :25].astype(np.int32)
    check(dev, "ScatterElements", [x, perm, randn(rng, perm.shape)], {"axis": 1})
    img = randn(rng, (4, 16, 8, 8))
    y = check(dev, "UpsampleNearest", [img], {"scales": (1, 1, 2, 2)})[0]
    check(dev, "UpsampleNearestBackward", [randn(rng, y.shape)],
          {"scales": (1, 1, 2, 2), "x_shape": img.shape})


# ============================================================== CPU: parallel compilations
def test_parallel_numba_paths(dev, rng, monkeypatch):
    """Small calls run numba's serial compilation; force the parallel one on every kernel."""
    if dev.backend != "cpu":
        pytest.skip("CPU numba internals")
    numba = pytest.importorskip("numba")
    if numba.get_num_threads() < 2:
        pytest.skip("numba runs one thread")
    from singa_cpu.kernels import _parallel

    monkeypatch.setattr(_parallel, "PARALLEL_MIN_ITEMS", 0)
    monkeypatch.setattr(_parallel, "SERIAL_BY_DEFAULT", False)
    for case in ("r18.l1", "asymmetric", "group4", "winograd odd", "depthwise 7x7 batch 8"):
        conv_all_passes(dev, rng, case)
    for mode in ("max", "avg"):
        xs, geo = POOL["overlap ceil"]
        x = randn(rng, xs)
        y = check(dev, "Pooling2d", [x], dict(geo, mode=mode))[0]
        check(dev, "Pooling2dBackward", [randn(rng, y.shape), x, y], dict(geo, mode=mode))
    x = randn(rng, (8, 16, 5, 5))
    p = [randn(rng, (16,)) for _ in range(3)] + [(rng.random(16) + 0.5).astype(np.float32)]
    _, mean, inv, _, _ = check(dev, "BatchNormTrain", [x] + p, {})
    check(dev, "BatchNormInfer", [x] + p, {})
    check(dev, "BatchNormBackward", [randn(rng, x.shape), x, p[0], mean, inv], {})


# ============================================================== matrix products
@pytest.mark.parametrize("a_shape, n", [((1, 7, 7, 48), 96), ((2, 5, 3, 16), 24),
                                        ((3, 4, 40), 8)])
def test_matmul_of_stacked_rows_by_a_matrix(dev, rng, a_shape, n):
    """``(..., K) @ (K, N)`` (a Linear layer on NHWC activations) against float64, in both
    dtypes; on the CPU one 2-D product over all the rows, also when bound to a replay's
    arrays, and numpy's stacked products when the rows are not contiguous."""
    for dtype in (np.float32, np.float64):
        a, b = randn(rng, a_shape, dtype), randn(rng, (a_shape[-1], n), dtype)
        check(dev, "Matmul", [a, b], {})
    if dev.backend != "cpu":
        return
    from singa_cpu.kernels.linalg import KERNELS

    a, b = randn(rng, a_shape), randn(rng, (a_shape[-1], n))
    want = np.matmul(a.astype(np.float64), b)
    out = np.full((*a_shape[:-1], n), np.nan, np.float32)
    bound = KERNELS["Matmul"].bind([a, b], [out], {})
    assert bound is not None
    bound([a, b], [out], {})
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)
    strided = randn(rng, (*a_shape[:-1], 2 * a_shape[-1]))[..., ::2]
    assert not strided.flags.c_contiguous
    out[...] = np.nan
    KERNELS["Matmul"]([strided, b], [out], {})
    np.testing.assert_allclose(out, np.matmul(strided.astype(np.float64), b), rtol=1e-5,
                               atol=1e-4)
    assert KERNELS["Matmul"].bind([strided, b], [out], {}) is None


def _scaled_copy(x, out):
    """A pjit kernel of the test's own (compiled both ways below)."""
    for i in prange(x.shape[0]):  # noqa: F821 - pjit binds prange before compiling
        out[i] = 2.0 * x[i]


def test_parallel_compilation_has_its_own_disk_cache(dev, monkeypatch):
    """numba keys its disk cache by function name, not by ``parallel``: the serial and the
    parallel compilation of one pjit kernel must write different cache files, or a later
    process can load parallel code for the serial dispatcher (which aborts when two chunk
    threads enter numba's workqueue at once)."""
    if dev.backend != "cpu":
        pytest.skip("CPU numba internals")
    numba = pytest.importorskip("numba")
    if numba.get_num_threads() < 2:
        pytest.skip("numba runs one thread")
    from singa_cpu.kernels import _parallel

    made = []
    njit = numba.njit

    def spy(**options):
        def deco(fn):
            made.append((options["parallel"], njit(**options)(fn)))
            return made[-1][1]
        return deco

    monkeypatch.setattr(numba, "njit", spy)
    monkeypatch.setattr(_parallel, "PARALLEL_MIN_ITEMS", 0)
    monkeypatch.setattr(_parallel, "SERIAL_BY_DEFAULT", False)
    globals()["prange"] = range
    kernel = _parallel.pjit()(_scaled_copy)
    x = np.arange(64, dtype=np.float32)
    out = np.empty_like(x)
    kernel(x, out)  # large enough by the patched threshold: the parallel compilation
    np.testing.assert_array_equal(out, 2 * x)
    kernel.serial()(x[::-1].copy(), out)
    np.testing.assert_array_equal(out, 2 * x[::-1])
    paths = {parallel: d._cache._cache_file._index_path for parallel, d in made}
    assert set(paths) == {False, True}
    assert paths[False] != paths[True], paths


# ============================================================== elementwise
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("k", [2.0, 3.0, 2.5, -3.0])
def test_pow_by_a_one_element_exponent(dev, rng, dtype, k):
    """Pow(x, e) with e of one element (GELU's tanh form exports ``x ** 3.0``; the CPU
    computes 2 and 3 as products) against float64, with the special values: signed zeros,
    infinities, NaN, values that overflow; the result's shape broadcasts e over x."""
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1.5, -2.5])
    x = np.concatenate([rng.standard_normal(64) * 4, specials]).astype(dtype).reshape(1, -1)
    e = np.array([[k]], dtype)
    got = run_op(dev, "Pow", [x, e], {})[0]
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), k).astype(dtype)
    assert got.shape == want.shape
    rtol = {np.float16: 2e-3, np.float32: 1e-6, np.float64: 1e-14}[dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)
    same_sign = np.signbit(got) == np.signbit(want)
    assert same_sign[~np.isnan(want)].all()
