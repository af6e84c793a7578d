"""Less common ONNX ops composed from autograd ops: Mod, Trilu, RMS/Lp/Group normalisation,
the two loss ops, Hardmax, Swish, Shrink, IsNaN/IsInf, EyeLike."""

from __future__ import annotations

import numpy as np
from singa import autograd, tensor

from ._registry import onnx_to_np, register


def _c(ctx, v, like):
    return ctx.tensor(np.asarray(v, np.float32), like=like)


@register("Mod", attrs=("fmod",))
def mod(ctx, attrs, a, b):
    """fmod=0: a - floor(a / b) b (the divisor's sign); fmod=1: a - trunc(a / b) b."""
    a = ctx.tensor(a) if isinstance(a, tensor.Tensor) or not isinstance(b, tensor.Tensor) \
        else ctx.tensor(a, like=b)
    b = ctx.tensor(b, like=a)
    is_int = a.dtype == tensor.int32
    fa = autograd.cast(a, tensor.float32) if is_int else a
    fb = autograd.cast(b, tensor.float32) if is_int else b
    q = autograd.div(fa, fb)
    if attrs.get("fmod", 0):
        q = autograd.mul(autograd.sign(q), autograd.floor(autograd.abs(q)))
    else:
        q = autograd.floor(q)
    r = autograd.sub(fa, autograd.mul(q, fb))
    return autograd.cast(autograd.rounde(r), tensor.int32) if is_int else r


@register("Trilu", attrs=("upper",), static_inputs=(1,))
def trilu(ctx, attrs, x, k=None):
    """Keep the upper (or lower) triangle of the last two axes from diagonal k; the rest is 0
    whatever its values (a select, not a product with a 0/1 mask: -inf * 0 is NaN)."""
    x = ctx.tensor(x)
    kk = 0 if k is None else int(ctx.host(k).reshape(-1)[0])
    n, m = x.shape[-2:]
    i, j = np.indices((n, m))
    mask = (j - i >= kk) if attrs.get("upper", 1) else (j - i <= kk)
    zero = ctx.tensor(np.zeros((), np.float32), like=x)
    return autograd.where(x, zero, ctx.tensor(mask, like=x))


@register("RMSNormalization", attrs=("axis", "epsilon", "stash_type"))
def rms_norm(ctx, attrs, x, scale):
    """y = x / sqrt(mean(x^2) + eps) scale over the axes from ``axis`` on."""
    x = ctx.tensor(x)
    nd = len(x.shape)
    axes = list(range(ctx.axis(attrs.get("axis", -1), "attribute 'axis'", nd), nd))
    ms = autograd.reduce_mean(autograd.mul(x, x), axes, 1)
    inv = autograd.reciprocal(autograd.sqrt(autograd.add(ms, _c(ctx, attrs.get("epsilon", 1e-5),
                                                                x))))
    return autograd.mul(autograd.mul(x, inv), ctx.tensor(scale, like=x))


@register("LpNormalization", attrs=("axis", "p"))
def lp_norm(ctx, attrs, x):
    """y = x / ||x||_p along ``axis`` (p = 1 or 2; 0 where the norm is 0)."""
    x = ctx.tensor(x)
    axis = ctx.axis(attrs.get("axis", -1), "attribute 'axis'", len(x.shape))
    if attrs.get("p", 2) == 1:
        norm = autograd.reduce_sum(autograd.abs(x), [axis], 1)
    else:
        norm = autograd.sqrt(autograd.reduce_sum(autograd.mul(x, x), [axis], 1))
    zero = autograd.equal(norm, _c(ctx, 0.0, norm))
    return autograd.div(x, autograd.add(norm, zero))


