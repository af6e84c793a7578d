"""Every shipped ``.cu`` source compiles with the installed NVRTC (12 or 13) for every
architecture of ``WANTED_ARCHS`` it supports, with no GPU and no driver (through
``cupy_backends.cuda.libs.nvrtc``), to PTX and to SASS, and defines every kernel it declares."""

from __future__ import annotations

import re

import pytest

from singa_cuda._nvrtc import (
    NvrtcCompileError,
    checked_archs,
    compile_source,
    headers,
    kernel_names,
    sources,
)

SOURCES = sources()


def test_sources_are_shipped():
    assert set(SOURCES) >= {"pool.cu", "loss.cu", "philox.cu", "scatter.cu"}, sorted(SOURCES)


@pytest.mark.parametrize("arch", checked_archs(), ids=lambda a: f"sm_{a}")
@pytest.mark.parametrize("file", sorted(SOURCES))
def test_compiles(file, arch):
    src = SOURCES[file]
    ptx = compile_source(src, file, arch, sass=False, include=headers()).decode()
    entries = set(re.findall(r"\.entry\s+(\w+)", ptx))
    declared = set(kernel_names(src))
    assert declared, f"{file} declares no kernel"
    assert declared <= entries, f"{file}: declared but not compiled: {declared - entries}"
    cubin = compile_source(src, file, arch, sass=True, include=headers())
    assert cubin[:4] == b"\x7fELF", "NVRTC's SASS output is not an ELF cubin"


def test_compile_error_carries_the_log():
    with pytest.raises(NvrtcCompileError, match="undefined_thing"):
        compile_source('extern "C" __global__ void k() { undefined_thing(); }', "bad.cu", 80)


def test_sources_share_one_header():
    # the element helpers live in cu/common.cuh only; every source includes it (directly or
    # through pool.cuh)
    include = headers()
    assert "common.cuh" in include and "pool.cuh" in include
    for file, src in SOURCES.items():
        assert "struct Acc" not in src and "__forceinline__ float ld(" not in src, file
        assert '#include "common.cuh"' in src or '#include "pool.cuh"' in src, file


def test_cache_key_covers_source_headers_arch_and_nvrtc():
    from singa_cuda._nvrtc import cache_key

    src, include = SOURCES["pool.cu"], headers()
    base = cache_key(src, include, 80, (12, 9))
    edited = {**include, "common.cuh": include["common.cuh"] + "\n// edited\n"}
    assert cache_key(src, edited, 80, (12, 9)) != base  # a header edit recompiles
    assert cache_key(src, {**include, "extra.cuh": ""}, 80, (12, 9)) != base
    assert cache_key(src + " ", include, 80, (12, 9)) != base
    assert cache_key(src, include, 90, (12, 9)) != base
    assert cache_key(src, include, 80, (12, 8)) != base
    assert cache_key(src, include, 80, (12, 9)) == base


def test_cubin_compiles_what_it_hashed(tmp_path, monkeypatch):
    # cubin() takes the headers from the same place as its cache key: a changed header gives
    # a new cache entry, compiled from the changed text (a broken header fails to compile)
    from singa_cuda import _nvrtc

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = _nvrtc.image("scatter.cu", 80)
    assert first[:4] == b"\x7fELF" and _nvrtc.image_path("scatter.cu", 80).is_file()
    real = _nvrtc.headers()
    monkeypatch.setattr(_nvrtc, "headers",
                        lambda: {**real, "common.cuh": real["common.cuh"] + "\n#error edited\n"})
    assert not _nvrtc.image_path("scatter.cu", 80).is_file()
    with pytest.raises(NvrtcCompileError, match="edited"):
        _nvrtc.image("scatter.cu", 80)
