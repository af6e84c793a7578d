"""The CPU's float32 LSTMSeq/GRUSeq as one compiled loop over the steps
(``singa_cpu.kernels.recurrent``: ``_rows_dot32`` for the recurrent product, then the cells),
for batches up to ``MAX_LOOP_BATCH``'s bound for the hidden size, and the per-step path of
larger batches.

Oracle: the ops' float64 numpy references (``OPS[...].reference``), on every output the
backward ops read (y, c, the gates, GRU's q). Shapes are generated: batches odd and even
(``_rows_dot32`` takes two rows of h at a time), hidden sizes that leave 1-3 weight rows out
of its blocks of four, and +-inf in the projection. A NaN in the state: the float32 cells'
sigmoid (``_sigmoid32``) does not propagate it, so there the two paths are checked against
each other.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from singa.ops import OPS

recurrent = pytest.importorskip("singa_cpu.kernels.recurrent")

RTOL, ATOL = 1e-5, 2e-6  # float32 against the float64 reference, as tests/nn's kernels
PATHS = {"loop": ((0, 1 << 30),), "per step": ((0, 0),)}  # MAX_LOOP_BATCH for each path

@contextlib.contextmanager
def _path(name):
    """MAX_LOOP_BATCH set for ``name``'s path, restored after (hypothesis runs many inputs in
    one test call, so no function-scoped monkeypatch)."""
    saved, recurrent.MAX_LOOP_BATCH = recurrent.MAX_LOOP_BATCH, PATHS[name]
    try:
        yield
    finally:
        recurrent.MAX_LOOP_BATCH = saved


shapes = st.tuples(st.integers(1, 6), st.integers(1, 7), st.integers(1, 13))


def _special(rng, xw, on):
    """+-inf in two elements of the projection (saturated gates)."""
    if on:
        flat = xw.reshape(-1)
        flat[rng.integers(flat.size)] = np.inf
        flat[rng.integers(flat.size)] = -np.inf


def _assert_outputs(got, want, scale=1):
    for name, g, w in zip(("y", "second", "third"), got, want):
        np.testing.assert_allclose(g, w, rtol=scale * RTOL, atol=scale * ATOL, err_msg=name)


@pytest.mark.parametrize("path", list(PATHS))
@settings(max_examples=25, deadline=None)
@given(shape=shapes, lbr=st.booleans(), reverse=st.booleans(), special=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_gru_seq_float32_matches_the_float64_reference(path, shape, lbr, reverse, special,
                                                       seed):
    t, b, h = shape
    rng = np.random.default_rng(seed)
    xw, rw = rng.standard_normal((t, b, 3 * h)), 0.5 * rng.standard_normal((3 * h, h))
    rb, h0 = rng.standard_normal(3 * h), rng.standard_normal((b, h))
    _special(rng, xw, special)
    attrs = {"reverse": reverse, "linear_before_reset": lbr}
    with np.errstate(invalid="ignore", over="ignore"):
        want = OPS["GRUSeq"].reference(xw, rw, rb, h0, **attrs)
    ins = [a.astype(np.float32) for a in (xw, rw, rb, h0)]
    outs = [np.full((t, b, h), -7.0, np.float32), np.full((t, b, 3 * h), -7.0, np.float32),
            np.full((t, b, h), -7.0, np.float32)]
    with _path(path):
        recurrent.gru_seq(ins, outs, attrs)
    _assert_outputs(outs, want)


@pytest.mark.parametrize("path", list(PATHS))
@settings(max_examples=25, deadline=None)
@given(shape=shapes, reverse=st.booleans(), special=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_lstm_seq_float32_matches_the_float64_reference(path, shape, reverse, special, seed):
    t, b, h = shape
    rng = np.random.default_rng(seed)
    xw, r = rng.standard_normal((t, b, 4 * h)), 0.5 * rng.standard_normal((4 * h, h))
    h0, c0 = rng.standard_normal((b, h)), rng.standard_normal((b, h))
    _special(rng, xw, special)
    with np.errstate(invalid="ignore", over="ignore"):
        want = OPS["LSTMSeq"].reference(xw, r, h0, c0, reverse=reverse)
    ins = [a.astype(np.float32) for a in (xw, r, h0, c0)]
    outs = [np.full((t, b, h), -7.0, np.float32), np.full((t, b, h), -7.0, np.float32),
            np.full((t, b, 4 * h), -7.0, np.float32)]
    with _path(path):
        recurrent.lstm_seq(ins, outs, {"reverse": reverse})
    _assert_outputs(outs, want)


@pytest.mark.parametrize("kind", ["gru", "gru lbr", "lstm"])
def test_nan_state_gives_the_same_outputs_on_both_paths(kind):
    rng = np.random.default_rng(1)
    t, b, h = 3, 3, 5
    g = 4 if kind == "lstm" else 3
    xw = rng.standard_normal((t, b, g * h)).astype(np.float32)
    r = rng.standard_normal((g * h, h)).astype(np.float32)
    h0 = rng.standard_normal((b, h)).astype(np.float32)
    h0[1, 2] = np.nan
    got = {}
    for path in PATHS:
        outs = [np.full((t, b, h), -7.0, np.float32), np.full((t, b, h), -7.0, np.float32),
                np.full((t, b, g * h), -7.0, np.float32)]
        with _path(path):
            if kind == "lstm":
                recurrent.lstm_seq([xw, r, h0, h0], outs, {})
            else:
                outs = [outs[0], outs[2], outs[1]]
                recurrent.gru_seq([xw, r, np.zeros(g * h, np.float32), h0], outs,
                                  {"linear_before_reset": kind == "gru lbr"})
        got[path] = outs
    for a, w in zip(got["loop"], got["per step"]):
        np.testing.assert_allclose(a, w, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("b", [1, 2, 3, 8, 33, 128])
def test_rows_dot32_is_h_times_w_transposed(b):
    """The recurrent product alone at the benchmark's size (768 x 256 weights) and a size
    with a remainder of weight rows, against numpy's float64 product."""
    rng = np.random.default_rng(b)
    for g, k in ((768, 256), (39, 13)):
        w = rng.standard_normal((g, k)).astype(np.float32)
        hh = rng.standard_normal((b, k)).astype(np.float32)
        out = np.full((b, g), np.nan, np.float32)
        recurrent._rows_dot32.dispatcher()(w, hh, out)
        want = hh.astype(np.float64) @ w.T.astype(np.float64)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * np.sqrt(k))


