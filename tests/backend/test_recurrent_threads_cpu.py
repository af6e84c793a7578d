"""The CPU's LSTMSeq/GRUSeq kernels and their backward ops with the batch split across threads
(``singa_cpu.kernels.recurrent._batch_spans``: each thread runs every step for its rows).

Oracles: the same kernel on one thread (bit for bit where the split claims it: the compiled
loop's forward, whose spans keep ``_rows_dot32``'s pairs of rows; the backward's per-step
outputs), the ops' float64 numpy references (``OPS[...].reference``) for every output, and
two runs on the same thread count for the reductions (the weight gradients, split by rows of
the result through ``_threads.matmul``), which may differ from one thread's in the last bits
but never from run to run. Threads are forced (``_threads.num_threads``) and the size
thresholds (``PARALLEL_MIN_MACS``, ``STEP_MIN_MACS``) set to 0, so the tiny generated shapes
split too.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from singa.ops import OPS

recurrent = pytest.importorskip("singa_cpu.kernels.recurrent")
_threads = pytest.importorskip("singa_cpu.kernels._threads")

PATHS = {"loop": ((0, 1 << 30),), "per step": ((0, 0),)}  # MAX_LOOP_BATCH for each path
KINDS = ["lstm", "gru", "gru lbr"]


@contextlib.contextmanager
def _setup(threads, path="loop", min_macs=0):
    """``threads`` forced, the split thresholds (both, to ``min_macs``; None: the module's)
    and the forward path (None: the default routing) set; restored after (hypothesis runs
    many inputs in one test call, so no function-scoped monkeypatch)."""
    saved = (_threads.num_threads, recurrent.PARALLEL_MIN_MACS, recurrent.STEP_MIN_MACS,
             recurrent.MAX_LOOP_BATCH)
    _threads.num_threads = lambda: threads
    if min_macs is not None:
        recurrent.PARALLEL_MIN_MACS = recurrent.STEP_MIN_MACS = min_macs
    if path is not None:
        recurrent.MAX_LOOP_BATCH = PATHS[path]
    try:
        yield
    finally:
        (_threads.num_threads, recurrent.PARALLEL_MIN_MACS, recurrent.STEP_MIN_MACS,
         recurrent.MAX_LOOP_BATCH) = saved


def _inputs(kind, t, b, h, seed, dtype=np.float64):
    """float64 inputs of ``kind``'s forward op and its attrs; weights by 1/sqrt(hidden)."""
    rng = np.random.default_rng(seed)
    g = 4 if kind == "lstm" else 3
    xw = rng.standard_normal((t, b, g * h))
    r = rng.standard_normal((g * h, h)) / np.sqrt(h)
    h0, c0 = rng.standard_normal((b, h)), rng.standard_normal((b, h))
    rb = rng.standard_normal(g * h)
    if kind == "lstm":
        return [a.astype(dtype) for a in (xw, r, h0, c0)]
    return [a.astype(dtype) for a in (xw, r, rb, h0)]


def _forward(kind, ins, reverse, threads, path="loop", min_macs=0):
    t, b = ins[0].shape[:2]
    h = ins[1].shape[1]
    dt = ins[0].dtype
    if kind == "lstm":
        outs = [np.full((t, b, w), -7.0, dt) for w in (h, h, 4 * h)]
        kernel, attrs = recurrent.lstm_seq, {"reverse": reverse}
    else:
        outs = [np.full((t, b, w), -7.0, dt) for w in (h, 3 * h, h)]
        kernel = recurrent.gru_seq
        attrs = {"reverse": reverse, "linear_before_reset": kind == "gru lbr"}
    with _setup(threads, path, min_macs):
        kernel(ins, outs, attrs)
    return outs, attrs


def _reference(kind, ins, attrs):
    ins64 = [a.astype(np.float64) for a in ins]
    return OPS["LSTMSeq" if kind == "lstm" else "GRUSeq"].reference(*ins64, **attrs)


def _backward(kind, ins, fwd, douts, attrs, threads, min_macs=0):
    """The backward kernel's outputs, float32 or float64 as the inputs."""
    t, b = ins[0].shape[:2]
    h = ins[1].shape[1]
    dt = ins[0].dtype
    if kind == "lstm":
        y, c, gates = fwd
        bins = [douts[0], douts[1], gates, c, y, ins[2], ins[3], ins[1]]
        outs = [np.full(s, -7.0, dt) for s in ((t, b, 4 * h), (4 * h, h), (b, h), (b, h))]
        kernel = recurrent.lstm_seq_backward
    else:
        y, gates, q = fwd
        bins = [douts[0], gates, q, y, ins[3], ins[1]]
        outs = [np.full(s, -7.0, dt) for s in ((t, b, 3 * h), (3 * h, h), (3 * h,), (b, h))]
        kernel = recurrent.gru_seq_backward
    with _setup(threads, None, min_macs):
        kernel(bins, outs, attrs)
    return bins, outs


def _equal(got, want, names):
    for name, g, w in zip(names, got, want):
        np.testing.assert_array_equal(g, w, err_msg=name)


shapes = st.tuples(st.integers(1, 5), st.integers(1, 11), st.integers(1, 13))


@settings(max_examples=30, deadline=None)
@given(shape=shapes, kind=st.sampled_from(KINDS), reverse=st.booleans(),
       threads=st.sampled_from([2, 3]), seed=st.integers(0, 2**32 - 1))
def test_the_split_loop_is_bitwise_the_one_thread_loop(shape, kind, reverse, threads, seed):
    """The compiled float32 loop: odd batches, batches under the thread count (those run
    unsplit), every output bit for bit that of one thread, and within float32 of the
    reference."""
    t, b, h = shape
    ins = _inputs(kind, t, b, h, seed, np.float32)
    one, attrs = _forward(kind, ins, reverse, 1)
    split, _ = _forward(kind, ins, reverse, threads)
    _equal(split, one, ("y", "second", "third"))
    for g, w in zip(split, _reference(kind, ins, attrs)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("b", [4, 5, 7, 8, 9, 33])
def test_the_split_loop_is_bitwise_at_fixed_batches(kind, reverse, b):
    """The same on fixed batches that split (hypothesis favours small ones, which do not):
    even and odd, on 2 and 3 threads."""
    ins = _inputs(kind, 3, b, 9, b, np.float32)
    one, _ = _forward(kind, ins, reverse, 1)
    for threads in (2, 3):
        split, _ = _forward(kind, ins, reverse, threads)
        _equal(split, one, ("y", "second", "third"))


@settings(max_examples=30, deadline=None)
@given(shape=shapes, kind=st.sampled_from(KINDS), reverse=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**32 - 1))
def test_the_split_per_step_path_matches_one_thread_and_the_reference(shape, kind, reverse,
                                                                      dtype, seed):
    """The per-step GEMM path (float64 always, float32 past the loop's bound): each span runs
    its own (rows, H) x (H, gates H) products, which OpenBLAS may sum in another order than
    the whole batch's, so the split is checked against one thread within rounding (and the
    reference), not bit for bit."""
    t, b, h = shape
    ins = _inputs(kind, t, b, h, seed, dtype)
    one, attrs = _forward(kind, ins, reverse, 1, "per step")
    split, _ = _forward(kind, ins, reverse, 2, "per step")
    rtol, atol = (1e-5, 2e-6) if dtype == np.float32 else (1e-12, 1e-13)
    for g, o, w in zip(split, one, _reference(kind, ins, attrs)):
        np.testing.assert_allclose(g, o, rtol=rtol, atol=atol)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@settings(max_examples=30, deadline=None)
@given(shape=shapes, kind=st.sampled_from(KINDS), reverse=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**32 - 1))
def test_the_split_backward_matches_one_thread_and_the_reference(shape, kind, reverse, dtype,
                                                                 seed):
    """BPTT per span of the batch: dxw and dh0 (and LSTM's dc0) within rounding of one thread
    (the per-step (rows, gates H) x (gates H, H) products are the span's), the weight and bias
    gradients (sums over all steps and rows, split by rows of the result) likewise, all within
    tolerance of the float64 reference, and two split runs bit for bit equal."""
    t, b, h = shape
    ins = _inputs(kind, t, b, h, seed, dtype)
    fwd, attrs = _forward(kind, ins, reverse, 1)
    rng = np.random.default_rng(seed + 1)
    douts = [rng.standard_normal(fwd[0].shape).astype(dtype) for _ in range(2)]
    bins, one = _backward(kind, ins, fwd, douts, attrs, 1)
    _, split = _backward(kind, ins, fwd, douts, attrs, 2)
    _, again = _backward(kind, ins, fwd, douts, attrs, 2)
    names = ("dxw", "dr", "dh0", "dc0") if kind == "lstm" else ("dxw", "drw", "drb", "dh0")
    _equal(again, split, names)
    op = OPS["LSTMSeqBackward" if kind == "lstm" else "GRUSeqBackward"]
    want = op.reference(*(a.astype(np.float64) for a in bins), **attrs)
    rtol, atol = (2e-4, 2e-5) if dtype == np.float32 else (1e-10, 1e-11)
    for name, g, o, w in zip(names, split, one, want):
        np.testing.assert_allclose(g, o, rtol=rtol, atol=atol, err_msg=name)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("kind", KINDS)
