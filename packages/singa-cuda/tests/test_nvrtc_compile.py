"""Every shipped ``.cu`` source compiles with NVRTC for sm_70, sm_80 and sm_90, with no GPU and
no driver (through ``cupy_backends.cuda.libs.nvrtc``), to PTX and to SASS, and defines every
kernel it declares."""

from __future__ import annotations

import re

import pytest

from singa_cuda._nvrtc import CHECKED_ARCHS, compile_source, kernel_names, sources

SOURCES = sources()


def test_sources_are_shipped():
    assert set(SOURCES) >= {"pool.cu", "loss.cu", "philox.cu", "scatter.cu"}, sorted(SOURCES)


@pytest.mark.parametrize("arch", CHECKED_ARCHS, ids=lambda a: f"sm_{a}")
@pytest.mark.parametrize("file", sorted(SOURCES))
def test_compiles(file, arch):
    src = SOURCES[file]
    ptx = compile_source(src, file, arch, sass=False).decode()
    entries = set(re.findall(r"\.entry\s+(\w+)", ptx))
    declared = set(kernel_names(src))
    assert declared, f"{file} declares no kernel"
    assert declared <= entries, f"{file}: declared but not compiled: {declared - entries}"
    cubin = compile_source(src, file, arch, sass=True)
    assert cubin[:4] == b"\x7fELF", "NVRTC's SASS output is not an ELF cubin"


def test_compile_error_carries_the_log():
    from singa_cuda._nvrtc import NvrtcCompileError

    with pytest.raises(NvrtcCompileError, match="undefined_thing"):
        compile_source('extern "C" __global__ void k() { undefined_thing(); }', "bad.cu", 80)
