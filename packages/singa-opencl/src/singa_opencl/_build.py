"""Building OpenCL programs from the shipped ``.cl`` sources, once per context.

A program is a ``.cl`` file from ``singa_opencl/cl`` plus a prelude that fixes its element types
(``T_*`` for inputs, ``O_*`` for outputs) and, for table-generated kernels, the instantiation
lines. Built programs are cached per device (one context per device) by their full source, and
pyopencl/pocl cache the binaries on disk, so a program is compiled once per machine.

A build failure becomes :class:`singa.errors.KernelError` naming the op, the device and the
compiler log.
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
from dataclasses import dataclass
from importlib import resources

import numpy as np
from singa import backend as sb
from singa.backend import KernelError


@dataclass(frozen=True)
class CLType:
    """How one SINGA dtype is stored (``storage``) and computed with (``compute``) in kernels.

    float16 is stored as ``half`` and computed in float through ``vload_half``/
    ``vstore_half_rte``, which every OpenCL device provides (no cl_khr_fp16 needed).
    """

    name: str
    storage: str
    compute: str
    scalar: type  # numpy type of a compute-type scalar kernel argument
    load: str  # macro body of LOAD(p, i)
    store: str  # macro body of STORE(p, i, v)
    is_int: bool = False
    needs_fp64: bool = False


def _plain(name, c, scalar, is_int=False, fp64=False):
    return CLType(name, c, c, scalar, "((p)[(i)])", "((p)[(i)] = (v))", is_int, fp64)


CL_TYPES = {
    sb.kFloat32: _plain("float32", "float", np.float32),
    sb.kInt: _plain("int32", "int", np.int32, is_int=True),
    sb.kDouble: _plain("float64", "double", np.float64, fp64=True),
    sb.kFloat16: CLType("float16", "half", "float", np.float32, "vload_half((i), (p))",
                            "vstore_half_rte((v), (i), (p))"),
}

#: Raw element types by item size, for copies that only move bits.
BITS_TYPES = {
    1: _plain("bits8", "uchar", np.uint8, True),
    2: _plain("bits16", "ushort", np.uint16, True),
    4: _plain("bits32", "uint", np.uint32, True),
    8: _plain("bits64", "ulong", np.uint64, True),
}


def type_prelude(prefix: str, t: CLType) -> str:
    """``#define``s of ``{prefix}_S``, ``_C``, ``_LOAD``, ``_STORE``, ``_IS_INT`` for type t."""
    return (
        f"#define {prefix}_S {t.storage}\n"
        f"#define {prefix}_C {t.compute}\n"
        f"#define {prefix}_LOAD(p, i) {t.load}\n"
        f"#define {prefix}_STORE(p, i, v) {t.store}\n"
        f"#define {prefix}_IS_INT {int(t.is_int)}\n"
    )


def prelude(**types: CLType) -> str:
    """The prelude for a program using the given roles, e.g. ``prelude(T=f32, O=i32)``."""
    parts = []
    if any(t.needs_fp64 for t in types.values()):
        parts.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n")
    for prefix, t in types.items():
        parts.append(type_prelude(prefix, t))
    return "".join(parts)


@functools.cache
def read_source(name: str) -> str:
    """The text of ``singa_opencl/cl/<name>``."""
    return resources.files("singa_opencl").joinpath("cl", name).read_text(encoding="utf-8")


class ProgramCache:
    """Built programs and kernel objects of one device (context), keyed by source."""

    def __init__(self, device):
        self.device = device
        self._programs: dict[str, object] = {}
        self._kernels: dict[tuple, object] = {}

    def program(self, source: str, op: str, what: str = ""):
        """Build ``source`` (once) or raise KernelError naming ``op`` and the device."""
        prg = self._programs.get(source)
        if prg is None:
            prg = build_program(self.device, source, op, what)
            self._programs[source] = prg
        return prg

    def kernel(self, program, name: str, scalar_types=None):
        """The kernel ``name`` of ``program`` (one object per program, name and argument types).

        ``scalar_types`` lists a numpy type per argument (None for buffers and structs), so
        that launches can pass Python numbers.
        """
        key = (id(program), name, None if scalar_types is None else tuple(scalar_types))
        k = self._kernels.get(key)
        if k is None:
            import pyopencl as cl

            k = cl.Kernel(program, name)
            if scalar_types is not None:
                k.set_scalar_arg_dtypes(scalar_types)
            self._kernels[key] = k
        return k


def build_program(device, source: str, op: str, what: str = ""):
    """Compile ``source`` for ``device``; a failure raises KernelError with the compiler log."""
    import pyopencl as cl

    try:
        with quiet_compiler():
            return cl.Program(device.context, source).build(options=["-cl-mad-enable"])
    except cl.Error as exc:
        log = _build_log(exc)
        raise KernelError(
            f"{op}: building the OpenCL program{' ' + what if what else ''} failed on device "
            f"{device.name} ({device.cl_device.name.strip()}, "
            f"{device.cl_device.platform.name.strip()}). Compiler log:\n{log}\n"
            "fix: update the OpenCL driver (or pocl), or run this op on another device "
            "(x.to_device(singa.device.get_default_device()))"
        ) from exc


@contextlib.contextmanager
def quiet_compiler():
    """Silence pyopencl's CompilerWarning for successful builds, unless the user asked for it.

    Intel's CPU runtime logs vectorisation remarks for every build, which pyopencl turns into a
    warning per program; a failed build raises (KernelError with the log) either way.
    ``PYOPENCL_COMPILER_OUTPUT=1`` shows the logs.
    """
    if os.environ.get("PYOPENCL_COMPILER_OUTPUT", "").lower() in ("1", "true", "yes", "on"):
        yield
        return
    import pyopencl as cl

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cl.CompilerWarning)
        yield


def _build_log(exc) -> str:
    text = str(exc)
    keep = [ln for ln in text.splitlines() if ln.strip() and "clBuildProgram failed" not in ln]
    return "\n".join(keep[-40:]) or text
