"""``singa.tensor``: SINGA's Tensor and the module-level tensor functions.

A :class:`Tensor` wraps a :class:`CTensor` (``t.data``) with autograd attributes
(``requires_grad``, ``stores_grad``, ``creator``, ``name``). Arithmetic on Tensors is not
recorded by autograd (use ``singa.autograd`` functions for that), exactly as in SINGA.
"""

from __future__ import annotations

import itertools
import re
import typing
from collections.abc import Callable
from numbers import Number

import numpy as np

from . import _dtype, _math
from ._ctensor import CTensor
from ._ctensor import host_array as _host_array
from ._device_api import get_default_device, get_device
from ._shapes import as_int, check_shape  # the shape rule, public for extensions
from .errors import DeviceMismatchError, DtypeMismatchError, ShapeError
from .ops._elementwise import BINARY as _BINARY
from .ops._elementwise import UNARY as _UNARY

__all__ = [  # and the elementwise functions built below from the op records
    "CTensor", "PlaceHolder", "Tensor", "float16", "float32", "float64", "int32", "kFloat16",
    "kFloat32", "kInt", "add_column", "add_row", "as_int", "average", "axpy", "bernoulli",
    "check_shape", "concatenate", "contiguous", "copy_data_to_from", "copy_from_numpy", "einsum",
    "from_numpy", "from_raw_tensor", "from_raw_tensors", "gaussian", "mult", "ones", "ones_like",
    "pow", "product", "random", "repeat", "reshape", "sizeof", "softmax", "sum", "sum_columns",
    "sum_rows", "tensordot", "to_host", "to_numpy", "transpose", "uniform", "zeros", "zeros_like",
]

float32 = kFloat32 = _dtype.kFloat32
float16 = kFloat16 = _dtype.kFloat16
int32 = kInt = _dtype.kInt
float64 = _dtype.kDouble

_DUMMY_RE = re.compile(r"^Dummy#\d+$")
_counter = itertools.count()


def _resolve_device(device):
    if device is None:
        return get_default_device()
    return get_device(device)


