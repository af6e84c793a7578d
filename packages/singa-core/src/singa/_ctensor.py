"""CTensor: the low-level tensor that Operators receive (SINGA's ``singa_wrap.Tensor``).

A CTensor is a view (shape, strides in elements, element offset, dtype) of a :class:`Block` on a
device. Several CTensors may share one Block (reshape, transpose, broadcast views). It carries no
autograd state; :class:`singa.tensor.Tensor` wraps it for that.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np

from . import _dtype
from ._shapes import check_shape
from .errors import DeviceMismatchError, GraphError, OutOfMemoryError, ShapeError

__all__ = ["CTensor", "contiguous_strides"]

_STRIDES: dict[tuple, tuple] = {}


def contiguous_strides(shape: tuple) -> tuple:
    """Row-major strides (in elements) of ``shape``."""
    st = _STRIDES.get(shape)
    if st is None:
        acc = 1
        rev = []
        for d in reversed(shape):
            rev.append(acc)
            acc *= d
        st = tuple(reversed(rev))
        if len(_STRIDES) < 4096:
            _STRIDES[shape] = st
    return st


_math_mod = None


def _m():
    """The functional math module (imported late: it imports this one)."""
    global _math_mod
    if _math_mod is None:
        from . import _math

        _math_mod = _math
    return _math_mod


def _default_device():
    from ._device_api import get_default_device

    return get_default_device()


def _check_shape(shape) -> tuple:
    """A user's shape: see :func:`singa._shapes.check_shape` (integers, non-negative)."""
    return check_shape(shape, "Tensor")


_I32 = np.iinfo(np.int32)
_F32_MAX = float(np.finfo(np.float32).max)


def host_array(arr: np.ndarray, np_dt: np.dtype, what: str = "copy_from_numpy") -> np.ndarray:
    """``arr`` in native byte order, converted to ``np_dt``; values that the conversion would
    change (an int64 past int32's range, a finite float64 past float32's) are refused with a
    ShapeError rather than silently wrapped or turned into inf."""
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.dtype == np_dt or arr.size == 0:
        return arr
    if np_dt == np.int32 and arr.dtype.kind in "iu" and arr.dtype.itemsize >= 4:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < _I32.min or hi > _I32.max:
            bad = hi if hi > _I32.max else lo
            raise ShapeError(f"{what}: value {bad} does not fit int32 (SINGA's integer dtype, "
                             f"range {_I32.min}..{_I32.max}); scale or clip the data, or "
                             "convert to float32 first")
    elif np_dt == np.float32 and arr.dtype == np.float64:
        finite = arr[np.isfinite(arr)]
        if finite.size and float(np.abs(finite).max()) > _F32_MAX:
            raise ShapeError(f"{what}: value {float(np.abs(finite).max())!r} does not fit "
                             "float32 (it would become inf); scale the data first")
    return arr


def _capacity(dev) -> int | None:
    """Total bytes of ``dev``'s memory (``mem_info()``), else of the host's RAM; None if
    unknown."""
    info = getattr(dev, "mem_info", None)
    if info is not None:
        try:
            return int(info()[1])
        except Exception:  # noqa: BLE001  (a backend that cannot say: no limit)
            return None
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _check_fits(shape: tuple, dt: int, dev) -> int:
    """Bytes of a tensor of ``shape``; refuse one larger than the device's whole memory now,
    not at first use with the allocator's message."""
    nbytes = math.prod(shape) * _dtype.ITEMSIZE[dt]
    if nbytes > (1 << 30):  # small tensors never need the (slower) capacity query
        cap = _capacity(dev)
        if cap is not None and nbytes > cap:
            raise OutOfMemoryError(
                f"a {_dtype.name_of(dt)} tensor of shape {shape} needs {nbytes / 2**30:.1f} "
                f"GiB but {dev.name} has {cap / 2**30:.1f} GiB in all; use a smaller shape or "
                "batch size"
            )
    return nbytes



def _renamed(old: str, new: str) -> None:
    warnings.warn(f"CTensor.{old} is deprecated and will be removed with backend API version 2; "
                  f"read CTensor.{new}", DeprecationWarning, stacklevel=3)


