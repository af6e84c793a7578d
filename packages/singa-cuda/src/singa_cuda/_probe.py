"""Why the CUDA backend can or cannot run here: facts gathered once, explained by a table.

:func:`gather` asks cupy, the driver, NVRTC and cuDNN what they have; :func:`explain` (pure, unit
tested with hand-made facts) turns them into the first problem and its fix. The plugin's probe
raises the :class:`CudaUnavailableError` it returns, so ``get_device("cuda")`` and ``python -m
singa info`` print the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The wheels of each CUDA stack (major version -> what to install). CUDA 13's NVRTC and
#: runtime-header wheels carry no ``-cu13`` suffix (their headers are in ``nvidia/cu13``).
STACKS = {
    12: {"cupy": "cupy-cuda12x", "extra": "cuda12",
         "nvrtc": "nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12",
         "cudnn": "nvidia-cudnn-cu12 nvidia-cudnn-frontend", "nccl": "nvidia-nccl-cu12",
         "driver": "R525 or newer"},
    13: {"cupy": "cupy-cuda13x", "extra": "cuda13",
         "nvrtc": '"nvidia-cuda-nvrtc>=13,<14" "nvidia-cuda-runtime>=13,<14"',
         "cudnn": "nvidia-cudnn-cu13 nvidia-cudnn-frontend", "nccl": "nvidia-nccl-cu13",
         "driver": "R580 or newer"},
}
#: The stack assumed when none is installed yet (what current drivers run).
DEFAULT_STACK = 13
INSTALL = ('pip install ".[cuda13]" in the singa checkout (driver R580+, CUDA 13), or '
           '".[cuda12]" for a CUDA 12 driver (R525+)')


class CudaUnavailableError(RuntimeError):
    """The CUDA backend cannot run here. ``reason`` is a short code (see :data:`REASONS`),
    ``fix`` what to do about it."""

    def __init__(self, reason: str, detail: str, fix: str):
        self.reason = reason
        self.detail = detail
        self.fix = fix
        super().__init__(f"{detail}. fix: {fix}")


@dataclass(frozen=True)
class CudaFacts:
    """What :func:`gather` found. Versions are CUDA's integers (12040 = 12.4); 0 = none."""

    cupy_error: str | None = None
    driver_version: int = 0
    runtime_version: int = 0
    device_count: int = 0
    device_error: str | None = None
    nvrtc_error: str | None = None
    cudnn_error: str | None = None
    cupy_dist: str | None = None  # the installed cupy wheel: "cupy-cuda13x 14.2.0"

    @property
    def stack(self) -> int:
        """The CUDA major version of the installed cupy (its runtime), else
        :data:`DEFAULT_STACK`."""
        if self.runtime_version:
            return self.runtime_version // 1000
        for major, names in STACKS.items():
            if self.cupy_dist and self.cupy_dist.startswith(names["cupy"] + " "):
                return major
        return DEFAULT_STACK

    @property
    def wheels(self) -> dict:
        """:data:`STACKS`' entry of this stack (CUDA 13's for an unknown newer one)."""
        return STACKS.get(self.stack, STACKS[max(STACKS)])


def _ver(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}"


def _no_cupy(f: CudaFacts):
    if f.cupy_error:
        return ("no-cupy", f"cupy is not importable ({f.cupy_error})", INSTALL)


def _no_driver(f: CudaFacts):
    if f.driver_version == 0:
        return ("no-driver", "no NVIDIA driver is loaded (libcuda.so was not found, so there is "
                "no GPU this process can use)",
                "install the NVIDIA driver for your GPU (nvidia-smi must work); in a container "
                "start it with the GPU exposed, e.g. docker run --gpus all")