class Tensor:
    """A multi-dimensional array on a device, with autograd bookkeeping.

    ``Tensor(shape=(), device=None, dtype=float32, data=None, requires_grad=True,
    stores_grad=False, creator=None, name=None)``; ``data`` may be a numpy array (copied in,
    cast to ``dtype``) or a CTensor (wrapped). Without data the tensor is uninitialised and reads
    as zeros.
    """

    tensor_count = 0
    __hash__ = None  # type: ignore[assignment]  # unhashable: == is elementwise; key by id()

    if typing.TYPE_CHECKING:
        # the arithmetic and comparison operators, set on the class from the _math functions
        # after its definition (the loop at the end of this module)
        __add__: Callable[..., Tensor]
        __sub__: Callable[..., Tensor]
        __mul__: Callable[..., Tensor]
        __truediv__: Callable[..., Tensor]
        __pow__: Callable[..., Tensor]
        __radd__: Callable[..., Tensor]
        __rsub__: Callable[..., Tensor]
        __rmul__: Callable[..., Tensor]
        __rtruediv__: Callable[..., Tensor]
        __rpow__: Callable[..., Tensor]
        __iadd__: Callable[..., Tensor]
        __isub__: Callable[..., Tensor]
        __imul__: Callable[..., Tensor]
        __itruediv__: Callable[..., Tensor]
        __lt__: Callable[..., Tensor]
        __le__: Callable[..., Tensor]
        __gt__: Callable[..., Tensor]
        __ge__: Callable[..., Tensor]
        __div__: Callable[..., Tensor]
        __rdiv__: Callable[..., Tensor]
        __idiv__: Callable[..., Tensor]

    def __init__(self, shape=(), device=None, dtype=float32, data=None, requires_grad=True,
                 stores_grad=False, creator=None, name=None):
        if isinstance(data, CTensor):
            if device is not None and _resolve_device(device) is not data.dev:
                raise DeviceMismatchError(
                    f"Tensor(data=<CTensor on {data.dev.name}>, device="
                    f"{_resolve_device(device).name}): the CTensor's device must match; move "
                    "it first with ct.ToDevice(device) or omit device="
                )
            ct = data
        elif data is not None:
            dev = _resolve_device(device)
            arr = np.asarray(data.to_numpy() if isinstance(data, Tensor) else data)
            if arr.dtype == np.float64 and dtype == float32:
                arr = arr.astype(np.float32)
            ct = CTensor._new(tuple(arr.shape), dev, _dtype.code_of(dtype))
            ct.copy_from_numpy(arr)
        else:
            if isinstance(shape, int):
                shape = (shape,)
            ct = CTensor(shape, _resolve_device(device), dtype)
        self.data = ct
        self.requires_grad = requires_grad
        self.stores_grad = stores_grad
        self._creator = creator
        self._name = name
        Tensor.tensor_count += 1

    @classmethod
    def _wrap(cls, ct: CTensor, requires_grad=True, stores_grad=False, creator=None,
              name=None) -> Tensor:
        """Wrap a CTensor without checks (hot path of every op)."""
        t = object.__new__(cls)
        t.data = ct
        t.requires_grad = requires_grad
        t.stores_grad = stores_grad
        t._creator = creator
        t._name = name
        return t

    # ------------------------------------------------------------------ attributes
    @property
    def shape(self) -> tuple:
        return self.data.dims

    @property
    def device(self):
        return self.data.dev

    @property
    def dtype(self) -> int:
        return self.data.dtype_code

    @property
    def name(self) -> str:
        if self._name is None:
            self._name = f"Dummy#{next(_counter)}"
        return self._name

    @name.setter
    def name(self, value):
        self._name = value

    @property
    def creator(self):
        c = self._creator
        if c is None:
            from .autograd import Dummy

            c = self._creator = Dummy(self)
        return c

    @creator.setter
    def creator(self, op):
        self._creator = op

    # ------------------------------------------------------------------ introspection
    def is_dummy(self) -> bool:
        """Whether the name is ``Dummy#<n>``, the name of a placeholder created without one."""
        return bool(_DUMMY_RE.match(self.name))

    def ndim(self) -> int:
        """The number of dimensions, len(self.shape)."""
        return len(self.data.dims)

    def is_empty(self) -> bool:
        """Whether the tensor is 0-dimensional (``ndim() == 0``)."""
        return self.ndim() == 0

    def is_transpose(self) -> bool:
        """Whether the data is a non-contiguous (strided, e.g. transposed) view."""
        return not self.data.contig

    def size(self) -> int:
        """The number of elements, the product of the shape."""
        return self.data.size

    def memsize(self) -> int:
        """The size of the data in bytes, size() times the dtype's item size."""
        return self.data.MemSize()

    def __repr__(self) -> str:
        return f"{np.array2string(to_numpy(self))}, {_dtype.name_of(self.dtype)}"

    def __array__(self, dtype=None, copy=None):
        arr = to_numpy(self)
        return arr if dtype is None else arr.astype(dtype)

    # ------------------------------------------------------------------ views and copies
    def _like(self, ct: CTensor) -> Tensor:
        return Tensor._wrap(ct, self.requires_grad, self.stores_grad)

    def transpose(self, axes=None) -> Tensor:
        """A strided view with permuted axes (no copy)."""
        return self._like(_math.transpose(self.data, axes))

    def T(self) -> Tensor:
        """The transpose, axes reversed (a strided view, no copy)."""
        return self.transpose()

    def reshape(self, shape) -> Tensor:
        """A tensor of the new shape sharing data when contiguous (materialised otherwise)."""
        return self._like(_math.reshape(self.data, shape))

    def contiguous(self) -> Tensor:
        """A tensor of the same values laid out row-major (a copy if strided)."""
        return self._like(_math.contiguous(self.data))

    def reset_like(self, t: Tensor) -> None:
        """Replace the data with a new, uninitialised block of t's shape, device and dtype.

        Parameters
        ----------
        t : Tensor
            The template.
        """
        self.data = CTensor._new(t.shape, t.device, t.dtype)

    def clone(self) -> Tensor:
        """A deep copy: a new data block with the same values, shape and dtype."""
        return self._like(_math.copy(self.data))

    def deepcopy(self) -> Tensor:
        """The same as :meth:`clone`."""
        return self.clone()

    def __deepcopy__(self, memo):
        t = self.clone()
        t._name = self._name
        return t

    def copy(self) -> Tensor:
        """A shallow copy: a new tensor object viewing the same data block (SINGA's CTensor copy
        constructor), so values are shared but in-place conversions of one (to_type,
        to_device) leave the other alone."""
        ct = self.data
        return self._like(ct._view_as(ct.dims, ct.strides))

    def repeat(self, repeats, axis) -> Tensor:
        """numpy.repeat: each element repeated along ``axis``.

        Parameters
        ----------
        repeats : int or sequence of int
            Repeats of each element (one count, or one per element along axis).
        axis : int or None
            None flattens first.

        Returns
        -------
        Tensor
            A new tensor, this dtype.
        """
        return self._like(_math.repeat(self.data, repeats, axis))

    def __getitem__(self, keys) -> Tensor:
        """Slices per axis (ints keep the axis with size 1, as in SINGA); returns a copy."""
        if not isinstance(keys, tuple):
            keys = (keys,)
        if len(keys) > len(self.shape):
            raise IndexError(f"too many indices ({len(keys)}) for a {len(self.shape)}-D tensor")
        starts, stops, steps = [], [], []
        for ax, key in enumerate(keys):
            n = self.shape[ax]
            if isinstance(key, (int, np.integer)):
                k = int(key) + (n if key < 0 else 0)
                if not 0 <= k < n:
                    raise IndexError(f"index {key} is out of range for axis {ax} of size {n}")
                starts.append(k)
                stops.append(k + 1)
                steps.append(1)
            elif isinstance(key, slice):
                start, stop, step = key.indices(n)
                starts.append(start)
                stops.append(stop)
                steps.append(step)
            else:
                raise TypeError(f"unsupported index {key!r}; use ints and slices")
        return self._like(_math.copy(_math.slice_view(self.data, starts, stops, steps)))

    # ------------------------------------------------------------------ dtype and placement
    def as_type(self, dtype) -> Tensor:
        """A copy converted to ``dtype`` (tensor.float32/float16/int32, 'int', 'float')."""
        if isinstance(dtype, str) and dtype not in ("int", "float"):
            raise TypeError(f"as_type: unsupported dtype string {dtype!r}; use 'int' or 'float'")
        try:
            code = _dtype.code_of(dtype)
        except DtypeMismatchError as exc:
            raise TypeError(str(exc)) from None
        return self._like(_math.as_type(self.data, code))

    def to_type(self, dtype) -> Tensor:
        """Convert in place."""
        self.data.ToType(dtype)
        return self

    def to_device(self, device) -> Tensor:
        """Move to ``device`` in place."""
        self.data.ToDevice(get_device(device))
        return self

    def to_host(self) -> Tensor:
        """Move the data to the host (CPU) device in place; returns this tensor."""
        self.data.ToHost()
        return self

    def to_numpy(self) -> np.ndarray:
        """Copy the values to a numpy array of this shape and dtype (see :func:`to_numpy`)."""
        return to_numpy(self)

    def l1(self) -> float:
        """Mean absolute value (SINGA's l1)."""
        return _math.l1(self.data)

    def l2(self) -> float:
        """Euclidean norm divided by the size (SINGA's l2)."""
        return _math.l2(self.data)

    # ------------------------------------------------------------------ fills
    def set_value(self, x, inplace=True) -> Tensor:
        """Fill this tensor in place with the number x.

        Parameters
        ----------
        x : float
            The value of every element.
        inplace : bool, default True
            Must be True (as in SINGA).

        Returns
        -------
        Tensor
            This tensor.

        Raises
        ------
        NotImplementedError
            inplace is False.
        """
        if not inplace:
            raise NotImplementedError("set_value(inplace=False) is not supported (as in SINGA)")
        _math.set_value(self.data, x)
        return self

    def gaussian(self, mean, std, inplace=True) -> Tensor:
        """Fill this tensor in place with normal samples N(mean, std^2).

        Parameters
        ----------
        mean : float
            Mean.
        std : float
            Standard deviation.
        inplace : bool, default True
            Must be True (as in SINGA).

        Returns
        -------
        Tensor
            This tensor.

        Raises
        ------
        NotImplementedError
            inplace is False.
        """
        if not inplace:
            raise NotImplementedError("gaussian(inplace=False) is not supported (as in SINGA)")
        _math.gaussian(self.data, mean, std)
        return self

    def uniform(self, low, high, inplace=True) -> Tensor:
        """Fill this tensor in place with uniform samples on [low, high).

        Parameters
        ----------
        low, high : float
            The bounds.
        inplace : bool, default True
            Must be True (as in SINGA).

        Returns
        -------
        Tensor
            This tensor.

        Raises
        ------
        NotImplementedError
            inplace is False.
        """
        if not inplace:
            raise NotImplementedError("uniform(inplace=False) is not supported (as in SINGA)")
        _math.uniform(self.data, low, high)
        return self

    def bernoulli(self, p, inplace=True) -> Tensor:
        """Fill this tensor in place with Bernoulli samples, 1 with probability p and 0
        otherwise.

        Parameters
        ----------
        p : float
            Probability of a 1.
        inplace : bool, default True
            Must be True (as in SINGA).

        Returns
        -------
        Tensor
            This tensor.

        Raises
        ------
        NotImplementedError
            inplace is False.
        """
        if not inplace:
            raise NotImplementedError("bernoulli(inplace=False) is not supported (as in SINGA)")
        _math.bernoulli(self.data, p)
        return self

    def copy_from_numpy(self, np_array, offset=0) -> None:
        """Copy values from a numpy array of the same size (cast to this dtype)."""
        self.data.copy_from_numpy(np_array, offset)

    def copy_data(self, t: Tensor) -> None:
        """Copy t's values into this tensor's data (same number of elements).

        Parameters
        ----------
        t : Tensor
            The source; shape may differ, size may not.

        Raises
        ------
        ShapeError
            The sizes differ.
        """
        if t.size() != self.size():
            raise ShapeError(f"copy_data: sizes differ ({t.shape} vs {self.shape})")
        _math.copy_into(self.data, t.data)

    def copy_from(self, t) -> None:
        """Copy values from a Tensor (:meth:`copy_data`) or a numpy array
        (:meth:`copy_from_numpy`).

        Parameters
        ----------
        t : Tensor or numpy.ndarray
            The source, of this tensor's size.

        Raises
        ------
        TypeError
            t is neither.
        """
        if isinstance(t, Tensor):
            self.copy_data(t)
        elif isinstance(t, np.ndarray):
            self.copy_from_numpy(t)
        else:
            raise TypeError(f"copy_from expects a Tensor or numpy array, got {type(t).__name__}")

    # SINGA's deprecated in-place row/column methods (add_column, div_row, ...) are built
    # below from one table, after the module functions they share

    # ------------------------------------------------------------------ operators
    def _operand(self, x):
        """(lhs CTensor, rhs CTensor-or-scalar) with SINGA's int/float scalar promotion."""
        if isinstance(x, Tensor):
            return self.data, x.data
        if isinstance(x, (Number, np.number)):
            if self.data.dtype_code == _dtype.kInt and isinstance(x, (float, np.floating)):
                return _math.as_type(self.data, _dtype.kFloat32), float(x)
            return self.data, x
        raise TypeError(f"unsupported operand type {type(x).__name__} for Tensor arithmetic")

    def _binop(self, fn, x) -> Tensor:
        a, b = self._operand(x)
        return Tensor._wrap(fn(a, b))

    def __floordiv__(self, x):
        return Tensor._wrap(_math.floor(self._binop(_math.div, x).data))

    def __matmul__(self, x):
        return mult(self, x)

    def __neg__(self):
        return Tensor._wrap(_math.neg(self.data))

    def _reflected(self, fn_scalar, x):
        if not isinstance(x, (Number, np.number)):
            return NotImplemented
        a, b = self._operand(x)
        return Tensor._wrap(fn_scalar(a, b))

    def _inplace(self, fn, x) -> Tensor:
        if isinstance(x, Tensor):
            fn(self.data, x.data)
        elif isinstance(x, (Number, np.number)):
            # numbers.Number declares no __float__; the values here are real numbers
            fn(self.data, x if self.data.dtype_code == _dtype.kInt else float(x))  # type: ignore[arg-type]
        else:
            raise TypeError(f"unsupported operand type {type(x).__name__} for Tensor arithmetic")
        return self

    def _compare(self, fn, x):
        r = self._binop(fn, x).data
        if r.dtype_code == _dtype.kInt:
            r = _math.as_type(r, _dtype.kFloat32)
        return Tensor._wrap(r)

    def __eq__(self, x):
        if x is None:
            return False
        return self._compare(_math.eq, x)

    def __ne__(self, x):
        if x is None:
            return True
        return self._compare(_math.ne, x)


