"""Registers ``cuda`` with a probe that states why it cannot run (no kernels in this release)."""

from singa.backend import BACKEND_API_VERSION, BackendSpec, hookimpl


class CudaBackendNotImplemented(RuntimeError):
    """The installed singa-cuda has no CUDA device implementation."""


def _probe() -> None:
    raise CudaBackendNotImplemented(
        "singa-cuda 0.1.0 ships no CUDA device or kernels yet; use the cpu or opencl backend "
        "(pip install singa[opencl] runs on any OpenCL device)"
    )


def _unavailable(*_args):
    _probe()


@hookimpl
def singa_backends():
    return [BackendSpec(name="cuda", api_version=BACKEND_API_VERSION,
                        create_device=_unavailable, kernels=_unavailable, probe=_probe,
                        device_count=lambda: 0, aliases=("gpu",),
                        install_hint="pip install singa[cuda]")]
