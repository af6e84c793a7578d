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
import importlib
import os
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path

#: Architectures CI compiles every source for, where the installed NVRTC supports them: Volta
#: (NVRTC 12 only; NVRTC 13 dropped it), Turing, Ampere, Hopper, Blackwell.
WANTED_ARCHS = (70, 75, 80, 90, 100, 120)


def supported_archs() -> tuple[int, ...]:
    """The ``sm_XY`` architectures the installed NVRTC compiles for (``nvrtcGetSupportedArchs``:
    NVRTC 12 lists 50-90, NVRTC 13 starts at 75)."""
    from cupy_backends.cuda.libs import nvrtc

    return tuple(sorted(int(a) for a in nvrtc.getSupportedArchs()))


def checked_archs() -> tuple[int, ...]:
    """:data:`WANTED_ARCHS` that the installed NVRTC supports (what CI compiles for)."""
    have = set(supported_archs())
    return tuple(a for a in WANTED_ARCHS if a in have)


def target_arch(device_arch: int, supported=None) -> tuple[int, bool]:
    """``(arch, sass)`` to compile for a GPU of compute capability ``device_arch``: its own SASS
    when NVRTC supports it; for a GPU newer than every architecture NVRTC knows, PTX of the
    newest one below it (the driver compiles it at load). A GPU older than NVRTC's oldest
    architecture (Volta under CUDA 13) cannot run its output: :class:`NvrtcArchError`."""
    archs = tuple(supported) if supported is not None else supported_archs()
    if device_arch in archs:
        return device_arch, True
    older = [a for a in archs if a <= device_arch]
    if older:
        return max(older), False
    raise NvrtcArchError(device_arch, archs)


class NvrtcCompileError(RuntimeError):
    """A ``.cu`` source failed to compile; the message holds NVRTC's log."""


class NvrtcArchError(RuntimeError):
    """The installed NVRTC cannot compile for this GPU's architecture."""

    def __init__(self, device_arch: int, supported):
        self.device_arch, self.supported = device_arch, tuple(supported)
        super().__init__(
            f"this GPU is sm_{device_arch} but the installed NVRTC compiles for sm_"
            f"{min(self.supported)} and newer only (CUDA 13 dropped Volta and older); install "
            "the CUDA 12 stack: pip install \"singa-cuda[cuda12]\" (cupy-cuda12x, "
            "nvidia-cuda-nvrtc-cu12, nvidia-cuda-runtime-cu12, nvidia-cudnn-cu12)")


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


def _header_dirs():
    """Candidate folders holding ``cuda_fp16.h``, most specific first: ``cuda.pathfinder``
    (a cupy 14 dependency that knows every wheel layout and conda), the CUDA 12 wheel
    (``nvidia/cuda_runtime/include``), the CUDA 13 wheel (``nvidia/cu13/include``), then a
    toolkit named by ``CUDA_PATH`` / ``CUDA_HOME``."""
    try:
        pathfinder = importlib.import_module("cuda.pathfinder")
        found = pathfinder.find_nvidia_header_directory("cudart")
        if found:
            yield Path(found)
    except Exception:  # not installed, or a version without this function
        pass
    try:
        import nvidia
    except ImportError:
        nvidia = None
    for base in getattr(nvidia, "__path__", []):
        yield Path(base) / "cuda_runtime" / "include"
        yield from sorted(Path(base).glob("cu[0-9]*/include"), reverse=True)
    for var in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(var):
            yield Path(os.environ[var]) / "include"


@lru_cache(maxsize=1)
def include_dir() -> str:
    """The folder with CUDA's ``cuda_fp16.h`` (and the runtime headers it includes), searched
    in :func:`_header_dirs`' order."""
    tried = []
    for inc in _header_dirs():
        if (inc / "cuda_fp16.h").is_file():
            return str(inc)
        tried.append(str(inc))
    raise FileNotFoundError(
        "CUDA's runtime headers (cuda_fp16.h) were not found (looked in: "
        f"{', '.join(tried) or 'no candidate folder'}); install the runtime-header wheel of "
        "your CUDA stack: pip install nvidia-cuda-runtime-cu12 (CUDA 12) or "
        "\"nvidia-cuda-runtime>=13,<14\" (CUDA 13), or set CUDA_PATH to a CUDA toolkit")


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


def image_path(file: str, arch: int, sass: bool = True) -> Path:
    """Where the compiled image (cubin, or PTX) of shipped source ``file`` for ``arch`` is
    cached."""
    from cupy_backends.cuda.libs import nvrtc

    key = cache_key(sources()[file], headers(), arch, nvrtc.getVersion())
    return _cache_dir() / f"sm_{arch}" / f"{file}.{key}.{'cubin' if sass else 'ptx'}"


def image(file: str, arch: int, sass: bool = True) -> bytes:
    """What ``cuModuleLoadData`` loads for shipped source ``file``: the cubin for ``arch``, or
    (``sass=False``) its NUL-terminated PTX, from the disk cache when present."""
    src, include = sources()[file], headers()
    path = image_path(file, arch, sass)
    if path.is_file():
        return path.read_bytes()
    data = loadable(compile_source(src, file, arch, sass=sass, include=include), sass)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:  # a read-only home: compile again next time
        pass
    return data


def loadable(data: bytes, sass: bool) -> bytes:
    """``compile_source``'s output as ``cuModuleLoadData`` takes it (PTX must end in NUL)."""
    return data if sass or data.endswith(b"\0") else data + b"\0"