def _old_driver(f: CudaFacts):
    # CUDA's minor-version compatibility: any driver of the runtime's major version runs it
    # (kernels are compiled to the device's own SASS, so no newer PTX JIT is needed)
    if f.driver_version // 1000 < f.runtime_version // 1000:
        return ("old-driver", f"the NVIDIA driver supports CUDA {_ver(f.driver_version)} but "
                f"cupy's runtime is CUDA {_ver(f.runtime_version)}",
                f"upgrade the driver to one for CUDA {f.stack}.x ({f.wheels['driver']}), or "
                f"use the CUDA {f.driver_version // 1000} stack: "
                + _other_stack_fix(f.driver_version // 1000))


def _no_device(f: CudaFacts):
    if f.device_count < 1:
        why = f" ({f.device_error})" if f.device_error else ""
        return ("no-device", f"the NVIDIA driver {_ver(f.driver_version)} is loaded but no CUDA "
                f"device is visible{why}",
                "check nvidia-smi, and that CUDA_VISIBLE_DEVICES does not hide the GPUs")


def _no_nvrtc(f: CudaFacts):
    if f.nvrtc_error:
        return ("no-nvrtc", f"NVRTC (the run-time CUDA compiler) or CUDA's runtime headers are "
                f"missing for CUDA {f.stack} ({f.nvrtc_error})",
                f"pip install {f.wheels['nvrtc']}")


def _no_cudnn(f: CudaFacts):
    if f.cudnn_error:
        return ("no-cudnn", f"cuDNN or its frontend is missing for CUDA {f.stack} "
                f"({f.cudnn_error})", f"pip install {f.wheels['cudnn']}")


def _other_stack_fix(major: int) -> str:
    names = STACKS.get(major)
    if names is None:
        return "a driver this old has no supported stack"
    cupys = " ".join(n["cupy"] for n in STACKS.values())
    return (f'pip uninstall -y {cupys} && pip install ".[{names["extra"]}]" in the singa '
            'checkout')


#: Checks of the machine, in order: only the first failing one is reported (no driver implies
#: no device). Then checks of the installed wheels, each reported.
MACHINE = (_no_cupy, _no_driver, _old_driver, _no_device)
WHEELS = (_no_nvrtc, _no_cudnn)
REASONS = ("no-cupy", "no-driver", "old-driver", "no-device", "no-nvrtc", "no-cudnn")


def explain(facts: CudaFacts) -> CudaUnavailableError | None:
    """The problem in ``facts`` that stops CUDA first, with its fix, or None when CUDA can
    run. Missing wheels found besides (cuDNN behind a missing driver) are named too."""
    found = []
    for check in MACHINE:
        r = check(facts)
        if r:
            found.append(r)
            break
    if not facts.cupy_error:
        found += [r for r in (check(facts) for check in WHEELS) if r]
    if not found:
        return None
    reason, detail, fix = found[0]
    for _, more, more_fix in found[1:]:
        detail += f"; also: {more} (fix: {more_fix})"
    return CudaUnavailableError(reason, detail, fix)


def gather() -> CudaFacts:
    """Ask cupy, the driver, NVRTC and cuDNN (creates no context and no handle)."""
    dist = _cupy_dist()
    try:
        import cupy  # noqa: F401
        from cupy.cuda import runtime
    except Exception as exc:  # ImportError, or a broken install raising anything
        return CudaFacts(cupy_error=f"{type(exc).__name__}: {exc}", cupy_dist=dist)
    driver = _call(runtime.driverGetVersion, 0)
    rt = _call(runtime.runtimeGetVersion, 0)
    count, dev_err = 0, None
    if driver:
        try:
            count = int(runtime.getDeviceCount())
        except Exception as exc:
            dev_err = str(exc)
    nvrtc_err = None
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
        from ._nvrtc import include_dir

        include_dir()
    except Exception as exc:
        nvrtc_err = f"{type(exc).__name__}: {exc}"
    cudnn_err = None
    try:
        import cudnn

        cudnn.backend_version()
    except Exception as exc:
        cudnn_err = f"{type(exc).__name__}: {exc}"
    return CudaFacts(None, driver, rt, count, dev_err, nvrtc_err, cudnn_err, dist)


def _cupy_dist() -> str | None:
    """``"cupy-cuda13x 14.2.0"``: the installed cupy wheel (several: all, comma-separated)."""
    from importlib import metadata

    found = []
    for names in STACKS.values():
        try:
            found.append(f"{names['cupy']} {metadata.version(names['cupy'])}")
        except metadata.PackageNotFoundError:
            pass
    return ", ".join(found) or None


def stack_name(f: CudaFacts | None = None) -> str:
    """The installed CUDA stack in words: ``"CUDA 13.0 (cupy-cuda13x 14.2.0), driver 13.0"``."""
    f = f if f is not None else facts()
    if f.cupy_error:
        return f"no cupy ({f.cupy_error})"
    rt = _ver(f.runtime_version) if f.runtime_version else "?"
    drv = _ver(f.driver_version) if f.driver_version else "none"
    return f"CUDA {rt} ({f.cupy_dist or 'cupy'}), driver {drv}"


def _call(fn, default):
    try:
        return int(fn())
    except Exception:
        return default


_FACTS: CudaFacts | None = None


def facts() -> CudaFacts:
    """:func:`gather`, once per process."""
    global _FACTS
    if _FACTS is None:
        _FACTS = gather()
    return _FACTS


def probe() -> None:
    """Raise :class:`CudaUnavailableError` naming why CUDA cannot run here."""
    err = explain(facts())
    if err is not None:
        raise err


def device_count() -> int:
    f = facts()
    return f.device_count if explain(f) is None else 0
