"""Entry point of the CUDA backend: registers ``cuda`` (alias ``gpu``).

The probe (:mod:`singa_cuda._probe`) names exactly what is missing (cupy, a driver, a new
enough driver, a device, NVRTC, cuDNN) and the fix; the registry shows that message for
``get_device("cuda")`` and in ``python -m singa info``. Nothing here imports cupy at load time.
"""

from singa.backend import BACKEND_API_VERSION, BackendSpec, hookimpl

from . import _probe


def _create(index: int):
    from .device import CudaGPU

    return CudaGPU(index)


def _kernels(device):
    from .kernels import kernel_table

    return kernel_table(device)


def _describe() -> list[str]:
    from singa.device import get_device

    return [get_device(f"cuda:{i}").describe() for i in range(_probe.device_count())]


@hookimpl
def singa_backends():
    return [BackendSpec(name="cuda", api_version=BACKEND_API_VERSION,
                        create_device=_create, kernels=_kernels, probe=_probe.probe,
                        device_count=_probe.device_count, aliases=("gpu",),
                        install_hint=_probe.INSTALL, describe=_describe)]
