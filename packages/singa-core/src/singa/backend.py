"""The public surface for plugin authors: everything a backend or extension imports.

A backend or extension (built-in or third-party) imports from this module only; every name
here is covered by the versioning policy in ``docs/plugin-authoring.md`` (a removal or an
incompatible change bumps :data:`BACKEND_API_VERSION`; additions do not). Anything under
``singa._*`` or ``singa.*._*`` is private and may change in any release; the ``lint`` session
enforces that no package in ``packages/`` other than singa-core imports it.

What a backend is made of:

- a :class:`Device` subclass over the backend's native buffers (implement ``make_native``
  or ``native``, ``native_to_numpy``, ``numpy_into_native``, ``synchronize``; optionally
  ``_seed``, ``_timed_call``, ``chain_compiler``; per-device state such as scratch buffers
  through :meth:`Device.workspace`);
- an :class:`Allocator` (``alloc``/``free``/``zero``, optionally ``sub`` for aliasing) that the
  device's :class:`MemPool` draws from; :class:`Block` is the lazily allocated memory a
  CTensor views;
- a kernel table ``{op name: kernel}`` over the ops of :data:`OPS`, each value a callable
  ``kernel(ins, outs, attrs)`` or a :class:`Kernel` record of one with its dtypes,
  contiguity and graph-mode ``bind`` (:func:`kernel_attrs` builds the record as a
  decorator), optionally with fused kernels named as in :data:`FUSIONS`;
- a :class:`BackendSpec` returned from a ``singa_backends`` hook marked with :data:`hookimpl`
  (the hooks and their contract: :mod:`singa.hookspecs`); an extension returns
  :class:`CommunicatorSpec` records from ``singa_communicators``;
- optionally, graph-mode stages (:class:`GraphStage`, :func:`register_stage`; see
  :mod:`singa.graph`) that see the :class:`Plan` after ordering, after memory planning, or
  wrap its replay (a stream, a captured CUDA graph).

Discovery can be inspected and tested through :func:`registry` (what the installed plugins
provided, and which failed) and a fresh :class:`PluginRegistry` over chosen entry points
installed with :func:`set_registry`.

Dtypes: ops and kernels name dtypes by SINGA's integer codes (``kFloat32`` ...);
:data:`NP_DTYPE` maps a code to its numpy dtype and :data:`ITEMSIZE` to its size in bytes.
"""

from __future__ import annotations

from ._bounds import check_indices
from ._dtype import (
    FLOATS,
    ITEMSIZE,
    NP_DTYPE,
    kChar,
    kDouble,
    kFloat16,
    kFloat32,
    kInt,
    kUChar,
)
from ._dtype import (
    NAME as DTYPE_NAME,
)
from ._dtype import (
    code_of as dtype_code,
)
from ._dtype import (
    name_of as dtype_name,
)
from ._plugins import (
    KNOWN_BACKENDS,
    BackendEntry,
    PluginFailure,
    PluginRegistry,
    Provider,
    SingaPluginWarning,
    registry,
    set_registry,
)
from ._spec import BACKEND_API_VERSION, BackendSpec, CommunicatorSpec
from .device import Device
from .errors import (
    DeviceMismatchError,
    DeviceUnavailableError,
    DtypeMismatchError,
    HostFallbackWarning,
    IndexOutOfRangeError,
    KernelError,
    MissingKernelError,
    ShapeError,
    SingaError,
)
from .graph import GraphStage, Plan, check_plan, register_stage
from .hookspecs import hookimpl
from .memory import Allocator, Block, MemPool
from .ops import (
    EMPTY,
    FUSIONS,
    OPS,
    ChainStep,
    ElementwiseChain,
    FusionDef,
    Kernel,
    OpDef,
    kernel_attrs,
)
from .ops._nn_ops import Conv2dGeometry, Pool2dGeometry, conv2d_geometry, pool2d_geometry

__all__ = [
    "BACKEND_API_VERSION",
    "DTYPE_NAME",
    "EMPTY",
    "FLOATS",
    "FUSIONS",
    "ITEMSIZE",
    "KNOWN_BACKENDS",
    "NP_DTYPE",
    "OPS",
    "Allocator",
    "BackendEntry",
    "BackendSpec",
    "Block",
    "ChainStep",
    "CommunicatorSpec",
    "Conv2dGeometry",
    "Device",
    "DeviceMismatchError",
    "DeviceUnavailableError",
    "DtypeMismatchError",
    "ElementwiseChain",
    "FusionDef",
    "GraphStage",
    "HostFallbackWarning",
    "IndexOutOfRangeError",
    "Kernel",
    "KernelError",
    "MemPool",
    "MissingKernelError",
    "OpDef",
    "Plan",
    "PluginFailure",
    "PluginRegistry",
    "Pool2dGeometry",
    "Provider",
    "ShapeError",
    "SingaError",
    "SingaPluginWarning",
    "check_indices",
    "check_plan",
    "conv2d_geometry",
    "dtype_code",
    "dtype_name",
    "hookimpl",
    "kChar",
    "kDouble",
    "kFloat16",
    "kFloat32",
    "kInt",
    "kUChar",
    "kernel_attrs",
    "pool2d_geometry",
    "register_stage",
    "registry",
    "set_registry",
]
