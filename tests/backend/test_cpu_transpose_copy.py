"""The CPU backend's transposing copies (singa_cpu.kernels._transpose): a copy whose source is a
batch of transposed matrices runs as OpenBLAS omatcopy calls. Every copy it takes must equal
numpy's copy bit for bit (the oracle) on every class of float value; the copies it must not
take (other dtypes, overlapping memory, negative or zero strides, small or non-transposed
sources) are left to numpy and reported as not taken."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@pytest.fixture
def tr(singa_device):
    if singa_device.backend != "cpu":
        pytest.skip("CPU kernel internals")
    from singa_cpu.kernels import _transpose

    if _transpose.symbol() is None:
        pytest.skip("numpy's BLAS has no OpenBLAS omatcopy: every copy is numpy's")
    return _transpose


def _values(rng, shape, dtype):
    """Random normals with every special class sprinkled in: zeros of both signs, infinities,
    quiet NaNs (one with a payload), subnormals, the largest finite values."""
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    fi = np.finfo(dtype)
    ints = np.uint32 if dtype == np.float32 else np.uint64
    payload = np.array([np.nan], dtype).view(ints) | ints(5)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, fi.smallest_subnormal,
                         -fi.smallest_subnormal * 3, fi.max, -fi.max], dtype)
    idx = rng.choice(flat.size, size=min(flat.size, 2 * specials.size + 1), replace=False)
    flat[idx[:specials.size]] = specials[:len(idx[:specials.size])]
    if idx.size > specials.size:
        flat[idx[specials.size]] = payload.view(dtype)[0]
    return x


def _bits(a):
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, perm", [
    ((256, 1024), (1, 0)),  # an LSTM's recurrent weights seen transposed
    ((2, 512, 4, 64), (0, 2, 3, 1)),  # attention's keys as (batch, heads, dim, seq)
    ((2, 16, 16, 128), (0, 3, 1, 2)),  # NHWC to NCHW: H and W merge into one axis
    ((3, 200, 180), (0, 2, 1)),  # sizes that are not multiples of any block
    ((128, 256), (1, 0)),  # the smallest it takes: 32768 elements, rows 1 KB apart
])
def test_transposed_copies_are_numpys_bit_for_bit(tr, shape, perm, dtype):
    x = _values(np.random.default_rng(0), shape, dtype)
    src = x.transpose(perm)
    out = np.empty(src.shape, dtype)
    assert tr.copy(src, out)
    np.testing.assert_array_equal(_bits(out), _bits(np.ascontiguousarray(src)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                          HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_layout_is_copied_right_or_left_to_numpy(tr, data):
    """Random shapes, axis orders, slices (offsets, steps, padding between rows) and both
    dtypes: whatever copy() takes equals numpy's copy; what it declines it leaves untouched."""
    nd = data.draw(st.integers(2, 4), label="ndim")
    shape = tuple(data.draw(st.lists(st.integers(1, 40), min_size=nd, max_size=nd), label="shape"))
    dtype = data.draw(st.sampled_from([np.float32, np.float64]), label="dtype")
    pad = tuple(data.draw(st.lists(st.integers(0, 3), min_size=nd, max_size=nd), label="pad"))
    step = tuple(data.draw(st.lists(st.integers(1, 2), min_size=nd, max_size=nd), label="step"))
    perm = tuple(data.draw(st.permutations(range(nd)), label="perm"))
    big = _values(np.random.default_rng(1), tuple((n + p) * s for n, p, s in zip(shape, pad, step)),
                  dtype)
    src = big[tuple(slice(p, p + n * s, s) for n, p, s in zip(shape, pad, step))]
    src = src.transpose(perm)
    out = np.full(src.shape, 7, dtype)
    saved_min = tr.MIN_ITEMS, tr.MIN_MATRIX_ITEMS, tr.MIN_LDA_BYTES
    tr.MIN_ITEMS, tr.MIN_MATRIX_ITEMS, tr.MIN_LDA_BYTES = 0, 0, 0  # small shapes: same paths
    try:
        took = tr.copy(src, out)
    finally:
        tr.MIN_ITEMS, tr.MIN_MATRIX_ITEMS, tr.MIN_LDA_BYTES = saved_min
    if took:
        np.testing.assert_array_equal(_bits(out), _bits(np.ascontiguousarray(src)))
    else:
        assert (out == 7).all()


@pytest.mark.parametrize("case", ["float16", "int32", "overlap", "negative", "broadcast",
                                  "contiguous", "small", "strided_out", "inner_contiguous",
                                  "overlapping_rows", "small_matrices", "close_rows"])
