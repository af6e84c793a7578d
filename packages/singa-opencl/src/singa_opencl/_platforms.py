"""OpenCL platform and device discovery, ordering and selection.

Device ordinals (``opencl:N``) number the *usable* devices: the one chosen by
``SINGA_OPENCL_DEVICE`` (or, when it is unset, the first GPU) is ``opencl:0``, then the other
GPUs, then the remaining devices in platform order. A device is usable when its compiler builds a
one-line kernel, and, in a child process, a kernel with 16-wide float vectors (what gemm.cl's
tiles use). Some runtimes enumerate devices they cannot compile for: pocl built against an LLVM
that does not know the host CPU reports ``unknown target CPU 'generic'`` (AMD Zen 5), or aborts
the whole process inside LLVM on 16-wide vectors (the PyPI pocl's LLVM 14 on AMD Zen 4, which
it takes for a Zen 3 while loading its AVX-512 kernel library). Those are listed by the doctor
with the reason but get no ordinal. The child's verdict is cached per machine and runtime under
``$XDG_CACHE_HOME/singa``, so only the first enumeration on a machine pays for it (0.2 s for a
working runtime; 15-100 s for the PyPI pocl on Zen 4, which takes that long to crash).

Before the first platform query, :mod:`._icd` makes OpenCL runtimes that pip installed into this
environment (Intel's CPU runtime) visible to the ICD loader.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform as _host
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from singa import config
from singa.backend import DeviceUnavailableError

from . import _icd

INSTALL_HINT = 'pip install ".[opencl]" in the singa checkout'

_SMOKE_SOURCE = "__kernel void singa_smoke(__global float* y) { y[get_global_id(0)] = 1.0f; }"

#: Built and run in a child process (see the module docstring): y[0:16] = a * a + y through a
#: 16-wide vector ``mad``, the builtin and width of gemm.cl's inner loop.
_PROBE_SOURCE = (
    "__kernel void singa_probe(__global float* y, __global const float* a) {"
    " if (get_global_id(0) == 0) { float16 v = vload16(0, a);"
    " vstore16(mad(v, v, vload16(0, y)), 0, y); } }")

#: The child: build and run the source argv[3] on platform argv[1], device argv[2]; exit 0 when
#: the result is right, 1 with the compiler's message (or the wrong result) on stdout otherwise.
#: A compiler that aborts kills only the child.
_PROBE_SCRIPT = """
import sys
import numpy as np
import pyopencl as cl
dev = cl.get_platforms()[int(sys.argv[1])].get_devices()[int(sys.argv[2])]
ctx = cl.Context([dev])
try:
    prg = cl.Program(ctx, sys.argv[3]).build()
except Exception as exc:
    print(exc)
    sys.exit(1)
q = cl.CommandQueue(ctx)
a = np.arange(16, dtype=np.float32)
y = np.ones(16, np.float32)
mf = cl.mem_flags
ab = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
yb = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=y)
prg.singa_probe(q, (1,), None, yb, ab)
cl.enqueue_copy(q, y, yb)
q.finish()
if not np.array_equal(y, a * a + 1):
    print(f"a 16-wide vector mad computed {y.tolist()}, not a * a + 1")
    sys.exit(1)
print("ok")
"""

#: Seconds the child may take (a cold compiler cache and a loaded machine included).
PROBE_TIMEOUT = 120.0


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
                info.problem = _smoke_build(cl, dev) or probe_verdict(info)
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
        return f"its OpenCL compiler cannot build kernels: {_reason(str(exc))}"
    return None


def _reason(log: str) -> str:
    """The line of a compiler's message that says why: its last error line, else its first."""
    lines = [ln.strip() for ln in log.strip().splitlines()] or ["?"]
    errors = [ln for ln in lines if "error" in ln.lower()]
    return errors[-1] if errors else lines[0]


def _probe_key(info: CLDeviceInfo, source: str, script: str) -> str:
    """What the child's verdict depends on: the runtime, the device, this CPU and the probe."""
    d, p = info.device, info.platform
    parts = [p.name, p.version, d.name, d.version, getattr(d, "driver_version", ""),
             _host.machine(), _cpu_identity(), source, script]
    return hashlib.sha256("\0".join(str(x) for x in parts).encode()).hexdigest()[:24]


def _cpu_identity() -> str:
    """The CPU's model and feature flags (what a compiler's target choice depends on)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            head = f.read(1 << 16).split("\n\n", 1)[0]
    except OSError:
        return _host.processor()
    keep = ("vendor_id", "cpu family", "model", "model name", "flags")
    return "\n".join(ln for ln in head.splitlines() if ln.split(":", 1)[0].strip() in keep)


def probe_verdict(info: CLDeviceInfo, source: str = _PROBE_SOURCE,
                  script: str = _PROBE_SCRIPT, cache: Path | None = None) -> str | None:
    """Why ``info``'s device cannot run our kernels, or None: ``source`` built and run by
    ``script`` in a child process (a compiler abort kills the child only), the verdict
    cached in ``cache`` (default ``$XDG_CACHE_HOME/singa/opencl-probe``) by runtime, device,
    CPU and probe."""
    if cache is None:
        cache = _icd.cache_root() / "opencl-probe"
    path = cache / f"{_probe_key(info, source, script)}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))["problem"]
    except (OSError, ValueError, KeyError, TypeError):
        pass  # not probed yet on this machine (or an unreadable entry): probe
    problem = _run_probe(info, source, script)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache, prefix=".probe-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"device": info.describe(), "problem": problem}, f)
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache: probe again next time
    return problem


def _run_probe(info: CLDeviceInfo, source: str, script: str) -> str | None:
    cmd = [sys.executable, "-c", script, str(info.platform_index), str(info.device_index),
           source]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT,
                             errors="replace")
    except subprocess.TimeoutExpired:
        return (f"its OpenCL compiler did not build a 16-wide vector kernel within "
                f"{PROBE_TIMEOUT:.0f} s")
    except OSError as exc:
        return f"the kernel probe could not start a child process ({exc})"
    if out.returncode == 0:
        return None
    if out.returncode < 0:  # killed by a signal: LLVM's "LLVM ERROR" aborts the process
        llvm = [ln.strip() for ln in out.stderr.splitlines() if "LLVM ERROR" in ln]
        detail = f" ({llvm[0][:200]})" if llvm else ""
        return (f"its OpenCL compiler crashes the process (signal {-out.returncode}) building "
                f"a kernel with 16-wide float vectors{detail}")
    reason = _reason(out.stdout if out.stdout.strip() else out.stderr)
    return f"its OpenCL compiler cannot build or run kernels: {reason[:300]}"


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