def _operator_method(dunder: str, apply, fn):
    def method(self, x):
        return apply(self, fn, x)

    method.__name__, method.__qualname__ = dunder, f"Tensor.{dunder}"
    method.__doc__ = f"``{dunder}``: {fn.__name__} of the tensor and x (a tensor or number)."
    return method


# Python's arithmetic and comparison operators: how the method applies the _math function
# (Tensor._binop: a new tensor; _reflected: number (op) tensor; _inplace: into self;
# _compare: a float32 1/0 tensor)
for _apply, _methods in (
        (Tensor._binop, {"__add__": _math.add, "__sub__": _math.sub, "__mul__": _math.mul,
                         "__truediv__": _math.div, "__pow__": _math.pow}),
        (Tensor._reflected, {"__radd__": _math.add, "__rsub__": _math.rsub,
                             "__rmul__": _math.mul, "__rtruediv__": _math.rdiv,
                             "__rpow__": _math.rpow}),
        (Tensor._inplace, {"__iadd__": _math.iadd, "__isub__": _math.isub,
                           "__imul__": _math.imul, "__itruediv__": _math.idiv}),
        (Tensor._compare, {"__lt__": _math.lt, "__le__": _math.le, "__gt__": _math.gt,
                           "__ge__": _math.ge})):
    for _dunder, _fn in _methods.items():
        setattr(Tensor, _dunder, _operator_method(_dunder, _apply, _fn))
