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
    "HyperparameterError",
    "ConfigError",
    "DistError",
    "CollectiveMismatchError",
    "CheckpointError",
    "OptimizerStateError",
    "IndexOutOfRangeError",
    "DataFileError",
    "OutOfMemoryError",
    "SingaONNXError",
    "ExtensionUnavailableError",
    "HostFallbackWarning",
]


class SingaError(Exception):
    """Base class of every SINGA error."""


class DeviceUnavailableError(SingaError, RuntimeError):
    """A device was requested whose backend is not installed, failed to load, or has no hardware."""


class PluginError(SingaError, RuntimeError):
    """A plugin failed to load or returned invalid records (raised in strict mode).

    Attributes
    ----------
    plugin : str
        The entry-point name of the plugin at fault; set on the errors that the plugin
        loader's guard (``PluginRegistry.call``) raises, absent on the others.
    call : str
        What the guard was calling (``"import"``, ``"hook"``, ``"create_device(0)"``, ...);
        set with ``plugin``.
    """

    # declared, not assigned: only the guard sets them, so other PluginErrors have neither
    plugin: str
    call: str


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


class DistError(SingaError):
    """A distributed operation failed (ranks disagree, a peer failed, bad arguments).
    ``singa.dist.DistError`` is this class."""


class CollectiveMismatchError(DistError, ValueError):
    """The ranks of a communicator made different calls at the same point: another
    operation, reduction or root, tensors of other shapes or dtypes, or a put whose get
    expects another dtype or size. Raised on every rank involved, naming both ranks' calls,
    before any data moves (so never a hang, a wrong value or a partial fill)."""


class HyperparameterError(SingaError, ValueError, TypeError):
    """An optimizer's or a schedule's argument is not a number (or a ``DecayScheduler``) in
    its valid range: a negative or NaN learning rate, ``beta_1`` outside [0, 1), ...

    The message names the argument, the value and the valid range. Also a ``ValueError``
    (PyTorch's type for these) and a ``TypeError`` (SINGA's type for a learning rate that is
    not a number), so code written for either keeps catching it.
    """


class ConfigError(SingaError, ValueError):
    """An environment variable of SINGA's registry (:mod:`singa.config`) holds a value it does
    not accept, e.g. ``SINGA_LOG_LEVEL=loud``.

    The message names the variable, the value and the values it accepts. Also a
    ``ValueError``, Python's type for a bad value, so ``except ValueError`` catches it.
    """


class CheckpointError(SingaError, ValueError):
    """A checkpoint is missing, malformed, hostile, or does not match the model."""


class OptimizerStateError(SingaError, LookupError):
    """An optimizer state cannot be matched to exactly one parameter: a name that several
    parameters carry was used to look up or load a state (each parameter tensor has its own).
    The message lists the parameters' shapes and the unique keys (``name#i``) to use."""


class IndexOutOfRangeError(SingaError, IndexError):
    """An index tensor (gather, embedding, scatter, class ids of a loss) holds a value outside
    the axis it indexes. Every backend raises it before reading or writing out of bounds."""


class DataFileError(SingaError, ValueError):
    """A data file (idx, pickle, gzip archive) is corrupt, truncated, hostile or too large."""


class OutOfMemoryError(SingaError, MemoryError):
    """A tensor or buffer larger than the device can ever hold was requested."""


class SingaONNXError(SingaError, ValueError):
    """An ONNX model is malformed, hostile, or uses ops/attributes singa-onnx does not support.

    The message names the node (or file) at fault and, for unsupported features, lists every
    one found in the model at once.
    """


class ExtensionUnavailableError(SingaError, ImportError):
    """An optional singa package (singa-onnx, singa-dist) is not installed or failed to import."""


class HostFallbackWarning(UserWarning):
    """An op without a kernel on the device runs on the host (``BackendSpec.host_fallback``).

    Issued once per op and device, naming the op; ``Device.fallback_stats()`` counts the calls.
    Silence it with ``warnings.simplefilter("ignore", HostFallbackWarning)``.
    """
