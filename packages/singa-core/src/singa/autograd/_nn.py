"""Neural-network operators: convolution, pooling, batch norm, dropout and the losses.

Every computation is an op of the table (``Conv2d``, ``Pooling2d``, ``BatchNormTrain`` ...),
so these classes hold no backend code: each backend supplies the kernels. Each class carries
the declaration of its ``singa.autograd`` function (:mod:`._functions`).
"""

from __future__ import annotations

import numpy as np

from .. import _dtype, _math
from .._ctensor import CTensor
from .._handles import BatchNormHandle, ConvHandle, PoolingHandle, _pads4
from ..errors import DeviceMismatchError, ShapeError, SingaError
from ..ops import OPS, run
from ..ops._signatures import Param
from ._engine import Operator, is_training
from ._functions import Function, X, declares

_ODD = Param("odd_padding", "tuple of 4 int", "Extra asymmetric pads of x.", (0, 0, 0, 0))
_LOSS = "The loss, shape (1,), x's dtype."


@declares(Function(
    "conv2d", "y = conv(x, W) + b with the geometry of ``handle`` (NCHW)",
    (Param("handle", "ConvHandle", "Kernel size, stride, padding, groups and channels."),
     Param("x", "Tensor", "Shape (N, C_in, H, W)."),
     Param("W", "Tensor", "Shape (C_out, C_in / group, kh, kw)."),
     Param("b", "Tensor", "Shape (C_out,).", None), _ODD), ("x", "W", "b"),
    "y, shape (N, C_out, H_out, W_out).",
    grad="dx = Conv2dBackwardX(dy, W), dW = Conv2dBackwardW(dy, x), db = sum(dy, (0, 2, 3))"))
class _Conv2d(Operator):
    """y = conv(x, W) + b with the geometry of ``handle``; ``odd_padding`` adds asymmetric pads.

    dx = Conv2dBackwardX(dy, W), dW = Conv2dBackwardW(dy, x), db = sum(dy, (0, 2, 3)).
    """

    def __init__(self, handle: ConvHandle, odd_padding=(0, 0, 0, 0)):
        super().__init__()
        self.handle = handle
        self.attrs = dict(handle.attrs())
        if any(odd_padding):
            self.attrs["pads"] = _pads4(handle.pads, odd_padding)

    def forward(self, x, W, b=None):
        ins = [x, W] if b is None else [x, W, b]
        y = run(OPS["Conv2d"], ins, self.attrs)[0]
        if is_training():
            self.x, self.W, self.has_bias = x, W, b is not None
        return y

    def backward(self, dy):
        if not hasattr(self, "x"):
            self._need_cache()
        x, W = self.x, self.W
        dx = run(OPS["Conv2dBackwardX"], [dy, W], {**self.attrs, "x_shape": x.dims})[0] \
            if self.needs_grad(0) else None
        dW = run(OPS["Conv2dBackwardW"], [dy, x], {**self.attrs, "w_shape": W.dims})[0] \
            if self.needs_grad(1) else None
        if self.has_bias:
            return dx, dW, _math.sum(dy, (0, 2, 3))
        return dx, dW


@declares(Function(
    "pooling_2d", "Max or average pooling with the geometry of ``handle`` (NCHW)",
    (Param("handle", "PoolingHandle", "Kernel, stride, padding and the pooling kind."),
     Param("x", "Tensor", "Shape (N, C, H, W)."), _ODD), ("x",),
    "y, shape (N, C, H_out, W_out).", grad="dx = Pooling2dBackward(dy, x, y)"))
class _Pooling2d(Operator):
    """Max or average pooling with the geometry of ``handle``."""

    def __init__(self, handle: PoolingHandle, odd_padding=(0, 0, 0, 0)):
        super().__init__()
        self.handle = handle
        self.attrs = dict(handle.attrs())
        if any(odd_padding):
            self.attrs["pads"] = _pads4(handle.pads, odd_padding)

    def forward(self, x):
        y = run(OPS["Pooling2d"], [x], self.attrs)[0]
        if is_training():
            self.x, self.y = x, y
        return y

    def backward(self, dy):
        if not hasattr(self, "x"):
            self._need_cache()
        return run(OPS["Pooling2dBackward"], [dy, self.x, self.y], self.attrs)[0]