def _copy_from_host_ptr(name: str, dtype: str):
    """CTensor's SWIG method ``name``: the host array converted to ``dtype``, then
    ``CTensor._copy_prefix``."""
    np_dt = np.dtype(dtype)

    def method(self, arr, num=None):
        self._copy_prefix(np.asarray(arr, dtype=np_dt), num)

    method.__name__, method.__qualname__ = name, f"CTensor.{name}"
    method.__doc__ = f"""Copy values from a host array into this tensor, converted to {dtype}.

C++ ``Tensor::{name}``. The array is flattened; its first ``num``
values (all of them when ``num`` is None) are written from element 0. When they fill the
tensor this is :meth:`copy_from_numpy`; fewer are written into a prefix of a contiguous
tensor and the rest is kept.

Parameters
----------
arr : array_like
    The values; converted with ``numpy.asarray(arr, dtype=numpy.{dtype})``.
num : int, optional
    How many values to copy.

Raises
------
ShapeError
    More values than the tensor holds, or a prefix copy into a non-contiguous tensor.
"""
    return method


def _get_value_method(name: str, dtype: str):
    """CTensor's SWIG method ``name``: the values as a flat ``dtype`` array
    (``CTensor._get_values``)."""
    np_dt = np.dtype(dtype)

    def method(self, n: int | None = None) -> np.ndarray:
        return self._get_values(np_dt, n)

    method.__name__, method.__qualname__ = name, f"CTensor.{name}"
    method.__doc__ = f"""The values as a flat numpy {dtype} array (SWIG's ``{name}``).

Parameters
----------
n : int, optional
    Return only the first ``n`` values (row-major order); all of them when None.

Returns
-------
numpy.ndarray
    A 1-d array copied from the device, converted to {dtype}.
"""
    return method


