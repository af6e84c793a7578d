"""SINGA's platform functions (``singa.device.*``) over the plugin registry."""

from __future__ import annotations

from . import config
from ._plugins import on_registry_change, registry
from .errors import DeviceUnavailableError, PluginError

_default = None


def _reset_default_device() -> None:
    global _default
    _default = None


on_registry_change(_reset_default_device)


def parse_device_string(spec: str) -> tuple[str, int]:
    """Split ``"cuda:1"`` into ``("cuda", 1)``; ``"cpu"`` gives ``("cpu", 0)``."""
    if not isinstance(spec, str) or not spec.strip():
        raise DeviceUnavailableError(
            f"invalid device string {spec!r}; use 'cpu', 'opencl:0', 'cuda:1', ..."
        )
    text = spec.strip().lower()
    name, sep, idx = text.partition(":")
    if not sep:
        return name, 0
    try:
        index = int(idx)
    except ValueError:
        raise DeviceUnavailableError(
            f"invalid device string {spec!r}: the part after ':' must be an integer index"
        ) from None
    return name, index


def get_device(spec="cpu"):
    """Return the device named by a device string (``"cpu"``, ``"opencl:0"``, ``"cuda:1"``).

    Raises :class:`singa.errors.DeviceUnavailableError` naming what was asked, what is
    available, the cause and the install command when the backend cannot be used.
    """
    from ._device import Device

    if isinstance(spec, Device):
        return spec
    name, index = parse_device_string(spec)
    return registry().device(name, index)


def get_default_device():
    """The default device: ``SINGA_DEVICE`` if set, else the host CPU (SINGA's CppCPU)."""
    global _default
    dev = _default
    if dev is None:
        dev = _default = get_device(config.get("SINGA_DEVICE") or "cpu")
    return dev


def create_cpu_device():
    """The host CPU device (a singleton)."""
    return get_device("cpu")


def create_cuda_gpu(set_default: bool = False):
    """CUDA GPU 0 (needs ``pip install ".[cuda13]"`` in the singa checkout and an NVIDIA GPU)."""
    return create_cuda_gpu_on(0, set_default)


def create_cuda_gpu_on(device_id: int, set_default: bool = False):
    """The CUDA GPU with ordinal ``device_id``."""
    dev = registry().device("cuda", int(device_id))
    if set_default:
        global _default
        _default = dev
    return dev


def create_cuda_gpus(num: int):
    """A list of the first ``num`` CUDA GPUs."""
    return create_cuda_gpus_on(list(range(num)))


def create_cuda_gpus_on(device_ids):
    """A list of the CUDA GPUs with the given ordinals."""
    return [create_cuda_gpu_on(i) for i in device_ids]


def create_opencl_device(index: int | None = None):
    """The default OpenCL device (``SINGA_OPENCL_DEVICE`` selects one), or device ``index``."""
    return registry().device("opencl", 0 if index is None else int(index))


def _count(name: str) -> int:
    return registry().device_count(name)


def get_num_gpus() -> int:
    """Number of CUDA GPUs (raises with the install hint if the CUDA backend is unusable)."""
    return _count("cuda")


def get_gpu_ids() -> list[int]:
    """The indices of the CUDA GPUs, ``0 .. get_num_gpus() - 1`` (raises as
    :func:`get_num_gpus` does)."""
    return list(range(get_num_gpus()))


def get_gpu_mem_size(device_id: int) -> tuple[int, int]:
    """(free, total) bytes of CUDA GPU ``device_id``."""
    dev = create_cuda_gpu_on(device_id)
    return dev.mem_info()


def device_query(device_id: int, verbose: bool = False) -> str:
    """A description string of CUDA GPU ``device_id``."""
    return create_cuda_gpu_on(device_id).describe(verbose)


def get_num_opencl_platforms() -> int:
    """Number of OpenCL platforms with a device: the distinct platform indices ``P`` of the
    OpenCL backend's ``describe()`` lines (``"P:D platform / device / ..."``, one per device);
    raises with the install hint if the OpenCL backend is unusable."""
    return len({line.split(":")[0] for line in registry().describe("opencl")})


def get_num_opencl_devices() -> int:
    """Number of OpenCL devices (raises with the install hint if the OpenCL backend is
    unusable)."""
    return _count("opencl")


def enable_lazy_alloc(enable: bool) -> None:
    """Allocate memory at first write (True, default) or when a tensor is created (False)."""
    from ._device import Device

    Device.EnableLazyAlloc(enable)


def list_devices() -> list[str]:
    """Device strings of every usable device of every installed backend (a backend whose
    plugin fails to count its devices is left out and reported by ``python -m singa info``;
    ``SINGA_STRICT_PLUGINS=1`` raises its PluginError instead)."""
    reg = registry()
    out = []
    for name in reg.available_backends():
        if name == "cpu":
            out.append("cpu")
            continue
        try:
            count = reg.device_count(name)
        except PluginError:
            if config.get("SINGA_STRICT_PLUGINS"):
                raise
            continue
        out.extend(f"{name}:{i}" for i in range(count))
    return out
