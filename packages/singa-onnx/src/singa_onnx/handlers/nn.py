"""Neural-network ONNX ops: Conv, pooling, normalisation, Gemm/MatMul, Dropout.

1-D convolution and pooling run as 2-D ones over a height of 1; asymmetric padding goes into
the handle's four pads; ceil-mode pooling adds the end padding that makes the extra window.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from singa import autograd, singa_wrap, tensor

from ._registry import Fused, register


def _spatial_pads(attrs, in_sizes, kernel, strides, dilations):
    """Per-axis (begin, end) pads from ``pads`` or ``auto_pad``."""
    nd = len(in_sizes)
    mode = attrs.get("auto_pad", "NOTSET")
    if isinstance(mode, bytes):
        mode = mode.decode()
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        out = []
        for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
            eff = d * (k - 1) + 1
            total = max((math.ceil(size / s) - 1) * s + eff - size, 0)
            small = total // 2
            out.append((total - small, small) if mode == "SAME_LOWER" else (small, total - small))
        return out
    if mode == "VALID":
        return [(0, 0)] * nd
    pads = list(attrs.get("pads", [0] * (2 * nd)))
    return [(pads[i], pads[i + nd]) for i in range(nd)]


def _check_geometry(attrs, ndims=(1, 2)):
    bad = []
    ks = attrs.get("kernel_shape")
    if ks is not None and len(ks) not in ndims:
        bad.append(f"{len(ks)}-D kernel_shape {list(ks)} (1-D and 2-D only)")
    return bad


def _to_2d(x):
    """(N, C, L) -> (N, C, 1, L); returns the tensor and whether it was 1-D."""
    if len(x.shape) == 3:
        return autograd.reshape(x, [x.shape[0], x.shape[1], 1, x.shape[2]]), True
    return x, False


def _lift(vals, one_d, fill):
    return [fill] + list(vals) if one_d else list(vals)


def _at_least(ctx, attrs, name, length, default, low=1):
    """The INTS attribute ``name`` (``default`` when absent): ``length`` ints, each at least
    ``low`` (kernel_shape, strides, dilations: 1; pads, output_padding: 0)."""
    vals = ctx.int_list(attrs.get(name, default), f"attribute {name!r}", length=length)
    if vals is None:
        raise ctx.refuse(f"attribute {name!r}", "is required")
    if min(vals, default=low) < low:
        raise ctx.refuse(f"attribute {name!r}", f"{vals}: each value must be at least {low}")
    return vals


def _group(ctx, attrs):
    return _at_least(ctx, attrs, "group", 1, [1])[0]


def _conv_operands(ctx, attrs, x, w, op):
    """x and W as tensors, and the geometry attributes Conv and ConvTranspose share:
    ``(x, w, spatial dims, kernel_shape, strides, dilations)`` with ONNX's defaults."""
    x = ctx.tensor(x)
    w = ctx.tensor(w, like=x)
    if len(x.shape) not in (3, 4):
        raise ctx.error(f"{op} supports 1-D and 2-D inputs, got shape {x.shape}")
    nsp = len(x.shape) - 2
    kernel = _at_least(ctx, attrs, "kernel_shape", nsp, w.shape[2:])
    strides = _at_least(ctx, attrs, "strides", nsp, [1] * nsp)
    dil = _at_least(ctx, attrs, "dilations", nsp, [1] * nsp)
    _at_least(ctx, attrs, "pads", 2 * nsp, [0] * (2 * nsp), low=0)
    return x, w, nsp, kernel, strides, dil


class _Shaped(NamedTuple):
    """What a handle reads of its input: the shape (N, C, H, W)."""

    shape: tuple


def _conv_handle(ctx, attrs, x, w, has_bias):
    """The Conv node's ConvHandle for operands shaped like ``x`` and ``w`` (2-D geometry:
    a 1-D convolution's lifted to a height of 1). The node keeps the last one with its operand
    shapes: its attributes never change and its shapes rarely do, and parsing and checking
    them again cost ~28 us a node on every eager run (1.5 ms of MobileNetV3-small's ~13)."""
    key = (x.shape, w.shape, has_bias)
    kept = ctx.state.get("conv")
    if kept is not None and kept[0] == key:
        return kept[1]
    x, w, nsp, kernel, strides, dil = _conv_operands(ctx, attrs, x, w, "Conv")
    pads = _spatial_pads(attrs, x.shape[2:], kernel, strides, dil)
    one_d = nsp == 1
    kernel, strides, dil = _lift(kernel, one_d, 1), _lift(strides, one_d, 1), _lift(dil, one_d, 1)
    pads = _lift(pads, one_d, (0, 0))
    four = (pads[0][0], pads[0][1], pads[1][0], pads[1][1])
    shape = (x.shape[0], x.shape[1], 1, x.shape[2]) if one_d else tuple(x.shape)
    handle = singa_wrap.ConvHandle(_Shaped(shape), kernel, strides, four, x.shape[1], w.shape[0],
                                   has_bias, _group(ctx, attrs), dilation=dil)
    ctx.state["conv"] = (key, handle)
    return handle


