"""Operators the ONNX importer needs that SINGA's autograd lacked: arg-max and transposed
convolution, each over ops already in the op table (``ArgMax``, ``Conv2dBackwardX``), so they
run on every backend. The max/min reductions it needs too (``ReduceMax``, ``ReduceMin``) are
built from their records in :mod:`._reductions`."""

from __future__ import annotations

import numpy as np

from .. import _dtype, _math
from ..ops import OPS, run
from ..ops._records import Onnx
from ..ops._signatures import Param
from ._engine import Operator, is_training
from ._functions import ANY, Function, declares

__all__ = ["ArgMax", "ConvTranspose2d"]


def _argmax_numpy(x, axis=0, keepdims=1):
    y = np.argmax(x, axis).astype(np.int32)
    return np.expand_dims(y, axis) if keepdims else y


@declares(Function(
    "argmax", "The int32 index of the first maximum of x along ``axis``; no gradient",
    (ANY, Param("axis", "int", "The axis searched.", 0),
     Param("keepdims", "int", "1 keeps the axis as size 1.", 1)), ("x",),
    "y, x's shape without axis (with it as size 1 when keepdims), int32.",
    numpy=_argmax_numpy, example={"x": [[1.0, 5.0], [3.0, 2.0]], "axis": 1},
    onnx=Onnx("ArgMax", (("axis", "axis"), ("keepdims", "keepdims")), int64_out=True)))
class ArgMax(Operator):
    """Index (int32) of the first maximum along ``axis``; no gradient."""

    def __init__(self, axis=0, keepdims=1):
        super().__init__()
        self.axis, self.keepdims = axis, bool(keepdims)

    def forward(self, x):
        """The int32 index of the first maximum of x along ``axis`` (kept as size 1 when
        keepdims).
        """
        y = _math.argmax(x, self.axis, self.keepdims)
        return y if y.dtype_code == _dtype.kInt else _math.as_type(y, _dtype.kInt)

    def backward(self, dy):
        """None: an index has no gradient."""
        return None


@declares(Function(
    "conv_transpose2d", "y = conv_transpose(x, W) + b (NCHW), the input gradient of a "
    "convolution as a forward op",
    (Param("x", "Tensor", "Shape (N, C_in, H, W)."),
     Param("W", "Tensor", "Shape (C_in, C_out / group, kh, kw)."),
     Param("b", "Tensor", "Shape (C_out,).", None),
     Param("out_shape", "sequence of int", "The spatial output shape, when the strides leave "
           "it ambiguous.", None),
     Param("stride", "tuple of 2 int", "The stride of the convolution from y's shape to x's.",
           (1, 1)),
     Param("pads", "tuple of 4 int", "Its pads, in ONNX order.", (0, 0, 0, 0)),
     Param("dilation", "tuple of 2 int", "Its dilation.", (1, 1)),
     Param("group", "int", "Its groups.", 1)), ("x", "W", "b"),
    "y, shape (N, C_out, H_out, W_out).",
    grad="dx = Conv2d(dy, W), dW = Conv2dBackwardW(x, dy), db = sum(dy, (0, 2, 3))"))
class ConvTranspose2d(Operator):
    """y = conv_transpose(x, W) + b: the input gradient of a convolution, as a forward op.

    With attrs of a convolution from y's shape to x's (stride, pads, dilation, group):
    y = Conv2dBackwardX(x, W); dx = Conv2d(dy, W); dW = Conv2dBackwardW(x, dy);
    db = sum(dy, (0, 2, 3)). W has shape (C_in, C_out / group, kh, kw).
    """

    def __init__(self, out_shape, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), group=1):
        super().__init__()
        self.out_shape = tuple(int(d) for d in out_shape)
        self.attrs = {"stride": tuple(stride), "pads": tuple(pads),
                      "dilation": tuple(dilation), "group": int(group)}

    def forward(self, x, W, b=None):
        """y = conv_transpose(x, W) + b for x (N, C_in, H, W) and W (C_in, C_out / group, kh,
        kw); y (N, C_out, H_out, W_out).
        """
        y = run(OPS["Conv2dBackwardX"], [x, W], {**self.attrs, "x_shape": self.out_shape})[0]
        if b is not None:
            y = _math.add(y, _math.reshape(b, (1, b.dims[0], 1, 1)))
        if is_training():
            self.x, self.W, self.has_bias = x, W, b is not None
        return y

    def backward(self, dy):
        """(dx, dW) or (dx, dW, db), db = sum(dy, (0, 2, 3))."""
        if not hasattr(self, "x"):
            self._need_cache()
        dx = run(OPS["Conv2d"], [dy, self.W], self.attrs)[0] if self.needs_grad(0) else None
        dW = run(OPS["Conv2dBackwardW"], [self.x, dy], {**self.attrs, "w_shape": self.W.dims})[0] \
            if self.needs_grad(1) else None
        if self.has_bias:
            return dx, dW, _math.sum(dy, (0, 2, 3))
        return dx, dW
