"""Entry point of the pyref backend (``pyref = singa_pyref.plugin``)."""

from singa.backend import BACKEND_API_VERSION, BackendSpec, hookimpl


def _create(index: int):
    from .device import PyRefDevice

    return PyRefDevice(index)


def _kernels(device):
    from .kernels import kernel_table

    return kernel_table(device)


@hookimpl
def singa_backends():
    return [
        BackendSpec(
            name="pyref",
            api_version=BACKEND_API_VERSION,
            create_device=_create,
            kernels=_kernels,
            device_count=lambda: 1,
            install_hint="put tests/plugins on PYTHONPATH with a singa_pyref dist-info",
            host_fallback=True,
            describe=lambda: ["pyref:0: pure-Python reference device"],
        )
    ]
