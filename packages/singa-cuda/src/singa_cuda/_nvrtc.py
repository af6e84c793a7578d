"""NVRTC compilation of the package's ``cu/*.cu`` sources, and their per-device cache.

Compilation goes through the low-level binding ``cupy_backends.cuda.libs.nvrtc``
(createProgram / compileProgram / getCUBIN / getPTX), which needs neither a driver nor a GPU, so
CI compile-checks every source for several architectures. On a GPU each source is compiled once
per architecture to SASS (``--gpu-architecture=sm_XY``, no driver-side PTX JIT, so a driver
older than NVRTC works) and kept in memory and on disk (``~/.cache/singa-cuda``).

Headers of the package (``cu/*.cuh``, included as ``#include "common.cuh"``) are handed to NVRTC
in memory (createProgram's headers / include names), from the same texts that go into the disk
cache key: a header edit recompiles every source, and what is compiled is exactly what was
hashed. The host build of the tests writes the same texts next to its copy of the source.
"""

from __future__ import annotations

import hashlib
import os
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path

#: Architectures CI compiles every source for (Volta, Ampere, Hopper).
CHECKED_ARCHS = (70, 80, 90)


class NvrtcCompileError(RuntimeError):
    """A ``.cu`` source failed to compile; the message holds NVRTC's log."""


def _shipped(suffix: str) -> dict[str, str]:
    pkg = resources.files("singa_cuda") / "cu"
    return {p.name: p.read_text() for p in sorted(pkg.iterdir(), key=lambda p: p.name)
            if p.name.endswith(suffix)}


def sources() -> dict[str, str]:
    """``{file name: CUDA C source}`` of every shipped ``cu/*.cu`` file."""
    return _shipped(".cu")


def headers() -> dict[str, str]:
    """``{include name: text}`` of every shipped ``cu/*.cuh`` header."""
    return _shipped(".cuh")


_KERNEL_RE = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(')


def kernel_names(source: str) -> list[str]:
    """Names of the ``extern "C" __global__`` kernels a source defines (macro-generated
    names are listed in the source's ``// kernels:`` line)."""
    names = _KERNEL_RE.findall(source)
    for line in source.splitlines():
        if line.startswith("// kernels:"):
            names += line.split(":", 1)[1].split()
    return sorted(set(names))


@lru_cache(maxsize=1)
def include_dir() -> str:
    """``nvidia/cuda_runtime/include`` of the nvidia-cuda-runtime-cu12 wheel (cuda_fp16.h)."""
    import nvidia.cuda_runtime as rt

    for base in rt.__path__:
        inc = Path(base) / "include"
        if (inc / "cuda_fp16.h").is_file():
            return str(inc)
    raise FileNotFoundError("cuda_fp16.h not found in the nvidia-cuda-runtime-cu12 wheel; "
                            "pip install nvidia-cuda-runtime-cu12")


def options(arch: int, sass: bool, extra=()) -> list[str]:
    kind = "sm" if sass else "compute"
    return [f"--gpu-architecture={kind}_{arch}", "--std=c++17", f"-I{include_dir()}",
            "-default-device", *extra]


def compile_source(source: str, name: str, arch: int, sass: bool = True, extra=(),
                   include: dict[str, str] | None = None) -> bytes:
    """Compile ``source`` for ``arch`` (e.g. 80): SASS (a cubin) or PTX, with the headers
    ``include`` (``{include name: text}``, default none) available to ``#include "..."``.
    Raises :class:`NvrtcCompileError` with NVRTC's log."""
    from cupy_backends.cuda.libs import nvrtc

    inc = include or {}
    prog = nvrtc.createProgram(source, name, [t.encode() for t in inc.values()],
                               [n.encode() for n in inc])
    try:
        try:
            nvrtc.compileProgram(prog, options(arch, sass, extra))
        except nvrtc.NVRTCError as exc:
            log = nvrtc.getProgramLog(prog)
            raise NvrtcCompileError(f"{name} for sm_{arch}: {exc}\n{log}") from None
        if sass:
            return bytes(nvrtc.getCUBIN(prog))
        ptx = nvrtc.getPTX(prog)
        return ptx.encode() if isinstance(ptx, str) else bytes(ptx)
    finally:
        nvrtc.destroyProgram(prog)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "singa-cuda"


def cache_key(source: str, include: dict[str, str], arch: int, nvrtc_version) -> str:
    """Disk cache key of a cubin: the NVRTC version, the architecture, the source and every
    header it may include (name and text)."""
    h = hashlib.sha256(f"{nvrtc_version}|{arch}|".encode())
    for part in (source, *(f"{n}\0{t}" for n, t in sorted(include.items()))):
        h.update(len(part).to_bytes(8, "little"))  # length-prefixed: no ambiguous concatenation
        h.update(part.encode())
    return h.hexdigest()[:24]


def cubin_path(file: str, arch: int) -> Path:
    """Where the cubin of shipped source ``file`` for ``arch`` is cached."""
    from cupy_backends.cuda.libs import nvrtc

    key = cache_key(sources()[file], headers(), arch, nvrtc.getVersion())
    return _cache_dir() / f"sm_{arch}" / f"{file}.{key}.cubin"


def cubin(file: str, arch: int) -> bytes:
    """The cubin of shipped source ``file`` for ``arch``, from the disk cache when present."""
    src, include = sources()[file], headers()
    path = cubin_path(file, arch)
    if path.is_file():
        return path.read_bytes()
    data = compile_source(src, file, arch, sass=True, include=include)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:  # a read-only home: compile again next time
        pass
    return data