class CTensor:
    """A strided view of device memory. Constructed as ``CTensor(shape[, device][, dtype])``.

    Fields (what a backend's ``make_native`` reads):

    dims : tuple of int
        The shape (SINGA's ``shape()`` method returns it).
    strides : tuple of int
        Strides **in elements**, not bytes; 0 along a broadcast dimension.
    offset : int
        Element 0's offset from the start of the block, in elements.
    dtype_code : int
        The dtype code (``singa.tensor.float32`` ...; ``np_dtype`` is numpy's).
    dev, block, contig
        The device, the ref-counted :class:`~singa.memory.Block`, and whether ``strides``
        are the row-major strides of ``dims``.

    ``shp``, ``strd``, ``off`` and ``dt``, the names before, still read these with a
    DeprecationWarning.
    """

    __slots__ = ("dims", "strides", "dtype_code", "dev", "offset", "block", "contig", "_view",
                 "_vbuf",
                 "__weakref__")

    def __init__(self, shape=(), device=None, dtype=_dtype.kFloat32):
        from ._device import Device

        if isinstance(device, int) and not isinstance(device, bool) and dtype == _dtype.kFloat32:
            device, dtype = None, device  # CTensor(shape, dtype)
        if device is not None and not isinstance(device, Device):
            from ._device_api import get_device

            device = get_device(device)
        shape = _check_shape(shape)
        dt = _dtype.code_of(dtype)
        dev = device if device is not None else _default_device()
        self.dims = shape
        self.strides = contiguous_strides(shape)
        self.dtype_code = dt
        self.dev = dev
        self.offset = 0
        self.contig = True
        self._vbuf = None
        blk = dev.new_block(_check_fits(shape, dt, dev))
        blk.ref_count += 1
        self.block = blk

    @classmethod
    def _new(cls, shape: tuple, dev, dt: int) -> CTensor:
        """Fast constructor for a fresh contiguous tensor (no argument checking)."""
        t = object.__new__(cls)
        t.dims = shape
        t.strides = contiguous_strides(shape)
        t.dtype_code = dt
        t.dev = dev
        t.offset = 0
        t.contig = True
        t._vbuf = None
        n = 1
        for d in shape:
            n *= d
        nbytes = n * _dtype.ITEMSIZE[dt]
        if nbytes > (1 << 30):  # an op's output larger than the device: refuse, as __init__
            _check_fits(shape, dt, dev)
        blk = dev.new_block(nbytes)
        blk.ref_count += 1
        t.block = blk
        return t

    def _view_as(self, shape: tuple, strides: tuple, off: int | None = None) -> CTensor:
        """A new CTensor sharing this block with other shape/strides/offset."""
        t = object.__new__(CTensor)
        t.dims = shape
        t.strides = strides
        t.dtype_code = self.dtype_code
        t.dev = self.dev
        t.offset = self.offset if off is None else off
        t.contig = strides == contiguous_strides(shape)
        t._vbuf = None
        blk = self.block
        blk.ref_count += 1
        t.block = blk
        return t

    def __del__(self):
        try:
            self.block.ref_count -= 1
        except AttributeError:  # construction failed before the block was set
            pass

    # ------------------------------------------------------------------ former field names
    # Backends written against the surface of stop 35 and before read the fields by these
    # names; they keep working, with a DeprecationWarning naming the new field.
    @property
    def shp(self) -> tuple:
        """Deprecated: :attr:`dims`."""
        _renamed("shp", "dims")
        return self.dims

    @property
    def strd(self) -> tuple:
        """Deprecated: :attr:`strides`."""
        _renamed("strd", "strides")
        return self.strides

    @property
    def dt(self) -> int:
        """Deprecated: :attr:`dtype_code`."""
        _renamed("dt", "dtype_code")
        return self.dtype_code

    @property
    def off(self) -> int:
        """Deprecated: :attr:`offset`."""
        _renamed("off", "offset")
        return self.offset

    # ------------------------------------------------------------------ SWIG-style introspection
    def shape(self, i: int | None = None):
        """The shape tuple, or dimension ``i``."""
        return self.dims if i is None else self.dims[i]

    def nDim(self) -> int:
        """Number of dimensions (C++ ``Tensor::nDim``); 0 for a scalar."""
        return len(self.dims)

    def Size(self) -> int:
        """Number of elements, the product of the shape (C++ ``Tensor::Size``)."""
        return math.prod(self.dims)

    def MemSize(self) -> int:
        """Bytes of the elements, ``Size()`` times the item size (C++ ``Tensor::MemSize``)."""
        return self.Size() * _dtype.ITEMSIZE[self.dtype_code]

    def data_type(self) -> int:
        """The dtype code (``singa.tensor.float32`` ...), as C++ ``Tensor::data_type``."""
        return self.dtype_code

    def device(self):
        """The :class:`~singa.device.Device` holding the memory (C++ ``Tensor::device``)."""
        return self.dev

    def initialized(self) -> bool:
        """True while the block's memory is allocated (SINGA's ``initialized``).

        A block allocates on first use, so a tensor not yet written or read is not initialized.
        """
        return self.block.data is not None

    def transpose(self) -> bool:
        """True when the strides are not row-major (a transposed or broadcast view).

        ``contig`` means row-major strides; the element offset may be non-zero (a slice of a
        block), and backends apply it in :meth:`Device.native`.
        """
        return not self.contig

    def stride(self) -> tuple:
        """Strides in elements, one per dimension (C++ ``Tensor::stride``)."""
        return self.strides

    @property
    def size(self) -> int:
        """Number of elements (the same as :meth:`Size`)."""
        return math.prod(self.dims)

    @property
    def np_dtype(self):
        """numpy's dtype for this tensor's dtype code."""
        return _dtype.NP_DTYPE[self.dtype_code]

    def __repr__(self) -> str:
        return (f"<CTensor shape={self.dims} dtype={_dtype.name_of(self.dtype_code)} "
                f"device={self.dev.name}>")

    # ------------------------------------------------------------------ host transfer
    def to_numpy(self) -> np.ndarray:
        """Copy the values to a new numpy array of this shape and dtype."""
        dev = self.dev
        if dev._graph_enabled:
            raise GraphError(
                f"cannot read tensor values on {dev.name} while its graph is being recorded; "
                "read them after the graph runs (after model(...) returns)"
            )
        out = []
        dev.exec(lambda: out.append(dev.native_to_numpy(dev.native(self))),
                 [self.block], [], "CopyToHost")
        return out[0]

    def copy_from_numpy(self, arr, offset: int = 0) -> None:
        """Copy ``arr`` (cast to this dtype) into this tensor.

        Without ``offset`` the element counts must match. With one (in elements), the values
        are written from that position of a contiguous tensor and the rest is kept.
        """
        arr = np.asarray(arr)
        n = self.Size()
        if not offset:
            if arr.size != n:
                raise ShapeError(
                    f"copy_from_numpy: array has {arr.size} elements {arr.shape}, tensor has "
                    f"{n} {self.dims}; reshape the array or create a tensor of shape {arr.shape}"
                )
            self._write_host(arr.reshape(self.dims))
            return
        self._write_range(arr.reshape(-1), offset)

    def _write_range(self, flat: np.ndarray, offset: int) -> None:
        n = self.Size()
        if not self.contig:
            raise ShapeError("a partial host copy needs a contiguous tensor; call contiguous()")
        if offset < 0 or flat.size + offset > n:
            raise ShapeError(
                f"copy_from_numpy: {flat.size} values at offset {offset} do not fit the "
                f"tensor's {n} elements"
            )
        self._view_as((flat.size,), (1,), self.offset + offset)._write_host(flat, extra_reads=True)

    def _write_host(self, arr: np.ndarray, extra_reads: bool = False) -> None:
        np_dt = np.dtype(_dtype.NP_DTYPE[self.dtype_code])
        src = np.ascontiguousarray(host_array(arr, np_dt), dtype=np_dt)
        if src is arr:
            src = src.copy()  # the op may run later (graph); never alias the caller's array
        dev = self.dev
        reads = [self.block] if extra_reads else []
        dev.exec(lambda: dev.numpy_into_native(src, dev.native(self)), reads, [self.block],
                 "CopyFromHost")

    # SWIG names: the host array converted to each dtype
    CopyFloatDataFromHostPtr = _copy_from_host_ptr("CopyFloatDataFromHostPtr", "float32")
    CopyIntDataFromHostPtr = _copy_from_host_ptr("CopyIntDataFromHostPtr", "int32")
    CopyHalfFloatDataFromHostPtr = _copy_from_host_ptr("CopyHalfFloatDataFromHostPtr", "float16")

    def _copy_prefix(self, arr, num):
        arr = arr.reshape(-1)
        if num is not None:
            arr = arr[:num]
        if arr.size == self.Size():
            self.copy_from_numpy(arr)
        else:
            self._write_range(arr, 0)

    # SWIG names: the values as a flat array of each dtype
    GetFloatValue = _get_value_method("GetFloatValue", "float32")
    GetIntValue = _get_value_method("GetIntValue", "int32")
    GetHalfFloatValue = _get_value_method("GetHalfFloatValue", "float16")

    def _get_values(self, np_dt, n):
        flat = self.to_numpy().reshape(-1).astype(np_dt, copy=False)
        return flat if n is None else flat[:n]

    # ------------------------------------------------------------------ math methods
    def SetFloatValue(self, x) -> None:
        """Fill every element with ``x``, converted to this dtype (C++ ``Tensor::SetValue``)."""
        _m().set_value(self, x)

    def CopyData(self, other: CTensor) -> None:
        """Overwrite this tensor's values with ``other``'s (C++ ``Tensor::CopyData``).

        ``other`` is moved to this device, cast to this dtype and reshaped to this shape first;
        this tensor keeps its memory, shape and dtype.

        Raises
        ------
        ShapeError
            The element counts differ.
        """
        if other.Size() != self.Size():
            raise ShapeError(f"CopyData: sizes differ ({other.dims} vs {self.dims})")
        _m().copy_into(self, other)

    def AsType(self, dtype) -> CTensor:
        """A new tensor with the values converted to ``dtype`` (C++ ``Tensor::AsType``).

        ``dtype`` is a SINGA dtype code (``singa.tensor.float32`` ...), a numpy dtype or a name;
        this tensor is unchanged.
        """
        return _m().as_type(self, _dtype.code_of(dtype))

    def ToType(self, dtype) -> None:
        """Convert this tensor to ``dtype`` in place (C++ ``Tensor::ToType``).

        It takes a new block holding the converted values; views of the old block keep the old
        values.
        """
        new = _m().as_type(self, _dtype.code_of(dtype))
        self._adopt(new)

    def ToDevice(self, dev) -> None:
        """Move this tensor to ``dev`` in place (C++ ``Tensor::ToDevice``).

        ``dev`` is a Device or anything :func:`singa.device.get_device` accepts. Nothing happens
        when the tensor is already there; otherwise the values are staged through host memory
        into a new block, and views of the old block stay where they were.
        """
        from ._device_api import get_device

        dev = get_device(dev)
        if dev is self.dev:
            return
        self._adopt(_m().to_device(self, dev))

    def ToHost(self) -> None:
        """Move this tensor to its device's host device in place (C++ ``Tensor::ToHost``)."""
        self.ToDevice(self.dev.host())

    def _adopt(self, other: CTensor) -> None:
        """Swap in ``other``'s memory and layout (in-place conversions)."""
        self.block.ref_count -= 1
        other.block.ref_count += 1
        self.block = other.block
        self.dims, self.strides = other.dims, other.strides
        self.offset, self.contig = other.offset, other.contig
        self.dtype_code = other.dtype_code
        self.dev = other.dev
        self._vbuf = None

    def Clone(self) -> CTensor:
        """A contiguous copy of this tensor on the same device (C++ ``Tensor::Clone``)."""
        return _m().copy(self)

    def Repeat(self, repeats, axis) -> CTensor:
        """A new tensor with elements repeated as :func:`numpy.repeat` (C++ ``Tensor::Repeat``).

        Parameters
        ----------
        repeats : int or sequence of int
            Repeat count for every element, or one per element along ``axis``.
        axis : int or None
            The axis to repeat along; None repeats the flattened tensor.
        """
        return _m().repeat(self, repeats, axis)

    def ResetLike(self, t: CTensor) -> None:
        """Give this tensor a new block of ``t``'s shape, dtype and device (C++ ``ResetLike``).

        The tensor becomes contiguous and its old values are not kept; views of the old block
        keep that block.
        """
        self._adopt(CTensor._new(t.dims, t.dev, t.dtype_code))

    def L1(self) -> float:
        """Mean absolute value, ``sum(|x|) / Size()`` (C++ ``Tensor::l1``)."""
        return float(_m().l1(self))

    def L2(self) -> float:
        """Euclidean norm over the element count, ``sqrt(sum(x**2)) / Size()`` (C++ ``l2``)."""
        return float(_m().l2(self))

    def __iadd__(self, x):
        _m().iadd(self, x)
        return self

    def __isub__(self, x):
        _m().isub(self, x)
        return self

    def __imul__(self, x):
        _m().imul(self, x)
        return self

    def __itruediv__(self, x):
        _m().idiv(self, x)
        return self

    def __add__(self, x):
        return _m().add(self, x)

    def __sub__(self, x):
        return _m().sub(self, x)

    def __mul__(self, x):
        return _m().mul(self, x)

    def __truediv__(self, x):
        return _m().div(self, x)

    __div__ = __truediv__

    def __lt__(self, x):
        return _m().lt(self, x)

    def __le__(self, x):
        return _m().le(self, x)

    def __gt__(self, x):
        return _m().gt(self, x)

    def __ge__(self, x):
        return _m().ge(self, x)

    __hash__ = object.__hash__


def check_same_device(op_name: str, tensors) -> None:
    """Raise DeviceMismatchError naming both devices and the fix."""
    dev = tensors[0].dev
    for i, t in enumerate(tensors[1:], 1):
        if t.dev is not dev:
            raise DeviceMismatchError(
                f"{op_name}: expected all tensors on one device, but input 0 is on {dev.name} "
                f"and input {i} is on {t.dev.name}; move one, e.g. x.to_device(y.device)"
            )