def test_copies_it_does_not_take(tr, case):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((256, 512)).astype(np.float32)
    src, out = x.T, np.empty((512, 256), np.float32)
    if case == "float16":
        src, out = x.astype(np.float16).T, np.empty((512, 256), np.float16)
    elif case == "int32":
        src, out = (x * 100).astype(np.int32).T, np.empty((512, 256), np.int32)
    elif case == "overlap":  # the output is the source's own memory
        buf = np.zeros(2 * 256 * 512, np.float32)
        src = buf[:256 * 512].reshape(256, 512).T
        out = buf[256 * 256:256 * 256 + 256 * 512].reshape(512, 256)
    elif case == "negative":
        src = x[::-1].T
    elif case == "broadcast":
        src = np.broadcast_to(x[:1], (256, 512)).T
    elif case == "contiguous":
        src = np.ascontiguousarray(x.T)
    elif case == "small":
        src, out = x[:32, :32].T, np.empty((32, 32), np.float32)
    elif case == "strided_out":
        out = np.empty((512, 512), np.float32)[:, ::2]
    elif case == "small_matrices":  # 16 of 128x64 (attention keys at seq 64): numpy copies
        src = x.reshape(16, 128, 64)
        src, out = src.transpose(0, 2, 1), np.empty((16, 64, 128), np.float32)
    elif case == "close_rows":  # A 512x64: rows 256 bytes apart, numpy's copy is as fast
        src, out = x.reshape(-1)[:512 * 64].reshape(512, 64).T, np.empty((64, 512), np.float32)
    elif case == "overlapping_rows":  # windows over one row: BLAS refuses lda < columns
        win = np.lib.stride_tricks.sliding_window_view(x.reshape(-1)[:70000], 64)[::1]
        src, out = win.T, np.empty(win.T.shape, np.float32)
    elif case == "inner_contiguous":  # the last axis stays contiguous: numpy's copy is fast
        src, out = x.reshape(16, 16, 512).transpose(1, 0, 2), np.empty((16, 16, 512), np.float32)
    assert not tr.copy(src, out)


def test_disabled_leaves_every_copy_to_numpy(tr, monkeypatch):
    monkeypatch.setattr(tr, "ENABLED", False)
    x = np.ones((256, 256), np.float32)
    assert not tr.copy(x.T, np.empty((256, 256), np.float32))


def test_a_signaling_nan_comes_out_quiet_with_its_payload(tr):
    """The one documented difference from numpy's copy: OpenBLAS multiplies by alpha = 1."""
    x = np.zeros((256, 256), np.float32)
    x.view(np.uint32)[3, 5] = 0x7F800021  # signaling NaN, payload 0x21
    out = np.empty((256, 256), np.float32)
    assert tr.copy(x.T, out)
    assert out.view(np.uint32)[5, 3] in (0x7F800021, 0x7FC00021)
    assert np.isnan(out[5, 3]) and (out[np.arange(256) != 5] == 0).all()


def test_the_probe_refuses_a_function_that_changes_bits(tr):
    """A BLAS whose omatcopy flushes subnormals (or changes any other value) is not used."""
    def flushing(order, trans, rows, cols, alpha, a, lda, b, ldb):
        import ctypes

        dt = np.float32
        src = np.ctypeslib.as_array(ctypes.cast(a, ctypes.POINTER(ctypes.c_float)),
                                    (rows * lda,))[:rows * lda].reshape(rows, lda)[:, :cols]
        dst = np.ctypeslib.as_array(ctypes.cast(b, ctypes.POINTER(ctypes.c_float)),
                                    (cols * ldb,)).reshape(cols, ldb)
        v = src.T.astype(dt)
        v[np.abs(v) < np.finfo(dt).tiny] = 0
        dst[:, :rows] = v

    assert tr._probe(tr._functions()[np.dtype(np.float32)], np.float32)
    assert not tr._probe(flushing, np.float32)


def test_the_cpu_copy_op_takes_the_transposed_path(tr, monkeypatch):
    """singa's Copy of a transposed tensor (what a kernel that needs contiguous inputs gets)
    runs through omatcopy and equals numpy's copy."""
    from singa import _math, tensor

    calls = []
    real = tr.copy
    monkeypatch.setattr(tr, "copy", lambda s, d: (calls.append(s.shape), real(s, d))[1])
    x = np.random.default_rng(3).standard_normal((256, 192)).astype(np.float32)
    t = tensor.from_numpy(x)
    y = _math.copy(_math.transpose(t.data))
    np.testing.assert_array_equal(y.to_numpy(), x.T)
    assert calls == [(192, 256)]


def test_contiguous_is_numpys_ascontiguousarray(tr):
    """What the recurrent kernels use for their transposed weights: the same array when it is
    contiguous already, else numpy's contiguous copy, bit for bit, by either path."""
    x = _values(np.random.default_rng(4), (1024, 256), np.float32)
    assert tr.contiguous(x) is x
    for src in (x.T, x[::2].T, x[:, :100]):
        got = tr.contiguous(src)
        assert got.flags.c_contiguous
        np.testing.assert_array_equal(_bits(got), _bits(np.ascontiguousarray(src)))
