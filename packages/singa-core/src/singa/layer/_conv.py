"""Convolution, pooling and batch-normalisation layers."""

from __future__ import annotations

import math

from .. import autograd
from .._handles import BatchNormHandle, ConvHandle, PoolingHandle, _pair
from ..errors import ShapeError
from ..utils import get_padding_shape
from ._base import Layer, ParamLayer, new_param


def _split_padding(padding):
    """(symmetric pads (ph, pw), odd extras (t, b, l, r)) from SINGA's padding forms."""
    if isinstance(padding, int):
        return (padding, padding), (0, 0, 0, 0)
    padding = tuple(int(p) for p in padding)
    if len(padding) == 2:
        return padding, (0, 0, 0, 0)
    if len(padding) == 4:
        t, b, l, r = padding
        ph, pw = min(t, b), min(l, r)
        return (ph, pw), (t - ph, b - ph, l - pw, r - pw)
    raise ShapeError(f"padding must be an int, a pair or (top, bottom, left, right): {padding}")


_PAD_MODES = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


_INT32_MAX = 2**31 - 1


def _positive(layer: str, name: str, pair: tuple) -> tuple:
    """A (h, w) pair of window sizes, strides or dilations, each at least 1."""
    if min(pair) < 1:
        raise ShapeError(f"{layer}: {name}={pair} must be at least 1 on each axis (a "
                         f"{name} of 0 has no meaning; use 1 for none)")
    if max(pair) > _INT32_MAX:
        raise ShapeError(f"{layer}: {name}={pair} is larger than any tensor axis "
                         f"(at most {_INT32_MAX})")
    return pair


def _non_negative_padding(layer: str, pads: tuple, odd: tuple) -> None:
    if min(pads + odd) < 0 or max(pads + odd) > _INT32_MAX:
        raise ShapeError(f"{layer}: padding must be in 0..{_INT32_MAX}, got {pads} (+ {odd})")


def _positional(nb_kernels, kernel_size, args, stride, padding):
    """(nb_kernels, kernel_size, stride, padding) from either positional form of Conv2d and
    SeparableConv2d: ``(nb_kernels, kernel_size)``, or PyTorch's ``(in_channels,
    out_channels, kernel_size[, stride[, padding]])`` (``args`` the arguments past the
    second), whose in_channels is dropped: the layer infers it from its first input."""
    if args:
        nb_kernels, kernel_size = kernel_size, args[0]
    if len(args) > 1:
        stride = args[1]
    if len(args) > 2:
        padding = args[2]
    return nb_kernels, kernel_size, stride, padding


