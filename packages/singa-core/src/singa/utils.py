"""Helpers shared by layers, examples and ONNX: padding rules, progress bars, graph walks."""

from __future__ import annotations

import math
import sys
from collections import OrderedDict

__all__ = ["update_progress", "get_padding_shape", "get_output_shape", "same_pad_shape_check",
           "handle_odd_pad_fwd", "handle_odd_pad_bwd", "re_new_handle", "force_unicode",
           "post_order_recursive"]


def update_progress(progress: float, info: str = "") -> None:
    """Draw a one-line text progress bar for ``progress`` in [0, 1]."""
    width = 30
    progress = min(max(float(progress), 0.0), 1.0)
    filled = int(round(width * progress))
    bar = "#" * filled + "-" * (width - filled)
    end = "\n" if progress >= 1.0 else ""
    sys.stdout.write(f"\r[{bar}] {progress * 100:5.1f}% {info}{end}")
    sys.stdout.flush()


def get_padding_shape(pad_mode: str, input_spatial_shape, kernel_spatial_shape,
                      strides_spatial):
    """ONNX SAME padding, in SINGA's format: ``(pads, odd_pads)``, two lists.

    ``pads`` is ``[begin_0, end_0, begin_1, end_1, ...]`` with the symmetric part (``begin_i ==
    end_i``) of each spatial axis; ``odd_pads`` has the same layout and holds the one extra cell
    of an odd total: at the end for SAME_UPPER, at the beginning for SAME_LOWER. The total per
    axis is ``max((ceil(in / s) - 1) * s + k - in, 0)``.
    """
    mode = pad_mode.upper()
    if mode not in ("SAME_UPPER", "SAME_LOWER"):
        raise ValueError(f"pad_mode must be SAME_UPPER or SAME_LOWER, got {pad_mode!r}")
    pads: list[int] = []
    odd: list[int] = []
    for size, k, s in zip(input_spatial_shape, kernel_spatial_shape, strides_spatial):
        out = math.ceil(size / s)
        total = max((out - 1) * s + k - size, 0)
        small, extra = total // 2, total % 2
        pads.extend((small, small))
        odd.extend((extra, 0) if mode == "SAME_LOWER" else (0, extra))
    return pads, odd


def get_output_shape(pad_mode: str, input_spatial_shape, kernel_spatial_shape,
                     strides_spatial):
    """Spatial output shape of a convolution/pooling with ONNX auto padding."""
    mode = pad_mode.upper()
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        return tuple(math.ceil(i / s) for i, s in zip(input_spatial_shape, strides_spatial))
    if mode == "VALID":
        return tuple(math.ceil((i - k + 1) / s) for i, k, s in
                     zip(input_spatial_shape, kernel_spatial_shape, strides_spatial))
    raise ValueError(f"unsupported pad_mode {pad_mode!r}")


def same_pad_shape_check(handle, pad_mode, x) -> None:
    """Raise if ``handle`` (built for SAME padding) does not give a SAME-sized output."""
    want = get_output_shape(pad_mode, x.shape[2:], handle.kernel, handle.stride)
    got = (getattr(handle, "conv_height", getattr(handle, "pooled_height", None)),
           getattr(handle, "conv_width", getattr(handle, "pooled_width", None)))
    if tuple(want) != tuple(got):
        raise ValueError(f"padding {pad_mode} should give output {want}, the handle gives {got}")


def handle_odd_pad_fwd(x, odd_padding, is_pool=False):
    """Pad a CTensor by the asymmetric extras (top, bottom, left, right).

    Convolution pads with zeros; pooling replicates the edges (SINGA's rule).
    """
    from . import _math
    from .ops import OPS, run

    t, b, l, r = odd_padding
    pads = (0, 0, t, l, 0, 0, b, r)
    mode = "edge" if is_pool else "constant"
    return run(OPS["Pad"], [x], {"pads": pads, "mode": mode, "value": 0.0})[0] if any(
        odd_padding) else _math.copy(x)


def handle_odd_pad_bwd(dx, odd_padding):
    """Remove the asymmetric extras from a gradient computed on the padded input."""
    from . import _math

    t, b, l, r = odd_padding
    n, c, h, w = dx.dims
    return _math.copy(_math.slice_view(dx, [t, l], [h - b, w - r], None, [2, 3]))


def re_new_handle(handle, x, is_pool=False):
    """A handle like ``handle`` for input ``x`` (a different batch or spatial size)."""
    from ._handles import ConvHandle, PoolingHandle

    if is_pool or isinstance(handle, PoolingHandle):
        return PoolingHandle(x, handle.kernel, handle.stride, handle.pads,
                             handle.is_max_pooling, count_include_pad=handle.count_include_pad)
    return ConvHandle(x, handle.kernel, handle.stride, handle.pads, handle.channels,
                      handle.num_filters, handle.bias_term, handle.group,
                      dilation=handle.dilation)


def force_unicode(s):
    """Decode bytes as UTF-8; return str unchanged."""
    return s.decode("utf-8") if isinstance(s, bytes) else s


def post_order_recursive(root, root_t):
    """Post-order walk of the autograd graph from op ``root`` (producing tensor ``root_t``).

    Returns OrderedDicts ``(nodes, weights, inputs)``: ops by name (inputs before users),
    parameter tensors (stores_grad) by name, and other leaf tensors by name.
    """
    from .autograd import Dummy

    nodes, weights, inputs = OrderedDict(), OrderedDict(), OrderedDict()
    visited = set()

    def walk(op, t):
        if id(op) in visited:
            return
        visited.add(id(op))
        if isinstance(op, Dummy):
            tensor = op.tensor
            (weights if tensor.stores_grad else inputs)[tensor.name] = tensor
            return
        for src_op, _xid, _x, _sg in op.src:
            walk(src_op, None)
        nodes[op.name] = op

    walk(root, root_t)
    return nodes, weights, inputs