@register("Conv", attrs=("kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"),
          check=_check_geometry)
def conv(ctx, attrs, x, w, b=None):
    """y = conv(x, W) + b: grouped, dilated, strided, any padding (1-D and 2-D). With
    ``attrs["__fuse__"]`` (set by the eager run, see ``backend.EAGER_FUSIONS``) the device's
    fused kernel of that name also applies the activation that follows the node."""
    x = ctx.tensor(x)
    w = ctx.tensor(w, like=x)
    handle = _conv_handle(ctx, attrs, x, w, b is not None)
    x, one_d = _to_2d(x)
    if one_d:
        w = autograd.reshape(w, [w.shape[0], w.shape[1], 1, w.shape[2]])
    b = None if b is None else ctx.tensor(b, like=x)
    fused = attrs.get("__fuse__")
    if fused is not None:
        y = Fused(fused, dict(handle.attrs()))(*((x, w) if b is None else (x, w, b)))[0]
    else:
        y = autograd.conv2d(handle, x, w, b)
    if one_d:
        y = autograd.reshape(y, [y.shape[0], y.shape[1], y.shape[3]])
    return y


def _check_pool(attrs):
    bad = _check_geometry(attrs)
    if any(d != 1 for d in attrs.get("dilations", [])):
        bad.append(f"dilations={list(attrs['dilations'])}")
    if attrs.get("storage_order", 0) != 0:
        bad.append("storage_order=1")
    if attrs.get("__noutputs__", 1) > 1:
        bad.append("the Indices output")
    return bad


def _pool(is_max):
    def handler(ctx, attrs, x):
        x = ctx.tensor(x)
        if len(x.shape) not in (3, 4):
            raise ctx.error(f"pooling supports 1-D and 2-D inputs, got shape {x.shape}")
        nsp = len(x.shape) - 2
        kernel = _at_least(ctx, attrs, "kernel_shape", nsp, None)
        strides = _at_least(ctx, attrs, "strides", nsp, [1] * nsp)
        _at_least(ctx, attrs, "pads", 2 * nsp, [0] * (2 * nsp), low=0)
        pads = _spatial_pads(attrs, x.shape[2:], kernel, strides, [1] * nsp)
        if attrs.get("ceil_mode", 0):
            grown = []
            for size, k, s, (pb, pe) in zip(x.shape[2:], kernel, strides, pads):
                out = math.ceil((size + pb + pe - k) / s) + 1
                if (out - 1) * s >= size + pb:  # the last window may not start in the end pad
                    out -= 1
                grown.append((pb, pe + max((out - 1) * s + k - (size + pb + pe), 0)))
            pads = grown
        x, one_d = _to_2d(x)
        kernel, strides = _lift(kernel, one_d, 1), _lift(strides, one_d, 1)
        pads = _lift(pads, one_d, (0, 0))
        four = (pads[0][0], pads[0][1], pads[1][0], pads[1][1])
        handle = singa_wrap.PoolingHandle(
            x.data, kernel, strides, four, is_max,
            count_include_pad=bool(attrs.get("count_include_pad", 0)))
        y = autograd.pooling_2d(handle, x)
        if one_d:
            y = autograd.reshape(y, [y.shape[0], y.shape[1], y.shape[3]])
        return y

    return handler


register("MaxPool", attrs=("kernel_shape", "strides", "pads", "auto_pad", "ceil_mode",
                           "dilations", "storage_order"), check=_check_pool)(_pool(True))
register("AveragePool", attrs=("kernel_shape", "strides", "pads", "auto_pad", "ceil_mode",
                               "count_include_pad", "dilations"), check=_check_pool)(_pool(False))


@register("GlobalAveragePool")
def global_average_pool(ctx, attrs, x):
    """Mean over every spatial axis, kept as size 1."""
    x = ctx.tensor(x)
    return autograd.reduce_mean(x, list(range(2, len(x.shape))), 1)


@register("GlobalMaxPool")
def global_max_pool(ctx, attrs, x):
    """Max over every spatial axis, kept as size 1 (a 2-D max pool over the whole map)."""
    x = ctx.tensor(x)
    n, c = x.shape[:2]
    sp = int(np.prod(x.shape[2:]))
    flat = autograd.reshape(x, [n, c, 1, sp])
    handle = singa_wrap.PoolingHandle(flat.data, (1, sp), (1, sp), 0, True)
    y = autograd.pooling_2d(handle, flat)
    return autograd.reshape(y, [n, c] + [1] * (len(x.shape) - 2))


