"""Dense layers, embeddings, activations, losses and shape layers."""

from __future__ import annotations

import math

from .. import _dtype, autograd
from ..errors import DtypeMismatchError, ShapeError
from ..tensor import Tensor
from ._base import Layer, ParamLayer, new_param

_INT32 = _dtype.kInt


class Linear(ParamLayer):
    """Fully connected layer: ``y = x W + b``.

    ``Linear(out_features)`` or ``Linear(in_features, out_features[, bias])``;
    ``in_features`` is inferred from the first input either way.

    Parameters
    ----------
    out_features : int
        Width of the output, at least 1.
    bias : bool, default True
        Whether to add ``b``.

    Notes
    -----
    ``W`` (in, out) ~ N(0, 2 / (in + out)); ``b`` (out,) = 0, both created on the first call
    on the input's device and dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from singa import layer, tensor
    >>> fc = layer.Linear(3)
    >>> fc(tensor.from_numpy(np.ones((2, 4), np.float32))).shape
    (2, 3)
    """

    def __init__(self, out_features, *args, bias=True, **kwargs):
        super().__init__()
        self.in_features = None
        if args:
            self.in_features = out_features
            out_features = args[0]
            if len(args) > 1:
                bias = args[1]
        self.out_features = int(out_features)
        if self.out_features < 1:
            raise ShapeError(f"Linear: out_features must be at least 1, got {out_features}")
        self.bias = bool(bias)

    def initialize(self, x):
        """Create ``W`` (in_features, out_features) and ``b`` (out_features,) from ``x``.

        Parameters
        ----------
        x : Tensor
            The first input, (batch, in_features), floating point.
        """
        self.float_check(x)
        if len(x.shape) != 2:
            raise ShapeError(f"Linear {self.name or ''}: expects 2-D input (batch, features), "
                             f"got shape {x.shape}; flatten it first (layer.Flatten() or "
                             "autograd.flatten)")
        self.in_features = x.shape[1]
        std = math.sqrt(2.0 / (self.in_features + self.out_features))
        self.W = new_param((self.in_features, self.out_features), x).gaussian(0.0, std)
        if self.bias:
            self.b = new_param((self.out_features,), x).set_value(0.0)

    def forward(self, x):
        """Compute ``y = x W + b``.

        Parameters
        ----------
        x : Tensor
            Shape (batch, in_features).

        Returns
        -------
        Tensor
            Shape (batch, out_features).
        """
        if self.bias:
            self.device_check(x, self.W, self.b)
        else:
            self.device_check(x, self.W)
        self.dtype_check(x, self.W, *([self.b] if self.bias else []))
        if len(x.shape) != 2 or x.shape[-1] != self.W.shape[0]:
            raise ShapeError(f"Linear {self.name or ''}: W expects {self.W.shape[0]} input "
                             f"features, i.e. input of shape (batch, {self.W.shape[0]}); got "
                             f"{x.shape}")
        y = autograd.matmul(x, self.W)
        if self.bias:
            y = autograd.add_bias(y, self.b, axis=0)
        return y

    def _param_names(self):
        return ["W", "b"] if self.bias else ["W"]


