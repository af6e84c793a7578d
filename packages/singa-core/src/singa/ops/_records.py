"""What the op records (:mod:`._elementwise`, :mod:`._reductions`, :mod:`._rearrangements`)
share.

:class:`Onnx`, the ONNX operator a record computes; :func:`dtype_names`, the dtypes a rendered
docstring names; :class:`RecordDoc`, the Operator classes' docstrings rendered on first read.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from .. import _dtype

__all__ = ["Onnx", "RecordDoc", "dtype_names"]


@dataclass(frozen=True)
class Onnx:
    """The ONNX operator (default domain) that computes what a record computes.

    op_type: its name. attrs: ``(ONNX attribute, record attribute)`` pairs, one per attribute
    of the record (HardSigmoid's gamma is ONNX's beta); ONNX's default of each is the
    record's. A rearrangement's pairs name the Operator's attribute instead, and the ONNX
    operand may be an input (Reshape's shape; see ``Rearrangement``). bools: which of the ONNX
    operator's tensors are bool, where singa holds 1/0 in the input's dtype: "" none, "out"
    the output (comparisons), "all" inputs and output (logic). The opsets that define
    ``op_type`` are onnx's schema's to say (``onnx.defs``), not the record's.
    """

    op_type: str
    attrs: tuple = ()
    bools: str = ""


@functools.cache  # a handful of dtype tuples (NUM, FHD), named in every docstring
def dtype_names(dtypes) -> str:
    """The dtype codes' names as docstrings list them: "float32, float64 or int32"."""
    names = [_dtype.name_of(d) for d in dtypes]
    return ", ".join(names[:-1]) + " or " + names[-1]


class RecordDoc:
    """A class's ``__doc__`` rendered by ``render()`` on first read, then kept.

    ``type.__doc__`` calls a descriptor found in the class's own dict, so ``cls.__doc__``,
    ``instance.__doc__``, ``help()``, ``inspect.getdoc`` and the reference site's tools all read
    the text, and an import that never reads it does not render it. The Operator classes built
    from the records hold one; functions cannot (a function's ``__doc__`` is a plain slot), so
    the wrappers' docstrings are rendered when the functions are made, from each record's
    ``example``, computed once.
    """

    __slots__ = ("_render", "_text")

    def __init__(self, render: Callable[[], str]):
        self._render = render
        self._text: str | None = None

    def __get__(self, obj, cls=None) -> str:
        if self._text is None:
            self._text = self._render()
        return self._text
