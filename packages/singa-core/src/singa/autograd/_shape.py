"""Shape and indexing operators: joining and cutting (Concat, Split, Slice), Gather, Tile,
Expand, Pad, UpSample, Where, ScatterElements, Shape, ConstantOfShape, NonZero, OneHot and
Embedding (the products and softmax are in :mod:`._products`, the axis reductions are built
from their records in :mod:`._reductions`, the rearrangements, Reshape to SpaceToDepth, in
:mod:`._rearrangements`). Each class carries the declaration of its ``singa.autograd``
function (:mod:`._functions`)."""

from __future__ import annotations

import numpy as np

from .. import _dtype, _math
from .._bounds import check_indices, integer_indices
from .._ctensor import CTensor
from .._shapes import as_int, check_shape
from ..errors import DtypeMismatchError, ShapeError
from ..ops import OPS, run
from ..ops._records import Onnx
from ..ops._rules import broadcast_shapes, check_axis
from ..ops._signatures import Param
from ._elementwise import _zeros_like
from ._engine import Operator, back_broadcast
from ._functions import ANY, Function, declares


def _as_ctensor(value, dev, dtype=_dtype.kInt) -> CTensor:
    """A CTensor from a list/ndarray/CTensor (indices, conditions) on ``dev``."""
    if isinstance(value, CTensor):
        return value if value.dev is dev else _math.to_device(value, dev)
    from ..tensor import Tensor

    if isinstance(value, Tensor):
        return _as_ctensor(value.data, dev, dtype)
    arr = np.asarray(value)
    ct = CTensor._new(tuple(arr.shape), dev, dtype)
    ct.copy_from_numpy(arr)
    return ct


# ---------------------------------------------------------------- joining and cutting


class Concat(Operator):
    """Concatenate along ``axis``; dx_i = the matching slice of dy."""

    def __init__(self, axis=0):
        super().__init__()
        self.axis = axis

    def forward(self, *xs):
        """y = the CTensors xs joined along ``axis``."""
        ax = check_axis("Concat", self.axis, len(xs[0].dims))
        self.ax, self.sizes = ax, [x.dims[ax] for x in xs]
        return _math.concat(xs, ax)

    def backward(self, dy):
        """(dx_1, ..., dx_n): the slices of dy along ``axis`` matching each input."""
        out, start = [], 0
        for n in self.sizes:
            out.append(_math.slice_view(dy, [start], [start + n], None, [self.ax]))
            start += n
        return tuple(out)


@declares(Function(
    "split", "Split x along ``axis``",
    (ANY, Param("axis", "int", "The axis cut."),
     Param("parts", "sequence of int or None", "Sizes of the pieces, summing to "
           "x.shape[axis]."),
     Param("num_output", "int", "With parts None: the number of equal pieces.", None)),
    ("x",), "The pieces, in order.", grad="dx = the pieces' gradients joined along ``axis``",
    outputs="all",
    numpy=lambda x, axis, parts, num_output=None: tuple(np.split(
        x, num_output if parts is None else np.cumsum(parts)[:-1], axis)),
    example={"x": [1.0, 2.0, 3.0, 4.0, 5.0], "axis": 0, "parts": [2, 3]},
    onnx=Onnx("Split", (("split", "sizes"), ("axis", "ax")))))