def test_the_benchmark_shape_splits_and_agrees(kind, monkeypatch):
    """(35, 32, 256) at the default threshold and routing, as the LSTM language model's layers
    run it: split on two threads (forward and backward), the forward bit for bit one
    thread's, the backward within rounding of it and deterministic."""
    t, b, h = 35, 32, 256
    calls = []
    run_spans = recurrent._run_spans
    monkeypatch.setattr(recurrent, "_run_spans",
                        lambda fn, spans: calls.append(len(spans)) or run_spans(fn, spans))
    ins = _inputs(kind, t, b, h, 5, np.float32)
    one, attrs = _forward(kind, ins, False, 1, None, None)
    split, _ = _forward(kind, ins, False, 2, None, None)
    _equal(split, one, ("y", "second", "third"))
    douts = [np.random.default_rng(6).standard_normal(one[0].shape).astype(np.float32)] * 2
    _, bone = _backward(kind, ins, one, douts, attrs, 1, None)
    _, bsplit = _backward(kind, ins, one, douts, attrs, 2, None)
    _, again = _backward(kind, ins, one, douts, attrs, 2, None)
    assert calls == [1, 2, 1, 2, 2]
    for g, o, a in zip(bsplit, bone, again):
        np.testing.assert_array_equal(g, a)
        np.testing.assert_allclose(g, o, rtol=1e-4, atol=1e-5)