@declares(Function(
    "batchnorm_2d", "Batch normalisation over axis 1 of (N, C) or (N, C, H, W) input: y = "
    "scale (x - mean) / sqrt(var + eps) + bias",
    (Param("handle", "BatchNormHandle", "Momentum and eps."),
     Param("x", "Tensor", "Shape (N, C) or (N, C, H, W)."),
     Param("scale", "Tensor", "Shape (C,)."), Param("bias", "Tensor", "Shape (C,)."),
     Param("running_mean", "Tensor", "Shape (C,), updated in place in training."),
     Param("running_var", "Tensor", "Shape (C,), updated in place in training.")),
    ("x", "scale", "bias"), "y, x's shape.",
    grad="dx, dscale, dbias = BatchNormBackward(dy, x, scale, batch mean, 1 / batch std)",
    note="In training, mean and var are the batch's and the running statistics are updated "
    "in place (running = momentum running + (1 - momentum) batch); otherwise the running "
    "ones are used."))
class _BatchNorm2d(Operator):
    """Batch normalisation over axis 1 of (N, C) or (N, C, H, W) input.

    Training: normalise with batch statistics and update ``running_mean``/``running_var`` in
    place (running = momentum running + (1 - momentum) batch). Inference: use the running
    statistics.
    """

    def __init__(self, handle: BatchNormHandle, running_mean, running_var, name=None):
        super().__init__(name)
        self.handle = handle
        self.running_mean = running_mean.data if hasattr(running_mean, "data") else running_mean
        self.running_var = running_var.data if hasattr(running_var, "data") else running_var

    def forward(self, x, scale, bias):
        if len(x.dims) not in (2, 4):
            raise ShapeError(f"BatchNorm2d expects (N, C) or (N, C, H, W) input, got {x.dims}")
        rm, rv = self.running_mean, self.running_var
        eps = self.handle.eps
        if is_training():
            c = x.dims[1]
            mean = CTensor._new((c,), x.dev, x.dtype_code)
            inv = CTensor._new((c,), x.dev, x.dtype_code)
            y = CTensor._new(x.dims, x.dev, x.dtype_code)
            run(OPS["BatchNormTrain"], [x, scale, bias, rm, rv],
                {"momentum": self.handle.factor, "eps": eps}, [y, mean, inv, rm, rv])
            self.cache = (x, scale, mean, inv)
            return y
        return run(OPS["BatchNormInfer"], [x, scale, bias, rm, rv], {"eps": eps})[0]

    def backward(self, dy):
        if not hasattr(self, "cache"):
            self._need_cache()
        x, scale, mean, inv = self.cache
        dx, dscale, dbias = run(OPS["BatchNormBackward"], [dy, x, scale, mean, inv])
        return dx, dscale, dbias


@declares(Function(
    "dropout", "Training: y = x * mask / (1 - ratio), mask ~ Bernoulli(1 - ratio); otherwise "
    "y = x",
    (X, Param("seed", "int", "Seed of the mask.", 0),
     Param("ratio", "float", "The probability of dropping a cell.", 0.5)), ("x",),
    "y, of x's shape and dtype.", grad="dx = dy mask / (1 - ratio) in training, else dy"))
class Dropout(Operator):
    """Training: y = x * mask / (1 - ratio) with mask ~ Bernoulli(1 - ratio); else y = x.

    SINGA scaled by (1 - ratio) (an operator-precedence bug); this uses the correct
    1 / (1 - ratio) so that E[y] = x.
    """

    def __init__(self, seed=0, ratio=0.5):
        super().__init__()
        if not 0.0 <= ratio < 1.0:
            raise ValueError(f"Dropout: ratio must be in [0, 1), got {ratio}")
        self.seed, self.ratio = seed, float(ratio)

    def forward(self, x):
        """Training: y = x mask / (1 - ratio), mask ~ Bernoulli(1 - ratio) drawn with ``seed``;
        otherwise y = x. Shape and dtype of x.
        """
        if not is_training() or self.ratio == 0.0:
            self.mask = None
            return x
        mask = _math.bernoulli(CTensor._new(x.dims, x.dev, x.dtype_code), 1.0 - self.ratio)
        _math.imul(mask, 1.0 / (1.0 - self.ratio))
        self.mask = mask
        return _math.mul(x, mask)

    def backward(self, dy):
        """dx = dy mask / (1 - ratio) in training (the same mask), else dy."""
        return dy if self.mask is None else _math.mul(dy, self.mask)


