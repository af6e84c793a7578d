"""CUDA errors as singa errors: what went wrong and what to do about it.

cupy raises ``CUDARuntimeError``/``CUDADriverError``/``OutOfMemoryError`` whose text is the
CUDA enum name; :func:`translate` maps the name to a :mod:`singa.errors` class and a fix.
"""

from __future__ import annotations

from singa.errors import DeviceUnavailableError, KernelError, SingaError

#: CUDA error name -> (singa error class, explanation and fix)
TRANSLATIONS: dict[str, tuple[type, str]] = {
    "cudaErrorMemoryAllocation": (
        KernelError, "the GPU is out of memory; use a smaller batch, call "
        "dev.empty_cache(), or enable graph mode (Model.compile(use_graph=True)) which reuses "
        "intermediate memory"),
    "OutOfMemoryError": (
        KernelError, "the GPU is out of memory; use a smaller batch, call dev.empty_cache(), "
        "or enable graph mode (Model.compile(use_graph=True)) which reuses intermediate memory"),
    "cudaErrorInsufficientDriver": (
        DeviceUnavailableError, "the NVIDIA driver is missing or older than the CUDA runtime; "
        "install or upgrade the driver (python -m singa info names the versions)"),
    "cudaErrorNoDevice": (
        DeviceUnavailableError, "no CUDA device is visible; check nvidia-smi and "
        "CUDA_VISIBLE_DEVICES"),
    "cudaErrorInvalidDevice": (
        DeviceUnavailableError, "no CUDA device has this ordinal; list them with "
        "singa.device.list_devices()"),
    "cudaErrorIllegalAddress": (
        KernelError, "a kernel accessed memory out of bounds (the CUDA context is now unusable; "
        "restart the process); rerun with CUDA_LAUNCH_BLOCKING=1 to find the op and report it "
        "with python -m singa info"),
    "cudaErrorLaunchOutOfResources": (
        KernelError, "a kernel asked for more registers or shared memory than the GPU has; "
        "report it with python -m singa info"),
    "cudaErrorNoKernelImageForDevice": (
        KernelError, "no kernel was built for this GPU's architecture; clear ~/.cache/singa-cuda "
        "and retry, or upgrade nvidia-cuda-nvrtc-cu12"),
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": (
        KernelError, "the driver is older than NVRTC's PTX; upgrade the NVIDIA driver"),
}


def translate(exc: BaseException, what: str) -> SingaError:
    """The singa error for CUDA exception ``exc`` raised while doing ``what``."""
    text = f"{type(exc).__name__}: {exc}"
    for name, (cls, fix) in TRANSLATIONS.items():
        if name in text:
            return cls(f"{what} failed: {text}. {fix}")
    return KernelError(f"{what} failed: {text}. If this persists, report it with the output of "
                       "python -m singa info")
