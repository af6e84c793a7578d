"""OpenCL platform and device discovery, ordering and selection.

Device ordinals (``opencl:N``) number the *usable* devices: the one chosen by
``SINGA_OPENCL_DEVICE`` (or, when it is unset, the first GPU) is ``opencl:0``, then the other
GPUs, then the remaining devices in platform order. A device is usable when its compiler builds a
one-line kernel; some runtimes enumerate devices they cannot compile for (pocl built against an
LLVM that does not know the host CPU reports ``unknown target CPU 'generic'``), and those are
listed by the doctor with the reason but get no ordinal.

Before the first platform query, :mod:`._icd` makes OpenCL runtimes that pip installed into this
environment (Intel's CPU runtime) visible to the ICD loader.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from singa import config
from singa.backend import DeviceUnavailableError

from . import _icd

INSTALL_HINT = "pip install singa[opencl]"

_SMOKE_SOURCE = "__kernel void singa_smoke(__global float* y) { y[get_global_id(0)] = 1.0f; }"


@dataclass
class CLDeviceInfo:
    """One (platform, device) pair as the OpenCL runtime enumerates it."""

    platform_index: int
    device_index: int
    platform: Any
    device: Any
    problem: str | None = field(default=None)

    @property
    def key(self) -> str:
        return f"{self.platform_index}:{self.device_index}"

    @property
    def is_gpu(self) -> bool:
        import pyopencl as cl

        return bool(self.device.type & cl.device_type.GPU)

    @property
    def has_fp16(self) -> bool:
        return "cl_khr_fp16" in self.device.extensions

    @property
    def has_fp64(self) -> bool:
        return "cl_khr_fp64" in self.device.extensions

    def describe(self) -> str:
        p = self.platform.name.strip()
        d = self.device.name.strip()
        v = self.device.version.strip()
        return f"{self.key} {p} / {d} / {v} / fp16 {'yes' if self.has_fp16 else 'no'}"


_lock = threading.Lock()
_cache: dict[str, Any] = {}


def import_pyopencl():
    """Import pyopencl or raise an ImportError that says how to install it."""
    try:
        import pyopencl
    except ImportError as exc:
        raise ImportError(
            f"the OpenCL backend needs pyopencl, which is not installed ({exc}); "
            f"fix: {INSTALL_HINT} (installs pyopencl and the pocl CPU runtime)"
        ) from exc
    return pyopencl


def enumerate_devices() -> list[CLDeviceInfo]:
    """Every (platform, device) pair, with ``problem`` set for devices that cannot compile."""
    with _lock:
        found = _cache.get("devices")
        if found is not None:
            return found
        _icd.expose_pip_runtimes()  # before the loader's first platform query reads the env
        cl = import_pyopencl()
        try:
            platforms = cl.get_platforms()
        except cl.Error as exc:  # ocl-icd raises PLATFORM_NOT_FOUND_KHR when there is none
            raise RuntimeError(
                f"no OpenCL platform found ({exc}){_icd_clause()}; fix: {INSTALL_HINT} "
                "installs CPU runtimes from PyPI (pocl; on Linux x86_64 also Intel's "
                "intel-opencl-rt); on a machine with a GPU install its vendor's OpenCL driver"
            ) from exc
        found = []
        for p_idx, plat in enumerate(platforms):
            try:
                devices = plat.get_devices()
            except cl.Error:
                devices = []
            for d_idx, dev in enumerate(devices):
                info = CLDeviceInfo(p_idx, d_idx, plat, dev)
                info.problem = _smoke_build(cl, dev)
                found.append(info)
        _cache["devices"] = found
        return found


def _smoke_build(cl, dev) -> str | None:
    """Build a one-line kernel; return why it failed, or None."""
    from ._build import quiet_compiler

    try:
        ctx = cl.Context([dev])
        with quiet_compiler():
            cl.Program(ctx, _SMOKE_SOURCE).build()
    except Exception as exc:  # a broken compiler raises RuntimeError/LogicError with its log
        lines = [ln.strip() for ln in str(exc).splitlines() if "error" in ln.lower()]
        reason = lines[-1] if lines else str(exc).splitlines()[0]
        return f"its OpenCL compiler cannot build kernels: {reason}"
    return None


def _match(spec: str, infos: list[CLDeviceInfo]) -> CLDeviceInfo:
    spec = spec.strip()
    for info in infos:
        if info.key == spec:
            return info
    low = spec.lower()
    # A whole name beats a substring: pocl calls its device "pthread-<arch>-AMD EPYC", so the
    # Intel runtime's device "AMD EPYC" would otherwise never be selectable by its name.
    for exact in (True, False):
        for info in infos:
            names = (info.platform.name.strip().lower(), info.device.name.strip().lower())
            if (low in names if exact else any(low in n for n in names)):
                if info.problem is None:
                    return info
    listing = "; ".join(i.describe() for i in infos) or "none"
    raise DeviceUnavailableError(
        f"SINGA_OPENCL_DEVICE={spec!r} matches no usable OpenCL device. Use 'P:D' (platform "
        f"P, device D) or a substring of a platform or device name. Devices: {listing}. "
        "Diagnose with: python -m singa info"
    )


def ordered_devices() -> list[CLDeviceInfo]:
    """Usable devices in ordinal order (``opencl:0`` first)."""
    infos = enumerate_devices()
    usable = [i for i in infos if i.problem is None]
    usable.sort(key=lambda i: (not i.is_gpu, i.platform_index, i.device_index))
    spec = config.get("SINGA_OPENCL_DEVICE")
    if spec:
        chosen = _match(spec, infos)
        if chosen.problem is not None:
            raise DeviceUnavailableError(
                f"SINGA_OPENCL_DEVICE={spec!r} selects {chosen.describe()}, but "
                f"{chosen.problem}. Choose another device or unset SINGA_OPENCL_DEVICE."
            )
        usable = [chosen] + [i for i in usable if i is not chosen]
    return usable


def probe() -> None:
    """Raise with the cause and the fix when no OpenCL device can run kernels here."""
    infos = enumerate_devices()
    if not infos:
        raise RuntimeError(
            f"OpenCL platforms exist but report no device{_icd_clause()}; fix: "
            f"{INSTALL_HINT} installs CPU runtimes, or install a vendor driver"
        )
    if not any(i.problem is None for i in infos):
        reasons = "; ".join(f"{i.describe()}: {i.problem}" for i in infos)
        raise RuntimeError(
            f"no OpenCL device can compile kernels ({reasons}){_icd_clause()}. The pocl from "
            "PyPI bundles an LLVM that may not know a recent CPU; on Linux x86_64, "
            f"{INSTALL_HINT} also installs Intel's CPU runtime (intel-opencl-rt), which "
            "singa-opencl adds to the ICD loader unless OCL_ICD_VENDORS or "
            "OPENCL_VENDOR_PATH is set; else install a newer pocl (e.g. Debian/Ubuntu: "
            "apt-get install pocl-opencl-icd) or a vendor OpenCL driver"
        )
    ordered_devices()  # a bad SINGA_OPENCL_DEVICE is reported here too


def _icd_clause() -> str:
    st = _icd.status()
    note = st.note() if st is not None else None
    return f" [{note}]" if note else ""


def device_count() -> int:
    try:
        return len(ordered_devices())
    except Exception:
        return 0


def describe() -> list[str]:
    """One line per OpenCL device: ``P:D platform / device / version / fp16 yes|no``."""
    try:
        infos = enumerate_devices()
    except Exception as exc:
        return [f"opencl: unavailable: {exc}"]
    try:
        ordinal = {id(info): n for n, info in enumerate(ordered_devices())}
    except Exception:
        ordinal = {}
    icd = _icd.status()
    note = icd.note() if icd is not None else None
    placed = False
    lines = []
    for info in infos:
        line = info.describe()
        if info.problem is not None:
            line += f" / unusable: {info.problem}"
        elif id(info) in ordinal:
            line += f" / opencl:{ordinal[id(info)]}"
        if note and icd.provides(info.platform.name):
            line += f" / {note}"
            placed = True
        lines.append(line)
    if note and lines and not placed:
        lines[0] += f" / {note}"  # a runtime left out (user's setting) or of unknown platform
    return lines


def reset_cache() -> None:
    """Forget the enumeration (tests that change the environment call this)."""
    with _lock:
        _cache.clear()
