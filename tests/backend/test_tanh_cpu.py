"""The CPU's one-pass float32 Tanh loop (``singa_cpu.kernels.elementwise._tanh_loop``:
``expm1(-2|x|)`` from ``_expf.expm1_neg_parts32``, the sign put back).

Oracles: float64 ``np.tanh`` (error in float32 ulps of the result, on a dense grid and on
small arguments down to subnormals, where a ``1 - exp`` formula would lose every digit),
numpy's float32 ``tanh`` for special values and signed zeros, and the loop itself on one
thread for the split across threads (bit for bit: each element is computed alone).
"""

from __future__ import annotations

import numpy as np
import pytest

elementwise = pytest.importorskip("singa_cpu.kernels.elementwise")
_threads = pytest.importorskip("singa_cpu.kernels._threads")

#: Largest error allowed, in float32 ulps of the float64 result (measured: 2.5; numpy's own
#: float32 tanh: 1.4).
MAX_ULPS = 4.0


def tanh(x, out=None):
    out = np.empty_like(x) if out is None else out
    elementwise.KERNELS["Tanh"]([x], [out], {})
    return out


def ulps(got, x):
    ref = np.tanh(x.astype(np.float64))
    return np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref).astype(np.float32))


def test_error_within_a_few_ulps_large_and_small_arguments():
    small = np.geomspace(1e-44, 0.5, 100_000)
    x = np.concatenate([np.linspace(-20, 20, 400_001), small, -small]).astype(np.float32)
    assert ulps(tanh(x), x).max() <= MAX_ULPS


def test_special_values_and_signed_zeros():
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3e38, -3e38,
                  43.0, 44.0, -9.0], np.float32)
    got, want = tanh(x), np.tanh(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(got)]),
                                  np.signbit(want[~np.isnan(want)]))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


def test_in_place_and_float16_and_strided():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(5000) * 3).astype(np.float32)
    want = tanh(x)
    tanh(x, out=x)
    np.testing.assert_array_equal(x, want)
    h = (rng.standard_normal((7, 9)) * 3).astype(np.float16)
    np.testing.assert_array_equal(tanh(h), np.tanh(h.astype(np.float32)).astype(np.float16))
    s = (rng.standard_normal((6, 10)) * 3).astype(np.float32)[:, ::2]
    np.testing.assert_array_equal(tanh(s, out=np.empty(s.shape, np.float32)), np.tanh(s))


def test_split_across_threads_is_one_threads_bits(monkeypatch):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(elementwise.PARALLEL_MIN_ITEMS + 4099) * 4).astype(np.float32)
    monkeypatch.setattr(_threads, "num_threads", lambda: 1)
    one = tanh(x)
    monkeypatch.setattr(_threads, "num_threads", lambda: 3)
    np.testing.assert_array_equal(tanh(x), one)
    assert ulps(one, x).max() <= MAX_ULPS
