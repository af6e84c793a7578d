"""The CPU backend's host threading (singa_cpu.kernels._threads): convolution batch chunks run
on several threads, each with single-threaded BLAS. Results must equal the float64 numpy
references whatever the number of threads and however the chunks fall on them; BLAS's thread
count must be restored; errors must surface."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from test_nn_kernels_cpu import (
    CONV,
    _conv_arrays,
    assert_bitwise,
    check,
    conv_all_passes,
    randn,
    run_fused,
    run_op,
)


@pytest.fixture
def dev(singa_device):
    if singa_device.backend != "cpu":
        pytest.skip("CPU threading internals")
    return singa_device


@pytest.fixture
def rng():
    return np.random.default_rng(11)


@pytest.fixture
def threads():
    from singa_cpu.kernels import _threads

    return _threads


def _force_threads(monkeypatch, threads, n):
    monkeypatch.setattr(threads, "num_threads", lambda: n)


def _count_gemm_splits(monkeypatch, threads, splits):
    """Append to ``splits`` the length split of every product ``threads.matmul`` splits,
    through the pool (``run_ranges``) or the spinning team (``_team.Team.matmul``: the sum of
    its spans)."""
    from singa_cpu.kernels import _team

    real_ranges, real_team = threads.run_ranges, _team.Team.matmul

    def ranges(fn, n, parallel=True, threads=None):
        splits.append(n)
        return real_ranges(fn, n, parallel, threads)

    def team(self, a, b, out, spans, by_columns):
        done = real_team(self, a, b, out, spans, by_columns)
        if done:
            splits.append(sum(count for _, count in spans))
        return done

    monkeypatch.setattr(threads, "run_ranges", ranges)
    monkeypatch.setattr(_team.Team, "matmul", team)
    return ranges


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("case", ["r18.l1", "r18.l4", "winograd odd", "r18.down", "group4",
                                  "pointwise", "asymmetric"])
def test_conv_is_exact_on_any_number_of_threads(dev, rng, threads, monkeypatch, case,
                                                n_threads):
    """Small chunks so that every pass has several per thread (and uneven last ones)."""
    from singa_cpu.kernels import conv, winograd

    _force_threads(monkeypatch, threads, n_threads)
    monkeypatch.setattr(conv, "COL_BYTES", 1)
    monkeypatch.setattr(winograd, "TILE_BYTES", 1)
    monkeypatch.setattr(winograd, "MIN_TILES", 1)
    conv_all_passes(dev, rng, case)


@pytest.mark.parametrize("n_threads", [2, 3])
@pytest.mark.parametrize("case", ["r18.l1", "r18.l4", "winograd odd"])
def test_winograd_weight_gradient_split_by_point(dev, rng, threads, monkeypatch, case,
                                                 n_threads):
    """Few tiles per thread: the weight gradient's products split by Winograd point (all
    three passes still against float64; the point split must be the path taken)."""
    from singa_cpu.kernels import winograd

    _force_threads(monkeypatch, threads, n_threads)
    monkeypatch.setattr(winograd, "MIN_TILES", 1 << 30)
    monkeypatch.setattr(winograd, "PARALLEL_MIN_ITEMS", 1)  # weight transform split too
    taken = []
    real = winograd._by_points
    monkeypatch.setattr(winograd, "_by_points", lambda *a: (taken.append(real(*a)), taken[-1])[1])
    conv_all_passes(dev, rng, case)
    assert taken == [n_threads]


@pytest.mark.parametrize("n_threads", [2, 3])
@pytest.mark.parametrize("case", list(CONV))
def test_batch_one_convolution_splits_each_product(dev, rng, threads, monkeypatch, case,
                                                   n_threads):
    """One image, more threads than images (batch-1 inference): the products of every path
    are split across the threads instead of by image. Conv2d with its bias and the backward
    passes against float64; the fused Conv2d+ReLU(+Pooling2d) bitwise the unfused kernels."""
    from singa_cpu.kernels import _threads, depthwise, winograd

    _force_threads(monkeypatch, threads, n_threads)
    monkeypatch.setattr(_threads, "PARALLEL_MIN_MACS", 0)  # split even the small test GEMMs
    monkeypatch.setattr(winograd, "MIN_BATCH_TILES", 1)  # the Winograd cases stay Winograd
    splits = []
    counted = _count_gemm_splits(monkeypatch, _threads, splits)  # the GEMM helper's split
    monkeypatch.setattr(winograd, "run_ranges", counted)  # Winograd's split by point
    monkeypatch.setattr(depthwise, "run_ranges", counted)  # the few-tap layers' blocks
    xs, ws, attrs = CONV[case]
    xs = (1, *xs[1:])
    x, w, b = _conv_arrays(rng, xs, ws)
    y = check(dev, "Conv2d", [x, w, b], attrs)[0]
    if attrs.get("group", 1) == 1:
        assert splits, "no product was split across the threads"
    dy = randn(rng, y.shape)
    check(dev, "Conv2dBackwardX", [dy, w], {**attrs, "x_shape": xs})
    check(dev, "Conv2dBackwardW", [dy, x], {**attrs, "w_shape": ws})
    if min(y.shape[2:]) >= 2:
        _fused_equal_unfused(dev, x, w, b, attrs, y, case)
    else:
        relu = run_op(dev, "ReLU", [y], {})[0]
        assert_bitwise(run_fused(dev, "Conv2d+ReLU", [x, w, b], attrs, y.shape), relu, case)


@pytest.mark.parametrize("n_threads", [2, 3])
@pytest.mark.parametrize("case", ["r18.l1", "winograd odd", "r18.l4"])
def test_batch_one_winograd_transforms_by_channel_ranges(dev, rng, threads, monkeypatch, case,
                                                         n_threads):
    """One image through Winograd with its transforms in channel ranges on the threads (the
    path of big maps, forced here): all three passes against float64, and the forward (with
    and without bias) and the data gradient bitwise what the serial transforms give."""
    from singa_cpu.kernels import winograd

    _force_threads(monkeypatch, threads, n_threads)
    monkeypatch.setattr(winograd, "MIN_BATCH_TILES", 1)
    xs, ws, attrs = CONV[case]
    xs = (1, *xs[1:])
    x, w, b = _conv_arrays(rng, xs, ws)
    dy = randn(rng, (1, ws[0], *run_op(dev, "Conv2d", [x, w], attrs)[0].shape[2:]))
    calls = []
    real = winograd._one_image_by_channels
    monkeypatch.setattr(winograd, "_one_image_by_channels",
                        lambda *a: (calls.append(1), real(*a)))
    results = {}
    for split in (0, 1 << 62):
        monkeypatch.setattr(winograd, "SPLIT_CHANNELS_MIN_ITEMS", split)
        del calls[:]
        if split == 0:
            results[split] = [check(dev, "Conv2d", [x, w, b], attrs)[0],
                              check(dev, "Conv2d", [x, w], attrs)[0],
                              check(dev, "Conv2dBackwardX", [dy, w], {**attrs, "x_shape": xs})[0]]
            check(dev, "Conv2dBackwardW", [dy, x], {**attrs, "w_shape": ws})
            assert len(calls) >= 3, "the channel-range path did not run"
        else:
            results[split] = [run_op(dev, "Conv2d", [x, w, b], attrs)[0],
                              run_op(dev, "Conv2d", [x, w], attrs)[0],
                              run_op(dev, "Conv2dBackwardX", [dy, w],
                                     {**attrs, "x_shape": xs})[0]]
            assert not calls
    for what, got, want in zip(("bias", "no bias", "dx"), results[0], results[1 << 62]):
        assert_bitwise(got, want, f"{case} {what}")


@pytest.mark.parametrize("case", ["cnn.conv1", "cnn.conv2"])
def test_batch_one_small_convolution_runs_without_a_section(dev, rng, threads, monkeypatch,
                                                             case):
    """One small image (the seed CNN at batch 1) runs its im2col forward directly on the
    calling thread even when threads are available, not through the chunk runner: against
    float64, and the fused kernels bitwise the unfused ones."""
    from singa_cpu.kernels import conv, depthwise

    _force_threads(monkeypatch, threads, 2)
    monkeypatch.setattr(depthwise, "MAX_DENSE_TAPS", 0)  # conv1 (25 taps) takes im2col too
    chunked = []
    real = conv.run_chunks

    def counted(fn, items, threads=None):
        chunked.append(len(list(items)))
        return real(fn, items, threads)

    monkeypatch.setattr(conv, "run_chunks", counted)  # the convolution's chunk runner
    xs, ws, attrs = CONV[case]
    x, w, b = _conv_arrays(rng, (1, *xs[1:]), ws)
    y = check(dev, "Conv2d", [x, w, b], attrs)[0]
    _fused_equal_unfused(dev, x, w, b, attrs, y, case)
    assert chunked == [], f"{case}: a batch-1 product this small went through the chunks"


def _fused_equal_unfused(dev, x, w, b, attrs, y, case):
    """The fused Conv2d+ReLU and Conv2d+ReLU+Pooling2d (2x2 max) give bitwise what Conv2d
    (output ``y``), ReLU and Pooling2d give one after the other."""
    relu = run_op(dev, "ReLU", [y], {})[0]
    assert_bitwise(run_fused(dev, "Conv2d+ReLU", [x, w, b], attrs, y.shape), relu, case)
    pattrs = dict(kernel=(2, 2), stride=(2, 2), mode="max")
    pooled = run_op(dev, "Pooling2d", [relu], pattrs)[0]
    got_y, got_p = run_fused(dev, "Conv2d+ReLU+Pooling2d", [x, w, b],
                             {**attrs, "second": pattrs}, y.shape, pooled.shape)
    assert_bitwise(got_y, relu, case)
    assert_bitwise(got_p, pooled, case)


def _operand(rng, shape, transposed):
    x = rng.standard_normal(shape[::-1] if transposed else shape).astype(np.float32)
    return x.T if transposed else x


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("case", [
    ((5, 40), False, (40, 70), False, "cols"),  # wide output: the bigger operand b is split
    ((70, 40), False, (40, 5), False, "rows"),  # tall output: a is split
    ((9, 9), False, (9, 9), False, "rows"),  # square: rows
    ((4, 33), False, (33, 70), True, "cols"),  # b a transposed view (a Linear layer's W.T)
    ((60, 6), True, (6, 50), False, "rows"),  # a a transposed view (a weight gradient's x.T)
    ((3, 6, 8), False, (3, 8, 20), False, "batch"),  # batched: by the leading axis
])
def test_gemm_split_across_threads(threads, monkeypatch, n_threads, case):
    """The GEMM helper splits a big product by columns when the output is wider than tall,
    else by rows (or by batch), and equals the float64 product within float32 rounding;
    the same call twice gives the same bits."""
    rng = np.random.default_rng(5)
    a_shape, a_t, b_shape, b_t, axis = case
    a, b = _operand(rng, a_shape, a_t), _operand(rng, b_shape, b_t)
    _force_threads(monkeypatch, threads, n_threads)
    monkeypatch.setattr(threads, "PARALLEL_MIN_MACS", 0)
    splits = []
    _count_gemm_splits(monkeypatch, threads, splits)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    out = np.full(want.shape, np.nan, np.float32)
    threads.matmul(a, b, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    again = np.full(want.shape, np.nan, np.float32)
    threads.matmul(a, b, again)
    assert np.array_equal(out, again)
    if n_threads == 1:
        assert splits == []
    else:
        expected = {"cols": out.shape[-1], "rows": out.shape[0], "batch": out.shape[0]}[axis]
        assert splits[0] == expected, f"{case}: split over {splits}, expected {axis}"


@pytest.mark.parametrize("n_threads", [2, 3])
@pytest.mark.parametrize("case", ["cnn.conv1", "r18.stem", "imagenet.stem7x7", "r18.down",
                                  "group4", "dilated", "winograd odd"])
def test_batch_one_large_image_runs_in_bands(dev, rng, threads, monkeypatch, case, n_threads):
    """Fewer images than threads, columns past COL_BYTES (an ImageNet stem at batch 1): every
    (image, band of output rows) is a chunk with its own columns and epilogue. Conv2d against
    float64 and equal to the unbanded kernel; the fused ReLU and ReLU+2x2-pooling (even band
    heights) bitwise the unfused kernels."""
    from singa_cpu.kernels import conv, depthwise, winograd

    xs, ws, attrs = CONV[case]
    xs = (min(xs[0], n_threads - 1), *xs[1:])
    x, w, b = _conv_arrays(rng, xs, ws)
    monkeypatch.setattr(winograd, "MIN_BATCH_TILES", 1 << 30)  # 3x3 layers take im2col too
    monkeypatch.setattr(depthwise, "MAX_DENSE_TAPS", 0)  # and few-tap layers (cnn.conv1)
    _force_threads(monkeypatch, threads, n_threads)
    whole = run_op(dev, "Conv2d", [x, w, b], attrs)[0]
    monkeypatch.setattr(conv, "COL_BYTES", 1)
    banded = []
    real = conv._bands
    monkeypatch.setattr(conv, "_bands", lambda *a: (banded.append(real(*a)), banded[-1])[1])
    y = check(dev, "Conv2d", [x, w, b], attrs)[0]
    assert banded[-1] and len(banded[-1]) >= min(n_threads, -(-y.shape[2] // 2)), banded
    np.testing.assert_allclose(y, whole, rtol=1e-6, atol=1e-6 * float(np.abs(whole).max()))
    _fused_equal_unfused(dev, x, w, b, attrs, y, case)


def test_winograd_needs_enough_tiles_in_the_batch(dev):
    """Winograd only when the batch has MIN_BATCH_TILES output tiles: at batch 1 ResNet's
    14x14 and 7x7 layers (16 and 4 F4 tiles) take im2col, its 56x56 layer and every layer at
    batch 32 Winograd."""
    from singa.backend import conv2d_geometry
    from singa_cpu.kernels import winograd

    def takes(n, c, hw):
        return winograd.eligible(conv2d_geometry("Conv2d", (n, c, hw, hw), (c, c, 3, 3),
                                                 {"pads": (1, 1, 1, 1)}))

    assert not takes(1, 512, 7) and not takes(1, 256, 14)
    assert takes(1, 64, 56) and takes(32, 512, 7) and takes(32, 256, 14)


@pytest.mark.parametrize("case", ["r18.down", "r18.l4"])
def test_weight_gradient_when_other_threads_take_every_chunk(dev, rng, threads, monkeypatch,
                                                             case):
    """The caller's accumulator is the output itself; when the pool threads run all chunks
    (the caller was descheduled), their partial sums must still land in dW."""
    from singa_cpu.kernels import conv, winograd

    def elsewhere(fn, items, threads=None):
        def run(part):
            for item in part:
                fn(item)

        items = list(items)
        ts = [threading.Thread(target=run, args=(items[i::2],)) for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    for module in (conv, winograd, threads):  # threads: ThreadSums.run's groups
        monkeypatch.setattr(module, "run_chunks", elsewhere)
    _force_threads(monkeypatch, threads, 2)
    monkeypatch.setattr(conv, "COL_BYTES", 1)
    monkeypatch.setattr(winograd, "TILE_BYTES", 1)
    conv_all_passes(dev, rng, case)


def _schedules():
    """Ways the pool may run items: in order on one thread, in reverse on one thread, every
    item on its own new thread (the caller runs none), the second half first on another thread
    while the caller waits."""
    def serial(fn, items, threads=None):
        for item in list(items):
            fn(item)

    def reverse(fn, items, threads=None):
        for item in reversed(list(items)):
            fn(item)

    def each_elsewhere(fn, items, threads=None):
        for item in list(items):
            t = threading.Thread(target=fn, args=(item,))
            t.start()
            t.join()

    def late_caller(fn, items, threads=None):
        items = list(items)
        half = len(items) // 2
        t = threading.Thread(target=lambda: [fn(i) for i in items[half:]])
        t.start()
        t.join()
        for item in items[:half]:
            fn(item)

    return {"serial": serial, "reverse": reverse, "each_elsewhere": each_elsewhere,
            "late_caller": late_caller}


@pytest.mark.parametrize("n_threads", [2, 3])
@pytest.mark.parametrize("case", ["cnn.conv2", "r18.down", "r18.l4", "group4"])
def test_weight_gradient_bits_do_not_depend_on_the_schedule(dev, rng, threads, monkeypatch,
                                                            case, n_threads):
    """With a given thread count the weight gradient's partial sums fall in fixed groups
    added in a fixed order, so which thread runs which chunk, and when, changes no bit (it
    did: two trainings of the README's CNN on 2 threads ended 0.9499 and 0.9694)."""
    from singa_cpu.kernels import conv, winograd

    xs, ws, attrs = CONV[case]
    x, w, _ = _conv_arrays(rng, xs, ws)
    dy = randn(rng, run_op(dev, "Conv2d", [x, w], attrs)[0].shape)
    wattrs = {**attrs, "w_shape": ws}
    _force_threads(monkeypatch, threads, n_threads)
    monkeypatch.setattr(conv, "COL_BYTES", 1)  # several chunks per group
    monkeypatch.setattr(winograd, "TILE_BYTES", 1)
    monkeypatch.setattr(winograd, "MIN_TILES", 1)
    want = run_op(dev, "Conv2dBackwardW", [dy, x], wattrs)[0]
    check(dev, "Conv2dBackwardW", [dy, x], wattrs)  # and it is the float64 reference's
    for name, schedule in _schedules().items():
        for module in (conv, winograd, threads):
            monkeypatch.setattr(module, "run_chunks", schedule)
        assert_bitwise(run_op(dev, "Conv2dBackwardW", [dy, x], wattrs)[0], want, name)


def test_run_chunks_covers_every_item_once_and_restores_blas(dev, threads):
    if not threads._find_blas():
        pytest.skip("numpy's BLAS thread count cannot be controlled here")
    before = threads._blas[0]()
    seen, blas_inside = [], []

    def fn(i):
        seen.append(i)
        blas_inside.append(threads._blas[0]())
        assert threads.in_worker()

    threads.run_chunks(fn, range(37), threads=2)
    assert sorted(seen) == list(range(37))
    assert set(blas_inside) == {1}  # each chunk ran with single-threaded BLAS
    assert threads._blas[0]() == before
    assert not threads.in_worker()


@pytest.mark.parametrize("outside", [1, 2])
def test_single_threaded_blas_sets_and_restores_only_a_count_other_than_one(
        dev, threads, monkeypatch, outside):
    """Inside, BLAS runs on one thread; after, on as many as before; a process already on
    one thread pays no call to set it (every BLAS kernel enters a section)."""
    if not threads._find_blas():
        pytest.skip("numpy's BLAS thread count cannot be controlled here")
    get, set_ = threads._blas
    before = get()
    calls = []

    def counting(n):
        calls.append(n)
        set_(n)

    monkeypatch.setattr(threads, "_blas", (get, counting))
    set_(outside)
    try:
        with threads.single_threaded_blas():
            inside = get()
            with threads.single_threaded_blas():  # nested: nothing more to set
                nested = get()
        after = get()
    finally:
        set_(before)
    assert inside == nested == 1 and after == outside
    assert calls == ([] if outside == 1 else [1, outside])


def test_run_chunks_reraises_and_restores_blas(dev, threads):
    before = threads._blas[0]() if threads._find_blas() else None
    done = []

    def fn(i):
        if i == 3:
            raise ValueError("chunk 3 failed")
        done.append(i)

    with pytest.raises(ValueError, match="chunk 3 failed"):
        threads.run_chunks(fn, range(8), threads=2)
    assert sorted(done) == [0, 1, 2, 4, 5, 6, 7]  # the others finished before the raise
    if before is not None:
        assert threads._blas[0]() == before


def test_nested_sections_run_serially_inside_a_chunk(dev, threads):
    inner_threads = []

    def outer(_):
        inner_threads.append(threads.num_threads())
        threads.run_chunks(lambda j: None, range(4))

    threads.run_chunks(outer, range(4), threads=2)
    assert inner_threads == [1, 1, 1, 1]


def test_spans_are_a_multiple_of_the_threads(threads, monkeypatch):
    monkeypatch.setattr(threads, "num_threads", lambda: 2)
    assert threads.chunk_spans(32, 32) == [(0, 16), (16, 16)]
    assert threads.chunk_spans(32, 8) == [(0, 8), (8, 8), (16, 8), (24, 8)]
    spans = threads.chunk_spans(7, 3)  # 3 chunks -> 4, uneven but covering
    assert len(spans) == 4 and sum(m for _, m in spans) == 7
    assert threads.chunk_spans(1, 8) == [(0, 1)]
    assert threads.split_spans(5, 2) == [(0, 3), (3, 2)]


@pytest.mark.parametrize("name", ["ReLU", "ReLUBackward", "Add", "Sub", "Mul", "AddScalar",
                                  "MulScalar"])
def test_elementwise_in_flat_slices(dev, rng, threads, monkeypatch, name):
    """Forced onto 3 threads (uneven slices), also with the output aliasing an input."""
    from singa.ops import OPS
    from singa_cpu.kernels import elementwise

    monkeypatch.setattr(elementwise, "PARALLEL_MIN_ITEMS", 0)
    monkeypatch.setattr(threads, "num_threads", lambda: 3)
    kernel = elementwise.KERNELS[name]
    attrs = {"value": 0.75} if name.endswith("Scalar") else {}
    ins = [randn(rng, (7, 5, 11)) for _ in range(OPS[name].nin)]
    want = OPS[name].reference(*[a.astype(np.float64) for a in ins], **attrs)
    out = np.empty_like(ins[0])
    kernel(ins, [out], attrs)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    kernel(ins, [ins[0]], attrs)  # in place: out is the first input
    np.testing.assert_allclose(ins[0], want, rtol=1e-6, atol=1e-6)


def test_axpy_in_slices(dev, rng, threads, monkeypatch):
    from singa_cpu.kernels import linalg

    monkeypatch.setattr(linalg, "PARALLEL_MIN_ITEMS", 0)
    monkeypatch.setattr(threads, "num_threads", lambda: 3)
    x, y = randn(rng, (13, 17)), randn(rng, (13, 17))
    alpha = np.array([-0.3], np.float32)
    want = y.astype(np.float64) - 0.3 * x
    linalg.KERNELS["Axpy"]([alpha, x, y], [y], {})  # SGD updates in place
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("target", ["y", "x", "new"])
@pytest.mark.parametrize("n_threads", [1, 3])
def test_axpy_in_blocks(dev, rng, threads, monkeypatch, dtype, target, n_threads):
    """Axpy on more than two blocks runs block by block (alpha * x of a block added while in
    cache): bitwise numpy's two-pass ``y + x * alpha``, with the output being y (an SGD update),
    x, or a third array, within and across the threads' slices."""
    from singa_cpu.kernels import linalg

    monkeypatch.setattr(linalg, "AXPY_BLOCK", 16)
    monkeypatch.setattr(linalg, "PARALLEL_MIN_ITEMS", 0)
    monkeypatch.setattr(threads, "num_threads", lambda: n_threads)
    x = rng.standard_normal((7, 29)).astype(dtype)  # 203 elements: 12 full blocks and a tail
    y = rng.standard_normal((7, 29)).astype(dtype)
    alpha = np.array([-0.37], dtype)
    want = np.add(y, x * alpha.reshape(()))
    exact = y.astype(np.float64) - 0.37 * x.astype(np.float64)
    out = {"y": y, "x": x, "new": np.full(x.shape, np.nan, dtype)}[target]
    linalg.KERNELS["Axpy"]([alpha, x, y], [out], {})
    assert np.array_equal(out, want)
    np.testing.assert_allclose(out, exact, rtol=1e-6, atol=1e-6)


def test_batchnorm_by_channel_ranges(dev, rng, threads, monkeypatch):
    from singa_cpu.kernels import norm

    monkeypatch.setattr(norm, "PARALLEL_MIN_ITEMS", 0)
    monkeypatch.setattr(threads, "num_threads", lambda: 3)
    x = randn(rng, (6, 10, 4, 3))
    p = [randn(rng, (10,)) for _ in range(3)] + [(rng.random(10) + 0.5).astype(np.float32)]
    _, mean, inv, _, _ = check(dev, "BatchNormTrain", [x] + p, {})
    check(dev, "BatchNormInfer", [x] + p, {})
    check(dev, "BatchNormBackward", [randn(rng, x.shape), x, p[0], mean, inv], {})


@pytest.mark.parametrize("case", ["cnn.pool1", "overlap ceil", "asymmetric"])
@pytest.mark.parametrize("mode", ["max", "avg"])
def test_pooling_by_image_ranges(dev, rng, threads, monkeypatch, case, mode):
    from singa_cpu.kernels import pool
    from test_nn_kernels_cpu import POOL

    monkeypatch.setattr(pool, "PARALLEL_MIN_ITEMS", 0)
    monkeypatch.setattr(threads, "num_threads", lambda: 3)
    xs, geo = POOL[case]
    x = randn(rng, xs)
    y = check(dev, "Pooling2d", [x], dict(geo, mode=mode))[0]
    check(dev, "Pooling2dBackward", [randn(rng, y.shape), x, y], dict(geo, mode=mode))


def test_thread_count_follows_openblas_and_the_doctor_says_so(dev, threads):
    """OPENBLAS_NUM_THREADS=1 makes every kernel serial; the doctor's cpu lines report it."""
    import os
    import subprocess
    import sys

    if not threads._find_blas():
        pytest.skip("numpy's BLAS thread count cannot be controlled here")
    code = ("from singa_cpu.kernels import _threads; from singa_cpu.plugin import _describe; "
            "print(_threads.num_threads()); print(_describe()[1])")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0] == "1"
    assert out[1].startswith("kernel threads: 1 ")


def test_the_doctor_names_the_gemm_teams_cblas(dev, threads):
    """The doctor's third cpu line: the CBLAS symbol the GEMM team calls (the one
    ``_find_cblas`` resolves in numpy's OpenBLAS), or why there is no team."""
    from singa_cpu.plugin import _describe

    line = _describe()[2]
    cblas = threads._find_cblas()
    if cblas is None:
        assert line.startswith("GEMM team: off (")
    else:
        assert line.startswith("GEMM team: ") and cblas[3] in line
        assert ("ILP64" if cblas[2] else "LP64") in line


def test_the_doctor_names_the_transposing_copies_symbol(dev, threads):
    """The doctor's fourth cpu line: the omatcopy function transposed copies call, or that
    numpy copies them."""
    from singa_cpu.kernels import _transpose
    from singa_cpu.plugin import _describe

    line = _describe()[3]
    omat = _transpose.symbol()
    if omat is None:
        assert line.startswith("transposing copies: numpy's (")
    else:
        assert line == f"transposing copies: through {omat} (OpenBLAS omatcopy)"