class Split(Operator):
    """Split along ``axis`` into ``parts`` (sizes) or ``num_output`` equal pieces."""

    def __init__(self, axis, parts, num_output=None):
        super().__init__()
        self.axis = as_int(axis, "Split: axis")
        if num_output is not None:
            num_output = as_int(num_output, "Split: num_output")
        if parts is not None:
            many = isinstance(parts, (list, tuple, range))
            parts = [as_int(p, "Split: part size") for p in (parts if many else [parts])]
            parts = parts if many else parts[0]
        self.parts, self.num_output = parts, num_output

    def forward(self, x):
        """The tuple of pieces of x along ``axis`` (sizes ``parts`` or equal pieces)."""
        ax = check_axis("Split", self.axis, len(x.dims))
        n = x.dims[ax]
        parts = self.parts
        if parts is None or isinstance(parts, int) and self.num_output is not None:
            k = self.num_output or parts
            if k is None or k <= 0:
                raise ShapeError(f"Split: the number of outputs must be positive, got {k}")
            if n % k:
                raise ShapeError(f"Split: axis {ax} of size {n} is not divisible by {k}")
            parts = [n // k] * k
        elif isinstance(parts, int):
            parts = [parts]
        if any(p < 0 for p in parts):
            raise ShapeError(f"Split: part sizes must be non-negative, got {parts}")
        if sum(parts) != n:
            raise ShapeError(f"Split: parts {parts} do not sum to {n} (axis {ax} of {x.dims})")
        self.ax, self.sizes, self.x_shape = ax, list(parts), x.dims
        self.dtype_code, self.dev = x.dtype_code, x.dev
        out, start = [], 0
        for p in parts:
            out.append(_math.copy(_math.slice_view(x, [start], [start + p], None, [ax])))
            start += p
        return tuple(out)

    def backward(self, *dys):
        """dx = the gradients of the pieces joined along ``axis``."""
        parts = []
        for dy, p in zip(dys, self.sizes):
            if dy is None:
                shape = list(self.x_shape)
                shape[self.ax] = p
                dy = _math.set_value(CTensor._new(tuple(shape), self.dev, self.dtype_code), 0.0)
            parts.append(dy)
        return _math.concat(parts, self.ax)


def _slice_numpy(x, starts, ends, axes=None, steps=None):
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * x.ndim
    for a, s, e, k in zip(axes, starts, ends, steps):
        index[a] = slice(s, e, k)
    return x[tuple(index)]


def _normalize_slice(x_shape, starts, ends, axes, steps):
    nd = len(x_shape)
    given = {"starts": starts, "ends": ends, "axes": axes, "steps": steps}
    lengths = {k: len(v) for k, v in given.items() if v is not None}
    if len(set(lengths.values())) > 1:
        raise ShapeError(f"Slice: starts, ends, axes and steps must have one length each, got "
                         f"{lengths}")
    axes = [check_axis("Slice", a, nd)
            for a in (range(len(starts)) if axes is None else axes)]
    if len(set(axes)) != len(axes):
        raise ShapeError(f"Slice: axes {axes} name an axis twice")
    steps = [1] * len(axes) if steps is None else list(steps)
    big = 2 ** 62
    st, en = [], []
    for s, e, step in zip(starts, ends, steps):
        s, e = as_int(s, "Slice: start"), as_int(e, "Slice: end")
        s, e = max(min(s, big), -big), max(min(e, big), -big)
        st.append(s)
        en.append(e)
        if as_int(step, "Slice: step") == 0:
            raise ShapeError("Slice: step cannot be 0")
    return st, en, steps, axes


@declares(Function(
    "slice", "ONNX Slice: x[starts:ends:steps] on ``axes``, numpy semantics per axis",
    (ANY, Param("starts", "sequence of int", "Begins per sliced axis (negative counts from "
                "the end)."),
     Param("ends", "sequence of int", "Ends per sliced axis (negative counts from the end)."),
     Param("axes", "sequence of int", "The sliced axes; None: the first len(starts).", None),
     Param("steps", "sequence of int", "Strides; None: 1.", None)), ("x",),
    "y, x's dtype.", grad="dx = dy written into zeros", numpy=_slice_numpy,
    example={"x": [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]], "starts": [1, 0],
             "ends": [2, 4], "steps": [1, 2]}))
class Slice(Operator):
    """ONNX Slice (numpy semantics per axis); dx = dy written into zeros."""

    def __init__(self, starts, ends, axes=None, steps=None):
        super().__init__()
        self.starts, self.ends, self.axes, self.steps = starts, ends, axes, steps

    def forward(self, x):
        """y = x[starts:ends:steps] on ``axes`` (a copy)."""
        self.args = _normalize_slice(x.dims, self.starts, self.ends, self.axes, self.steps)
        self.x_shape, self.dtype_code, self.dev = x.dims, x.dtype_code, x.dev
        view = _math.slice_view(x, *self.args)
        if 0 in view.dims:
            raise ShapeError(f"Slice: empty result {view.dims} is not supported")
        return _math.copy(view)

    def backward(self, dy):
        """dx = zeros of x's shape with dy written into the sliced cells."""
        dx = _math.set_value(CTensor._new(self.x_shape, self.dev, self.dtype_code), 0.0)
        _math.copy_into(_math.slice_view(dx, *self.args), dy)
        return dx


