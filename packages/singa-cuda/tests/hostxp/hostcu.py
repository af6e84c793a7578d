"""The package's ``cu/*.cu`` kernels built for the CPU with g++ and launched through ctypes.

A stand-in for :class:`singa_cuda.cu_kernels.CuModules` with the same ``launch(file, name,
n_items, args)``: the kernel sources are compiled unchanged as C++ (``shim/`` supplies
``cuda_fp16.h`` and the CUDA keywords), so the kernels' index arithmetic, window rules,
accumulation types and Philox words are checked by the conformance kit on the CPU. What this
cannot check: parallel execution (one host thread runs the grid-stride loops), real atomics,
and cubin loading.
"""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from singa_cuda._nvrtc import headers, sources

SHIM = Path(__file__).parent / "shim"
_BUILD = Path(tempfile.mkdtemp(prefix="singa_cuda_hostcu_"))
_LIBS: dict[str, ctypes.CDLL] = {}
_CTYPES = {np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64,
           np.dtype(np.uint32): ctypes.c_uint32, np.dtype(np.float64): ctypes.c_double}


def compiler() -> str | None:
    return shutil.which("g++")


def _gxx(src: str, what: str, extra=()) -> Path:
    """``src`` (CUDA C) built by g++ as a shared library, with the package's headers (the
    texts NVRTC gets) written beside it; returns the library's path."""
    include = headers()
    key = hashlib.sha256("\0".join([src, *sorted(f"{n}\0{t}" for n, t in include.items())])
                         .encode()).hexdigest()[:16]
    folder = _BUILD / key
    folder.mkdir(exist_ok=True)
    for name, text in include.items():
        (folder / name).write_text(text)
    cpp = folder / f"{what}.cpp"
    so = cpp.with_suffix(".so")
    if not so.is_file():
        cpp.write_text(src)
        cmd = [compiler() or "g++", "-x", "c++", "-std=c++17", "-O1", "-shared", "-fPIC",
               f"-I{SHIM}", f"-I{folder}", "-include", str(SHIM / "cuda_host_prelude.h"),
               *extra, str(cpp), "-o", str(so)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"host build of {what} failed:\n{proc.stderr}\n{src}")
    return so


def library(file: str) -> ctypes.CDLL:
    """``file`` compiled for the host (once per process)."""
    lib = _LIBS.get(file)
    if lib is None:
        lib = _LIBS[file] = ctypes.CDLL(str(_gxx(sources()[file], file)))
    return lib


def _struct_type(dtype: np.dtype):
    fields = [(name, _CTYPES[dtype.fields[name][0]]) for name in dtype.names]
    return type(f"S{abs(hash(dtype))}", (ctypes.Structure,), {"_fields_": fields})


_STRUCTS: dict = {}


def struct_value(a: np.ndarray):
    """A size-one structured numpy array as the ctypes struct passed by value: its bytes, as
    cupy hands them to the driver (``CNumpyArray``)."""
    assert a.size == 1, "cupy passes only size-one numpy arrays by value"
    cls = _STRUCTS.get(a.dtype)
    if cls is None:
        cls = _STRUCTS[a.dtype] = _struct_type(a.dtype)
    assert ctypes.sizeof(cls) == a.dtype.itemsize, "ctypes and numpy disagree on the layout"
    return cls.from_buffer_copy(a.tobytes())


def _arg(a):
    if isinstance(a, np.ndarray) and a.dtype.names is not None:
        return struct_value(a)  # a struct argument (on the host, arrays are numpy too)
    if isinstance(a, np.ndarray):
        assert a.flags.c_contiguous, "kernels are flagged contiguous_inputs"
        return ctypes.c_void_p(a.ctypes.data)
    return _CTYPES[np.dtype(type(a))](a)


class HostModules:
    """Launches kernels of the host-built ``.cu`` files (same interface as CuModules)."""

    def launch(self, file: str, name: str, n_items: int, args: tuple) -> None:
        fn = getattr(library(file), name)
        fn.restype = None
        fn(*(_arg(a) for a in args))


def chain_builder(src: str, name: str):
    """``build`` for :class:`singa_cuda.chains.ChainCompiler` on the CPU: the generated CUDA C
    compiled by g++ as the shipped sources are."""
    fn = getattr(ctypes.CDLL(str(_gxx(src, "chain"))), name)
    fn.restype = None

    def launch(args, n_items):
        fn(*(_arg(a) for a in args))

    return launch
