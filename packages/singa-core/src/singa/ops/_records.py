"""What the op records (:mod:`._elementwise`, :mod:`._reductions`, :mod:`._rearrangements`)
and the functions declared on their Operator classes (``singa.autograd.functions``) share.

:class:`Onnx`, the ONNX operator a record or an Operator computes; :func:`dtype_names`, the
dtypes a rendered docstring names; :class:`RecordDoc`, the Operator classes' docstrings
rendered on first read.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import _dtype

__all__ = ["Onnx", "RecordDoc", "dtype_names"]


@dataclass(frozen=True)
class Onnx:
    """The ONNX operator (default domain) that computes what a record or an Operator computes.

    op_type: its name. attrs: ``(ONNX operand, attribute)`` pairs. An elementwise record's
    pairs name the record's attributes (HardSigmoid's gamma is ONNX's beta), whose defaults
    are ONNX's. A rearrangement record's, and a declared function's
    (:class:`singa.autograd.functions.Function`), name the attribute the Operator keeps after
    its forward ran (``Transpose.perm``, ``Concat``'s checked ``ax``), and the ONNX operand may
    be an input (Reshape's shape, Tile's repeats: a constant int64 input where onnx's schema
    has an input of that name at the export opset, else an attribute). bools: which of the
    ONNX operator's tensors are bool, where singa holds 1/0 in the input's dtype: "" none,
    "out" the output (comparisons), "all" inputs and output (logic). convert: ``(ONNX
    operand, function)`` pairs, the function taking the Operator attribute's value to ONNX's
    (Transpose's negative axes counted from 0, Gather's index CTensor as an array). applies:
    ``applies(op)``, whether one ``op_type`` node computes this Operator instance (ONNX's
    SpaceToDepth is the DCR one only); None: every instance does. int64_out: ONNX's output is
    int64 where singa's is int32 (Shape, ArgMax), so a Cast to int32 follows. The opsets that
    define ``op_type`` are onnx's schema's to say (``onnx.defs``), not the record's.
    """

    op_type: str
    attrs: tuple = ()
    bools: str = ""
    convert: tuple = ()
    applies: Callable[[Any], bool] | None = None
    int64_out: bool = False


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
