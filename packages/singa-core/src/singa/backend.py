"""The public surface for backend authors: everything a hardware plugin needs, and nothing else.

A backend (built-in or third-party) imports from this module only; every name here is covered by
the versioning policy in ``docs/plugin-authoring.md`` (a removal or an incompatible change bumps
:data:`BACKEND_API_VERSION`; additions do not). Anything under ``singa._*`` or
``singa.*._*`` is private and may change in any release; the ``lint`` session enforces that no
package in ``packages/`` other than singa-core imports it.

What a backend is made of:

- a :class:`Device` subclass over the backend's native buffers (implement ``native``,
  ``native_to_numpy``, ``numpy_into_native``, ``synchronize``; optionally ``_seed``,
  ``_timed_call``, ``chain_compiler``);
- an :class:`Allocator` (``alloc``/``free``/``zero``, optionally ``sub`` for aliasing) that the
  device's :class:`MemPool` draws from; :class:`Block` is the lazily allocated memory a
  CTensor views;
- a kernel table ``{op name: kernel(ins, outs, attrs)}`` over the ops of :data:`OPS`
  (flags set with :func:`kernel_attrs`), optionally with fused kernels named as in
  :data:`FUSIONS`;
- a :class:`BackendSpec` returned from a ``singa_backends`` hook marked with :data:`hookimpl`.

Dtypes: ops and kernels name dtypes by SINGA's integer codes (``kFloat32`` ...);
:data:`NP_DTYPE` maps a code to its numpy dtype and :data:`ITEMSIZE` to its size in bytes.
"""

from __future__ import annotations

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
from ._spec import BACKEND_API_VERSION, BackendSpec, CommunicatorSpec
from .device import Device
from .errors import (
    DeviceMismatchError,
    DeviceUnavailableError,
    DtypeMismatchError,
    HostFallbackWarning,
    KernelError,
    MissingKernelError,
    ShapeError,
    SingaError,
)
from .hookspecs import hookimpl
from .memory import Allocator, Block, MemPool
from .ops import EMPTY, FUSIONS, OPS, ChainStep, ElementwiseChain, FusionDef, OpDef, kernel_attrs
from .ops._nn_ops import Conv2dGeometry, Pool2dGeometry, conv2d_geometry, pool2d_geometry

__all__ = [
    "BACKEND_API_VERSION",
    "DTYPE_NAME",
    "EMPTY",
    "FLOATS",
    "FUSIONS",
    "ITEMSIZE",
    "NP_DTYPE",
    "OPS",
    "Allocator",
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
    "HostFallbackWarning",
    "KernelError",
    "MemPool",
    "MissingKernelError",
    "OpDef",
    "Pool2dGeometry",
    "ShapeError",
    "SingaError",
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
]