@register("GroupNormalization", attrs=("epsilon", "num_groups", "stash_type"))
def group_norm(ctx, attrs, x, scale, bias):
    """Normalise each group of C / num_groups channels, then scale_c and bias_c."""
    x = ctx.tensor(x)
    n, c = x.shape[:2]
    g = int(attrs["num_groups"])
    xg = autograd.reshape(x, [n, g, int(np.prod(x.shape[1:])) // g])
    mean = autograd.reduce_mean(xg, [2], 1)
    d = autograd.sub(xg, mean)
    var = autograd.reduce_mean(autograd.mul(d, d), [2], 1)
    y = autograd.div(d, autograd.sqrt(autograd.add(var, _c(ctx, attrs.get("epsilon", 1e-5),
                                                           x))))
    y = autograd.reshape(y, list(x.shape))
    shape = [1, c] + [1] * (len(x.shape) - 2)
    return autograd.add(autograd.mul(y, autograd.reshape(ctx.tensor(scale, like=x), shape)),
                        autograd.reshape(ctx.tensor(bias, like=x), shape))


@register("Swish", attrs=("alpha",))
def swish(ctx, attrs, x):
    """y = x sigmoid(alpha x)."""
    x = ctx.tensor(x)
    return autograd.mul(x, autograd.sigmoid(autograd.mul(x, _c(ctx, attrs.get("alpha", 1.0),
                                                               x))))


@register("Shrink", attrs=("bias", "lambd"))
def shrink(ctx, attrs, x):
    """y = x + bias if x < -lambd, x - bias if x > lambd, else 0."""
    x = ctx.tensor(x)
    lam, bias = attrs.get("lambd", 0.5), attrs.get("bias", 0.0)
    lo = autograd.less(x, _c(ctx, -lam, x))
    hi = autograd.greater(x, _c(ctx, lam, x))
    return autograd.add(autograd.mul(lo, autograd.add(x, _c(ctx, bias, x))),
                        autograd.mul(hi, autograd.sub(x, _c(ctx, bias, x))))


@register("Hardmax", attrs=("axis",))
def hardmax(ctx, attrs, x):
    """1 at the first maximum along ``axis``, 0 elsewhere."""
    x = ctx.tensor(x)
    axis = ctx.axis(attrs.get("axis", -1), "attribute 'axis'", len(x.shape))
    idx = autograd.argmax(x, axis, 0)
    return autograd.onehot(axis, idx, x.shape[axis], np.array([0.0, 1.0], np.float32))


@register("IsNaN")
def is_nan(ctx, attrs, x):
    """1 where x is NaN (x != x)."""
    x = ctx.tensor(x)
    return autograd._not(autograd.equal(x, x))


@register("IsInf", attrs=("detect_negative", "detect_positive"))
def is_inf(ctx, attrs, x):
    """1 where x is +inf (detect_positive) or -inf (detect_negative)."""
    x = ctx.tensor(x)
    out = None
    for flag, v in (("detect_positive", np.inf), ("detect_negative", -np.inf)):
        if attrs.get(flag, 1):
            hit = autograd.equal(x, _c(ctx, v, x))
            out = hit if out is None else autograd._or(out, hit)
    return out if out is not None else autograd.mul(x, _c(ctx, 0.0, x))


def _check_loss(attrs):
    r = attrs.get("reduction", "mean")
    return [] if r in ("mean", "sum", "none") else [f"reduction={r!r}"]


def _nll(ctx, attrs, logp, target, weight):
    """-logp[target] per element with weights and ignore_index; reduced as ONNX says."""
    t = ctx.host(target).astype(np.int64)
    c = logp.shape[1]
    ign = attrs.get("ignore_index")
    keep = np.ones(t.shape, np.float32) if ign is None else (t != ign).astype(np.float32)
    tt = np.where(keep > 0, t, 0)
    if tt.size and (tt.max() >= c or tt.min() < 0):
        raise ctx.error(f"class index out of range [0, {c})")
    onehot = np.moveaxis(np.eye(c, dtype=np.float32)[tt], -1, 1)  # (N, C, d...)
    w = np.ones(c, np.float32) if weight is None else ctx.host(weight).astype(np.float32)
    per = w[tt] * keep  # (N, d...)
    picked = autograd.reduce_sum(autograd.mul(logp, ctx.tensor(onehot, like=logp)), [1], 0)
    loss = autograd.mul(autograd.negative(picked), ctx.tensor(per, like=logp))
    red = attrs.get("reduction", "mean")
    if red == "none":
        return loss
    total = autograd.reshape(autograd.reduce_sum(loss, list(range(len(loss.shape))), 0), [])
    if red == "sum":
        return total
    return autograd.mul(total, _c(ctx, 1.0 / max(float(per.sum()), 1e-30), total))


@register("NegativeLogLikelihoodLoss", attrs=("ignore_index", "reduction"), check=_check_loss)
def nll_loss(ctx, attrs, x, target, weight=None):
    """loss = -x[n, target[n, ...], ...] weighted, reduced by ``reduction``."""
    return _nll(ctx, attrs, ctx.tensor(x), target, weight)


@register("SoftmaxCrossEntropyLoss", attrs=("ignore_index", "reduction"), check=_check_loss)
def softmax_ce_loss(ctx, attrs, x, target, weight=None):
    """loss = NLL(log softmax(x) over axis 1); the second output is log softmax."""
    x = ctx.tensor(x)
    logp = autograd.log_softmax(x, 1)
    return _nll(ctx, attrs, logp, target, weight), logp


@register("EyeLike", attrs=("dtype", "k"))
def eye_like(ctx, attrs, x):
    """An identity-like 2-D matrix of x's shape, diagonal shifted by k (a host value)."""
    n, m = x.shape
    out = np.eye(n, m, attrs.get("k", 0), dtype=np.float32)
    dt = attrs.get("dtype")
    if dt is not None:
        import onnx

        out = out.astype(onnx.helper.tensor_dtype_to_np_dtype(dt))
    return out


@register("BitShift", attrs=("direction",))
def bit_shift(ctx, attrs, x, s):
    """x << s as x 2^s, x >> s as floor(x / 2^s) (unsigned values held as int32)."""
    x = ctx.tensor(x)
    sh = ctx.tensor(s, like=x)
    two = ctx.tensor(np.array(2, np.int32), like=x)
    p = autograd.cast(autograd.pow(autograd.cast(two, tensor.float32),
                                   autograd.cast(sh, tensor.float32)), tensor.float32)
    fx = autograd.cast(x, tensor.float32)
    y = autograd.mul(fx, p) if attrs["direction"] == "LEFT" else autograd.floor(
        autograd.div(fx, p))
    return autograd.cast(y, tensor.int32)


def _axis_shape(ctx, x_shape, v, axis):
    """Reshape a per-axis (1-D) scale/zero point to broadcast along ``axis`` (read only
    here: a per-tensor scale ignores it)."""
    if len(v.shape) == 1 and len(x_shape) > 1:
        shape = [1] * len(x_shape)
        shape[ctx.axis(axis, "attribute 'axis'", len(x_shape))] = v.shape[0]
        return autograd.reshape(v, shape)
    return v


def _check_q(attrs):
    return ["block_size"] if attrs.get("block_size", 0) else []


@register("DequantizeLinear", attrs=("axis", "block_size", "output_dtype"), check=_check_q)
def dequantize(ctx, attrs, x, scale, zero=None):
    """y = (x - zero_point) scale, per tensor or per ``axis``."""
    xf = autograd.cast(ctx.tensor(x), tensor.float32)
    s = ctx.tensor(scale)
    s = autograd.cast(s, tensor.float32) if s.dtype != tensor.float32 else s
    axis = attrs.get("axis", 1)
    if zero is not None:
        z = autograd.cast(ctx.tensor(zero), tensor.float32)
        xf = autograd.sub(xf, _axis_shape(ctx, x.shape, z, axis))
    return autograd.mul(xf, _axis_shape(ctx, x.shape, s, axis))


_Q_RANGE = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127),
            np.dtype(np.uint16): (0, 65535), np.dtype(np.int16): (-32768, 32767)}


