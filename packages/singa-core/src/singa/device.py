"""Devices and SINGA's platform functions.

``get_default_device()`` is the host CPU unless ``SINGA_DEVICE`` names another device.
Accelerators are created with ``create_cuda_gpu*``/``create_opencl_device`` as in SINGA, or by
device string with :func:`get_device` (``"cuda:0"``, ``"opencl:0"``). A device whose backend is
not installed or has no hardware raises :class:`singa.errors.DeviceUnavailableError` with the
cause and the ``pip install ".[...]"`` command; there is never a silent fallback to the CPU.
"""

from ._device import Device
from ._device_api import (
    create_cpu_device,
    create_cuda_gpu,
    create_cuda_gpu_on,
    create_cuda_gpus,
    create_cuda_gpus_on,
    create_opencl_device,
    device_query,
    enable_lazy_alloc,
    get_default_device,
    get_device,
    get_gpu_ids,
    get_gpu_mem_size,
    get_num_gpus,
    get_num_opencl_devices,
    get_num_opencl_platforms,
    list_devices,
    parse_device_string,
)

__all__ = [
    "Device",
    "create_cpu_device",
    "create_cuda_gpu",
    "create_cuda_gpu_on",
    "create_cuda_gpus",
    "create_cuda_gpus_on",
    "create_opencl_device",
    "device_query",
    "enable_lazy_alloc",
    "get_default_device",
    "get_device",
    "get_gpu_ids",
    "get_gpu_mem_size",
    "get_num_gpus",
    "get_num_opencl_devices",
    "get_num_opencl_platforms",
    "list_devices",
    "parse_device_string",
]
