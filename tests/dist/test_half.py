"""singa_dist.half: the compiled float16 conversions give numpy's bits exactly.

Oracle: numpy's ``astype(np.float16)`` (round to nearest even, overflow to infinity,
subnormals, NaN payloads) on every float16 value, the exact midpoints between neighbouring
float16 values and the float32 values one ulp either side of them (where rounding decides),
NaN payloads, and random bit patterns; the accumulation against numpy's rank-order float32 sum.
"""

from __future__ import annotations

import numpy as np
import pytest
from half_cases import boundaries

half = pytest.importorskip("singa_dist.half")
if not half.available():
    pytest.skip('numba is not installed (pip install ".[dist]" in the singa checkout)',
                allow_module_level=True)


def _nans(rng):
    payload = rng.integers(1, 2**23, 50000).astype(np.uint32)
    low = np.arange(1, 2**13, dtype=np.uint32)  # payloads below float16's mantissa bits
    bits = np.concatenate([payload, low]) | np.uint32(0x7F800000)
    return [bits.view(np.float32), (bits | np.uint32(0x80000000)).view(np.float32)]


def test_to_half_is_bitwise_numpys_conversion():
    rng = np.random.default_rng(0)
    random = rng.integers(0, 2**32, 2_000_000, dtype=np.uint64).astype(np.uint32)
    special = np.array([np.inf, -np.inf, 0.0, -0.0, 65504, 65519.99, 65520, 1e-8, 2.98e-8,
                        6e-8], np.float32)
    for x in [*boundaries(), *_nans(rng), random.view(np.float32), special]:
        x = np.ascontiguousarray(x)
        got = np.empty(x.size, np.float16)
        half.to_half(x, got)
        with np.errstate(all="ignore"):
            want = x.astype(np.float16)
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_accumulate_is_numpys_rank_order_sum(ranks):
    rng = np.random.default_rng(ranks)
    recv = rng.integers(0, 2**16, (ranks, 100003), dtype=np.uint64).astype(
        np.uint16).view(np.float16)
    got = np.empty(recv.shape[1], np.float32)
    half.accumulate(recv, got)
    want = np.empty_like(got)
    want[...] = recv[0]
    with np.errstate(all="ignore"):
        for r in range(1, ranks):
            want += recv[r]
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