Tensor.__div__ = Tensor.__truediv__
Tensor.__rdiv__ = Tensor.__rtruediv__
Tensor.__idiv__ = Tensor.__itruediv__

PlaceHolder = Tensor


# ---------------------------------------------------------------------- conversion
def from_numpy(np_array, dev=None) -> Tensor:
    """A Tensor with the array's values; float64 becomes float32, other integers and bool
    int32, big-endian arrays native. Values that do not fit (an int64 past int32's range)
    raise ShapeError instead of wrapping."""
    arr = np.asarray(np_array)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.dtype == np.float64:
        arr = _host_array(arr, np.dtype(np.float32), "from_numpy").astype(np.float32)
    elif arr.dtype.kind in "iub" and arr.dtype != np.int32:
        arr = _host_array(arr, np.dtype(np.int32), "from_numpy").astype(np.int32)
    if arr.dtype not in (np.float32, np.float16, np.int32):
        raise TypeError(
            f"from_numpy: unsupported dtype {arr.dtype}; SINGA tensors hold float32, float16 "
            "or int32 (convert with arr.astype(np.float32))"
        )
    return Tensor(data=arr, device=dev, dtype=_dtype.code_of(arr.dtype))


def to_numpy(t: Tensor) -> np.ndarray:
    """Copy the tensor's values to a numpy array of its shape and dtype."""
    return t.data.to_numpy()


