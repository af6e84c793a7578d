"""Kernel records: a backend's kernel callable and what the dispatcher must know about it.

A kernel table maps op names to plain callables ``kernel(ins, outs, attrs)`` (the calling
convention is in :mod:`singa.ops._registry`) or to :class:`Kernel` records, which carry what
the dispatcher needs to know about the callable (:func:`kernel_attrs` builds one as a
decorator). ``Device._attach`` turns every entry into a record with :func:`as_kernel`: a plain
callable becomes ``Kernel(fn)``; a callable that carries the record's fields as function
attributes (the deprecated spelling) is read once into a record, with a DeprecationWarning
naming the :class:`Kernel` spelling. The fields:

- ``contiguous_inputs`` (bool): inputs must be row-major; the dispatcher materialises strided
  inputs first (and routes non-contiguous outputs through a temporary).
- ``dtypes`` (tuple of dtype codes): the dtypes this kernel supports (default: all of the op's
  ``dtypes``); the conformance kit tests exactly these.
- ``bind`` (callable ``bind(ins, outs, attrs) -> kernel | None``): specialisation for graph
  mode. When a recorded graph is prepared for replay, each step's kernel that has ``bind`` is
  called once with the native arrays and attributes every replay of that plan will pass (the
  same array objects each time: a plan's memory does not move, only the contents change). It
  returns a kernel with the usual signature specialised to exactly those arrays (shapes,
  strides, dtypes and buffers fixed: geometry computed, code path chosen, views and scratch
  sizes prepared once), which the replays call instead, or None to keep the general kernel.
  The bound kernel must give bitwise what the general one gives on the same arrays, whatever
  their contents; in a replay it runs inside the device's ``around_replay`` graph stages (the
  conformance kit's ``test_bound``, which checks it, calls it outside them, so it must not
  depend on them for correctness), and unlike a general kernel it may keep the arrays it was
  bound to.
- ``host_fallback`` (bool): set by core on the kernels it makes for the host fallback.

The record sits below the Device in the stack (``singa._device`` builds the dispatch table
from it), so it imports nothing but dtypes and errors.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from . import _dtype
from .errors import KernelError

__all__ = ["Kernel", "as_kernel", "kernel_attrs"]


@dataclass(eq=False)
class Kernel:
    """A backend's kernel for one op: the callable and what the dispatcher must know about it.

    Calling the record calls ``fn(ins, outs, attrs)``. The fields are described in this
    module's docstring; ``dtypes=None`` means every dtype of the op. A backend may hang its
    own attributes on a record (a diagnosis handle), as on a function; core reads only the
    fields.
    """

    fn: Callable
    dtypes: tuple | None = None
    contiguous_inputs: bool = False
    bind: Callable | None = None
    host_fallback: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.fn, Kernel):  # a record of a record: one record, outer fields win
            inner = self.fn
            self.fn = inner.fn
            self.dtypes = inner.dtypes if self.dtypes is None else self.dtypes
            self.contiguous_inputs = self.contiguous_inputs or inner.contiguous_inputs
            self.bind = inner.bind if self.bind is None else self.bind
            self.host_fallback = self.host_fallback or inner.host_fallback
        if not callable(self.fn):
            raise KernelError(f"Kernel(fn=...) needs a callable fn(ins, outs, attrs), got "
                              f"{type(self.fn).__name__}")
        if self.bind is not None and not callable(self.bind):
            raise KernelError(f"Kernel(bind=...) needs a callable bind(ins, outs, attrs) or "
                              f"None, got {type(self.bind).__name__}")
        if self.dtypes is not None:
            self.dtypes = tuple(_dtype.code_of(d) for d in self.dtypes)
        # what error messages and profiles call the kernel; a backend may rename it
        self.__name__ = getattr(self.fn, "__name__", type(self.fn).__name__)

    def __call__(self, ins, outs, attrs) -> None:
        self.fn(ins, outs, attrs)


_FIELDS = tuple(f.name for f in fields(Kernel) if f.name != "fn")
#: The deprecated kernel function attributes and the Kernel field each one is read into.
_LEGACY_ATTRS = {"dtypes": "dtypes", "contiguous_inputs": "contiguous_inputs",
                 "bind": "bind", "is_host_fallback": "host_fallback"}


def kernel_attrs(**flags: Any):
    """Decorator making a :class:`Kernel` record of a kernel function, e.g.
    ``@kernel_attrs(contiguous_inputs=True)`` or ``@kernel_attrs(dtypes=(kFloat32,))``.

    Applied to a record, it returns a copy with ``flags`` changed. The record's fields stay
    assignable (``k.bind = ...`` after the decorator), so a table built in steps works.
    """
    unknown = sorted(set(flags) - set(_FIELDS))
    if unknown:
        raise KernelError(f"kernel_attrs: unknown flag(s) {', '.join(unknown)}; the flags are "
                          f"{', '.join(_FIELDS)}")

    def deco(fn):
        if isinstance(fn, Kernel):
            return replace(fn, **flags)
        return Kernel(fn, **flags)

    return deco


def as_kernel(value: Any, op_name: str = "?", owner: str = "?") -> Kernel:
    """The :class:`Kernel` record of kernel-table entry ``value`` (``op_name`` of backend
    ``owner``, for the warning): a record as it is, a plain callable wrapped, and a callable
    carrying the record's fields as function attributes read into a record with a
    DeprecationWarning."""
    if isinstance(value, Kernel):
        return value
    found = {field_: getattr(value, attr) for attr, field_ in _LEGACY_ATTRS.items()
             if getattr(value, attr, None) is not None}
    if found:
        spelled = ", ".join(f"{k}={'...' if k == 'bind' else repr(v)}"
                            for k, v in found.items())
        warnings.warn(
            f"kernel {op_name!r} of backend {owner!r} carries its metadata as function "
            f"attributes ({', '.join(sorted(found))}), which is deprecated and stops working "
            f"with backend API version 2. Return a record instead: "
            f"singa.backend.Kernel(fn, {spelled}), or decorate the function with "
            f"@singa.backend.kernel_attrs(...)",
            DeprecationWarning, stacklevel=2)
    return Kernel(value, **found)