def _check_bn(attrs):
    bad = []
    if attrs.get("training_mode", 0):
        bad.append("training_mode=1 (running statistics as outputs)")
    if attrs.get("__noutputs__", 1) > 1:
        bad.append("the running mean/var outputs")
    return bad


@register("BatchNormalization", attrs=("epsilon", "momentum", "training_mode", "spatial"),
          check=_check_bn, frozen_inputs=(3, 4))
def batch_norm(ctx, attrs, x, scale, bias, mean, var):
    """y = scale (x - mean) / sqrt(var + eps) + bias over axis 1 (batch statistics while
    singa.autograd.training is on, updating mean and var in place)."""
    x = ctx.tensor(x)
    scale, bias = ctx.tensor(scale, like=x), ctx.tensor(bias, like=x)
    # the running statistics are state the op updates: keep one Tensor per node
    st = ctx.state
    if "mean" not in st:
        st["mean"] = ctx.tensor(mean, like=x)
        st["var"] = ctx.tensor(var, like=x)
    shape = x.shape
    if len(shape) not in (2, 4):
        x = autograd.reshape(x, [shape[0], shape[1], 1, int(np.prod(shape[2:]))])
    handle = singa_wrap.BatchNormHandle(attrs.get("momentum", 0.9), x.data,
                                        eps=attrs.get("epsilon", 1e-5))
    y = autograd.batchnorm_2d(handle, x, scale, bias, st["mean"], st["var"])
    return y if len(shape) in (2, 4) else autograd.reshape(y, list(shape))


@register("Gemm", attrs=("alpha", "beta", "transA", "transB"))
def gemm(ctx, attrs, a, b, c=None):
    """y = alpha op(A) op(B) + beta C."""
    a = ctx.tensor(a)
    b = ctx.tensor(b, like=a)
    c = None if c is None else ctx.tensor(c, like=a)
    return autograd.gemm(a, b, c, attrs.get("alpha", 1.0), attrs.get("beta", 1.0),
                         attrs.get("transA", 0), attrs.get("transB", 0))


@register("MatMul")
def matmul(ctx, attrs, a, b):
    """y = a @ b with numpy's batching and broadcasting."""
    if isinstance(a, tensor.Tensor):
        return autograd.matmul(a, ctx.tensor(b, like=a))
    b = ctx.tensor(b)
    return autograd.matmul(ctx.tensor(a, like=b), b)


@register("Dropout", attrs=("ratio", "seed", "is_test"), static_inputs=(1, 2))
def dropout(ctx, attrs, x, ratio=None, training_mode=None):
    """Identity at inference; while singa.autograd.training is on (fine-tuning) or when
    ``training_mode`` is given true, drop with probability ``ratio`` and rescale."""
    x = ctx.tensor(x)
    r = attrs.get("ratio", 0.5) if ratio is None else float(ctx.host(ratio).reshape(-1)[0])
    train = autograd.training or (training_mode is not None
                                  and bool(ctx.host(training_mode).reshape(-1)[0]))
    if train and r > 0:
        saved = autograd.training
        autograd.training = True
        try:
            y = autograd.dropout(x, attrs.get("seed", 0), r)
        finally:
            autograd.training = saved
    else:
        y = x
    mask = ctx.tensor(np.ones(x.shape, np.float32))
    return y, mask


def _norm(ctx, x, axes, eps):
    """(x - mean) / sqrt(var + eps) over ``axes``, plus mean and 1/sqrt(var + eps)."""
    mean = autograd.reduce_mean(x, axes, 1)
    d = autograd.sub(x, mean)
    var = autograd.reduce_mean(autograd.mul(d, d), axes, 1)
    inv = autograd.reciprocal(autograd.sqrt(autograd.add(
        var, ctx.tensor(np.float32(eps), like=x))))
    return autograd.mul(d, inv), mean, inv


@register("LayerNormalization", attrs=("axis", "epsilon", "stash_type"))
def layer_norm(ctx, attrs, x, scale, bias=None):
    """y = (x - mean) / sqrt(var + eps) scale + bias over the axes from ``axis`` on."""
    x = ctx.tensor(x)
    nd = len(x.shape)
    axis = ctx.axis(attrs.get("axis", -1), "attribute 'axis'", nd)
    y, mean, inv = _norm(ctx, x, list(range(axis, nd)), attrs.get("epsilon", 1e-5))
    y = autograd.mul(y, ctx.tensor(scale, like=x))
    if bias is not None:
        y = autograd.add(y, ctx.tensor(bias, like=x))
    return y, mean, inv


