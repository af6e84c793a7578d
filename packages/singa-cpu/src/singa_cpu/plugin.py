"""Entry point of the CPU backend: registers ``cpu`` through the same hook as any plugin."""

from singa.plugins import BACKEND_API_VERSION, BackendSpec, hookimpl


def _create(index: int):
    from .device import CppCPU

    return CppCPU()


def _kernels(device):
    from .kernels import kernel_table

    return kernel_table(device)


def _describe() -> list[str]:
    import os
    import platform

    return [f"cpu: {platform.processor() or platform.machine()}, {os.cpu_count()} cores"]


@hookimpl
def singa_backends():
    return [
        BackendSpec(
            name="cpu",
            api_version=BACKEND_API_VERSION,
            create_device=_create,
            kernels=_kernels,
            device_count=lambda: 1,
            aliases=("host", "cppcpu"),
            install_hint="pip install singa   (the meta-package installs singa-cpu)",
            describe=_describe,
        )
    ]
