"""The table of ONNX op handlers and the context they run in.

A handler turns one ONNX node into singa autograd calls. It receives the node's inputs as
singa Tensors (values computed at run time) or numpy arrays (values known without running the
model: initializers that are not parameters, Constant nodes, shapes), and returns its outputs
the same way. Handlers declare the attributes they understand so that every unsupported op or
attribute of a model is found before anything runs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import overload

import numpy as np
from singa import autograd, tensor
from singa.errors import ShapeError, SingaONNXError
from singa.ops import run_fused

__all__ = ["HANDLERS", "OpHandler", "Context", "Fused", "register", "onnx_to_np"]


class Fused(autograd.Operator):
    """Two ops as the device's fused kernel ``name`` (``singa.ops.run_fused``: inputs in the
    fused kernel's order, ``attrs`` its attributes), bitwise the two ops'. Inference only:
    the eager run uses it while ``autograd.training`` is off (no backward is recorded then;
    see ``backend.EAGER_FUSIONS``)."""

    def __init__(self, name: str, attrs: dict):
        super().__init__()
        self.fused = name
        self.attrs = attrs

    def forward(self, *xs):
        return run_fused(self.fused, list(xs), self.attrs)[0]

    def backward(self, dy):
        raise SingaONNXError(f"{self.fused} of an eager inference run has no backward pass "
                             "(it is used only while singa.autograd.training is off)")


@dataclass(frozen=True)
class OpHandler:
    """One ONNX op type: the function, the attributes it reads, and a value check.

    ``check(attrs) -> list[str]`` returns the attribute values it cannot honour;
    ``frozen_inputs`` are input positions whose initializers are state, not trainable
    parameters (batch-norm running statistics); ``static_inputs`` are positions read as
    host values (shapes, axes), which therefore must not be trainable either.
    """

    op_type: str
    fn: Callable
    attrs: frozenset
    check: Callable | None = None
    frozen_inputs: tuple = ()
    static_inputs: tuple = ()
    doc: str = field(default="", compare=False)


HANDLERS: dict[str, OpHandler] = {}

# attributes every op may carry without changing what it computes
_HARMLESS: frozenset[str] = frozenset()


def register(*op_types, attrs=(), check=None, frozen_inputs=(), static_inputs=()):
    """Decorator: register ``fn(ctx, attrs, *inputs)`` for ``op_types``."""

    def deco(fn):
        for op in op_types:
            HANDLERS[op] = OpHandler(op, fn, frozenset(attrs) | _HARMLESS, check,
                                     tuple(frozen_inputs), tuple(static_inputs),
                                     (fn.__doc__ or "").strip())
        return fn

    return deco


# singa stores ints as int32 and booleans as 0/1 floats (SINGA's NP_TYPE_TO_SINGA_SUPPORT_TYPE)
_TO_SINGA_NP = {
    np.dtype(np.float32): np.float32, np.dtype(np.float64): np.float32,
    np.dtype(np.float16): np.float32, np.dtype(np.bool_): np.float32,
    np.dtype(np.int64): np.int32, np.dtype(np.int32): np.int32, np.dtype(np.int16): np.int32,
    np.dtype(np.int8): np.int32, np.dtype(np.uint8): np.int32, np.dtype(np.uint16): np.int32,
    np.dtype(np.uint32): np.int32,
}


@functools.lru_cache(maxsize=64)
def onnx_to_np(elem_type: int):
    """numpy dtype of an ONNX TensorProto element type, or None when numpy has none (cached:
    every run converts its outputs to their declared types; bounded: types come from files)."""
    import onnx

    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return None


def singa_np_dtype(dt) -> type | None:
    """The numpy dtype singa holds values of numpy dtype ``dt`` in (None: unsupported)."""
    dt = np.dtype(dt)
    want = _TO_SINGA_NP.get(dt)  # the common case first: dtype.name costs ~4 us a call
    if want is None and dt.name == "bfloat16":  # ml_dtypes' bfloat16 widens exactly to
        return np.float32  # float32
    return want


class Context:
    """What a handler may use: the device, conversions, and per-node state."""

    def __init__(self, device, opset: int, node_name: str = "", op_type: str = "",
                 state: dict | None = None, max_elements: int = 1 << 28):
        self.device = device
        self.opset = opset
        self.node_name = node_name
        self.op_type = op_type
        self.state = state if state is not None else {}
        self.max_elements = max_elements
        self.in_types: list = []  # declared ONNX element types of the inputs, when known

    def budget(self, shape, what: str = "") -> None:
        """Refuse to create a tensor of ``shape`` past the element budget (hostile sizes).

        ``shape`` follows core's rule (:func:`singa.tensor.check_shape`: integers, not bools
        or floats, non-negative, a product numpy can index); ``what`` names where it came
        from for the message (``"input 'shape'"``).
        """
        dims = self.shape(shape, what or "output shape")
        n = math.prod(dims)
        if n > self.max_elements:
            raise self.error(f"{self.op_type} would create a tensor of shape {list(dims)} ({n} "
                             f"elements), over the limit of {self.max_elements} (pass "
                             "max_elements to prepare to allow more)")

    # ------------------------------------------------------- values from the model file
    # Shapes, axes, perms, pads and repeats come from attributes or operands a stranger's
    # file controls: each is checked here, once, with core's rule, so that a float, bool,
    # negative, huge or wrong-length value is a SingaONNXError naming the node and the value.
    _FIX = "the model is malformed: fix the value in the exporter, or re-export the model"

    def refuse(self, what: str, problem: str) -> SingaONNXError:
        """The error for a value the model file got wrong: names the node, the op, ``what``
        (``"attribute 'perm'"``, ``"input 'shape'"``) and the problem."""
        return self.error(f"{self.op_type} {what}: {problem}; {self._FIX}")

    def int_list(self, v, what: str, length: int | None = None) -> list[int] | None:
        """``v`` (an INTS attribute, a host array or a Tensor) as a list of Python ints.

        Integer dtypes and ints only: a float is refused, never truncated (3.9 is not 3), and
        so is a bool; ``length`` (when given) is the number of values ``v`` must hold.
        """
        if v is None:
            return None
        if isinstance(v, (tensor.Tensor, np.ndarray)):
            arr = self.host(v)
            if arr.dtype.kind not in "iu":
                raise self.refuse(what, f"must hold integers, got {arr.dtype} values "
                                   f"{arr.reshape(-1)[:8].tolist()}")
            vals = [int(i) for i in arr.reshape(-1)]
        else:
            seq = list(v) if isinstance(v, (list, tuple, range)) else [v]
            try:
                vals = [tensor.as_int(i, f"value {j}") for j, i in enumerate(seq)]
            except ShapeError as exc:
                raise self.refuse(what, f"{seq[:8]} ({exc})") from None
        if length is not None and len(vals) != length:
            raise self.refuse(what, f"holds {len(vals)} values {vals[:8]}, needs {length}")
        return vals

    def shape(self, v, what: str, *, infer: bool = False, size: int | None = None,
              length: int | None = None) -> tuple[int, ...]:
        """``v`` as a shape by core's rule (:func:`singa.tensor.check_shape`): non-negative
        ints whose product numpy can index; ``infer``: one -1 resolved against ``size``."""
        vals = self.int_list(v, what, length)
        try:
            return tensor.check_shape(vals, f"{self.op_type} {what}", infer=infer, size=size)
        except ShapeError as exc:
            raise self.error(f"{exc}; {self._FIX}") from None

    def axis(self, a, what: str, rank: int, *, inclusive: bool = False) -> int:
        """One axis in [-rank, rank) (``inclusive``: [-rank, rank], Flatten's range) as a
        non-negative int; out-of-range axes are refused, never wrapped."""
        try:
            a = tensor.as_int(a, "the axis")
        except ShapeError as exc:
            raise self.refuse(what, str(exc)) from None
        hi = rank + 1 if inclusive else rank
        if not -rank <= a < hi:
            raise self.refuse(what, f"axis {a} is out of range [{-rank}, {hi - 1}] (rank "
                               f"{rank})")
        return a + rank if a < 0 else a

    def axes(self, v, what: str, rank: int) -> list[int] | None:
        """Distinct axes in [-rank, rank) as non-negative ints, in the order given (None when
        ``v`` is None); a repeated axis is refused."""
        vals = self.int_list(v, what)
        if vals is None:
            return None
        out = [self.axis(a, what, rank) for a in vals]
        if len(set(out)) != len(out):
            raise self.refuse(what, f"axes {vals} name an axis twice (rank {rank})")
        return out

    # --------------------------------------------------------------- conversions
    def error(self, msg: str) -> SingaONNXError:
        """A [`SingaONNXError`][singa.errors.SingaONNXError] whose message names this node."""
        return SingaONNXError(f"node {self.node_name!r}: {msg}")

    def singa_array(self, v) -> np.ndarray:
        """``v`` as the contiguous numpy array singa holds it in (see :func:`singa_np_dtype`)."""
        arr = np.asarray(v)
        want = singa_np_dtype(arr.dtype)
        if want is None:
            raise self.error(f"dtype {arr.dtype} is not supported by singa")
        if want is np.int32 and arr.size and (arr.max() > 2**31 - 1 or arr.min() < -2**31):
            # huge int64 sentinels (INT64_MAX "to the end") only make sense as host values
            arr = np.clip(arr, -2**31, 2**31 - 1)
        return np.ascontiguousarray(arr.astype(want, copy=False))

    # None passes through (an omitted optional input), anything else becomes a Tensor
    @overload
    def tensor(self, v: None, like: tensor.Tensor | None = None) -> None: ...
    @overload
    def tensor(self, v: object, like: tensor.Tensor | None = None) -> tensor.Tensor: ...

    def tensor(self, v, like=None):
        """``v`` as a singa Tensor on the device (numpy values are copied in).

        ``like``: a Tensor whose dtype ``v`` is cast to (ONNX requires matching operand types;
        singa may hold them differently, e.g. a bool constant next to a float tensor).
        """
        if v is None:
            return None
        if isinstance(v, tensor.Tensor):
            t = v
        else:
            t = tensor.from_numpy(self.singa_array(v), self.device)
            t.requires_grad = False
            t.stores_grad = False
        if like is not None and t.dtype != like.dtype:
            t = autograd.cast(t, like.dtype)
        return t

    # None passes through (an omitted optional input), anything else becomes an array
    @overload
    def host(self, v: None) -> None: ...
    @overload
    def host(self, v: object) -> np.ndarray: ...

    def host(self, v):
        """``v`` as a numpy array (reads a Tensor back from the device)."""
        if v is None:
            return None
        if isinstance(v, tensor.Tensor):
            return tensor.to_numpy(v)
        return np.asarray(v)

    def ints(self, v, what: str = "operand") -> list[int] | None:
        """``v`` as a list of ints (integer dtypes only: see :meth:`int_list`)."""
        return self.int_list(v, what)

    @staticmethod
    def is_host(v) -> bool:
        """Whether ``v`` is a host value (None or not a singa Tensor), e.g. a constant folded on
        the host.
        """
        return v is None or not isinstance(v, tensor.Tensor)


def shape_of(v) -> tuple:
    """The shape of a Tensor or array as a tuple."""
    return tuple(v.shape)