class Conv2d(ParamLayer):
    """2-D convolution over (N, C, H, W).

    ``Conv2d(nb_kernels, kernel_size, stride=1, padding=0, dilation=1, group=1, bias=True,
    pad_mode='NOTSET', activation='NOTSET')``, or PyTorch style
    ``Conv2d(in_channels, out_channels, kernel_size[, stride[, padding]])`` (in_channels is
    inferred anyway). ``padding``: int, (ph, pw) or (top, bottom, left, right);
    ``pad_mode`` SAME_UPPER/SAME_LOWER computes it from the input size; ``activation='RELU'``
    fuses a ReLU. W (nb, in/group, kh, kw) ~ N(0, 2 / ((in/group) kh kw + nb)); b = 0.
    """

    def __init__(self, nb_kernels, kernel_size, *args, stride=1, padding=0, dilation=1,
                 group=1, bias=True, pad_mode="NOTSET", activation="NOTSET", **kwargs):
        super().__init__()
        nb_kernels, kernel_size, stride, padding = _positional(nb_kernels, kernel_size, args,
                                                               stride, padding)
        unknown = set(kwargs) - {"cudnn_prefer", "workspace_MB_limit"}
        if unknown:
            raise TypeError(f"Conv2d got unexpected keyword arguments {sorted(unknown)}")
        self.nb_kernels = int(nb_kernels)
        if self.nb_kernels < 1:
            raise ShapeError(f"Conv2d: nb_kernels (output channels) must be at least 1, got "
                             f"{nb_kernels}")
        self.kernel_size = _positive("Conv2d", "kernel_size", _pair(kernel_size, "kernel_size"))
        self.stride = _positive("Conv2d", "stride", _pair(stride, "stride"))
        self.dilation = _positive("Conv2d", "dilation", _pair(dilation, "dilation"))
        self.padding, self.odd_padding = _split_padding(padding)
        _non_negative_padding("Conv2d", self.padding, self.odd_padding)
        if int(group) < 1:
            raise ShapeError(f"Conv2d: group must be at least 1, got {group}")
        self.group = int(group)
        self.bias = bool(bias)
        if pad_mode.upper() not in _PAD_MODES:
            raise ValueError(f"pad_mode must be one of {_PAD_MODES}, got {pad_mode!r}")
        self.pad_mode = pad_mode.upper()
        if activation.upper() not in ("NOTSET", "RELU"):
            raise ValueError(f"activation must be 'NOTSET' or 'RELU', got {activation!r}")
        self.activation = activation.upper()
        self.handle = None

    def initialize(self, x):
        """Create ``W`` (nb_kernels, in_channels / group, kh, kw), ``b`` (nb_kernels,) and the
        convolution handle.

        Parameters
        ----------
        x : Tensor
            The first input, (N, C, H, W), floating point; C must be divisible by ``group``.
        """
        self.float_check(x)
        if len(x.shape) != 4:
            raise ShapeError(f"Conv2d {self.name}: expects (N, C, H, W) input, got {x.shape}")
        self.in_channels = x.shape[1]
        if self.in_channels < 1:
            raise ShapeError(f"Conv2d {self.name}: the input {x.shape} has no channels")
        if self.in_channels % self.group or self.nb_kernels % self.group:
            raise ShapeError(f"Conv2d {self.name}: in_channels {self.in_channels} and "
                             f"nb_kernels {self.nb_kernels} must be divisible by group "
                             f"{self.group}")
        kh, kw = self.kernel_size
        cin = self.in_channels // self.group
        std = math.sqrt(2.0 / (cin * kh * kw + self.nb_kernels))
        self.W = new_param((self.nb_kernels, cin, kh, kw), x).gaussian(0.0, std)
        if self.bias:
            self.b = new_param((self.nb_kernels,), x).set_value(0.0)
        self._make_handle(x)

    def _make_handle(self, x):
        if self.pad_mode in ("SAME_UPPER", "SAME_LOWER"):
            eff = tuple(d * (k - 1) + 1 for d, k in zip(self.dilation, self.kernel_size))
            pads, odd = get_padding_shape(self.pad_mode, x.shape[2:], eff, self.stride)
            self.padding, self.odd_padding = (pads[0], pads[2]), tuple(odd)
        elif self.pad_mode == "VALID":
            self.padding, self.odd_padding = (0, 0), (0, 0, 0, 0)
        self.handle = ConvHandle(x.data, self.kernel_size, self.stride, self.padding,
                                 self.in_channels, self.nb_kernels, self.bias, self.group,
                                 dilation=self.dilation, odd_padding=self.odd_padding)

    def forward(self, x):
        """Convolve ``x`` with ``W`` and add ``b`` (then ReLU when ``activation='RELU'``).

        Parameters
        ----------
        x : Tensor
            Shape (N, in_channels, H, W); a new H, W rebuilds the handle.

        Returns
        -------
        Tensor
            Shape (N, nb_kernels, H', W') with
            ``H' = (H + pad_top + pad_bottom - dilation (kh - 1) - 1) // stride + 1`` (W' alike).
        """
        if x.shape[1] != self.in_channels:
            raise ShapeError(f"Conv2d {self.name}: input has {x.shape[1]} channels, the layer "
                             f"was built for {self.in_channels}")
        params = [self.W] + ([self.b] if self.bias else [])
        self.device_check(x, *params)
        self.dtype_check(x, *params)
        h = self.handle
        if (h.height, h.width) != tuple(x.shape[2:]):
            self._make_handle(x)
        y = autograd.conv2d(self.handle, x, self.W, self.b if self.bias else None)
        return autograd.relu(y) if self.activation == "RELU" else y

    def _param_names(self):
        return ["W", "b"] if self.bias else ["W"]


