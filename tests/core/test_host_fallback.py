"""Host fallback of ops without a kernel (``BackendSpec.host_fallback``): random ops draw from
the device's seeded host generator (never the reference's expected value), every op is warned
once and counted per call, graph replays count too, and a random op core cannot sample is
refused."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from singa import _math
from singa.backend import (
    BACKEND_API_VERSION,
    ITEMSIZE,
    NP_DTYPE,
    BackendSpec,
    Device,
    HostFallbackWarning,
    OpDef,
    kFloat16,
    kFloat32,
)
from singa.errors import MissingKernelError
from singa.testing.checks import upload
from test_scheduler import _Alloc


class HostDev(Device):
    """numpy-backed device with only Copy and Add native: the rest falls back."""

    def __init__(self, fallback=True):
        super().__init__("hostfb", 0, _Alloc())
        spec = BackendSpec("hostfb", BACKEND_API_VERSION, lambda i: self, lambda d: {},
                           host_fallback=fallback)
        self._attach(spec, {"Copy": lambda i, o, a: np.copyto(o[0], i[0]),
                            "Add": lambda i, o, a: np.add(i[0], i[1], out=o[0])})

    def native(self, ct):
        isz = ITEMSIZE[ct.dtype_code]
        return np.ndarray(ct.dims, NP_DTYPE[ct.dtype_code], ct.block.data, ct.offset * isz,
                          tuple(s * isz for s in ct.strides))

    def native_to_numpy(self, arr):
        return np.array(arr)

    def numpy_into_native(self, src, arr):
        np.copyto(arr, src, casting="unsafe")


def _new(dev, shape, dt=kFloat32):
    from singa.tensor import Tensor

    return Tensor(shape, dev, dt).data


def _draw(dev, kind, n=200_000, dt=kFloat32, **params):
    x = _new(dev, (n,), dt)
    getattr(_math, kind)(x, **params)
    return x.to_numpy()


@pytest.fixture
def dev():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HostFallbackWarning)
        yield HostDev()


def test_gaussian_fallback_draws_normal_values(dev):
    d = _draw(dev, "gaussian", mean=1.5, std=0.5)
    se = 0.5 / np.sqrt(d.size)
    assert abs(d.mean() - 1.5) < 5 * se
    assert abs(d.std() / 0.5 - 1) < 0.01  # sd of the sample sd: 1/sqrt(2n) = 0.0016
    # fraction within one sd of the mean: 0.6827 for a normal distribution
    assert abs(np.mean(np.abs(d - 1.5) < 0.5) - 0.6827) < 5 * np.sqrt(0.68 * 0.32 / d.size)


def test_uniform_fallback_stays_in_range_and_is_flat(dev):
    d = _draw(dev, "uniform", low=-2.0, high=3.0)
    assert d.min() >= -2.0 and d.max() < 3.0
    hist, _ = np.histogram(d, bins=10, range=(-2, 3))
    expected = d.size / 10
    assert np.all(np.abs(hist - expected) < 5 * np.sqrt(expected))
    # float16 rounds ~2**-12 of the draws on [0, 1) up to 1.0: all must stay below it
    h = _draw(dev, "uniform", dt=kFloat16, low=0.0, high=1.0)
    assert h.dtype == np.float16 and h.max() < 1.0 and h.min() >= 0.0


def test_bernoulli_fallback_has_frequency_p(dev):
    d = _draw(dev, "bernoulli", p=0.3)
    assert set(np.unique(d)) == {0.0, 1.0}
    assert abs(d.mean() - 0.3) < 5 * np.sqrt(0.3 * 0.7 / d.size)


def test_set_rand_seed_makes_fallback_draws_reproducible(dev):
    dev.SetRandSeed(42)
    assert dev.rand_seed == 42
    a = _draw(dev, "gaussian", n=1000, mean=0.0, std=1.0)
    b = _draw(dev, "gaussian", n=1000, mean=0.0, std=1.0)  # the generator advanced
    dev.SetRandSeed(42)
    c = _draw(dev, "gaussian", n=1000, mean=0.0, std=1.0)
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b)
    # the draws are those of numpy's generator seeded with the device seed
    np.testing.assert_array_equal(
        a, np.random.default_rng(42).normal(0.0, 1.0, 1000).astype(np.float32))
    dev.SetRandSeed(43)
    assert not np.array_equal(a, _draw(dev, "gaussian", n=1000, mean=0.0, std=1.0))


def test_devices_are_seeded_without_set_rand_seed():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HostFallbackWarning)
        d1, d2 = HostDev(), HostDev()
        assert isinstance(d1.rand_seed, int) and d1.rand_seed != d2.rand_seed
        a = _draw(d1, "uniform", n=100, low=0.0, high=1.0)
        assert np.unique(a).size == 100  # real draws, not the reference's expected value
        np.testing.assert_array_equal(
            a, np.random.default_rng(d1.rand_seed).uniform(0, 1, 100).astype(np.float32))


def test_each_op_is_warned_once_and_counted_per_call():
    dev = HostDev()
    x = upload(np.arange(6, dtype=np.float32).reshape(2, 3), dev)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            _math.exp(x)
        _math.neg(x)
        _math.neg(x)
        _math.add(x, x)  # native: never counted, never warned
    msgs = [str(w.message) for w in caught if issubclass(w.category, HostFallbackWarning)]
    assert len(msgs) == 2, msgs
    assert "'Exp'" in msgs[0] and "hostfb" in msgs[0] and "fallback_stats" in msgs[0]
    assert "'Neg'" in msgs[1] and "Exp, Neg" in msgs[1]  # names every op fallen back so far
    assert dev.fallback_stats() == {"Exp": 3, "Neg": 2}
    assert dev.memory_stats()["host_fallback_calls"] == 5
    np.testing.assert_allclose(_math.exp(x).to_numpy(), np.exp(x.to_numpy()), rtol=1e-6)
    stats = dev.fallback_stats()
    stats["Exp"] = 0  # a copy: the device's counts are unchanged
    assert dev.fallback_stats()["Exp"] == 4


def test_graph_replay_counts_and_draws_anew_each_run(dev):
    dev.SetRandSeed(5)
    x = _new(dev, (1000,))
    dev.EnableGraph(True)
    _math.gaussian(x, 0.0, 1.0)
    dev.EnableGraph(False)
    before = dev.fallback_stats()
    dev.RunGraph()
    first = x.to_numpy()
    dev.RunGraph()
    second = x.to_numpy()
    after = dev.fallback_stats()
    assert after["Gaussian"] - before.get("Gaussian", 0) == 2
    assert not np.array_equal(first, second)  # a replay draws new numbers
    np.testing.assert_array_equal(
        first, np.random.default_rng(5).normal(0, 1, 1000).astype(np.float32))


def test_random_op_without_host_sampler_is_refused(dev):
    op = OpDef("MadeUpRandom", 0, lambda ins, attrs: [((2,), kFloat32)],
               lambda shape, dtype: np.zeros(shape), random=True)
    with pytest.raises(MissingKernelError, match="MadeUpRandom.*cannot fall back"):
        dev.kernel(op)


def test_no_fallback_without_opt_in():
    dev = HostDev(fallback=False)
    x = upload(np.ones(3, np.float32), dev)
    with pytest.raises(MissingKernelError, match="'Exp'.*host fallback"):
        _math.exp(x)
    assert dev.fallback_stats() == {}