@register("QuantizeLinear", attrs=("axis", "block_size", "output_dtype", "saturate",
                                   "precision"), check=_check_q)
def quantize(ctx, attrs, x, scale, zero=None):
    """y = saturate(round_half_even(x / scale) + zero_point) in the zero point's type."""
    x = ctx.tensor(x)
    axis = attrs.get("axis", 1)
    s = _axis_shape(ctx, x.shape, ctx.tensor(scale, like=x), axis)
    declared = attrs.get("output_dtype") or (ctx.in_types[2] if zero is not None
                                              and len(ctx.in_types) > 2 else None)
    zt = np.dtype(onnx_to_np(declared)) if declared else np.dtype(np.uint8)
    if zt not in _Q_RANGE:
        raise ctx.error(f"QuantizeLinear to {zt} is not supported")
    lo, hi = _Q_RANGE[zt]
    y = autograd.rounde(autograd.div(x, s))
    if zero is not None:
        z = autograd.cast(ctx.tensor(zero), tensor.float32)
        y = autograd.add(y, _axis_shape(ctx, x.shape, z, axis))
    return autograd.cast(autograd.clip(y, float(lo), float(hi)), tensor.int32)


@register("ScatterND", attrs=("reduction",),
          check=lambda a: [] if a.get("reduction", "none") == "none"
          else [f"reduction={a['reduction']!r}"])