def _loop_bound(hidden):
    return next(b for h, b in recurrent.MAX_LOOP_BATCH if hidden >= h)


def test_the_loop_table_covers_every_hidden_size_widest_first():
    hidden = [h for h, _ in recurrent.MAX_LOOP_BATCH]
    assert hidden == sorted(hidden, reverse=True) and hidden[-1] == 0
    assert [_loop_bound(h) for h in (1, 191, 192, 511, 512, 4096)] == [8, 8, 32, 32, 64, 64]
    assert not recurrent._runs_as_loop(np.dtype(np.float64), 1, 256)


# (hidden, batch) at each bound of MAX_LOOP_BATCH and one past it
BOUNDS = [(h, b + d) for h, b in ((4, 8), (192, 32), (512, 64)) for d in (0, 1)]


def test_batches_within_the_bound_take_the_compiled_loop(monkeypatch):
    """Each row of MAX_LOOP_BATCH: its batch runs ``_gru_seq32``/``_lstm_seq32`` (once per
    thread's span of the batch), one more the per-step path (the benchmark's numbers depend
    on which one runs)."""
    rng = np.random.default_rng(0)
    calls = []
    for name in ("_gru_seq32", "_lstm_seq32"):
        fn = getattr(recurrent, name)
        monkeypatch.setattr(recurrent, name,
                            lambda *a, _fn=fn, _name=name: calls.append(_name) or _fn(*a))
    t = 2
    for h, b in BOUNDS:
        calls.clear()
        xw = rng.standard_normal((t, b, 3 * h)).astype(np.float32)
        rw = rng.standard_normal((3 * h, h)).astype(np.float32)
        rb, h0 = np.zeros(3 * h, np.float32), np.zeros((b, h), np.float32)
        outs = [np.empty((t, b, h), np.float32), np.empty((t, b, 3 * h), np.float32),
                np.empty((t, b, h), np.float32)]
        recurrent.gru_seq([xw, rw, rb, h0], outs, {"linear_before_reset": True})
        xw4 = rng.standard_normal((t, b, 4 * h)).astype(np.float32)
        r4 = rng.standard_normal((4 * h, h)).astype(np.float32)
        recurrent.lstm_seq([xw4, r4, h0, h0],
                           [np.empty((t, b, h), np.float32), np.empty((t, b, h), np.float32),
                            np.empty((t, b, 4 * h), np.float32)], {})
        want = ["_gru_seq32", "_lstm_seq32"] if b <= _loop_bound(h) else []
        # once per span of the batch when it is split across threads
        assert list(dict.fromkeys(calls)) == want, (h, b)


@st.composite
def _wide_loop_cases(draw):
    """(t, b, h) that the loop runs since the bounds widened with the hidden size: hidden 192
    or more, batch past 8 and within the bound."""
    h = draw(st.integers(192, 600))
    return draw(st.integers(1, 3)), draw(st.integers(9, _loop_bound(h))), h


@settings(max_examples=12, deadline=None)
@given(shape=_wide_loop_cases(), kind=st.sampled_from(["gru", "gru lbr", "lstm"]),
       reverse=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_wide_batches_on_the_loop_match_the_reference_and_the_per_step_path(shape, kind,
                                                                             reverse, seed):
    """Batches that take the loop only at larger hidden sizes, as routed by default: within
    the float32 tolerance of the float64 reference, and within twice it of the per-step GEMM
    path (two results each within the tolerance of the reference; at these widths OpenBLAS's
    sums leave up to ~1.5e-6 over rtol |want|, the loop's ~5e-7). Weights scaled by
    1/sqrt(hidden) so that the gates stay unsaturated."""
    t, b, h = shape
    assert recurrent._runs_as_loop(np.dtype(np.float32), b, h)
    rng = np.random.default_rng(seed)
    g = 4 if kind == "lstm" else 3
    xw = rng.standard_normal((t, b, g * h))
    r = rng.standard_normal((g * h, h)) / np.sqrt(h)
    h0, c0 = rng.standard_normal((b, h)), rng.standard_normal((b, h))
    rb = rng.standard_normal(3 * h)
    if kind == "lstm":
        attrs, ins64 = {"reverse": reverse}, (xw, r, h0, c0)
        want = OPS["LSTMSeq"].reference(*ins64, **attrs)
        kernel, widths = recurrent.lstm_seq, (h, h, 4 * h)
    else:
        attrs = {"reverse": reverse, "linear_before_reset": kind == "gru lbr"}
        ins64 = (xw, r, rb, h0)
        want = OPS["GRUSeq"].reference(*ins64, **attrs)
        kernel, widths = recurrent.gru_seq, (h, 3 * h, h)
    ins = [a.astype(np.float32) for a in ins64]
    got = {}
    for path in ("default", "per step"):
        outs = [np.full((t, b, w), -7.0, np.float32) for w in widths]
        with contextlib.nullcontext() if path == "default" else _path(path):
            kernel(ins, outs, attrs)
        got[path] = outs
    _assert_outputs(got["default"], want)
    _assert_outputs(got["default"], got["per step"], scale=2)