@register("InstanceNormalization", attrs=("epsilon",))
def instance_norm(ctx, attrs, x, scale, bias):
    """y = (x - mean) / sqrt(var + eps) scale_c + bias_c over each sample's spatial axes."""
    x = ctx.tensor(x)
    nd = len(x.shape)
    y, _, _ = _norm(ctx, x, list(range(2, nd)), attrs.get("epsilon", 1e-5))
    shape = [1, x.shape[1]] + [1] * (nd - 2)
    s = autograd.reshape(ctx.tensor(scale, like=x), shape)
    b = autograd.reshape(ctx.tensor(bias, like=x), shape)
    return autograd.add(autograd.mul(y, s), b)


@register("ConvTranspose", attrs=("kernel_shape", "strides", "pads", "dilations", "group",
                                  "auto_pad", "output_padding", "output_shape"),
          check=_check_geometry)
def conv_transpose(ctx, attrs, x, w, b=None):
    """y = conv_transpose(x, W) + b (1-D and 2-D): the input gradient of a convolution."""
    x, w, nsp, kernel, strides, dil = _conv_operands(ctx, attrs, x, w, "ConvTranspose")
    opad = _at_least(ctx, attrs, "output_padding", nsp, [0] * nsp, low=0)
    group = _group(ctx, attrs)
    if "output_shape" in attrs:
        given = ctx.shape(attrs["output_shape"], "attribute 'output_shape'")
        if len(given) not in (nsp, nsp + 2):
            raise ctx.refuse("attribute 'output_shape'", f"{list(given)}: needs {nsp} spatial "
                             f"sizes (or {nsp + 2} with batch and channels)")
    mode = attrs.get("auto_pad", "NOTSET")
    eff = [d * (k - 1) + 1 for d, k in zip(dil, kernel)]
    full = [s * (i - 1) + op + e for s, i, op, e in zip(strides, x.shape[2:], opad, eff)]
    if "output_shape" in attrs or mode in ("SAME_UPPER", "SAME_LOWER"):
        target = list(attrs["output_shape"])[-nsp:] if "output_shape" in attrs else \
            [i * s for i, s in zip(x.shape[2:], strides)]
        pads = []
        for f, t in zip(full, target):
            total = f - t
            small, big = total // 2, total - total // 2
            pads.append((small, big) if mode == "SAME_UPPER" else (big, small))
    elif mode == "VALID":
        pads = [(0, 0)] * nsp
    else:
        p = list(attrs.get("pads", [0] * (2 * nsp)))
        pads = [(p[i], p[i + nsp]) for i in range(nsp)]
    if any(a < 0 or c < 0 for a, c in pads):
        raise ctx.error(f"ConvTranspose: negative padding {pads} is not supported")
    out = [f - a - c for f, (a, c) in zip(full, pads)]
    x4, one_d = _to_2d(x)
    if one_d:
        w = autograd.reshape(w, [w.shape[0], w.shape[1], 1, w.shape[2]])
    strides, dil, out = _lift(strides, one_d, 1), _lift(dil, one_d, 1), _lift(out, one_d, 1)
    pads = _lift(pads, one_d, (0, 0))
    out_shape = [x.shape[0], w.shape[1] * group] + out
    ctx.budget(out_shape)
    four = (pads[0][0], pads[0][1], pads[1][0], pads[1][1])
    y = autograd.conv_transpose2d(x4, w, None if b is None else ctx.tensor(b, like=x),
                                  out_shape, strides, four, dil, group)
    if one_d:
        y = autograd.reshape(y, [y.shape[0], y.shape[1], y.shape[3]])
    return y


@register("LpPool", attrs=("kernel_shape", "strides", "pads", "auto_pad", "p", "ceil_mode",
                           "dilations"), check=_check_pool)
def lp_pool(ctx, attrs, x):
    """y = (sum over the window of |x|^p)^(1/p), as an average pool of |x|^p times the
    window size (padding counted as zeros)."""
    x = ctx.tensor(x)
    p = float(attrs.get("p", 2))
    k = int(np.prod(attrs["kernel_shape"]))
    powd = autograd.pow(autograd.abs(x), ctx.tensor(np.float32(p), like=x))
    avg = _pool(False)(ctx, {**attrs, "count_include_pad": 1}, powd)
    s = autograd.mul(avg, ctx.tensor(np.float32(k), like=x))
    return autograd.pow(s, ctx.tensor(np.float32(1.0 / p), like=x))
