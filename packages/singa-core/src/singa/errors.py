"""Exceptions SINGA raises. Each message says what was asked, what is wrong, and the fix."""

from __future__ import annotations

__all__ = [
    "SingaError",
    "DeviceUnavailableError",
    "PluginError",
    "PluginConflictError",
    "DeviceMismatchError",
    "DtypeMismatchError",
    "ShapeError",
    "MissingKernelError",
    "KernelError",
    "GraphError",
    "CheckpointError",
    "HostFallbackWarning",
]


class SingaError(Exception):
    """Base class of every SINGA error."""


class DeviceUnavailableError(SingaError, RuntimeError):
    """A device was requested whose backend is not installed, failed to load, or has no hardware."""


class PluginError(SingaError, RuntimeError):
    """A plugin failed to load or returned invalid records (raised in strict mode)."""


class PluginConflictError(PluginError):
    """Two distributions claim the same backend name."""


class DeviceMismatchError(SingaError, ValueError):
    """Tensors on different devices were combined in one operation."""


class DtypeMismatchError(SingaError, TypeError):
    """Tensors of different dtypes were combined where SINGA requires one dtype."""


class ShapeError(SingaError, ValueError, AssertionError):
    """Operand shapes are incompatible with the operation.

    Also an ``AssertionError``: these checks replace SINGA's ``assert`` statements, so SINGA
    user code (and SINGA's own tests) that catch ``AssertionError`` for a shape mismatch keep
    working; ``except ValueError`` works as well.
    """


class MissingKernelError(SingaError, NotImplementedError):
    """The device's backend has no kernel for an operator and no host fallback."""


class KernelError(SingaError, RuntimeError):
    """A backend kernel failed (build failure, out of resources, ...)."""


class GraphError(SingaError, RuntimeError):
    """Misuse of the computational graph (e.g. reading values while recording)."""


class CheckpointError(SingaError, ValueError):
    """A checkpoint is missing, malformed, hostile, or does not match the model."""


class HostFallbackWarning(UserWarning):
    """An op without a kernel on the device runs on the host (``BackendSpec.host_fallback``).

    Issued once per op and device, naming the op; ``Device.fallback_stats()`` counts the calls.
    Silence it with ``warnings.simplefilter("ignore", HostFallbackWarning)``.
    """