def to_host(t: Tensor) -> Tensor:
    """A host (CPU) copy of ``t``."""
    return Tensor._wrap(_math.to_device(t.data, t.device.host()), t.requires_grad, t.stores_grad)


def from_raw_tensor(t: CTensor) -> Tensor:
    """Wrap a CTensor (the data layer's tensor) in a Tensor, sharing its data."""
    return Tensor._wrap(t)


def from_raw_tensors(tt) -> list:
    """Wrap each CTensor of ``tt`` in a Tensor (see :func:`from_raw_tensor`)."""
    return [from_raw_tensor(t) for t in tt]


def _call_singa_func(_singa_func, *args) -> Tensor:
    return Tensor._wrap(_singa_func(*args))


def copy_from_numpy(data: CTensor, np_array) -> None:
    """Copy a numpy array's values into the CTensor ``data`` (same size; cast to its dtype)."""
    data.copy_from_numpy(np_array)


# ---------------------------------------------------------------------- creation
def zeros_like(t: Tensor) -> Tensor:
    """A tensor of t's shape, device and dtype filled with 0."""
    return Tensor(t.shape, t.device, t.dtype).set_value(0)


def ones_like(t: Tensor) -> Tensor:
    """A tensor of t's shape, device and dtype filled with 1."""
    return Tensor(t.shape, t.device, t.dtype).set_value(1)


