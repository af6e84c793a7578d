"""Entry point of the OpenCL backend: registers ``opencl`` through the ``singa_backends`` hook.

Nothing here imports pyopencl; the record's callables do, when a device is probed or created.
"""

from singa.backend import BACKEND_API_VERSION, BackendSpec, hookimpl


def _probe() -> None:
    from ._platforms import probe

    probe()


def _device_count() -> int:
    from ._platforms import device_count

    return device_count()


def _create(index: int):
    from ._platforms import ordered_devices
    from .device import OpenCLDevice

    return OpenCLDevice(index, ordered_devices()[index])


def _kernels(device):
    from .kernels import kernel_table

    return kernel_table(device)


def _describe() -> list[str]:
    from ._platforms import describe

    return describe()


@hookimpl
def singa_backends():
    return [
        BackendSpec(
            name="opencl",
            api_version=BACKEND_API_VERSION,
            create_device=_create,
            kernels=_kernels,
            probe=_probe,
            device_count=_device_count,
            install_hint='pip install ".[opencl]" in the singa checkout',
            describe=_describe,
        )
    ]