@declares(Function(
    "gather", "y = take(x, indices, axis)",
    (ANY, Param("axis", "int", "The axis indexed."),
     Param("indices", "int or sequence of int", "Positions along axis (nested lists give "
           "more dimensions).")), ("x",),
    "y, x.shape with axis replaced by the shape of indices.", grad="dx = scatter-add of dy",
    numpy=lambda x, axis, indices: np.take(x, indices, axis),
    example={"x": [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], "axis": 0, "indices": [2, 0]},
    onnx=Onnx("Gather", (("axis", "ax"), ("indices", "idx")),
              convert=(("indices", lambda idx: idx.to_numpy()),))))
class Gather(Operator):
    """y = take(x, indices, axis); dx = scatter-add of dy."""

    def __init__(self, axis, indices):
        super().__init__()
        self.axis, self.indices = axis, indices

    def forward(self, x):
        """y = take(x, indices, axis)."""
        ax = check_axis("Gather", self.axis, len(x.dims))
        idx = integer_indices("Gather", self.indices.to_numpy()
                              if hasattr(self.indices, "to_numpy") else self.indices)
        check_indices("Gather", idx, x.dims[ax])  # before -k becomes n - k: -n-1 stays wrong
        idx = np.where(idx < 0, idx + x.dims[ax], idx).astype(np.int32)
        self.idx = _as_ctensor(idx, x.dev)
        self.ax, self.x_shape = ax, x.dims
        return _math.take(x, self.idx, ax)

    def backward(self, dy):
        """dx = zeros of x's shape with dy scatter-added at the indices."""
        return run(OPS["ScatterAdd"], [self.idx, dy],
                   {"shape": self.x_shape, "axis": self.ax})[0]


@declares(Function(
    "tile", "numpy.tile: repeat x ``repeats[i]`` times along axis i",
    (ANY, Param("repeats", "int or sequence of int", "A shorter sequence applies to the "
                "trailing axes, a longer one adds leading axes.")), ("x",),
    "y, x's dtype.", grad="dx = the sum of dy over the tiles",
    numpy=lambda x, repeats: np.tile(x, repeats),
    example={"x": [[1.0, 2.0]], "repeats": [2, 2]},
    onnx=Onnx("Tile", (("repeats", "reps"),))))
class Tile(Operator):
    """numpy.tile: repeat the whole tensor ``repeats[i]`` times along axis i.

    ``repeats`` is an int or a sequence of ints; a shorter sequence (or an int) applies to the
    trailing axes and a longer one adds leading axes, as numpy does.
    """

    def __init__(self, repeats):
        super().__init__()
        reps = list(repeats) if isinstance(repeats, (list, tuple, range, np.ndarray)) \
            else [repeats]
        self.repeats = [as_int(r, "Tile: repeat count") for r in reps]
        if any(r < 0 for r in self.repeats):
            raise ShapeError(f"Tile: repeats must be non-negative, got {repeats}")

    def forward(self, x):
        """y = numpy.tile(x, repeats)."""
        reps = self.repeats
        if len(reps) < len(x.dims):
            reps = [1] * (len(x.dims) - len(reps)) + reps
        shape = (1,) * (len(reps) - len(x.dims)) + x.dims
        self.x_shape, self.reps, self.full = x.dims, reps, shape
        inter = [v for d in shape for v in (1, d)]
        big = [v for r, d in zip(reps, shape) for v in (r, d)]
        y = _math.copy(_math.broadcast_to(_math.reshape(x, inter), big))
        return _math.reshape(y, [r * d for r, d in zip(reps, shape)])

    def backward(self, dy):
        """dx = the sum of dy over the tiles, of x's shape."""
        big = [v for r, d in zip(self.reps, self.full) for v in (r, d)]
        g = _math.sum(_math.reshape(dy, big), tuple(range(0, len(big), 2)))
        return _math.reshape(g, self.x_shape)


