"""Entry point of the backend (``[project.entry-points.singa] template = ...plugin``)."""

from singa.backend import BACKEND_API_VERSION, BackendSpec, hookimpl


def _create(index: int):
    from .device import TemplateDevice

    return TemplateDevice(index)


def _kernels(device):
    from .kernels import KERNELS

    return KERNELS


@hookimpl
def singa_backends():
    return [
        BackendSpec(
            name="template",
            api_version=BACKEND_API_VERSION,
            create_device=_create,
            kernels=_kernels,
            device_count=lambda: 1,
            install_hint="pip install singa-template",
            host_fallback=True,  # ops without a kernel run on the host, counted and warned
            describe=lambda: ["template:0: host memory in buffers of the backend's own type"],
        )
    ]
