"""The half-precision all-reduce on core's numpy conversions, the path taken without numba.

singa-dist's MPI communicator converts float16 with numba when it can import it
(``singa_dist.half.available()``), and ``singa-dist[mpi]`` always brings numba, so without
these tests the numpy fallback in ``singa.dist.Communicator`` (``_to_half``,
``_half_accumulate``) would never run. The ``numpy_half`` fixture makes numba unavailable to
the communicator, and makes the compiled kernels raise if they are called anyway.

Oracle: numpy's ``astype(np.float16)`` (round to nearest even) and the float32 sum of the
widened float16 values in rank order, bitwise. The collective tests run on every rank of the
session; the conversion tests simulate several ranks in one process, so a sum of more than one
rank is checked even when the session runs a single process.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import rank_data
from half_cases import boundaries
from hypothesis import given, settings
from hypothesis import strategies as st
from singa import dist, tensor

half = pytest.importorskip("singa_dist.half")


@pytest.fixture
def numpy_half(monkeypatch):
    def compiled(*_args):
        raise AssertionError("the numba kernels ran: the fallback was not forced")

    monkeypatch.setattr(half, "available", lambda: False)
    monkeypatch.setattr(half, "to_half", compiled)
    monkeypatch.setattr(half, "accumulate", compiled)


def _t(arr, dev):
    t = tensor.from_numpy(np.array(arr))
    t.to_device(dev)
    return t


def _rank_order_sum(xs):
    want = xs[0].astype(np.float16).astype(np.float32)
    for x in xs[1:]:
        want += x.astype(np.float16).astype(np.float32)
    return want


def test_the_fallback_converts_with_numpys_rounding(comm, numpy_half):
    x = np.concatenate(boundaries())
    got = np.empty(x.size, np.float16)
    with np.errstate(all="ignore"):
        comm._to_half(got, x)
        want = x.astype(np.float16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@settings(max_examples=25)
@given(ranks=st.integers(1, 6), size=st.integers(1, 3000), seed=st.integers(0, 2**32 - 1),
       scale=st.sampled_from([1e-6, 1.0, 300.0, 3e4]))
def test_the_fallback_sums_in_float32_in_rank_order(comm, ranks, size, seed, scale):
    """Partial sums stay float32: rounding any of them to float16 is a second rounding."""
    rng = np.random.default_rng(seed)
    xs = [(rng.standard_normal(size) * scale).astype(np.float32) for _ in range(ranks)]
    with np.errstate(all="ignore"):  # 3e4 times a normal value overflows float16: inf
        recv = np.stack([x.astype(np.float16) for x in xs])
    got = np.empty(size, np.float32)
    saved = half.available
    half.available = lambda: False  # hypothesis runs examples outside function fixtures
    try:
        with np.errstate(all="ignore"):
            comm._half_accumulate(recv, got)
            want = _rank_order_sum(xs)
    finally:
        half.available = saved
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("shape", [(5,), (1001,), (64, 33)], ids=str)
def test_all_reduce_half_on_the_fallback(comm, dev, numpy_half, shape):
    xs = [rank_data(83, r, shape, np.float32) for r in range(comm.world_size)]
    t = _t(xs[comm.rank], dev)
    comm.all_reduce_half(t)
    np.testing.assert_array_equal(tensor.to_numpy(t), _rank_order_sum(xs))


@pytest.mark.parametrize("buff", [7, 4194304])
def test_fused_and_started_half_on_the_fallback(comm, dev, numpy_half, buff):
    small = dist.get_communicator("mpi", buffSize=buff)  # several chunks when 7
    shapes = [(5,), (33,), (4, 4)]
    xs = [[rank_data(90 + i, r, s, np.float32) for r in range(comm.world_size)]
          for i, s in enumerate(shapes)]
    fused = [_t(x[comm.rank], dev) for x in xs]
    started = [_t(x[comm.rank], dev) for x in xs]
    small.fused_all_reduce(fused, half=True)
    small.start_all_reduce(started, half=True).wait()
    for x, a, b in zip(xs, fused, started):
        want = _rank_order_sum(x)
        np.testing.assert_array_equal(tensor.to_numpy(a), want)
        np.testing.assert_array_equal(tensor.to_numpy(b), want)