@declares(Function(
    "expand", "ONNX Expand: broadcast x against ``shape``",
    (ANY, Param("shape", "sequence of int", "Broadcasts with x.shape.")), ("x",),
    "y, the broadcast shape.", grad="dx = dy summed back to x's shape",
    numpy=lambda x, shape: np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(shape))),
    example={"x": [[1.0], [2.0]], "shape": [2, 3]},
    onnx=Onnx("Expand", (("shape", "shape"),))))
class Expand(Operator):
    """ONNX Expand: broadcast x against ``shape``; dx = dy summed back."""

    def __init__(self, shape):
        super().__init__()
        self.shape = list(check_shape(shape, "Expand"))

    def forward(self, x):
        """y = x broadcast against ``shape``."""
        out = broadcast_shapes("Expand", x.dims, tuple(self.shape))
        self.x_shape = x.dims
        return _math.copy(_math.broadcast_to(x, out))

    def backward(self, dy):
        """dx = dy summed over the broadcast axes, of x's shape."""
        return back_broadcast(dy.dims, self.x_shape, dy)


def _reflect_source(n: int, lo: int, hi: int) -> np.ndarray:
    """For each cell of an axis of length n reflect-padded by (lo, hi), the input cell it copies.

    Reflection repeats with period 2 (n - 1) when a pad exceeds n - 1 (numpy's ``reflect``);
    a length-1 axis repeats its only cell, as numpy does.
    """
    i = np.arange(-lo, n + hi)
    if n == 1:
        return np.zeros(i.size, np.int32)
    m = np.mod(i, 2 * (n - 1))
    return np.where(m < n, m, 2 * (n - 1) - m).astype(np.int32)


@declares(Function(
    "pad", "Pad x",
    (ANY, Param("mode", "str", '"constant", "reflect" or "edge".'),
     Param("pads", "sequence of int", "ONNX order: the begin pads of every axis, then the "
           "end pads (2 x.ndim values)."),
     Param("constant", "float", "The fill of constant mode.", 0.0)), ("x",),
    "y, each axis grown by its two pads.", grad="dx = the cells of dy that x filled "
    "(reflect and edge pads added back)",
    numpy=lambda x, mode, pads, constant=0.0: np.pad(
        x, [(pads[i], pads[x.ndim + i]) for i in range(x.ndim)], mode,
        **({"constant_values": constant} if mode == "constant" else {})),
    example={"x": [[1.0, 2.0]], "mode": "constant", "pads": [0, 1, 0, 1], "constant": 9.0}))
class Pad(Operator):
    """Pad with ``mode`` constant/reflect/edge; pads in ONNX order (all begins, then ends).

    ``reflect`` pads longer than the axis minus one reflect repeatedly, like numpy's and
    SINGA's: those axes are gathered (``dx`` scatter-adds back) and the rest runs as one
    ``Pad`` op.
    """

    def __init__(self, mode, pads, constant=0.0):
        super().__init__()
        self.mode, self.pads, self.constant = mode, [int(p) for p in pads], float(constant)

    def forward(self, x):
        """y = x padded by ``pads`` (ONNX order) in ``mode``."""
        self.x_shape = x.dims
        pads, self.gathers = list(self.pads), []
        nd = len(x.dims)
        if self.mode == "reflect" and len(pads) == 2 * nd and min(pads, default=0) >= 0:
            for ax, n in enumerate(x.dims):
                lo, hi = pads[ax], pads[nd + ax]
                if max(lo, hi) > n - 1 and n > 0:
                    self.gathers.append((ax, _as_ctensor(_reflect_source(n, lo, hi), x.dev)))
                    pads[ax] = pads[nd + ax] = 0
        for ax, idx in self.gathers:
            x = _math.take(x, idx, ax)
        self.inner_pads, self.inner_shape = tuple(pads), x.dims
        if not any(pads) and self.gathers:
            return x
        return run(OPS["Pad"], [x], {"pads": self.inner_pads, "mode": self.mode,
                                     "value": self.constant})[0]

    def backward(self, dy):
        """dx = the cells of dy that x filled (reflect/edge pads scatter-added back)."""
        if any(self.inner_pads) or not self.gathers:
            dy = run(OPS["PadBackward"], [dy], {"pads": self.inner_pads, "mode": self.mode,
                                                "x_shape": self.inner_shape})[0]
        for ax, idx in reversed(self.gathers):
            shape = list(dy.dims)
            shape[ax] = self.x_shape[ax]
            dy = run(OPS["ScatterAdd"], [idx, dy], {"shape": tuple(shape), "axis": ax})[0]
        return dy