class Gemm(ParamLayer):
    """ONNX-style Gemm layer: y = alpha op(x) op(W) + beta b."""

    def __init__(self, nb_kernels, alpha=1.0, beta=1.0, transA=False, transB=True,  # noqa: N803
                 bias=True, bias_shape=None):
        super().__init__()
        self.nb_kernels = int(nb_kernels)
        if self.nb_kernels < 1:
            raise ShapeError(f"Gemm: nb_kernels must be at least 1, got {nb_kernels}")
        self.alpha, self.beta = float(alpha), float(beta)
        self.transA, self.transB = int(transA), int(transB)
        self.bias, self.bias_shape = bool(bias), bias_shape

    def initialize(self, x):
        """Create ``W`` ((nb_kernels, n_in) if ``transB`` else (n_in, nb_kernels)) and ``b``.

        Parameters
        ----------
        x : Tensor
            The first input, 2-D; ``n_in`` is its second axis (its first when ``transA``).
        """
        self.float_check(x)
        if len(x.shape) != 2:
            raise ShapeError(f"Gemm {self.name or ''}: expects a 2-D input, got {x.shape}")
        n_in = x.shape[0] if self.transA else x.shape[1]
        w_shape = (self.nb_kernels, n_in) if self.transB else (n_in, self.nb_kernels)
        std = math.sqrt(2.0 / (n_in + self.nb_kernels))
        self.W = new_param(w_shape, x).gaussian(0.0, std)
        if self.bias:
            shape = tuple(self.bias_shape) if self.bias_shape else (1, self.nb_kernels)
            self.b = new_param(shape, x).set_value(0.0)

    def forward(self, x):
        """Compute ``y = alpha op(x) op(W) + beta b``.

        Parameters
        ----------
        x : Tensor
            A 2-D input.

        Returns
        -------
        Tensor
            Shape (batch, nb_kernels).
        """
        if self.bias:
            return autograd.gemm(x, self.W, self.b, self.alpha, self.beta, self.transA,
                                 self.transB)
        return autograd.gemm(x, self.W, None, self.alpha, self.beta, self.transA, self.transB)

    def _param_names(self):
        return ["W", "b"] if self.bias else ["W"]


class Embedding(ParamLayer):
    """Rows of W (input_dim, output_dim) looked up by integer ids."""

    def __init__(self, input_dim, output_dim, initializer="gaussian"):
        super().__init__()
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        if min(self.input_dim, self.output_dim) < 1:
            raise ShapeError(f"Embedding: input_dim={input_dim} (vocabulary size) and "
                             f"output_dim={output_dim} must be at least 1")
        if initializer not in ("gaussian", "uniform"):
            raise ValueError(f"Embedding initializer must be 'gaussian' or 'uniform', "
                             f"got {initializer!r}")
        self.initializer = initializer
        self._pretrained = None
        self.freeze = False

    def initialize(self, x):
        """Create ``W`` (input_dim, output_dim), float32, from the pretrained array if one was
        given.

        Parameters
        ----------
        x : Tensor
            The first batch of ids; only its device is used.
        """
        from .. import tensor

        self.W = Tensor((self.input_dim, self.output_dim), x.device, tensor.float32,
                        requires_grad=not self.freeze, stores_grad=not self.freeze)
        if self._pretrained is not None:
            self.W.copy_from_numpy(self._pretrained)
        elif self.initializer == "gaussian":
            self.W.gaussian(0.0, 1.0)
        else:
            self.W.uniform(-1.0, 1.0)

    def from_pretrained(self, W, freeze=True):
        """Use the given (input_dim, output_dim) array as W; ``freeze`` stops its updates."""
        import numpy as np

        W = np.asarray(W.to_numpy() if isinstance(W, Tensor) else W, np.float32)
        self.input_dim, self.output_dim = W.shape
        self._pretrained, self.freeze = W, bool(freeze)
        if self._initialized:
            self.W.copy_from_numpy(W)
            self.W.requires_grad = self.W.stores_grad = not self.freeze

    def forward(self, x):
        """Look up the rows of ``W`` named by ``x``.

        Parameters
        ----------
        x : Tensor
            int32 ids in ``[0, input_dim)``, any shape ``S``.

        Returns
        -------
        Tensor
            Shape ``S + (output_dim,)``.
        """
        if x.dtype != _INT32:
            raise DtypeMismatchError(
                f"Embedding {self.name or ''}: ids must be int32, got "
                f"{_dtype.name_of(x.dtype)}; convert with x.as_type(tensor.int32)")
        self.device_check(x, self.W)
        return autograd.embedding(x, self.W)

    def _param_names(self):
        return ["W"]