class SeparableConv2d(Layer):
    """A depthwise convolution (group = in_channels) followed by a 1x1 pointwise one.

    ``SeparableConv2d(nb_kernels, kernel_size, stride=1, padding=0, bias=False)`` or, as
    SINGA's examples write it, ``SeparableConv2d(in_channels, out_channels, kernel_size[,
    stride[, padding]])`` (in_channels is inferred anyway); stride and padding apply to the
    depthwise convolution.
    """

    def __init__(self, nb_kernels, kernel_size, *args, stride=1, padding=0, bias=False):
        super().__init__()
        if len(args) > 3:
            raise TypeError(f"SeparableConv2d takes at most 5 positional arguments (in_channels, "
                            f"out_channels, kernel_size, stride, padding), got {2 + len(args)}")
        nb_kernels, kernel_size, stride, padding = _positional(nb_kernels, kernel_size, args,
                                                               stride, padding)
        self.nb_kernels, self.kernel_size = int(nb_kernels), kernel_size
        self.stride, self.padding, self.bias = stride, padding, bias

    def initialize(self, x):
        """Create the depthwise (group = C) and the 1x1 pointwise convolutions from ``x`` (N, C,
        H, W).
        """
        cin = x.shape[1]
        self.depthwise_conv = Conv2d(cin, self.kernel_size, stride=self.stride,
                                     padding=self.padding, group=cin, bias=self.bias)
        self.point_conv = Conv2d(self.nb_kernels, 1, bias=self.bias)

    def forward(self, x):
        """Apply the depthwise then the pointwise convolution; returns (N, nb_kernels, H', W')."""
        return self.point_conv(self.depthwise_conv(x))


class BatchNorm2d(ParamLayer):
    """Batch normalisation over channels (axis 1) of (N, C) or (N, C, H, W) input.

    Params ``scale`` (1) and ``bias`` (0); states ``running_mean`` (0) and ``running_var`` (1),
    updated as running = momentum running + (1 - momentum) batch statistic; eps = 1e-5.
    """

    def __init__(self, *args, momentum=0.9):
        super().__init__()
        self.channels = int(args[0]) if args else None
        if len(args) > 1:  # BatchNorm2d(channels, momentum), SINGA's positional form
            momentum = args[1]
        if not 0.0 <= float(momentum) <= 1.0:
            raise ValueError(f"BatchNorm2d: momentum must be in [0, 1], got {momentum}")
        self.momentum = float(momentum)

    def initialize(self, x):
        """Create ``scale`` (1), ``bias`` (0), ``running_mean`` (0) and ``running_var`` (1), each
        (C,).

        Parameters
        ----------
        x : Tensor
            The first input, (N, C) or (N, C, H, W), floating point.
        """
        self.float_check(x)
        if len(x.shape) not in (2, 4):
            raise ShapeError(f"BatchNorm2d {self.name}: expects (N, C) or (N, C, H, W) input, "
                             f"got {x.shape}")
        c = x.shape[1]
        if self.channels is not None and self.channels != c:
            raise ShapeError(f"BatchNorm2d {self.name}: built for {self.channels} channels, "
                             f"input has {c}")
        self.channels = c
        self.scale = new_param((c,), x).set_value(1.0)
        self.bias = new_param((c,), x).set_value(0.0)
        self.running_mean = new_param((c,), x, stores_grad=False).set_value(0.0)
        self.running_var = new_param((c,), x, stores_grad=False).set_value(1.0)
        self.handle = BatchNormHandle(self.momentum, x.data)

    def forward(self, x):
        """Normalise each channel: ``y = scale (x - mean) / sqrt(var + eps) + bias``.

        In training ``mean`` and ``var`` are the batch's, and the running statistics are updated;
        in evaluation the running statistics are used.

        Parameters
        ----------
        x : Tensor
            Shape (N, C) or (N, C, H, W), non-empty.

        Returns
        -------
        Tensor
            The shape of ``x``.
        """
        if len(x.shape) not in (2, 4) or 0 in x.shape:
            raise ShapeError(f"BatchNorm2d {self.name}: expects a non-empty (N, C) or "
                             f"(N, C, H, W) input, got {x.shape} (batch statistics of an "
                             "empty batch are undefined)")
        self.device_check(x, self.scale, self.bias, self.running_mean, self.running_var)
        self.dtype_check(x, self.scale, self.bias, self.running_mean, self.running_var)
        return autograd.batchnorm_2d(self.handle, x, self.scale, self.bias, self.running_mean,
                                     self.running_var)

    def _param_names(self):
        return ["scale", "bias"]

    def get_states(self):
        """The parameters plus ``running_mean`` and ``running_var``, by full name."""
        states = self.get_params()
        states[self.running_mean.name] = self.running_mean
        states[self.running_var.name] = self.running_var
        return states

    def set_states(self, states):
        """Copy values into the parameters and running statistics of the same names.

        Parameters
        ----------
        states : dict[str, Tensor or numpy.ndarray]
            Values by full name, each of shape (C,).
        """
        self.set_params(states)
        self._set_tensors(states, ["running_mean", "running_var"])


