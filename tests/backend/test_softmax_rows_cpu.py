"""The CPU's Softmax, LogSoftmax and SoftmaxBackward along the last axis of C-contiguous
float32 arrays: one compiled loop per row (``singa_cpu.kernels.reduce._softmax_rows32``,
``_softmax_backward_rows32``), rows split across threads from a size on.

Oracles: the ops' float64 numpy references (``OPS[...].reference``), numpy's own float32
passes (the kernel these loops replace) for the NaN/inf pattern of special rows, and the
same loop on one thread, bit for bit (rows are independent, so a split changes nothing).
The other layouts (another axis, strided, float64) keep numpy's passes and are checked
against the same references.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from singa.ops import OPS

reduce = pytest.importorskip("singa_cpu.kernels.reduce")
_threads = pytest.importorskip("singa_cpu.kernels._threads")

RTOL = 2e-6  # float32 exp and a row sum of up to a few thousand terms


def softmax(x, axis=-1, out=None, op="Softmax"):
    out = np.empty_like(x) if out is None else out
    reduce.KERNELS[op]([x], [out], {"axis": axis})
    return out


FORWARD = ["Softmax", "LogSoftmax"]


def softmax_backward(y, dy, axis=-1, out=None):
    out = np.empty_like(y) if out is None else out
    reduce.KERNELS["SoftmaxBackward"]([y, dy], [out], {"axis": axis})
    return out


def numpy_softmax32(x, op="Softmax"):
    """The float32 numpy passes of the kernels before the loops (max, subtract, exp, sum,
    divide; or subtract the sum's log), for the special-value pattern."""
    with np.errstate(all="ignore"):
        z = x - x.max(axis=-1, keepdims=True)
        if op == "LogSoftmax":
            return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
        e = np.exp(z)
        return e / e.sum(axis=-1, keepdims=True)


def _probs(rng, shape):
    z = rng.standard_normal(shape)
    e = np.exp(z - z.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(0, 40), n=st.integers(1, 70), lead=st.sampled_from([(), (3,), (2, 2)]),
       spread=st.sampled_from([1.0, 30.0]), seed=st.integers(0, 2**31 - 1))
def test_forward_and_backward_match_the_float64_references(rows, n, lead, spread, seed):
    rng = np.random.default_rng(seed)
    shape = (*lead, rows, n)
    x = (rng.standard_normal(shape) * spread).astype(np.float32)
    for op in FORWARD:
        ref = OPS[op].reference(x.astype(np.float64), axis=-1)
        # x - max is rounded to float32 first (as numpy does), which alone costs exp a
        # relative error up to |x - max| * 2^-24: bounded by numpy's float32 passes' own
        # error, plus RTOL
        bound = 2 * np.abs(numpy_softmax32(x, op) - ref) + RTOL * np.abs(ref) + 1e-37
        assert np.all(np.abs(softmax(x, op=op) - ref) <= bound), op
    y, dy = _probs(rng, shape), rng.standard_normal(shape).astype(np.float32)
    ref_b = OPS["SoftmaxBackward"].reference(y.astype(np.float64), dy.astype(np.float64),
                                             axis=-1)
    np.testing.assert_allclose(softmax_backward(y, dy), ref_b, rtol=1e-5,
                               atol=1e-6 * max(1.0, float(np.abs(dy).max(initial=0.0))))


@pytest.mark.parametrize("op", FORWARD)
def test_special_rows_give_numpys_nan_pattern(op):
    inf, nan = np.inf, np.nan
    x = np.array([[1, nan, 2, 0, 1], [inf, 1, 2, 3, 4], [-inf] * 5, [-inf, 0, 1, -inf, 2],
                  [0, -100, -200, -1e30, 3], [nan, 1, 2, 3, 4], [1, 2, 3, 4, nan],
                  [-inf, -inf, inf, 0, 0], [3e38, -3e38, 0, 1, 2], [0, 0, 0, 0, 0]],
                 np.float32)
    got, want = softmax(x, op=op), numpy_softmax32(x, op)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    if op == "LogSoftmax":  # its -inf where numpy's exp underflows to 0 is finite here
        fin = np.isfinite(want)
        np.testing.assert_allclose(got[fin], want[fin], rtol=RTOL)
        assert np.all(got[~fin & ~np.isnan(want)] == -np.inf)
    else:
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=2e-38)


def test_in_place_outputs():
    rng = np.random.default_rng(3)
    for op in FORWARD:
        x = rng.standard_normal((33, 70)).astype(np.float32)
        want = softmax(x, op=op)
        softmax(x, out=x, op=op)
        np.testing.assert_array_equal(x, want)
    y, dy = _probs(rng, (33, 70)), rng.standard_normal((33, 70)).astype(np.float32)
    want_b = softmax_backward(y, dy)
    for which in ("y", "dy"):
        yy, dd = y.copy(), dy.copy()
        out = yy if which == "y" else dd
        softmax_backward(yy, dd, out=out)
        np.testing.assert_array_equal(out, want_b)


@pytest.mark.parametrize("shape", [(4097, 64), (3, 5, 1001), (1, 300000)])
def test_rows_split_across_threads_are_one_threads_bits(shape, monkeypatch):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    y, dy = _probs(rng, shape), rng.standard_normal(shape).astype(np.float32)
    monkeypatch.setattr(_threads, "num_threads", lambda: 1)
    one = softmax(x), softmax_backward(y, dy), softmax(x, op="LogSoftmax")
    monkeypatch.setattr(_threads, "num_threads", lambda: 3)
    calls = []
    run_ranges = reduce.run_ranges
    monkeypatch.setattr(reduce, "run_ranges",
                        lambda fn, n, parallel: calls.append(parallel) or run_ranges(fn, n,
                                                                                    parallel))
    split = softmax(x), softmax_backward(y, dy), softmax(x, op="LogSoftmax")
    for a, b in zip(split, one):
        np.testing.assert_array_equal(a, b)
    rows = int(np.prod(shape[:-1]))
    fwd = rows > 1 and x.size >= reduce.SOFTMAX_PARALLEL_MIN_ITEMS
    assert calls == [fwd, rows > 1 and x.size >= reduce.SOFTMAX_BACKWARD_PARALLEL_MIN_ITEMS,
                     fwd]
    np.testing.assert_allclose(split[0], OPS["Softmax"].reference(x.astype(np.float64)),
                               rtol=RTOL, atol=1e-37)


@pytest.mark.parametrize("case", ["axis 0", "strided", "float64", "float16"])
def test_other_layouts_keep_numpys_passes_and_agree(case):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 9)).astype(np.float32)
    axis = 0 if case == "axis 0" else -1
    if case == "strided":
        x = rng.standard_normal((6, 18)).astype(np.float32)[:, ::2]
    if case in ("float64", "float16"):
        x = x.astype(np.float64 if case == "float64" else np.float16)
    got = softmax(x, axis=axis, out=np.empty(x.shape, x.dtype))
    ref = OPS["Softmax"].reference(x.astype(np.float64), axis=axis)
    tol = {"float16": 2e-3, "float64": 1e-12}.get(case, RTOL)
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * 1e-3)
