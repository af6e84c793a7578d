"""One rule for every shape, dimension and axis that comes from a user or a file.

``Tensor(shape)``, ``reshape``, the shape ops' axes and sizes and the ``.npy`` headers of
checkpoints all validate through :func:`check_shape` and :func:`as_int`; singa-onnx can use
the same functions through ``singa.tensor.check_shape`` and ``singa.tensor.as_int``.

The rule: a dimension is a Python or numpy integer, never a bool (``True`` is not 1 here) and
never a float (3.9 is refused, not truncated to 3; 3.0 is refused as well, as Apache SINGA's
SWIG layer refuses it); dimensions are non-negative except that reshape may infer one ``-1``;
the product of a shape's nonzero dimensions fits numpy's index type (at most 2**63 - 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .errors import ShapeError

__all__ = ["MAX_ELEMENTS", "as_int", "check_shape"]

#: The most elements a shape may hold: numpy's ``intp`` (sizes and byte counts beyond it wrap).
MAX_ELEMENTS = 2**63 - 1


def as_int(value, what: str) -> int:
    """``value`` as an int when it is a Python or numpy integer (not a bool), else a
    :class:`~singa.errors.ShapeError` naming ``what`` and the value."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    kind = "a bool" if isinstance(value, (bool, np.bool_)) else type(value).__name__
    raise ShapeError(f"{what} must be an integer, got {value!r} ({kind}); pass a Python int "
                     "(floats are never truncated: int(x) first if that is what you mean)")


def check_shape(shape, what: str = "shape", *, infer: bool = False,
                size: int | None = None) -> tuple[int, ...]:
    """Validate ``shape`` and return it as a tuple of ints.

    Parameters
    ----------
    shape : sequence of int, or int
        The dimensions (a single integer is a 1-D shape).
    what : str
        What the shape is, for the message (``"reshape"``, ``"checkpoint state 'w'"``).
    infer : bool
        Allow one ``-1``, the dimension inferred from ``size`` (reshape).
    size : int, optional
        The number of elements the shape must hold (reshape); with ``infer`` the ``-1`` is
        replaced by ``size // prod(others)``.

    Returns
    -------
    tuple of int
        Every dimension non-negative; the product of the nonzero dimensions at most
        ``MAX_ELEMENTS`` (numpy's bound); ``prod(shape) == size`` when ``size`` is given.

    Raises
    ------
    ShapeError
        Naming ``what``, the shape and the offending dimension.
    """
    if type(shape) is tuple or type(shape) is list:
        dims = tuple(shape)
    elif isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)):
        dims = (shape,)
    elif isinstance(shape, np.ndarray) and shape.ndim == 0:
        dims = (shape.item(),)
    elif isinstance(shape, (str, bytes)) or not isinstance(shape, (Sequence, np.ndarray)):
        raise ShapeError(f"{what}: a shape must be a sequence of integers, got {shape!r}")
    else:
        dims = tuple(shape)
    for d in dims:  # the common case (ints, none negative) costs one pass and one product
        if type(d) is not int or d < 0:
            return _check_slowly(dims, what, infer, size)
    n = math.prod(dims)
    if n > MAX_ELEMENTS or n == 0 and len(dims) > 1 or size is not None and n != size:
        return _check_slowly(dims, what, infer, size)
    return dims


def _check_slowly(dims: tuple, what: str, infer: bool, size: int | None) -> tuple[int, ...]:
    """:func:`check_shape` for the shapes that need more than one pass: non-int types, -1,
    zeros next to huge dimensions, a product that misses ``size``; raises or resolves."""
    if any(type(d) is not int for d in dims):
        dims = tuple(as_int(d, f"{what}: dimension {j} of shape {dims!r}")
                     for j, d in enumerate(dims))
    holes = [i for i, d in enumerate(dims) if d == -1] if infer else []
    for i, d in enumerate(dims):
        if d < 0 and i not in holes:
            allowed = "; one may be -1, inferred from the size" if infer else ""
            raise ShapeError(f"{what}: shape {dims} has dimension {d} at position {i}; "
                             f"dimensions must be non-negative integers{allowed}")
    if len(holes) > 1:
        raise ShapeError(f"{what}: shape {dims} has {len(holes)} dimensions of -1; at most one "
                         "can be inferred")
    known = math.prod(d for d in dims if d != -1 or not holes)
    # numpy refuses a shape whose nonzero dimensions overflow its index type even when a zero
    # makes the product 0, so the bound applies to the nonzero ones
    if math.prod(d for d in dims if d > 0) > MAX_ELEMENTS:
        raise ShapeError(f"{what}: shape {dims} has more elements than any array can index "
                         f"(at most {MAX_ELEMENTS}, counting the nonzero dimensions)")
    if size is None:
        if holes:
            raise ShapeError(f"{what}: shape {dims} has a -1 but no size to infer it from")
        return dims
    if holes:
        if known == 0 or size % known:
            raise ShapeError(f"{what}: cannot infer the -1 in {dims} for {size} elements "
                             f"({size} is not a multiple of {known})")
        dims = tuple(size // known if d == -1 else d for d in dims)
    elif known != size:
        raise ShapeError(f"{what}: shape {dims} holds {known} elements, not {size}")
    return dims
