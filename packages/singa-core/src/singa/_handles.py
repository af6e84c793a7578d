"""Geometry records for convolution, pooling and batch norm (SINGA's *Handle classes).

SINGA had separate CPU (``ConvHandle``) and cuDNN (``CudnnConvHandle``) handles. Here one
backend-independent record describes the operation; each backend keeps whatever plans or
workspaces it needs inside its own kernels. The cuDNN names are aliases, kept so that code
constructing them still runs.
"""

from __future__ import annotations

from typing import Any

from .errors import ShapeError


def _pair(v, name):
    if isinstance(v, int):
        return (v, v)
    v = tuple(int(i) for i in v)
    if len(v) != 2:
        raise ShapeError(f"{name} must be an int or a pair, got {v}")
    return v


def _pads4(padding, odd_padding=(0, 0, 0, 0)):
    """(top, bottom, left, right) from SINGA padding forms plus odd (asymmetric) extras."""
    if isinstance(padding, int):
        p = (padding, padding, padding, padding)
    else:
        padding = tuple(int(i) for i in padding)
        if len(padding) == 2:
            p = (padding[0], padding[0], padding[1], padding[1])
        elif len(padding) == 4:
            p = padding
        else:
            raise ShapeError(f"padding must be an int, a pair or 4 values, got {padding}")
    o = tuple(int(i) for i in odd_padding)
    return (p[0] + o[0], p[1] + o[1], p[2] + o[2], p[3] + o[3])


def _shape_of(x) -> tuple:
    """Shape of a CTensor (``shape()`` method) or Tensor (``shape`` attribute)."""
    s = x.shape
    return tuple(s() if callable(s) else s)


def conv_output_size(size: int, k: int, stride: int, pad_begin: int, pad_end: int,
                     dilation: int = 1) -> int:
    r"""The output length of a convolution or pooling window along one axis.

    :math:`\lfloor (n + p_b + p_e - (d (k - 1) + 1)) / s \rfloor + 1`.

    Parameters
    ----------
    size : int
        The input length :math:`n`.
    k : int
        The window (kernel) length.
    stride : int
        The step :math:`s` between windows.
    pad_begin, pad_end : int
        The padding :math:`p_b`, :math:`p_e` before and after the input.
    dilation : int, default 1
        The spacing :math:`d` between window taps.

    Returns
    -------
    int
        The number of windows (below 1 when the window does not fit).
    """
    eff = dilation * (k - 1) + 1
    return (size + pad_begin + pad_end - eff) // stride + 1


class ConvHandle:
    """Convolution geometry for an input like ``x`` (N, C, H, W).

    ``ConvHandle(x, kernel_size, stride, padding, in_channels, out_channels, bias, groups=1,
    dilation=1)``; extra positional/keyword arguments of the cuDNN form (workspace limit,
    algorithm preference) are accepted and ignored.
    """

    def __init__(self, x, kernel_size, stride, padding, in_channels, out_channels, bias,
                 groups=1, *extra, dilation=1, odd_padding=(0, 0, 0, 0), **kw):
        self.kernel = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride")
        self.dilation = _pair(dilation, "dilation")
        self.pads = _pads4(padding, odd_padding)
        self.channels = int(in_channels)
        self.num_filters = int(out_channels)
        self.bias_term = bool(bias)
        self.group = int(groups)
        if self.channels % self.group or self.num_filters % self.group:
            raise ShapeError(f"Conv2d: in_channels {self.channels} and out_channels "
                             f"{self.num_filters} must be divisible by group {self.group}")
        shp = _shape_of(x)
        if len(shp) != 4:
            raise ShapeError(f"Conv2d expects a 4-D input (N, C, H, W), got shape {shp}")
        self.batchsize, self.height, self.width = shp[0], shp[2], shp[3]
        self.pad_h, self.pad_w = self.pads[0], self.pads[2]
        self.stride_h, self.stride_w = self.stride
        self.kernel_h, self.kernel_w = self.kernel
        self.conv_height = conv_output_size(self.height, self.kernel_h, self.stride_h,
                                            self.pads[0], self.pads[1], self.dilation[0])
        self.conv_width = conv_output_size(self.width, self.kernel_w, self.stride_w,
                                           self.pads[2], self.pads[3], self.dilation[1])
        if self.conv_height < 1 or self.conv_width < 1:
            raise ShapeError(
                f"Conv2d: input {self.height}x{self.width} is smaller than the kernel "
                f"{self.kernel} with padding {self.pads} and dilation {self.dilation}"
            )

    def attrs(self) -> dict[str, Any]:
        """The convolution's attributes as the ``Conv2d`` op takes them.

        Returns
        -------
        dict
            ``stride`` and ``dilation`` (pairs), ``pads`` (top, bottom, left, right) and
            ``group``.
        """
        return {"stride": self.stride, "pads": self.pads, "dilation": self.dilation,
                "group": self.group}


CudnnConvHandle = ConvHandle


class PoolingHandle:
    """Pooling geometry: ``PoolingHandle(x, kernel_size, stride, padding, is_max=True)``."""

    def __init__(self, x, kernel_size, stride, padding, is_max=True, *extra,
                 odd_padding=(0, 0, 0, 0), count_include_pad=True, **kw):
        self.kernel = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride")
        self.pads = _pads4(padding, odd_padding)
        self.is_max_pooling = bool(is_max)
        self.count_include_pad = bool(count_include_pad)
        shp = _shape_of(x)
        if len(shp) != 4:
            raise ShapeError(f"Pooling2d expects a 4-D input (N, C, H, W), got shape {shp}")
        self.batchsize, self.channels, self.height, self.width = shp
        self.pooled_height = conv_output_size(self.height, self.kernel[0], self.stride[0],
                                              self.pads[0], self.pads[1])
        self.pooled_width = conv_output_size(self.width, self.kernel[1], self.stride[1],
                                             self.pads[2], self.pads[3])
        if self.pooled_height < 1 or self.pooled_width < 1:
            raise ShapeError(f"Pooling2d: input {self.height}x{self.width} is smaller than "
                             f"the window {self.kernel} with padding {self.pads}")

    def attrs(self) -> dict[str, Any]:
        """The pooling's attributes as the ``Pooling2d`` op takes them.

        Returns
        -------
        dict
            ``kernel`` and ``stride`` (pairs), ``pads`` (top, bottom, left, right), ``mode``
            (``"max"`` or ``"avg"``) and ``count_include_pad``.
        """
        return {"kernel": self.kernel, "stride": self.stride, "pads": self.pads,
                "mode": "max" if self.is_max_pooling else "avg",
                "count_include_pad": self.count_include_pad}


CudnnPoolingHandle = PoolingHandle


class BatchNormHandle:
    """Batch-norm settings: ``BatchNormHandle(momentum, x)`` (running-average factor)."""

    def __init__(self, factor, x=None, eps=1e-5):
        self.factor = float(factor)
        self.eps = float(eps)
        if x is not None:
            self.channels = _shape_of(x)[1]


CudnnBatchNormHandle = BatchNormHandle
