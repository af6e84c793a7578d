"""The CPU's depthwise loops (singa_cpu.kernels.depthwise) are generated per kernel size and
column stride and compiled through a source file in the per-user cache, so that numba's disk
cache keeps them; where that folder cannot be written they are compiled in memory. Both give
the float64 reference's result."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def depthwise(singa_device, monkeypatch):
    if singa_device.backend != "cpu":
        pytest.skip("CPU kernel internals")
    from singa_cpu.kernels import depthwise

    monkeypatch.setattr(depthwise, "_COMPILED", {})
    return depthwise


def _conv_against_reference(depthwise):
    """A 2x3 depthwise layer with 19 channels, stride (1, 2) (the loop that splits each row
    into its two column phases), padding (top, bottom, left, right) (1, 0, 2, 1), bias and
    ReLU, against the float64 reference."""
    from singa.ops import OPS

    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 19, 6, 7)).astype(np.float32)
    w = rng.standard_normal((19, 1, 2, 3)).astype(np.float32)
    b = rng.standard_normal(19).astype(np.float32)
    attrs = {"group": 19, "stride": (1, 2), "pads": (1, 0, 2, 1)}
    want = np.maximum(OPS["Conv2d"].reference(x.astype(np.float64), w.astype(np.float64),
                                              b.astype(np.float64), **attrs), 0)
    y = np.full(want.shape, np.nan, np.float32)
    depthwise.conv(x, w, b, y, (1, 2), (1, 1), (1, 2), True)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_loops_compile_through_a_cached_source_file(depthwise, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    _conv_against_reference(depthwise)
    sources = list((tmp_path / "singa" / "depthwise").glob("singa_depthwise_*.py"))
    assert len(sources) == 1
    assert sources[0].read_text().endswith(depthwise.source(6, 2, 1))
    assert list((tmp_path / "singa" / "depthwise" / "__pycache__").glob("*.nbi"))


def test_loops_compile_in_memory_when_the_cache_is_not_writable(depthwise, tmp_path,
                                                                 monkeypatch):
    blocked = tmp_path / "a file"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    _conv_against_reference(depthwise)
    assert (depthwise._COMPILED[(6, 2, 1, False)].py_func.__code__.co_filename
            == "<singa depthwise 6 taps stride 2 block 1>")
    assert not (blocked / "singa").exists()