def _upsample_numpy(x, mode, scales):
    for axis, k in enumerate(scales):
        x = np.repeat(x, int(k), axis)
    return x


@declares(Function(
    "upsample", "Nearest-neighbour upsampling by integer ``scales``",
    (ANY, Param("mode", "str", '"nearest".'),
     Param("scales", "sequence of int", "One factor per axis.")), ("x",),
    "y, y.shape[i] = x.shape[i] scales[i].", grad="dx = dy summed over each block of "
    "repeated cells", numpy=_upsample_numpy,
    example={"x": [[1.0, 2.0]], "mode": "nearest", "scales": [2, 2]}))
class UpSample(Operator):
    """Nearest-neighbour upsampling by integer ``scales`` (one per axis)."""

    def __init__(self, mode, scales):
        super().__init__()
        if mode != "nearest":
            raise ValueError(f"UpSample: only mode='nearest' is supported, got {mode!r}")
        ints = [int(round(s)) for s in scales]
        if any(abs(s - i) > 1e-6 or i < 1 for s, i in zip(scales, ints)):
            raise ValueError(f"UpSample: scales must be positive integers, got {scales}")
        self.scales = tuple(ints)

    def forward(self, x):
        """y = x with each cell repeated ``scales[i]`` times along axis i."""
        self.x_shape = x.dims
        return run(OPS["UpsampleNearest"], [x], {"scales": self.scales})[0]

    def backward(self, dy):
        """dx = dy summed over each block of repeated cells."""
        return run(OPS["UpsampleNearestBackward"], [dy],
                   {"scales": self.scales, "x_shape": self.x_shape})[0]


@declares(Function(
    "where", "y = x where condition else y, with broadcasting",
    (Param("x", "Tensor", "Picked where the condition is nonzero; broadcasts with y and "
           "condition."),
     Param("y", "Tensor", "Picked elsewhere; broadcasts with x and condition."),
     Param("condition", "Tensor or array-like", "Nonzero (true) picks x.")), ("x", "y"),
    "Of the broadcast shape.", grad="dy goes to x where condition, to y elsewhere, each part "
    "summed to its input's shape",
    numpy=lambda x, y, condition: np.where(condition, x, y),
    example={"x": [1.0, 2.0, 3.0], "y": [-1.0, -2.0, -3.0], "condition": [1.0, 0.0, 1.0]}))
class Where(Operator):
    """y = condition ? a : b (broadcasting); the gradient is routed by the condition."""

    def __init__(self, condition):
        super().__init__()
        self.condition = condition

    def forward(self, a, b):
        """y = a where condition else b, broadcast."""
        self.cond = _as_ctensor(self.condition, a.dev, a.dtype_code) if not isinstance(
            self.condition, CTensor) else self.condition
        self.shapes = (a.dims, b.dims)
        return run(OPS["Where"], [self.cond, a, b])[0]

    def backward(self, dy):
        """(da, db) = (dy where condition, dy elsewhere), each summed to its input's shape."""
        zero = _zeros_like(dy)
        da = run(OPS["Where"], [self.cond, dy, zero])[0]
        db = run(OPS["Where"], [self.cond, zero, dy])[0]
        sa, sb = self.shapes
        return back_broadcast(dy.dims, sa, da), back_broadcast(dy.dims, sb, db)


def _scatter_numpy(x, indices, updates, axis=0):
    y = x.copy()
    np.put_along_axis(y, np.asarray(indices), np.asarray(updates), axis)
    return y