def _stateless(name, fn, doc):
    def forward(self, *xs):
        return fn(*xs)

    return type(name, (Layer,), {"forward": forward, "__doc__": doc})


ReLU = _stateless("ReLU", autograd.relu, "y = max(x, 0).")
Sigmoid = _stateless("Sigmoid", autograd.sigmoid, "y = 1 / (1 + exp(-x)).")
Tanh = _stateless("Tanh", autograd.tanh, "y = tanh(x).")
Add = _stateless("Add", autograd.add, "y = a + b (broadcasting); forward(a, b).")


class Flatten(Layer):
    """Reshape to (prod(shape[:axis]), prod(shape[axis:]))."""

    def __init__(self, axis=1):
        super().__init__()
        self.axis = axis

    def forward(self, x):
        """Reshape ``x`` to (prod(shape[:axis]), prod(shape[axis:]))."""
        return autograd.flatten(x, self.axis)


class SoftMax(Layer):
    """Softmax along ``axis`` (default 1)."""

    def __init__(self, axis=1):
        super().__init__()
        self.axis = axis

    def forward(self, x):
        """Compute ``exp(x) / sum(exp(x))`` along ``axis``; the output has ``x``'s shape."""
        return autograd.softmax(x, self.axis)


class SoftMaxCrossEntropy(Layer):
    """forward(x, t): mean cross entropy of softmax(x) against ids (N,) or dense (N, C) t."""

    def forward(self, x, t):
        """Mean cross entropy of ``softmax(x)`` against the targets.

        Parameters
        ----------
        x : Tensor
            Logits, (N, C).
        t : Tensor
            Class ids (N,) or dense targets (N, C).

        Returns
        -------
        Tensor
            A scalar loss.
        """
        return autograd.softmax_cross_entropy(x, t)


class MeanSquareError(Layer):
    """forward(x, t): sum((x - t)^2) / n."""

    def forward(self, x, t):
        """Compute ``sum((x - t)^2) / n``, n the number of elements of ``x``; returns a scalar."""
        return autograd.mse_loss(x, t)


class CrossEntropy(Layer):
    """forward(x, t): -sum(t log x) / N for probabilities x."""

    def forward(self, x, t):
        """Compute ``-sum(t log x) / N`` for probabilities ``x`` (N, C) and targets ``t``;
        returns a scalar.
        """
        return autograd.cross_entropy(x, t)


class BinaryCrossEntropy(Layer):
    """forward(x, t): binary cross entropy of probabilities x against t."""

    def forward(self, x, t):
        """Compute ``-sum(t log x + (1 - t) log(1 - x)) / N`` for probabilities ``x`` with
        batch size N; returns a scalar."""
        return autograd.binary_cross_entropy(x, t)


class Dropout(Layer):
    """Zero elements with probability ``ratio`` in training and scale the rest by
    1 / (1 - ratio). (SINGA passed ``ratio`` as the seed, so its ratio was always 0.5.)"""

    def __init__(self, ratio=0.5, seed=0):
        super().__init__()
        self.ratio, self.seed = float(ratio), seed

    def forward(self, x):
        """Zero each element with probability ``ratio`` and scale the rest by ``1 / (1 - ratio)``
        when training; identity otherwise.
        """
        return autograd.dropout(x, self.seed, self.ratio)


class Cat(Layer):
    """forward(list_of_tensors): concatenation along ``axis``."""

    def __init__(self, axis=0):
        super().__init__()
        self.axis = axis

    def forward(self, xs):
        """Concatenate the tensors of the list ``xs`` along ``axis``; all other axes must agree."""
        return autograd.cat(xs, self.axis)


class Reshape(Layer):
    """forward(x, shape): ONNX reshape (0 copies a dimension, -1 is inferred)."""

    def forward(self, x, shape):
        """Reshape ``x`` to ``shape`` (ONNX rules: 0 copies that dimension of ``x``, -1 is
        inferred).
        """
        return autograd.reshape(x, shape)
