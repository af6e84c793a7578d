"""Both CUDA stacks: where the runtime headers are found, and which architecture NVRTC compiles
a GPU's kernels for (no GPU needed)."""

from __future__ import annotations

import pytest

from singa_cuda import _nvrtc
from singa_cuda._nvrtc import NvrtcArchError, target_arch

NVRTC12 = (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90)
NVRTC13 = (75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121)


@pytest.mark.parametrize("supported, device, want", [
    (NVRTC13, 90, (90, True)),     # Hopper: its own SASS
    (NVRTC12, 70, (70, True)),     # Volta under CUDA 12
    (NVRTC12, 100, (90, False)),   # a GPU newer than NVRTC: PTX the driver compiles
    (NVRTC13, 101, (100, False)),
])
def test_target_arch(supported, device, want):
    assert target_arch(device, supported) == want


def test_volta_under_cuda13_names_the_cuda12_stack():
    with pytest.raises(NvrtcArchError, match=r"sm_70.*sm_75.*cuda12") as info:
        target_arch(70, NVRTC13)
    assert info.value.device_arch == 70


def test_checked_archs_are_what_this_nvrtc_supports():
    have = set(_nvrtc.supported_archs())
    got = _nvrtc.checked_archs()
    assert got and set(got) <= have
    assert set(got) == {a for a in _nvrtc.WANTED_ARCHS if a in have}
    assert 90 in got  # Hopper is in both stacks


def test_headers_are_found_for_the_installed_stack():
    inc = _nvrtc.include_dir()
    import os

    assert os.path.isfile(os.path.join(inc, "cuda_fp16.h")), inc


def _no_pathfinder(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "cuda.pathfinder", None)  # import raises ImportError


@pytest.mark.parametrize("layout", ["cuda_runtime/include", "cu13/include"])
def test_each_wheel_layout_is_searched(tmp_path, monkeypatch, layout):
    # the CUDA 12 wheel's nvidia/cuda_runtime/include and the CUDA 13 wheel's
    # nvidia/cu13/include, when cuda.pathfinder is not there to say
    import types

    inc = tmp_path / "nvidia" / layout
    inc.mkdir(parents=True)
    (inc / "cuda_fp16.h").write_text("")
    _no_pathfinder(monkeypatch)
    monkeypatch.setitem(__import__("sys").modules, "nvidia",
                        types.SimpleNamespace(__path__=[str(tmp_path / "nvidia")]))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    _nvrtc.include_dir.cache_clear()
    try:
        assert _nvrtc.include_dir() == str(inc)
    finally:
        _nvrtc.include_dir.cache_clear()


def test_a_toolkit_named_by_cuda_path_is_searched_last(tmp_path, monkeypatch):
    import sys
    import types

    _no_pathfinder(monkeypatch)
    monkeypatch.setitem(sys.modules, "nvidia", types.SimpleNamespace(__path__=[]))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("CUDA_PATH", str(tmp_path))
    _nvrtc.include_dir.cache_clear()
    try:
        with pytest.raises(FileNotFoundError, match="nvidia-cuda-runtime-cu12.*CUDA_PATH"):
            _nvrtc.include_dir()
        (tmp_path / "include").mkdir()
        (tmp_path / "include" / "cuda_fp16.h").write_text("")
        _nvrtc.include_dir.cache_clear()
        assert _nvrtc.include_dir() == str(tmp_path / "include")
    finally:
        _nvrtc.include_dir.cache_clear()