def zeros(shape, device=None) -> Tensor:
    """A float32 tensor of ``shape`` filled with 0.

    Parameters
    ----------
    shape : sequence of int
        The shape.
    device : Device, optional
        Default: the default device.
    """
    return Tensor(shape, device).set_value(0.0)


def ones(shape, device=None) -> Tensor:
    """A float32 tensor of ``shape`` filled with 1.

    Parameters
    ----------
    shape : sequence of int
        The shape.
    device : Device, optional
        Default: the default device.
    """
    return Tensor(shape, device).set_value(1.0)


def random(shape, device=None) -> Tensor:
    """Uniform values on [0, 1)."""
    return Tensor(shape, device).uniform(0.0, 1.0)


# ---------------------------------------------------------------------- shape and layout
def product(shape) -> int:
    """The product of the dimensions of ``shape`` (1 for an empty shape)."""
    p = 1
    for d in shape:
        p *= d
    return p


def sizeof(dtype) -> int:
    """The size in bytes of one element of ``dtype`` (a SINGA dtype code or numpy dtype)."""
    return _dtype.ITEMSIZE[_dtype.code_of(dtype)]


def contiguous(t: Tensor) -> Tensor:
    """t laid out row-major (:meth:`Tensor.contiguous`)."""
    return t.contiguous()


def reshape(t: Tensor, shape) -> Tensor:
    """t reshaped to ``shape`` (:meth:`Tensor.reshape`)."""
    return t.reshape(shape)


def transpose(t: Tensor, axes=None) -> Tensor:
    """t with permuted axes, a strided view (:meth:`Tensor.transpose`); axes None reverses them."""
    return t.transpose(axes)


def concatenate(tensors, axis) -> Tensor:
    """Join tensors along ``axis`` into a new tensor.

    Parameters
    ----------
    tensors : sequence of Tensor
        Equal shapes except along axis, one dtype.
    axis : int
        The axis joined.

    Returns
    -------
    Tensor
        Its size along axis is the sum of the inputs'.
    """
    return Tensor._wrap(_math.concat([t.data for t in tensors], axis))


def repeat(t: Tensor, repeats, axis=None) -> Tensor:
    """numpy.repeat of t (:meth:`Tensor.repeat`); axis None flattens first."""
    return Tensor._wrap(_math.repeat(t.data, repeats, axis))


def copy_data_to_from(dst: Tensor, src: Tensor, size: int, dst_offset=0, src_offset=0) -> None:
    """Copy ``size`` elements from ``src`` (at src_offset) to ``dst`` (at dst_offset).

    Offsets count elements of the flattened tensors; the devices may differ.
    """
    d, s = dst.data, src.data
    if src_offset + size > s.size or dst_offset + size > d.size:
        raise ShapeError(
            f"copy_data_to_from: {size} elements at offsets src={src_offset}, dst={dst_offset} "
            f"exceed the tensors ({s.size} and {d.size} elements)"
        )
    sv = _math.slice_view(_math.reshape(s, (s.size,)), [src_offset], [src_offset + size])
    if s.dev is not d.dev:
        sv = _math.to_device(sv, d.dev)
    if not d.contig:
        raise ShapeError("copy_data_to_from: the destination must be contiguous")
    dv = _math.slice_view(d._view_as((d.size,), (1,)), [dst_offset], [dst_offset + size])
    if sv.dtype_code != dv.dtype_code:
        sv = _math.as_type(sv, dv.dtype_code)
    _math.copy_into(dv, sv)


# ---------------------------------------------------------------------- math
def _ret(ret, ct):
    if ret is None:
        return Tensor._wrap(ct)
    ret.data = ct
    return ret


def pow(t: Tensor, x, out=None) -> Tensor:  # noqa: A001
    """t ** x elementwise; x is a number or a tensor."""
    b = x.data if isinstance(x, Tensor) else x
    if out is not None:
        _math.pow(t.data, b, out=out.data)
        return out
    return Tensor._wrap(_math.pow(t.data, b))