class Pooling2d(Layer):
    """Max (``is_max``) or average pooling; ``stride`` defaults to ``kernel_size``."""

    def __init__(self, kernel_size, stride=None, padding=0, is_max=True, pad_mode="NOTSET"):
        super().__init__()
        kind = "MaxPool2d" if is_max else "AvgPool2d"
        self.kernel_size = _positive(kind, "kernel_size", _pair(kernel_size, "kernel_size"))
        self.stride = self.kernel_size if stride is None else _positive(
            kind, "stride", _pair(stride, "stride"))
        self.padding, self.odd_padding = _split_padding(padding)
        _non_negative_padding(kind, self.padding, self.odd_padding)
        self.is_max = bool(is_max)
        if pad_mode.upper() not in _PAD_MODES:
            raise ValueError(f"pad_mode must be one of {_PAD_MODES}, got {pad_mode!r}")
        self.pad_mode = pad_mode.upper()
        self.count_include_pad = True
        self.handle = None

    def initialize(self, x):
        """Build the pooling handle from the first input ``x`` (N, C, H, W)."""
        self._make_handle(x)

    def _make_handle(self, x):
        if self.pad_mode in ("SAME_UPPER", "SAME_LOWER"):
            pads, odd = get_padding_shape(self.pad_mode, x.shape[2:], self.kernel_size,
                                          self.stride)
            self.padding, self.odd_padding = (pads[0], pads[2]), tuple(odd)
        elif self.pad_mode == "VALID":
            self.padding, self.odd_padding = (0, 0), (0, 0, 0, 0)
        self.handle = PoolingHandle(x.data, self.kernel_size, self.stride, self.padding,
                                    self.is_max, odd_padding=self.odd_padding,
                                    count_include_pad=self.count_include_pad)

    def forward(self, x):
        """Pool each (kh, kw) window of ``x`` (max or average).

        Parameters
        ----------
        x : Tensor
            Shape (N, C, H, W).

        Returns
        -------
        Tensor
            Shape (N, C, H', W') with ``H' = (H + 2 ph - kh) // stride + 1`` (W' alike).
        """
        h = self.handle
        if (h.height, h.width, h.channels) != (x.shape[2], x.shape[3], x.shape[1]):
            self._make_handle(x)
        return autograd.pooling_2d(self.handle, x)


class MaxPool2d(Pooling2d):
    """Max pooling over (N, C, H, W)."""

    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET"):
        super().__init__(kernel_size, stride, padding, True, pad_mode)


class AvgPool2d(Pooling2d):
    """Average pooling over (N, C, H, W) (padding cells count, as in SINGA/cuDNN)."""

    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET"):
        super().__init__(kernel_size, stride, padding, False, pad_mode)


class MaxPool1d(Pooling2d):
    """Max pooling along the last axis of (N, C, 1, W): kernel (1, k)."""

    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET"):
        stride = kernel_size if stride is None else stride
        super().__init__((1, kernel_size), (1, stride), (0, padding), True, pad_mode)


class AvgPool1d(Pooling2d):
    """Average pooling along the last axis of (N, C, 1, W): kernel (1, k)."""

    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET"):
        stride = kernel_size if stride is None else stride
        super().__init__((1, kernel_size), (1, stride), (0, padding), False, pad_mode)