def _softmax_rows(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _target(t, x: CTensor) -> CTensor:
    """Targets as a CTensor on x's device: int32 ids (N,) or dense (N, C) of x's dtype."""
    t = t.data if hasattr(t, "data") and not isinstance(t, CTensor) else t
    if not isinstance(t, CTensor):
        raise TypeError(f"target must be a Tensor, got {type(t).__name__}")
    if t.dev is not x.dev:
        raise DeviceMismatchError(f"target is on {t.dev.name} but the logits are on "
                                  f"{x.dev.name}; create the target on the same device (or "
                                  f"move it with t.to_device(x.device))")
    if len(t.dims) == 1 or (len(t.dims) == 2 and t.dims[1] == 1 and x.dims[1] != 1):
        ids = _math.reshape(t, (t.dims[0],))
        return ids if ids.dtype_code == _dtype.kInt else _math.as_type(ids, _dtype.kInt)
    if t.dims != x.dims:
        raise ShapeError(f"target shape {t.dims} matches neither ids ({x.dims[0]},) nor the "
                         f"logits {x.dims}")
    return t if t.dtype_code == x.dtype_code else _math.as_type(t, x.dtype_code)


def _scale_by(g: CTensor, dy) -> CTensor:
    if dy is None:
        return g
    if isinstance(dy, CTensor):
        return _math.mul(g, _math.reshape(dy, ()) if dy.size == 1 else dy)
    return _math.mul(g, float(dy))


def _rows_summing_to_one(t: CTensor):
    """(t / sum_c t per row, 1 for rows with a nonzero sum else 0), both (N, ...) CTensors.

    SINGA's reading of a dense target; an all-zero row stays zero (no 0/0) and is masked out
    of the gradient, since it contributes nothing to the loss.
    """
    s = _math.sum(t, 1, keepdims=True)
    live = _math.ne(s, 0.0)
    return _math.div(t, _math.add(s, _math.rsub(live, 1.0))), live


@declares(Function(
    "softmax_cross_entropy", "loss = mean_n(-sum_c q log softmax(x))",
    (Param("x", "Tensor", "Logits, shape (N, C)."),
     Param("t", "Tensor", "Int class ids of shape (N,), or a dense (N, C) target read as "
           "q = t / sum_c t.")), ("x",), _LOSS, grad="dx = (softmax(x) - q) / N dy",
    numpy=lambda x, t: -np.log(_softmax_rows(x)[np.arange(len(t)), t]).mean(keepdims=True),
    example={"x": [[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], "t": [2, 0]}))
class SoftMaxCrossEntropy(Operator):
    """loss = mean_n(-sum_c q log softmax(x)); dx = (softmax(x) - q) / N * dy.

    ``t`` holds int class ids of shape (N,) or a dense (N, C) target (one-hot or soft). As in
    SINGA, a dense target is read as a distribution: each row is divided by its sum,
    q = t / sum_c t (one-hot and probability rows are unchanged). That makes dx the exact
    gradient of the loss for any non-negative target, e.g. the unnormalised random targets of
    SINGA's RNN gradient checks. A target row of zeros adds nothing to the loss and gets no
    gradient.
    """

    def __init__(self, t):
        super().__init__()
        self.t = t

    def forward(self, x):
        """The loss, shape (1,) mean_n(-sum_c q log softmax(x)) of the (N, C) logits x against the
        target held by the op.
        """
        if len(x.dims) != 2:
            raise ShapeError(f"softmax_cross_entropy expects 2-D logits (N, C), got {x.dims}")
        self.tc = _target(self.t, x)
        self.live = None
        if len(self.tc.dims) == 2:
            self.tc, self.live = _rows_summing_to_one(self.tc)
        loss, probs = run(OPS["SoftmaxCrossEntropy"], [x, self.tc])
        self.p = probs
        return loss

    def backward(self, dy=1.0):
        """dx = (softmax(x) - q) / N * dy, shape (N, C)."""
        g = run(OPS["SoftmaxCrossEntropyBackward"], [self.p, self.tc])[0]
        if getattr(self, "live", None) is not None:
            g = _math.mul(g, self.live)
        return _scale_by(g, dy)


@declares(Function(
    "cross_entropy", "loss = -sum(t log y) / N for probabilities y",
    (Param("y", "Tensor", "Probabilities, shape (N, C)."),
     Param("t", "Tensor", "Target, shape (N, C).")), ("y",), "The loss, shape (1,).",
    grad="y's gradient is -t / (y N) times the loss's",
    numpy=lambda y, t: -(t * np.log(y)).sum(keepdims=True).reshape(1) / len(y),
    example={"y": [[0.2, 0.8], [0.5, 0.5]], "t": [[0.0, 1.0], [1.0, 0.0]]}))
class CrossEntropy(Operator):
    """loss = -sum(t log x) / N for probabilities x (N, C); dx = -t / (x N) * dy."""

    def __init__(self, t):
        super().__init__()
        self.t = t

    def forward(self, x):
        """The loss, shape (1,) -sum(t log x) / N of the (N, C) probabilities x."""
        if len(x.dims) != 2:
            raise ShapeError(f"cross_entropy expects 2-D probabilities (N, C), got {x.dims}")
        if 0 in x.dims:
            raise ShapeError(f"cross_entropy: input {x.dims} is empty; a loss needs at least one "
                             "sample and one class (check the batch)")
        tc = _target(self.t, x)
        n = x.dims[0]
        if len(tc.dims) == 1:
            # class ids: SINGA's CrossEntropyFwd, whose kernels refuse ids outside [0, C) on
            # every backend (a one-hot of a bad id would be a silent row of zeros)
            per_row = run(OPS["CrossEntropyFwd"], [x, tc])[0]
            self.x = x
            self.tc = run(OPS["OneHot"], [tc], {"depth": x.dims[1], "axis": -1, "on_value": 1.0,
                                               "off_value": 0.0, "dtype": x.dtype_code})[0]
            return _math.reshape(_math.mul(_math.sum(per_row), 1.0 / n), (1,))
        self.x, self.tc = x, tc
        return _math.reshape(_math.mul(_math.sum(_math.mul(tc, _math.log(x))), -1.0 / n), (1,))

    def backward(self, dy=1.0):
        """dx = -t / (x N) * dy, shape (N, C)."""
        g = _math.mul(_math.div(self.tc, self.x), -1.0 / self.x.dims[0])
        return _scale_by(g, dy)


@declares(Function(
    "binary_cross_entropy", "loss = -sum(t log(x + eps) + (1 - t) log(1 - x + eps)) / N, eps "
    "= 1e-4",
    (Param("x", "Tensor", "Probabilities, shape (N, ...)."),
     Param("t", "Tensor", "Target of x's shape.")), ("x",), "The loss, shape (1,).",
    grad="dx = -(t / (x + eps) - (1 - t) / (1 - x + eps)) / N dy",
    numpy=lambda x, t: -(t * np.log(x + 1e-4) + (1 - t) * np.log(1 - x + 1e-4)).sum(
        keepdims=True).reshape(1) / len(x),
    example={"x": [[0.9, 0.2]], "t": [[1.0, 0.0]]}))
class BinaryCrossEntropy(Operator):
    """loss = -sum(t log(x + eps) + (1 - t) log(1 - x + eps)) / N with eps = 1e-4."""

    eps = 1e-4

    def __init__(self, t):
        super().__init__()
        self.t = t

    def forward(self, x):
        """The loss, shape (1,) -sum(t log(x + eps) + (1 - t) log(1 - x + eps)) / N, eps = 1e-4."""
        t = self.t.data if hasattr(self.t, "data") else self.t
        if t.dims != x.dims:
            raise ShapeError(f"binary_cross_entropy: target {t.dims} must match x {x.dims}")
        t = t if t.dtype_code == x.dtype_code else _math.as_type(t, x.dtype_code)
        self.x, self.tc = x, t
        e = self.eps
        pos = _math.mul(t, _math.log(_math.add(x, e)))
        neg = _math.mul(_math.rsub(t, 1.0), _math.log(_math.add(_math.rsub(x, 1.0), e)))
        return _math.reshape(_math.mul(_math.sum(_math.add(pos, neg)), -1.0 / x.dims[0]), (1,))

    def backward(self, dy=1.0):
        """dx = -(t / (x + eps) - (1 - t) / (1 - x + eps)) / N * dy, of x's shape."""
        x, t, e = self.x, self.tc, self.eps
        g = _math.sub(_math.div(t, _math.add(x, e)),
                      _math.div(_math.rsub(t, 1.0), _math.add(_math.rsub(x, 1.0), e)))
        return _scale_by(_math.mul(g, -1.0 / x.dims[0]), dy)


@declares(Function(
    "mse_loss", "loss = sum((x - t)^2) / n over the n cells",
    (Param("x", "Tensor", "Any shape."), Param("t", "Tensor", "Target of x's shape.")),
    ("x",), "The loss, shape (1,).", grad="dx = 2 (x - t) / n dy",
    note="SINGA's form: the target is part of the operator, so the loss has one input and "
    "``loss.creator.backward()`` returns dx alone.",
    numpy=lambda x, t: ((x - t) ** 2).mean(keepdims=True).reshape(1),
    example={"x": [1.0, 2.0], "t": [0.0, 4.0]}))
class MeanSquareError(Operator):
    """loss = sum((x - t)^2) / n (n elements); dx = 2 (x - t) / n * dy.

    SINGA's form is ``MeanSquareError(t)(x)`` (what :func:`mse_loss` builds): the target is a
    constructor argument and ``backward`` returns the single CTensor dx. ``MeanSquareError()(x,
    t)`` also works and then returns ``(dx, dt)``.
    """

    def __init__(self, t=None):
        super().__init__()
        self.t = t

    def forward(self, x, t=None):
        """The loss, shape (1,) sum((x - t)^2) / n over the n cells; t is the constructor's target
        unless given here.
        """
        self.two_inputs = t is not None
        t = t if t is not None else (self.t.data if hasattr(self.t, "data") else self.t)
        if t.dims != x.dims:
            raise ShapeError(f"mse_loss: target {t.dims} must match x {x.dims}")
        if x.size == 0:
            raise ShapeError(f"mse_loss: x {x.dims} is empty; the mean of no squared errors is "
                             "undefined (check the batch)")
        self.diff = _math.sub(x, t)
        return _math.reshape(_math.mul(_math.sum(_math.square(self.diff)), 1.0 / x.size), (1,))

    def backward(self, dy=1.0):
        """dx = 2 (x - t) / n * dy; with t given to forward, (dx, -dx)."""
        g = _scale_by(_math.mul(self.diff, 2.0 / self.diff.size), dy)
        return (g, _math.neg(g)) if self.two_inputs else g


@declares(Function(
    "ranking_loss", "loss = mean(max(0, M - pos + neg))",
    (Param("pos", "Tensor", "Scores of the positive samples."),
     Param("neg", "Tensor", "Scores of the negative samples, pos's shape."),
     Param("M", "float", "The margin.", 0.2)), ("pos", "neg"), "The loss, shape (1,).",
    grad="dpos = -dy / n, dneg = dy / n where M - pos + neg > 0, else 0",
    numpy=lambda pos, neg, M=0.2: np.maximum(0, M - pos + neg).mean(  # noqa: N803
        keepdims=True).reshape(1),
    example={"pos": [1.0, 0.3], "neg": [0.5, 0.4]}))
class RankingLoss(Operator):
    """loss = mean(max(0, M - pos + neg)); the gradient flows where the hinge is active."""

    def __init__(self, M=0.2):  # noqa: N803  (SINGA's argument name)
        super().__init__()
        self.M = float(M)

    def forward(self, pos, neg):
        """The loss, shape (1,) mean(max(0, M - pos + neg)) of two same-shape CTensors."""
        if pos.dims != neg.dims:
            raise ShapeError(f"ranking_loss: pos {pos.dims} and neg {neg.dims} must have one "
                             "shape (one score per pair)")
        z = _math.add(_math.sub(neg, pos), self.M)
        self.active = _math.gt(z, 0.0)
        return _math.reshape(_math.reduce_mean(_math.relu(z)), (1,))

    def backward(self, dy=1.0):
        """(dpos, dneg) = (-g, g), g = dy / n where M - pos + neg > 0, else 0."""
        g = _scale_by(_math.mul(self.active, 1.0 / self.active.size), dy)
        return _math.neg(g), g


class _RNN(Operator):
    """SINGA's fused cuDNN RNN operator (``forward(x, hx, cx, W)`` with cuDNN's flat weight
    vector). Not provided: :class:`singa.layer.CudnnRNN` builds the same recurrent networks
    from autograd ops with per-gate parameters, on every backend."""

    def __init__(self, handle=None, return_sequences=False, use_mask=False, seq_lengths=None):
        raise SingaError(
            "autograd._RNN (cuDNN's fused RNN with a flat weight vector) is not provided; use "
            "layer.CudnnRNN(hidden_size, rnn_mode=...) or layer.LSTM/GRU/RNN, which run on "
            "every backend (see docs/compatibility.md)")