def _unary(decl):
    fn = getattr(_math, decl.name)

    def function(t: Tensor) -> Tensor:
        return Tensor._wrap(fn(t.data))

    function.__doc__ = decl.doc("tensor", arg="t", kind="Tensor")
    return function


def _compare(decl):
    fn = getattr(_math, decl.name)

    def function(t: Tensor, x) -> Tensor:
        return t._compare(fn, x)

    function.__doc__ = decl.doc("tensor", ("t", "x"), "Tensor").replace(
        "    y, of the broadcast shape.", "    y, of the broadcast shape, float32 (1/0).")
    return function


def _arith(decl):
    fn = getattr(_math, decl.name)

    def function(lhs: Tensor, rhs, ret: Tensor | None = None) -> Tensor:
        a, b = lhs._operand(rhs)
        if ret is None:
            return Tensor._wrap(fn(a, b))
        fn(a, b, out=ret.data)
        return ret

    function.__doc__ = decl.doc("tensor", ("lhs", "rhs"), "Tensor", out=(
        "ret : Tensor, optional\n    Written with y (in place) instead of a new tensor.\n"))
    return function


# abs, exp, ..., relu; add, sub, eltwise_mult, div; lt, le, gt, ge, eq: the records of the
# elementwise tables that SINGA's tensor module exports, named by the record
_FUNCTIONS = {
    **{decl.name: _unary(decl) for decl in _UNARY.values() if decl.tensor},
    **{decl.tensor: (_compare if decl.grad is None else _arith)(decl)
       for decl in _BINARY.values() if decl.tensor},
}
for _name, _function in _FUNCTIONS.items():
    _function.__name__ = _function.__qualname__ = _name
globals().update(_FUNCTIONS)
__all__ += sorted(_FUNCTIONS)


def axpy(alpha, x: Tensor, y: Tensor) -> Tensor:
    """y += alpha * x; returns y."""
    _math.axpy(alpha.data if isinstance(alpha, Tensor) else alpha, x.data, y.data)
    return y


def mult(A: Tensor, B: Tensor, C: Tensor | None = None, alpha=1.0, beta=0.0) -> Tensor:
    """Matrix product: GEMV, GEMM, or batched GEMM (3-D/4-D, broadcasting).

    With ``C`` it computes C = alpha * A @ B + beta * C in place and returns C.
    """
    if C is None:
        out = _math.matmul(A.data, B.data)
        if alpha != 1.0:
            out = _math.mul(out, float(alpha))
        return Tensor._wrap(out)
    if A.ndim() == 2 and B.ndim() == 2:
        _math.gemm(A.data, B.data, C.data, alpha, beta, out=C.data)
        return C
    prod = _math.matmul(A.data, B.data)
    if prod.dims != C.shape:
        raise ShapeError(f"mult: A @ B has shape {prod.dims} but C has shape {C.shape}")
    _math.imul(C.data, float(beta))
    _math.axpy(float(alpha), prod, C.data)
    return C


# ---------------------------------------------------------------------- reductions
def sum(t: Tensor, axis=None, out=None) -> Tensor:  # noqa: A001
    """Sum of the elements over ``axis`` (None: all; an int; or a tuple of ints), a Tensor.

    As in SINGA (a ``tensordot`` with a ones tensor), the summed axes are removed, and a sum
    over every axis (``axis=None``, or all axes named) is a Tensor of shape (1, 1); read the
    number with ``tensor.to_numpy(s)`` or ``s.to_numpy().item()``. ``out``, when given, must
    have the result's shape.
    """
    ct = _math.sum(t.data, axis)
    if not ct.dims:
        ct = _math.reshape(ct, (1, 1))
    if out is not None and tuple(out.shape) != ct.dims:
        raise ShapeError(f"tensor.sum: out has shape {tuple(out.shape)} but the sum has shape "
                         f"{ct.dims}; pass an out of that shape or omit it")
    return _ret(out, ct)


def average(t: Tensor, axis=None):
    """Mean: a float for 1-D input; otherwise a Tensor averaged over ``axis`` (default 0)."""
    if t.ndim() <= 1:
        return float(_math.reduce_mean(t.data).to_numpy())
    return Tensor._wrap(_math.reduce_mean(t.data, 0 if axis is None else axis))