@declares(Function(
    "scatter_elements", "ONNX ScatterElements: y = x with y[..., indices[i], ...] = updates[i] "
    "along ``axis``",
    (ANY, Param("indices", "Tensor or array-like of int", "Positions along axis, of updates' "
                "shape."),
     Param("updates", "Tensor or array-like", "The values written (constant: no gradient)."),
     Param("axis", "int", "The axis indexed.", 0)), ("x",),
    "y, x's shape and dtype.", grad="dx = dy with the scattered cells 0",
    numpy=_scatter_numpy,
    example={"x": [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], "indices": [[1, 0, 1]],
             "updates": [[5.0, 6.0, 7.0]], "axis": 0}))
class ScatterElements(Operator):
    """ONNX ScatterElements of constant ``updates`` into x; dx = dy with scattered cells 0."""

    def __init__(self, indices, updates, axis=0):
        super().__init__()
        self.indices, self.updates, self.axis = indices, updates, axis

    def forward(self, x):
        """y = x with ``updates`` written at ``indices`` along ``axis``."""
        self.idx = _as_ctensor(self.indices, x.dev)
        self.upd = _as_ctensor(self.updates, x.dev, x.dtype_code)
        self.attrs = {"axis": check_axis("ScatterElements", self.axis, len(x.dims)),
                      "reduction": "none"}
        return run(OPS["ScatterElements"], [x, self.idx, self.upd], self.attrs)[0]

    def backward(self, dy):
        """dx = dy with the scattered cells set to 0."""
        return run(OPS["ScatterElements"], [dy, self.idx, _zeros_like(self.upd)],
                   self.attrs)[0]


@declares(Function(
    "shape", "The shape of x as a 1-D int32 tensor; no gradient flows", (ANY,), ("x",),
    "Shape (x.ndim,), int32.", numpy=lambda x: np.asarray(x.shape, np.int32),
    example={"x": [[1.0, 2.0, 3.0]]},
    onnx=Onnx("Shape", int64_out=True)))
class Shape(Operator):
    """The shape of x as an int32 tensor (no gradient flows back through it).

    A direct ``op.backward(dy)`` call returns ``list(dy.shape)``, SINGA's return value (its
    tests compare it with the expected shape); inside :func:`autograd.backward` it passes no
    gradient (None), since an integer shape has no derivative.
    """

    def forward(self, x):
        """The shape of x as a 1-D int32 CTensor."""
        return _as_ctensor(np.asarray(x.dims, np.int32), x.dev)

    def backward(self, dy):
        """None inside :func:`backward`; a direct call returns ``list(dy.shape)`` (SINGA's
        value).
        """
        if self.__dict__.get("_in_engine"):
            return None
        return list(dy.dims)


@declares(Function(
    "constant_of_shape", "A float32 tensor of the shape held by x, filled with ``value``",
    (Param("x", "Tensor", "1-D, an integer shape."),
     Param("value", "float", "The fill.", 0.0)), ("x",), "y, of shape tuple(x), float32.",
    numpy=lambda x, value=0.0: np.full(tuple(x), value, np.float32),
    example={"x": [2, 3], "value": 1.5}))
class ConstantOfShape(Operator):
    """A tensor of the shape held by the input (an int tensor), filled with ``value``."""

    def __init__(self, value=0.0):
        super().__init__()
        self.value = value

    def forward(self, shape):
        """A CTensor of the shape held by the 1-D int CTensor, filled with value."""
        dims = tuple(int(d) for d in shape.to_numpy().reshape(-1))
        return _math.set_value(CTensor._new(dims, shape.dev, _dtype.kFloat32), float(self.value))

    def backward(self, dy):
        """None: the output does not depend on the shape's values."""
        return None


@declares(Function(
    "nonzero", "Indices of the nonzero cells of x, computed on the host", (ANY,), ("x",),
    "Shape (x.ndim, nnz), int32.", numpy=lambda x: np.array(np.nonzero(x), np.int32),
    example={"x": [[1.0, 0.0], [0.0, 2.0]]}))
class NonZero(Operator):
    """Indices of the nonzero elements, shape (ndim, nnz), int32 (computed on the host)."""

    def forward(self, x):
        """The (ndim, nnz) int32 indices of the nonzero cells of x."""
        idx = np.array(np.nonzero(x.to_numpy()), dtype=np.int32)
        return _as_ctensor(idx, x.dev)

    def backward(self, dy):
        """None: indices have no gradient."""
        return None