def scatter_nd(ctx, attrs, x, indices, updates):
    """y = x with ``updates`` written at the index tuples of ``indices``."""
    x = ctx.tensor(x)
    idx = ctx.host(indices).astype(np.int64)
    k = idx.shape[-1]
    shape = x.shape
    idx = np.where(idx < 0, idx + np.array(shape[:k]), idx)
    rows = np.ravel_multi_index(tuple(np.moveaxis(idx, -1, 0)), shape[:k])
    tail = int(np.prod(shape[k:], dtype=np.int64))
    lin = (rows[..., None] * tail + np.arange(tail)).reshape(-1)
    flat = autograd.reshape(x, [x.size()])
    upd = ctx.host(updates).reshape(-1)
    y = autograd.scatter_elements(flat, lin.astype(np.int32), upd.astype(np.float32)
                                  if x.dtype == tensor.float32 else upd.astype(np.int32), 0)
    return autograd.reshape(y, list(shape))


@register("Compress", attrs=("axis",), static_inputs=(1,))
def compress(ctx, attrs, x, cond):
    """The slices of x where ``condition`` is true, along ``axis`` (flattened without)."""
    x = ctx.tensor(x)
    c = np.nonzero(ctx.host(cond).reshape(-1))[0].astype(np.int32)
    if "axis" not in attrs:
        x = autograd.reshape(x, [x.size()])
        axis = 0
    else:
        axis = ctx.axis(attrs["axis"], "attribute 'axis'", len(x.shape))
    c = c[c < x.shape[axis]]
    if c.size == 0:
        raise ctx.error("Compress: empty result (empty tensors are not supported)")
    return autograd.gather(x, axis, c)


@register("CenterCropPad", attrs=("axes",), static_inputs=(1,))
def center_crop_pad(ctx, attrs, x, shape):
    """Crop or zero-pad each axis to ``shape`` around its centre."""
    x = ctx.tensor(x)
    nd = len(x.shape)
    axes = ctx.axes(attrs.get("axes", range(nd)), "attribute 'axes'", nd)
    target = ctx.shape(shape, "input 'shape'", length=len(axes))
    out = list(x.shape)
    for a, t in zip(axes, target):
        out[a] = t
    ctx.budget(out)
    for a, t in zip(axes, target):
        n = x.shape[a]
        if t < n:
            start = (n - t) // 2
            x = autograd.slice(x, [start], [start + t], [a])
        elif t > n:
            pads = [0] * (2 * nd)
            pads[a] = (t - n) // 2
            pads[a + nd] = t - n - (t - n) // 2
            x = autograd.pad(x, "constant", pads, 0.0)
    return x