def softmax(t: Tensor, out=None) -> Tensor:
    """Row-wise softmax of a 1-D or 2-D tensor."""
    if t.ndim() > 2:
        raise ShapeError(f"softmax: expects a 1-D or 2-D tensor, got shape {t.shape}")
    return _ret(out, _math.softmax(t.data, -1))


def einsum(ops: str, A: Tensor, B: Tensor) -> Tensor:
    """Einstein summation of exactly two tensors (``'ij,jk->ik'``, batched, outer, ...)."""
    from ._einsum import einsum2

    return Tensor._wrap(einsum2(ops, A.data, B.data))


def tensordot(A: Tensor, B: Tensor, axes=2) -> Tensor:
    """numpy.tensordot: contract the last ``axes`` axes of A with the first of B, or the
    explicit axis lists ``axes=(a_axes, b_axes)``."""
    from ._einsum import tensordot2

    return Tensor._wrap(tensordot2(A.data, B.data, axes))


# ---------------------------------------------------------------------- random fills
def bernoulli(p, t: Tensor) -> Tensor:
    """Fill t in place with Bernoulli(p) samples (0 or 1); returns t."""
    return t.bernoulli(p)


def gaussian(mean, std, t: Tensor) -> Tensor:
    """Fill t in place with normal samples N(mean, std^2); returns t."""
    return t.gaussian(mean, std)


def uniform(low, high, t: Tensor) -> Tensor:
    """Fill t in place with uniform samples on [low, high); returns t."""
    return t.uniform(low, high)


# ---------------------------------------------------------------------- row / column helpers
def _as_col(v: Tensor, m: Tensor) -> CTensor:
    return _math.as_column(v.data, m.data)


def _as_row(v: Tensor, m: Tensor) -> CTensor:
    return _math.as_row(v.data, m.data)


def add_column(alpha, v: Tensor, beta, M_: Tensor) -> Tensor:
    """M = alpha * v (as a column, broadcast) + beta * M, in place."""
    _math.scale_add(M_.data, _as_col(v, M_), alpha, beta)
    return M_


def add_row(alpha, v: Tensor, beta, M_: Tensor) -> Tensor:
    """M = alpha * v (as a row, broadcast) + beta * M, in place."""
    _math.scale_add(M_.data, _as_row(v, M_), alpha, beta)
    return M_


def sum_columns(M_: Tensor) -> Tensor:
    """Sum of the columns: shape (rows, 1)."""
    return Tensor._wrap(_math.sum(M_.data, 1, keepdims=True))


def sum_rows(M_: Tensor) -> Tensor:
    """Sum of the rows: shape (1, cols)."""
    return Tensor._wrap(_math.sum(M_.data, 0, keepdims=True))


def _add_into(m: CTensor, v: CTensor) -> CTensor:
    return _math.scale_add(m, v, 1.0, 1.0)


def _row_column_method(name: str, verb: str, along: str, update):
    as_vector, length = (_as_col, "rows") if along == "column" else (_as_row, "cols")

    def method(self, v):
        self.data = update(self.data, as_vector(v, self))
        return self

    method.__name__, method.__qualname__ = name, f"Tensor.{name}"
    method.__doc__ = (f"{verb} every {along} of this 2-D tensor, in place.\n\n"
                      "Parameters\n----------\nv : Tensor\n"
                      f"    Shape ({length},).\n\n"
                      "Returns\n-------\nTensor\n    This tensor.\n")
    return method


# SINGA's row/column methods on Tensor: what each does to every row or column of the 2-D
# tensor; update(m, v) gives its new data (_add_into writes into m, as add_column(1.0, v,
# 1.0, self) does; div and mult give a new CTensor)
for _verb, _update, _names in (("Add v to", _add_into, ("add_column", "add_row")),
                               ("Divide by v", _math.div, ("div_column", "div_row")),
                               ("Multiply by v", _math.mul, ("mult_column", "mult_row"))):
    for _name in _names:
        setattr(Tensor, _name, _row_column_method(_name, _verb, _name.rsplit("_", 1)[1], _update))
del _verb, _update, _names