@declares(Function(
    "onehot", "One-hot encoding along ``axis``: y = on where the position equals the index, "
    "off elsewhere",
    (Param("axis", "int", "Where the new axis of length depth goes."),
     Param("indices", "Tensor", "Integer class ids, any shape."),
     Param("depth", "int", "The number of classes."),
     Param("values", "sequence of 2 numbers", "[off, on].")), ("indices",),
    "y, indices' shape with depth inserted at axis, float32.",
    numpy=lambda axis, indices, depth, values: np.moveaxis(np.where(
        np.expand_dims(indices, -1) == np.arange(depth), values[1], values[0]), -1, axis),
    example={"axis": -1, "indices": [0, 2], "depth": 3, "values": [0.0, 1.0]}))
class OneHot(Operator):
    """One-hot encoding along ``axis`` with ``values = [off, on]``."""

    def __init__(self, axis, depth, values):
        super().__init__()
        self.axis = axis
        self.depth = int(np.asarray(depth.to_numpy() if hasattr(depth, "to_numpy")
                                    else depth).reshape(-1)[0])
        vals = np.asarray(values.to_numpy() if hasattr(values, "to_numpy") else values)
        self.offset, self.on = (float(v) for v in vals.reshape(-1)[:2])

    def forward(self, indices):
        """y = on where the class id of ``indices`` matches, off elsewhere, along axis."""
        if indices.dtype_code != _dtype.kInt:
            indices = _math.as_type(indices, _dtype.kInt)
        return run(OPS["OneHot"], [indices], {"depth": self.depth, "axis": self.axis,
                                              "on_value": self.on, "off_value": self.offset,
                                              "dtype": _dtype.kFloat32})[0]

    def backward(self, dy):
        """None: class ids have no gradient."""
        return None


@declares(Function(
    "embedding", "y = the rows of w at the integer ids x",
    (Param("x", "Tensor", "Integer ids, any shape; a float dtype is refused."),
     Param("w", "Tensor", "Shape (V, D), the embedding table.")), ("x", "w"),
    "y, shape x.shape + (D,), w's dtype.", grad="dw = scatter-add of dy by id",
    numpy=lambda x, w: np.take(w, x, 0),
    example={"x": [2, 0], "w": [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]}))
class Embedding(Operator):
    """y = rows of w at integer ids x; dw = scatter-add of dy.

    ``backward`` returns ``(dx, dw)`` as SINGA: dx is zeros of the ids' shape (an id has no
    derivative), computed only when asked for (a direct call, or ids that store gradients).
    Ids of a float dtype are refused, as PyTorch refuses them: a cast would truncate 1.9 to
    1, and telling 1.0 from 1.9 needs the values on the host, which graph recording cannot
    read; ids outside [-n, n) are refused by the Take kernel (IndexOutOfRangeError).
    """

    def forward(self, x, w):
        """y = the rows of w (V, D) at the integer ids x; y (*x.shape, D)."""
        if np.dtype(_dtype.NP_DTYPE[x.dtype_code]).kind not in "iu":
            raise DtypeMismatchError(
                f"Embedding: ids must be an integer tensor, got "
                f"{_dtype.name_of(x.dtype_code)} ids of "
                f"shape {x.dims}; a float id would be truncated (1.9 to 1): pass int32 ids "
                "(tensor.from_numpy(ids.astype(np.int32)), or ids.as_type(tensor.int32) when "
                "the float values are whole numbers)")
        ids = x if x.dtype_code == _dtype.kInt else _math.as_type(x, _dtype.kInt)
        self.ids, self.w_shape = ids, w.dims
        return _math.take(w, ids, 0)

    def backward(self, dy):
        """(dx, dw): dx zeros of the ids' shape, dw = scatter-add of dy by id."""
        dw = run(OPS["ScatterAdd"], [self.ids, dy], {"shape": self.w_shape, "axis": 0})[0] \
            if self.needs_grad(1) else None
        dx = _math.set_value(CTensor._new(self.ids.dims, dy.dev, dy.dtype_code), 0.0) \
            if self.needs_grad(0) else None
        return dx, dw