def test_spans_keep_pairs_of_rows_and_cover_the_batch():
    """Every span starts at an even row, all but the last have an even count, they cover the
    batch in order; small work or batches under 4 rows stay whole."""
    for threads in (2, 3, 4):
        for b in range(1, 40):
            with _setup(threads):
                spans = recurrent._batch_spans(b, 1, 0)
            assert spans[0][0] == 0 and spans[-1][1] == b
            assert all(s[1] == n[0] for s, n in zip(spans, spans[1:]))
            assert all(lo % 2 == 0 and hi > lo for lo, hi in spans)
            assert all((hi - lo) % 2 == 0 for lo, hi in spans[:-1])
            assert len(spans) == (1 if b < 4 else min(threads, b // 2))
    with _setup(2):
        assert recurrent._batch_spans(32, 99, 100) == [(0, 32)]
        assert recurrent._batch_spans(32, 100, 100) == [(0, 16), (16, 32)]


@pytest.mark.parametrize("kind,t,b,h,split", [
    ("lstm", 35, 4, 64, False),       # compiled loop, 2.3 M multiply-adds a call
    ("lstm", 35, 8, 64, True),        # compiled loop, 4.6 M
    ("lstm", 35, 12, 128, False),     # per-step path, 0.8 M a step
    ("lstm", 35, 16, 128, True),      # per-step path, 1.0 M a step
    ("gru", 35, 24, 128, True),       # per-step path, 1.2 M a step
])
def test_forward_splits_from_its_paths_threshold(kind, t, b, h, split):
    """The default thresholds route each path as measured (``PARALLEL_MIN_MACS`` a call on the
    compiled loops, ``STEP_MIN_MACS`` a step on the per-step paths): the spans the forward
    kernel runs, counted at ``_run_spans``."""
    ins = [a.astype(np.float32) for a in _inputs(kind, t, b, h, 0)]
    assert _spans_run(lambda: _forward(kind, ins, False, 2, None, None)) == [2 if split else 1]


def _spans_run(fn):
    """How many spans each ``recurrent._run_spans`` call made while ``fn()`` ran."""
    seen = []
    real = recurrent._run_spans

    def counting(run, spans):
        seen.append(len(spans))
        return real(run, spans)

    recurrent._run_spans = counting
    try:
        fn()
    finally:
        recurrent._run_spans = real
    return seen


@pytest.mark.parametrize("kind,b,h,split", [
    ("lstm", 12, 128, False), ("lstm", 16, 128, True),
    ("gru", 16, 256, False), ("gru", 24, 256, True),  # GRU_BACKWARD_STEP_FACTOR x a step
])
def test_backward_splits_from_its_step_threshold(kind, b, h, split):
    """The backward ops split from ``STEP_MIN_MACS`` a step (LSTM) and
    ``GRU_BACKWARD_STEP_FACTOR`` times it (GRU): spans counted at ``_run_spans`` (the weight
    gradients go through ``_threads.matmul``, which splits by rows of the gradient)."""
    ins = [a.astype(np.float32) for a in _inputs(kind, 3, b, h, 0)]
    fwd, attrs = _forward(kind, ins, False, 2, None, None)
    douts = [np.ones_like(a) for a in fwd[:2]]
    seen = _spans_run(lambda: _backward(kind, ins, fwd, douts, attrs, 2, None))
    assert seen == [2 if split else 1], seen


def test_float16_runs_the_split_float32_kernel():
    """float16 goes through float32 (``via_float32``): split, the result is one thread's."""
    ins = _inputs("lstm", 3, 6, 5, 0, np.float16)
    one, _ = _forward("lstm", ins, True, 1)
    split, _ = _forward("lstm", ins, True, 2)
    _equal(split, one, ("y", "c", "gates"))
    assert split[0].dtype == np.float16
