"""Declarations of the neural-network operators: convolution, pooling, batch normalisation and
losses (this module), and indexing/padding/resampling ops (:mod:`._nn_index_ops`).

Conventions shared by every op here
-----------------------------------
- Image tensors are NCHW. Weights of a convolution are ``W[O, C/group, kh, kw]``.
- Geometry attributes (``stride``, ``dilation``, ``kernel``) are pairs ``(h, w)``; a single int
  means the same value for both. ``pads`` is ``(top, bottom, left, right)``; a pair
  ``(ph, pw)`` or an int means symmetric padding. Backends should normalise attributes with
  :func:`conv2d_geometry` / :func:`pool2d_geometry` rather than re-implement the rules.
- Float ops are defined for float32, float16 and float64; float16 kernels should accumulate in
  float32. References compute in whatever dtype they receive (the conformance kit passes
  float64 copies of floating inputs) and are written for clarity, not speed.
- Index inputs are int32.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _dtype
from ..errors import DtypeMismatchError, ShapeError
from . import _rules as rules
from ._registry import FHD, defop

__all__ = ["Conv2dGeometry", "Pool2dGeometry", "conv2d_geometry", "pool2d_geometry",
           "pair", "pads4"]

_F16 = _dtype.kFloat16
_F32 = _dtype.kFloat32


# ============================================================== attribute normalisation
def pair(op: str, name: str, v, default) -> tuple:
    """``v`` as a pair of ints (an int means ``(v, v)``; None means ``default``)."""
    if v is None:
        v = default
    if isinstance(v, (int, np.integer)):
        return (int(v), int(v))
    t = tuple(int(a) for a in v)
    if len(t) != 2:
        raise ShapeError(f"{op}: attribute {name}={v!r} must be an int or a pair (h, w)")
    return t


def pads4(op: str, v) -> tuple:
    """``pads`` as ``(top, bottom, left, right)``; an int or pair ``(ph, pw)`` is symmetric."""
    if v is None:
        return (0, 0, 0, 0)
    if isinstance(v, (int, np.integer)):
        return (int(v),) * 4
    t = tuple(int(a) for a in v)
    if len(t) == 2:
        return (t[0], t[0], t[1], t[1])
    if len(t) != 4 or min(t) < 0:
        raise ShapeError(
            f"{op}: pads={v!r} must be (top, bottom, left, right) with non-negative entries "
            "(or an int / a pair (ph, pw) for symmetric padding)"
        )
    return t


def _check_float(op: str, ins) -> int:
    dt = rules.check_dtypes(op, ins)
    if dt not in _dtype.FLOATS:
        raise DtypeMismatchError(
            f"{op}: inputs are {_dtype.name_of(dt)}, but the op needs float32, float16 or "
            "float64; convert with x.as_type(tensor.float32)"
        )
    return dt


def _check_ndim(op: str, what: str, shape: tuple, ndim: int, layout: str) -> None:
    if len(shape) != ndim:
        raise ShapeError(
            f"{op}: {what} must be {ndim}-D {layout}, got shape {shape}; reshape it, e.g. "
            "x.reshape((1,) + x.shape) to add a batch axis"
        )


# ============================================================== convolution
class Conv2dGeometry(NamedTuple):
    """Checked geometry of a 2-D convolution of x (N, C, H, W) by W (O, C/group, kh, kw).

    Every field is an int; sizes are in elements, along the axis the name gives. The short
    names match the kernel code of every backend (singa_cpu, singa_opencl, singa_cuda), which
    reads them on its hot path. ``ho = (h + pt + pb - dh*(kh-1) - 1) // sh + 1``, likewise
    ``wo``.
    """

    n: int  #: batch size N (x.shape[0])
    c: int  #: input channels C (x.shape[1]), all groups together
    h: int  #: input height H (x.shape[2]), before padding
    w: int  #: input width W (x.shape[3]), before padding
    o: int  #: output channels O (W.shape[0]), all groups together
    kh: int  #: kernel height (W.shape[2]), in taps before dilation
    kw: int  #: kernel width (W.shape[3]), in taps before dilation
    sh: int  #: vertical stride: input rows between two output rows (>= 1)
    sw: int  #: horizontal stride: input columns between two output columns (>= 1)
    pt: int  #: padding rows (zeros) above the input
    pb: int  #: padding rows below the input
    pl: int  #: padding columns left of the input
    pr: int  #: padding columns right of the input
    dh: int  #: vertical dilation: input rows between two kernel taps (1 = dense)
    dw: int  #: horizontal dilation: input columns between two kernel taps (1 = dense)
    group: int  #: channel groups; each sees c // group inputs and makes o // group outputs
    ho: int  #: output height
    wo: int  #: output width


#: Geometries already computed, by (kind, op, shapes, the attributes read): kernels ask on every
#: call (7-10 us each, measured), mostly for the same few layers. Bounded; attributes that do
#: not hash (lists) are computed every time. Errors are raised, never cached.
_GEOMETRIES: dict = {}
_GEOMETRIES_MAX = 4096


def _cached(key, compute):
    try:
        return _GEOMETRIES[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable attribute value
        return compute()
    g = compute()
    if len(_GEOMETRIES) >= _GEOMETRIES_MAX:
        _GEOMETRIES.clear()
    _GEOMETRIES[key] = g
    return g


def conv2d_geometry(op: str, x_shape: tuple, w_shape: tuple, attrs: dict) -> Conv2dGeometry:
    """Check and normalise a convolution of ``x_shape`` (NCHW) by ``w_shape`` (O, C/g, kh, kw).

    ``Ho = (H + top + bottom - dh*(kh-1) - 1) // sh + 1`` and likewise ``Wo``.
    """
    key = ("conv", op, tuple(x_shape), tuple(w_shape), attrs.get("stride"),
           attrs.get("dilation"), attrs.get("pads"), attrs.get("group", 1))
    return _cached(key, lambda: _conv2d_geometry(op, x_shape, w_shape, attrs))


def _conv2d_geometry(op, x_shape, w_shape, attrs) -> Conv2dGeometry:
    _check_ndim(op, "x", tuple(x_shape), 4, "(N, C, H, W)")
    _check_ndim(op, "W", tuple(w_shape), 4, "(O, C/group, kh, kw)")
    n, c, h, w = (int(d) for d in x_shape)
    o, cg, kh, kw = (int(d) for d in w_shape)
    sh, sw = pair(op, "stride", attrs.get("stride"), (1, 1))
    dh, dw = pair(op, "dilation", attrs.get("dilation"), (1, 1))
    pt, pb, pl, pr = pads4(op, attrs.get("pads"))
    group = int(attrs.get("group", 1))
    if min(sh, sw, dh, dw, group) < 1:
        raise ShapeError(f"{op}: stride, dilation and group must be >= 1, got attrs {attrs}")
    if cg * group != c:
        raise ShapeError(
            f"{op}: input has {c} channels but W {tuple(w_shape)} expects {cg * group} "
            f"(W.shape[1]*group = {cg}*{group}); check in_channels and group"
        )
    if o % group:
        raise ShapeError(
            f"{op}: W has {o} output channels, not a multiple of group={group}; "
            "out_channels must be divisible by group"
        )
    ho = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    wo = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    if ho < 1 or wo < 1 or kh < 1 or kw < 1:
        raise ShapeError(
            f"{op}: kernel {kh}x{kw} (dilation {dh}x{dw}) does not fit the padded input "
            f"{h + pt + pb}x{w + pl + pr} of x {tuple(x_shape)}; use a smaller kernel or more "
            "padding"
        )
    return Conv2dGeometry(n, c, h, w, o, kh, kw, sh, sw, pt, pb, pl, pr, dh, dw, group, ho, wo)


def _geom(x_shape, w_shape, stride=None, pads=None, dilation=None, group=1):
    return conv2d_geometry("Conv2d", x_shape, w_shape,
                           {"stride": stride, "pads": pads, "dilation": dilation, "group": group})


def _windows(xp: np.ndarray, kh, kw, sh, sw, dh, dw, ho, wo) -> np.ndarray:
    """All receptive fields of padded ``xp`` (N, C, Hp, Wp): array (N, C, kh, kw, Ho, Wo) with
    ``win[n, c, i, j, p, q] = xp[n, c, p*sh + i*dh, q*sw + j*dw]``."""
    n, c = xp.shape[:2]
    win = np.empty((n, c, kh, kw, ho, wo), xp.dtype)
    for i in range(kh):
        for j in range(kw):
            win[:, :, i, j] = xp[:, :, i * dh: i * dh + sh * (ho - 1) + 1: sh,
                                 j * dw: j * dw + sw * (wo - 1) + 1: sw]
    return win


def _pad_hw(x, g: Conv2dGeometry | Pool2dGeometry, value=0.0, extra_h=0, extra_w=0):
    return np.pad(x, ((0, 0), (0, 0), (g.pt, g.pb + extra_h), (g.pl, g.pr + extra_w)),
                  constant_values=value)


def _conv2d_ref(x, W, b=None, stride=None, pads=None, dilation=None, group=1):
    g = _geom(x.shape, W.shape, stride, pads, dilation, group)
    win = _windows(_pad_hw(x, g), g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.ho, g.wo)
    win = win.reshape(g.n, group, g.c // group, g.kh, g.kw, g.ho, g.wo)
    wg = W.reshape(group, g.o // group, g.c // group, g.kh, g.kw)
    y = np.einsum("ngcijpq,gocij->ngopq", win, wg).reshape(g.n, g.o, g.ho, g.wo)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y


def _conv2d_backward_x_ref(dy, W, x_shape, stride=None, pads=None, dilation=None, group=1):
    g = _geom(x_shape, W.shape, stride, pads, dilation, group)
    dyg = dy.reshape(g.n, group, g.o // group, g.ho, g.wo)
    wg = W.reshape(group, g.o // group, g.c // group, g.kh, g.kw)
    dxp = np.zeros((g.n, g.c, g.h + g.pt + g.pb, g.w + g.pl + g.pr), dy.dtype)
    for i in range(g.kh):
        for j in range(g.kw):
            # every input cell that window offset (i, j) touched receives dy * W[..., i, j]
            contrib = np.einsum("ngopq,goc->ngcpq", dyg, wg[:, :, :, i, j])
            dxp[:, :, i * g.dh: i * g.dh + g.sh * (g.ho - 1) + 1: g.sh,
                j * g.dw: j * g.dw + g.sw * (g.wo - 1) + 1: g.sw] += contrib.reshape(
                    g.n, g.c, g.ho, g.wo)
    return dxp[:, :, g.pt: g.pt + g.h, g.pl: g.pl + g.w]


def _conv2d_backward_w_ref(dy, x, w_shape, stride=None, pads=None, dilation=None, group=1):
    g = _geom(x.shape, w_shape, stride, pads, dilation, group)
    win = _windows(_pad_hw(x, g), g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.ho, g.wo)
    win = win.reshape(g.n, group, g.c // group, g.kh, g.kw, g.ho, g.wo)
    dyg = dy.reshape(g.n, group, g.o // group, g.ho, g.wo)
    return np.einsum("ngopq,ngcijpq->gocij", dyg, win).reshape(w_shape)


def _conv2d_infer(ins, attrs):
    if len(ins) not in (2, 3):
        raise ShapeError(f"Conv2d: takes (x, W) or (x, W, b), got {len(ins)} inputs")
    dt = _check_float("Conv2d", ins)
    x, w = ins[0], ins[1]
    g = conv2d_geometry("Conv2d", x.dims, w.dims, attrs)
    if len(ins) == 3 and ins[2].dims != (g.o,):
        raise ShapeError(
            f"Conv2d: bias has shape {ins[2].dims} but W {w.dims} has {g.o} output channels; "
            f"bias must have shape ({g.o},)"
        )
    return [((g.n, g.o, g.ho, g.wo), dt)]


def _check_dy(op: str, dy_shape: tuple, g: Conv2dGeometry | Pool2dGeometry, c_out: int) -> None:
    want = (g.n, c_out, g.ho, g.wo)
    if tuple(dy_shape) != want:
        raise ShapeError(
            f"{op}: dy has shape {tuple(dy_shape)} but the forward output shape for these "
            f"attrs is {want}; pass the same attrs as the forward op"
        )


def _attr_shape(op: str, attrs: dict, key: str) -> tuple:
    if attrs.get(key) is None:
        raise ShapeError(f"{op}: attribute {key!r} (the shape of the forward input) is required")
    return tuple(int(d) for d in attrs[key])


def _conv2d_backward_x_infer(ins, attrs):
    dt = _check_float("Conv2dBackwardX", ins)
    dy, w = ins
    x_shape = _attr_shape("Conv2dBackwardX", attrs, "x_shape")
    g = conv2d_geometry("Conv2dBackwardX", x_shape, w.dims, attrs)
    _check_dy("Conv2dBackwardX", dy.dims, g, g.o)
    return [(x_shape, dt)]


def _conv2d_backward_w_infer(ins, attrs):
    dt = _check_float("Conv2dBackwardW", ins)
    dy, x = ins
    w_shape = _attr_shape("Conv2dBackwardW", attrs, "w_shape")
    g = conv2d_geometry("Conv2dBackwardW", x.dims, w_shape, attrs)
    _check_dy("Conv2dBackwardW", dy.dims, g, g.o)
    return [(w_shape, dt)]


def _sample_large_conv_geometry(g):
    """A convolution large enough for the paths backends pick by geometry: 3x3 stride-1
    layers with >= 16 channels (Winograd), 1x1 stride-1 unpadded ones (a plain GEMM),
    strided/dilated/grouped/5x5 ones with >= 64 output pixels an image (per-image im2col), and
    depthwise 3x3/5x5/7x7 ones (one input channel per group: direct kernels)."""
    kind = g.choice(["winograd", "pointwise", "im2col", "depthwise"])
    n = g.integers(2, 3)
    if kind == "winograd":
        c, o, k, s, d, group = g.integers(16, 20), g.integers(16, 20), 3, 1, 1, 1
        p = g.integers(0, 1)
        pads = (p, p, p, p)
        h, w = g.integers(6, 14), g.integers(6, 14)
    elif kind == "pointwise":
        c, o, k, s, d, group = g.integers(8, 20), g.integers(8, 20), 1, 1, 1, 1
        pads = (0, 0, 0, 0)
        h, w = g.integers(8, 20), g.integers(8, 20)
    elif kind == "depthwise":
        c = group = g.integers(4, 12)
        o = c * g.integers(1, 2)
        k, s, d = g.choice([3, 5, 7]), g.integers(1, 2), g.integers(1, 2)
        pads = tuple(g.integers(0, 3) for _ in range(4))
        h, w = g.integers(20, 28), g.integers(20, 28)
    else:
        group = g.choice([1, 2])
        c, o = group * g.integers(2, 6), group * g.integers(2, 8)
        k, s, d = g.choice([3, 5]), g.integers(1, 2), g.integers(1, 2)
        pads = tuple(g.integers(0, 2) for _ in range(4))
        h, w = g.integers(20, 28), g.integers(20, 28)
    attrs = {"stride": (s, s), "pads": pads, "dilation": (d, d), "group": group}
    xs, ws = (n, c, h, w), (o, c // group, k, k)
    return xs, ws, attrs, conv2d_geometry("Conv2d", xs, ws, attrs)


def _sample_conv_geometry(g):
    """Tiny random convolution: (x_shape, w_shape, attrs, (Ho, Wo), O)."""
    if g.large:
        return _sample_large_conv_geometry(g)
    group = g.choice([1, 1, 2, 3])
    cg, og = g.integers(1, 2), g.integers(1, 2)
    kh, kw = g.integers(1, 3), g.integers(1, 3)
    sh, sw = g.integers(1, 2), g.integers(1, 2)
    dh, dw = g.integers(1, 2), g.integers(1, 2)
    pads = (g.integers(0, 2), g.integers(0, 2), g.integers(0, 2), g.integers(0, 2))
    h = max(1, dh * (kh - 1) + 1 - pads[0] - pads[1] + g.integers(0, 3))
    w = max(1, dw * (kw - 1) + 1 - pads[2] - pads[3] + g.integers(0, 3))
    n = g.integers(1, 2)
    attrs = {"stride": (sh, sw), "pads": pads, "dilation": (dh, dw), "group": group}
    geo = conv2d_geometry("Conv2d", (n, cg * group, h, w), (og * group, cg, kh, kw), attrs)
    return (n, cg * group, h, w), (og * group, cg, kh, kw), attrs, geo


def _conv2d_sample(g, dtype):
    xs, ws, attrs, geo = _sample_conv_geometry(g)
    ins = [g.array(xs, dtype, -2, 2), g.array(ws, dtype, -2, 2)]
    if g.choice([False, True]):
        ins.append(g.array((geo.o,), dtype, -2, 2))
    return ins, attrs


def _conv2d_backward_x_sample(g, dtype):
    xs, ws, attrs, geo = _sample_conv_geometry(g)
    dy = g.array((geo.n, geo.o, geo.ho, geo.wo), dtype, -2, 2)
    return [dy, g.array(ws, dtype, -2, 2)], {**attrs, "x_shape": xs}


def _conv2d_backward_w_sample(g, dtype):
    xs, ws, attrs, geo = _sample_conv_geometry(g)
    dy = g.array((geo.n, geo.o, geo.ho, geo.wo), dtype, -2, 2)
    return [dy, g.array(xs, dtype, -2, 2)], {**attrs, "w_shape": ws}


_CONV_ATTRS = """
    Attributes: ``stride=(sh, sw)`` (default (1, 1)), ``pads=(top, bottom, left, right)``
    (default zeros; zero padding), ``dilation=(dh, dw)`` (default (1, 1)), ``group`` (default
    1). Channels are split into ``group`` equal blocks; output block ``g`` (channels
    ``g*O/group ...``) sees only input block ``g``. Output size
    ``Ho = (H + top + bottom - dh*(kh-1) - 1) // sh + 1`` (likewise ``Wo``)."""

def _conv2d_bound(x, W, b=None, **attrs):
    n = W.shape[1] * W.shape[2] * W.shape[3] + (b is not None)
    return np.sqrt(n) * _conv2d_ref(np.abs(x), np.abs(W), None if b is None else np.abs(b),
                                    **attrs)


def _conv2d_backward_x_bound(dy, W, x_shape, **attrs):
    n = W.shape[0] // attrs.get("group", 1) * W.shape[2] * W.shape[3]
    return np.sqrt(n) * _conv2d_backward_x_ref(np.abs(dy), np.abs(W), x_shape, **attrs)


def _conv2d_backward_w_bound(dy, x, w_shape, **attrs):
    n = dy.shape[0] * dy.shape[2] * dy.shape[3]
    return np.sqrt(n) * _conv2d_backward_w_ref(np.abs(dy), np.abs(x), w_shape, **attrs)


defop("Conv2d", -1, _conv2d_infer, _conv2d_ref, _conv2d_sample, dtypes=FHD,
      acc_bound=_conv2d_bound,
      doc="""2-D convolution (cross-correlation, no kernel flip), NCHW.

    Inputs: ``x[N, C, H, W]``, ``W[O, C/group, kh, kw]`` and optionally ``b[O]`` (2 or 3
    inputs, one dtype). Output ``y[N, O, Ho, Wo]``::

        y[n, o, p, q] = b[o] + sum_{c in group(o), i, j}
                        W[o, c - c0(o), i, j] * xpad[n, c, p*sh + i*dh, q*sw + j*dw]
    """ + _CONV_ATTRS)

defop("Conv2dBackwardX", 2, _conv2d_backward_x_infer, _conv2d_backward_x_ref,
      _conv2d_backward_x_sample, dtypes=FHD, acc_bound=_conv2d_backward_x_bound,
      doc="""Gradient of Conv2d with respect to x: ``(dy[N, O, Ho, Wo], W) -> dx[x_shape]``.

    The adjoint of the convolution (a transposed convolution): every cell of ``x`` that
    window position (p, q), offset (i, j) read receives ``sum_o dy[n, o, p, q] * W[o, c, i, j]``;
    contributions that fall into the padding are dropped. Attribute ``x_shape`` (required) is
    the forward input's shape; the other attributes are those of the forward Conv2d.
    """ + _CONV_ATTRS)

defop("Conv2dBackwardW", 2, _conv2d_backward_w_infer, _conv2d_backward_w_ref,
      _conv2d_backward_w_sample, dtypes=FHD, acc_bound=_conv2d_backward_w_bound,
      doc="""Gradient of Conv2d with respect to W: ``(dy[N, O, Ho, Wo], x) -> dW[w_shape]``::

        dW[o, c', i, j] = sum_{n, p, q} dy[n, o, p, q]
                                        * xpad[n, c0(o) + c', p*sh + i*dh, q*sw + j*dw]

    Attribute ``w_shape`` (required) is W's shape; the others are the forward Conv2d's. The
    bias gradient is ``Sum(dy, axes=(0, 2, 3))``.
    """ + _CONV_ATTRS)


# ============================================================== pooling
class Pool2dGeometry(NamedTuple):
    """Checked geometry of a 2-D pooling of x (N, C, H, W) by a kh x kw window.

    Sizes are ints, in elements, along the axis the name gives; the last three fields are
    flags. The short names match the kernel code of every backend (singa_cpu, singa_opencl,
    singa_cuda). ``ho`` and ``wo`` follow :func:`pool2d_geometry`'s rule.
    """

    n: int  #: batch size N (x.shape[0])
    c: int  #: channels C (x.shape[1]); each channel is pooled on its own
    h: int  #: input height H (x.shape[2]), before padding
    w: int  #: input width W (x.shape[3]), before padding
    kh: int  #: window height
    kw: int  #: window width
    sh: int  #: vertical stride: input rows between two windows (default kh)
    sw: int  #: horizontal stride: input columns between two windows (default kw)
    pt: int  #: padding rows above the input (< kh); max pooling never picks them
    pb: int  #: padding rows below the input (< kh)
    pl: int  #: padding columns left of the input (< kw)
    pr: int  #: padding columns right of the input (< kw)
    ho: int  #: output height
    wo: int  #: output width
    is_max: bool  #: True for max pooling, False for average pooling
    #: average pooling only: True divides a window's sum by the padded cells it covers too
    #: (not the ceil-mode overhang past the bottom/right padding), False only by its input cells
    count_include_pad: bool
    ceil_mode: bool  #: output size rounded up (a window may overhang the padding), not down


def _pool_out(size, k, s, lo, hi, ceil_mode):
    span = size + lo + hi - k
    if not ceil_mode:
        return span // s + 1
    out = -(-span // s) + 1
    if (out - 1) * s >= size + lo:  # the last window must start inside the input or top pad
        out -= 1
    return out


def pool2d_geometry(op: str, x_shape: tuple, attrs: dict) -> Pool2dGeometry:
    """Check and normalise a pooling of ``x_shape`` (NCHW).

    ``Ho = floor((H + top + bottom - kh) / sh) + 1``, or with ``ceil_mode`` the ceiling,
    dropping a last window that would start in the bottom padding (PyTorch's rule).
    """
    key = ("pool", op, tuple(x_shape), attrs.get("kernel"), attrs.get("stride"),
           attrs.get("pads"), attrs.get("mode", "max"), attrs.get("ceil_mode", False),
           attrs.get("count_include_pad", True))
    return _cached(key, lambda: _pool2d_geometry(op, x_shape, attrs))


def _pool2d_geometry(op, x_shape, attrs) -> Pool2dGeometry:
    _check_ndim(op, "x", tuple(x_shape), 4, "(N, C, H, W)")
    n, c, h, w = (int(d) for d in x_shape)
    if attrs.get("kernel") is None:
        raise ShapeError(f"{op}: attribute 'kernel' (kh, kw) is required")
    kh, kw = pair(op, "kernel", attrs["kernel"], None)
    sh, sw = pair(op, "stride", attrs.get("stride"), (kh, kw))
    pt, pb, pl, pr = pads4(op, attrs.get("pads"))
    mode = attrs.get("mode", "max")
    if mode not in ("max", "avg"):
        raise ShapeError(f"{op}: mode={mode!r}; use 'max' or 'avg'")
    if min(kh, kw, sh, sw) < 1:
        raise ShapeError(f"{op}: kernel and stride must be >= 1, got attrs {attrs}")
    if max(pt, pb) >= kh or max(pl, pr) >= kw:
        raise ShapeError(
            f"{op}: pads {(pt, pb, pl, pr)} must be smaller than the kernel {(kh, kw)} on each "
            "side (a window of only padding has no value); reduce the padding"
        )
    ceil_mode = bool(attrs.get("ceil_mode", False))
    ho = _pool_out(h, kh, sh, pt, pb, ceil_mode)
    wo = _pool_out(w, kw, sw, pl, pr, ceil_mode)
    if ho < 1 or wo < 1:
        raise ShapeError(
            f"{op}: kernel {(kh, kw)} is larger than the padded input {(h + pt + pb, w + pl + pr)}"
            f" of x {tuple(x_shape)}; use a smaller kernel or more padding"
        )
    return Pool2dGeometry(n, c, h, w, kh, kw, sh, sw, pt, pb, pl, pr, ho, wo, mode == "max",
                          bool(attrs.get("count_include_pad", True)), ceil_mode)


def _pool_geom(x_shape, kernel, stride, pads, mode, count_include_pad, ceil_mode):
    return pool2d_geometry("Pooling2d", x_shape, {
        "kernel": kernel, "stride": stride, "pads": pads, "mode": mode,
        "count_include_pad": count_include_pad, "ceil_mode": ceil_mode})


def _pool_extra(g: Pool2dGeometry):
    """Cells past the bottom/right padding that ceil-mode windows overhang."""
    eh = max(0, (g.ho - 1) * g.sh + g.kh - (g.h + g.pt + g.pb))
    ew = max(0, (g.wo - 1) * g.sw + g.kw - (g.w + g.pl + g.pr))
    return eh, ew


def _pool_divisor(g: Pool2dGeometry, dtype):
    """Number of cells each average window counts: (Ho, Wo)."""
    eh, ew = _pool_extra(g)
    ones = np.ones((1, 1, g.h, g.w), dtype)
    if g.count_include_pad:  # padded cells count, the ceil-mode overhang does not
        ones = np.ones((1, 1, g.h + g.pt + g.pb, g.w + g.pl + g.pr), dtype)
        cells = np.pad(ones, ((0, 0), (0, 0), (0, eh), (0, ew)))
    else:
        cells = _pad_hw(ones, g, 0.0, eh, ew)
    return _windows(cells, g.kh, g.kw, g.sh, g.sw, 1, 1, g.ho, g.wo).sum(axis=(2, 3))[0, 0]


def _pool_windows(x, g: Pool2dGeometry):
    eh, ew = _pool_extra(g)
    fill = -np.inf if g.is_max else 0.0
    xp = _pad_hw(x, g, fill, eh, ew)
    return _windows(xp, g.kh, g.kw, g.sh, g.sw, 1, 1, g.ho, g.wo)


def _pooling2d_ref(x, kernel, stride=None, pads=None, mode="max", count_include_pad=True,
                   ceil_mode=False):
    g = _pool_geom(x.shape, kernel, stride, pads, mode, count_include_pad, ceil_mode)
    win = _pool_windows(x, g)
    if g.is_max:
        return win.max(axis=(2, 3))
    return win.sum(axis=(2, 3)) / _pool_divisor(g, x.dtype)


def _pooling2d_backward_ref(dy, x, y, kernel, stride=None, pads=None, mode="max",
                            count_include_pad=True, ceil_mode=False):
    g = _pool_geom(x.shape, kernel, stride, pads, mode, count_include_pad, ceil_mode)
    eh, ew = _pool_extra(g)
    if g.is_max:
        win = _pool_windows(x, g).reshape(g.n, g.c, g.kh * g.kw, g.ho, g.wo)
        first = win.argmax(axis=2)  # first maximal cell in row-major window order
    else:
        share = dy / _pool_divisor(g, dy.dtype)
    dxp = np.zeros((g.n, g.c, g.h + g.pt + g.pb + eh, g.w + g.pl + g.pr + ew), dy.dtype)
    for i in range(g.kh):
        for j in range(g.kw):
            grad = dy * (first == i * g.kw + j) if g.is_max else share
            dxp[:, :, i: i + g.sh * (g.ho - 1) + 1: g.sh,
                j: j + g.sw * (g.wo - 1) + 1: g.sw] += grad
    return dxp[:, :, g.pt: g.pt + g.h, g.pl: g.pl + g.w]


def _pooling2d_infer(ins, attrs):
    dt = _check_float("Pooling2d", ins)
    g = pool2d_geometry("Pooling2d", ins[0].dims, attrs)
    return [((g.n, g.c, g.ho, g.wo), dt)]


def _pooling2d_backward_infer(ins, attrs):
    dt = _check_float("Pooling2dBackward", ins)
    dy, x, y = ins
    g = pool2d_geometry("Pooling2dBackward", x.dims, attrs)
    _check_dy("Pooling2dBackward", dy.dims, g, g.c)
    if y.dims != dy.dims:
        raise ShapeError(f"Pooling2dBackward: y {y.dims} must have dy's shape {dy.dims}")
    return [(x.dims, dt)]


def _sample_pool(g, dtype):
    if g.large:  # past the 2**17-element threshold for threads; 2x2/2 has its own path
        attrs = g.choice([{"kernel": (2, 2), "stride": (2, 2)},
                          {"kernel": (3, 3), "stride": (2, 2), "pads": (1, 1, 1, 1)}])
        attrs = {**attrs, "mode": g.choice(["max", "avg"]), "ceil_mode": g.booleans(),
                 "count_include_pad": g.booleans()}
        shape = (g.integers(2, 4), g.integers(8, 16), g.integers(64, 80), g.integers(64, 80))
        return g.array(shape, dtype, -3, 3), attrs
    kh, kw = g.integers(1, 3), g.integers(1, 3)
    attrs = {
        "kernel": (kh, kw),
        "stride": (g.integers(1, 3), g.integers(1, 3)),
        "pads": (g.integers(0, kh - 1), g.integers(0, kh - 1), g.integers(0, kw - 1),
                 g.integers(0, kw - 1)),
        "mode": g.choice(["max", "avg"]),
        "count_include_pad": g.choice([True, False]),
        "ceil_mode": g.choice([False, True]),
    }
    shape = (g.integers(1, 2), g.integers(1, 3), g.integers(kh, 6), g.integers(kw, 6))
    x = g.array(shape, dtype, -3, 3)
    if g.choice([False, True]):  # ties: max pooling must pick the first maximal cell
        x = (np.round(x) / 2).astype(x.dtype)
    return x, attrs


def _pooling2d_sample(g, dtype):
    x, attrs = _sample_pool(g, dtype)
    return [x], attrs


def _pooling2d_backward_sample(g, dtype):
    x, attrs = _sample_pool(g, dtype)
    y = _pooling2d_ref(x.astype(np.float64), **attrs).astype(x.dtype)
    return [g.array(y.shape, dtype, -2, 2), x, y], attrs


_POOL_ATTRS = """
    Attributes: ``kernel=(kh, kw)`` (required), ``stride=(sh, sw)`` (default: the kernel),
    ``pads=(top, bottom, left, right)`` (default zeros; each smaller than the kernel on its
    axis), ``mode`` ``"max"`` (default) or ``"avg"``, ``count_include_pad`` (default True, as
    SINGA/cuDNN: average windows divide by the number of cells inside the padded input, so
    padding counts as zeros; False divides by the number of real input cells), ``ceil_mode``
    (default False; True rounds the output size up, keeping a last partial window only if it
    starts inside the input or top/left padding; cells of that overhang never count).
    Max pooling ignores padding (padding never wins)."""

defop("Pooling2d", 1, _pooling2d_infer, _pooling2d_ref, _pooling2d_sample, dtypes=FHD,
      doc="""2-D max or average pooling, NCHW: ``x[N, C, H, W] -> y[N, C, Ho, Wo]``::

        y[n, c, p, q] = max / mean of x[n, c, p*sh - top + i, q*sw - left + j], 0 <= i < kh,
                        0 <= j < kw (see count_include_pad for the mean's divisor)
    """ + _POOL_ATTRS)

defop("Pooling2dBackward", 3, _pooling2d_backward_infer, _pooling2d_backward_ref,
      _pooling2d_backward_sample, dtypes=FHD,
      doc="""Gradient of Pooling2d: ``(dy[N, C, Ho, Wo], x, y) -> dx[N, C, H, W]``.

    Max: each ``dy[n, c, p, q]`` goes to the *first* maximal input cell of its window (window
    cells scanned row-major, padding excluded); windows that overlap accumulate. ``y`` is the
    forward output (kernels may use it to find the maximum, e.g. cuDNN; the reference
    recomputes it from ``x``). Avg: each window spreads ``dy / divisor`` over its input cells.
    """ + _POOL_ATTRS)


# ============================================================== batch normalisation
def _bn_axes(ndim):
    return (0,) + tuple(range(2, ndim))


def _bn_bcast(v, ndim):
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def _batchnorm_train_ref(x, scale, bias, running_mean, running_var, momentum=0.9, eps=1e-5):
    axes = _bn_axes(x.ndim)
    m = x.size // x.shape[1]
    mean = x.mean(axis=axes)
    var = x.var(axis=axes)  # biased: normalises the batch
    inv_std = 1.0 / np.sqrt(var + eps)
    y = (x - _bn_bcast(mean, x.ndim)) * _bn_bcast(inv_std * scale, x.ndim) \
        + _bn_bcast(bias, x.ndim)
    unbiased = var * (m / max(m - 1, 1))
    new_mean = momentum * running_mean + (1 - momentum) * mean
    new_var = momentum * running_var + (1 - momentum) * unbiased
    return y, mean, inv_std, new_mean, new_var


def _batchnorm_infer_ref(x, scale, bias, running_mean, running_var, eps=1e-5):
    inv_std = 1.0 / np.sqrt(running_var + eps)
    return (x - _bn_bcast(running_mean, x.ndim)) * _bn_bcast(inv_std * scale, x.ndim) \
        + _bn_bcast(bias, x.ndim)


def _batchnorm_backward_ref(dy, x, scale, saved_mean, saved_inv_std):
    axes = _bn_axes(x.ndim)
    m = x.size // x.shape[1]
    xhat = (x - _bn_bcast(saved_mean, x.ndim)) * _bn_bcast(saved_inv_std, x.ndim)
    dbias = dy.sum(axis=axes)
    dscale = (dy * xhat).sum(axis=axes)
    dx = _bn_bcast(scale * saved_inv_std / m, x.ndim) * (
        m * dy - _bn_bcast(dbias, x.ndim) - xhat * _bn_bcast(dscale, x.ndim))
    return dx, dscale, dbias


def _bn_check(op: str, ins, names):
    dt = _check_float(op, ins)
    x = ins[0]
    if len(x.dims) < 2:
        raise ShapeError(f"{op}: x must be (N, C) or (N, C, H, W), got shape {x.dims}")
    c = x.dims[1]
    for name, t in zip(names, ins):
        if name and t.dims != (c,):
            raise ShapeError(
                f"{op}: {name} has shape {t.dims} but x {x.dims} has {c} channels (axis 1); "
                f"{name} must have shape ({c},)"
            )
    return dt, x.dims, c


def _batchnorm_train_infer(ins, attrs):
    dt, shape, c = _bn_check("BatchNormTrain", ins,
                             (None, "scale", "bias", "running_mean", "running_var"))
    return [(shape, dt)] + [((c,), dt)] * 4


def _batchnorm_infer_infer(ins, attrs):
    dt, shape, c = _bn_check("BatchNormInfer", ins,
                             (None, "scale", "bias", "running_mean", "running_var"))
    return [(shape, dt)]


def _batchnorm_backward_infer(ins, attrs):
    dt, shape, c = _bn_check("BatchNormBackward", ins[1:],
                             (None, "scale", "saved_mean", "saved_inv_std"))
    if ins[0].dims != shape or ins[0].dtype_code != dt:
        raise ShapeError(f"BatchNormBackward: dy {ins[0].dims} must match x {shape} in shape "
                         "and dtype")
    return [(shape, dt), ((c,), dt), ((c,), dt)]


def _bn_shape(g):
    if g.large:  # past the 2**20-element threshold for threads
        return g.choice([(g.integers(8, 12), g.integers(8, 16), 96, 96),
                         (g.integers(4096, 8192), g.integers(200, 260))])
    n, c = g.integers(1, 3), g.integers(1, 3)
    if g.choice([False, True]):
        return (max(n, 2), c)
    return (n, c, g.integers(1, 4), g.integers(1, 4)) if n > 1 else (1, c, 2, g.integers(1, 3))


def _bn_params(g, c, dtype):
    return [g.array((c,), dtype, 0.5, 2), g.array((c,), dtype, -1, 1),
            g.array((c,), dtype, -1, 1), g.array((c,), dtype, 0.5, 2)]


def _batchnorm_train_sample(g, dtype):
    s = _bn_shape(g)
    attrs = {"momentum": g.choice([0.9, 0.5, 0.0]), "eps": g.choice([1e-5, 1e-3])}
    return [g.array(s, dtype, -2, 3)] + _bn_params(g, s[1], dtype), attrs


def _batchnorm_infer_sample(g, dtype):
    s = _bn_shape(g)
    return [g.array(s, dtype, -2, 3)] + _bn_params(g, s[1], dtype), {"eps": g.choice([1e-5,
                                                                                      1e-3])}


def _batchnorm_backward_sample(g, dtype):
    s = _bn_shape(g)
    x = g.array(s, dtype, -2, 3)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=_bn_axes(x.ndim))
    inv_std = 1.0 / np.sqrt(x64.var(axis=_bn_axes(x.ndim)) + 1e-5)
    npdt = x.dtype
    return [g.array(s, dtype, -2, 2), x, g.array((s[1],), dtype, 0.5, 2), mean.astype(npdt),
            inv_std.astype(npdt)], {}


_BN_TOL = {_F32: (1e-4, 1e-4), _F16: (3e-2, 5e-2)}


def _batchnorm_backward_bound(dy, x, scale, saved_mean, saved_inv_std):
    """sqrt(m) * sum|terms| of dbias and dscale, and what their rounding does to dx."""
    axes = _bn_axes(x.ndim)
    m = x.size // x.shape[1]
    xhat = np.abs((x - _bn_bcast(saved_mean, x.ndim)) * _bn_bcast(saved_inv_std, x.ndim))
    dbias = np.sqrt(m) * np.abs(dy).sum(axis=axes)
    dscale = np.sqrt(m) * (np.abs(dy) * xhat).sum(axis=axes)
    dx = _bn_bcast(np.abs(scale * saved_inv_std) / m, x.ndim) * (
        _bn_bcast(dbias, x.ndim) + xhat * _bn_bcast(dscale, x.ndim))
    return dx, dscale, dbias

defop("BatchNormTrain", 5, _batchnorm_train_infer, _batchnorm_train_ref,
      _batchnorm_train_sample, nout=5, dtypes=FHD, tol=_BN_TOL, recompute=True,
      state=((3, 3), (4, 4)),
      doc="""Batch normalisation, training mode; channel axis 1 of x (N, C) or (N, C, H, W).

    ``(x, scale[C], bias[C], running_mean[C], running_var[C]) ->
    (y, saved_mean[C], saved_inv_std[C], new_running_mean[C], new_running_var[C])``, with
    ``mean``/``var`` the batch mean and *biased* variance over all axes but 1 (m values each)::

        y = (x - mean) * saved_inv_std * scale + bias,   saved_inv_std = 1/sqrt(var + eps)
        new_running_mean = momentum * running_mean + (1 - momentum) * mean
        new_running_var  = momentum * running_var + (1 - momentum) * var * m / (m - 1)

    (for m == 1 the unbiased variance is taken as ``var``). Attributes ``momentum`` (default
    0.9) and ``eps`` (default 1e-5). Callers may pass ``outs[3], outs[4]`` aliasing
    ``ins[3], ins[4]`` to update the running statistics in place; kernels must support that.
    """)

defop("BatchNormInfer", 5, _batchnorm_infer_infer, _batchnorm_infer_ref, _batchnorm_infer_sample,
      dtypes=FHD, tol=_BN_TOL, recompute=True,
      doc="""Batch normalisation, inference mode:
    ``(x, scale, bias, running_mean, running_var) -> y`` with
    ``y = (x - running_mean) / sqrt(running_var + eps) * scale + bias`` per channel (axis 1).
    Attribute ``eps`` (default 1e-5).
    """)

defop("BatchNormBackward", 5, _batchnorm_backward_infer, _batchnorm_backward_ref,
      _batchnorm_backward_sample, nout=3, dtypes=FHD, tol=_BN_TOL,
      acc_bound=_batchnorm_backward_bound,
      doc="""Gradient of BatchNormTrain's y:
    ``(dy, x, scale, saved_mean, saved_inv_std) -> (dx, dscale[C], dbias[C])``; with
    ``xhat = (x - saved_mean) * saved_inv_std`` and sums over the m values of each channel::

        dbias = sum(dy),  dscale = sum(dy * xhat)
        dx = scale * saved_inv_std / m * (m * dy - dbias - xhat * dscale)
    """)


# ============================================================== losses
def _target_kind(op: str, logits, target) -> str:
    """'ids' for int32 class ids (N,), 'dense' for a (N, C) float target."""
    if len(logits.dims) != 2:
        raise ShapeError(f"{op}: input must be 2-D (N, C), got shape {logits.dims}; flatten it "
                         "first, e.g. x.reshape((N, -1))")
    n = logits.dims[0]
    if n == 0 or logits.dims[1] == 0:
        raise ShapeError(f"{op}: input {logits.dims} is empty; a loss needs at least one sample "
                         "and one class (check the batch and the layer producing the logits)")
    if target.dtype_code == _dtype.kInt:
        if target.dims != (n,):
            raise ShapeError(
                f"{op}: int32 target has shape {target.dims}; class ids must have shape ({n},) "
                f"for input {logits.dims}"
            )
        return "ids"
    if target.dtype_code != logits.dtype_code:
        raise DtypeMismatchError(
            f"{op}: input is {_dtype.name_of(logits.dtype_code)} but the target is "
            f"{_dtype.name_of(target.dtype_code)}; pass int32 class ids or a dense target of the "
            "input's dtype (t.as_type(x.dtype))"
        )
    if target.dims != logits.dims:
        raise ShapeError(
            f"{op}: dense target has shape {target.dims} but the input is {logits.dims}; it must "
            "match (or pass int32 class ids of shape (N,))"
        )
    return "dense"


def _dense_target(target, n_classes, dtype):
    """The target as a dense (N, C) distribution (one-hot rows for int class ids)."""
    if target.ndim == 1:
        return np.eye(n_classes, dtype=dtype)[target]
    return target


def _log_softmax_rows(x):
    z = x - x.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _softmax_cross_entropy_ref(logits, target):
    logp = _log_softmax_rows(logits)
    t = _dense_target(target, logits.shape[1], logits.dtype)
    loss = -(t * logp).sum() / logits.shape[0]
    return np.asarray([loss], logits.dtype), np.exp(logp)


def _softmax_cross_entropy_backward_ref(probs, target):
    t = _dense_target(target, probs.shape[1], probs.dtype)
    return (probs - t) / probs.shape[0]


#: Probabilities are clamped below at float32's smallest normal number (SINGA's FLT_MIN).
_P_FLOOR = float(np.finfo(np.float32).tiny)


def _cross_entropy_fwd_ref(p, target):
    t = _dense_target(target, p.shape[1], p.dtype)
    return -(t * np.log(np.maximum(p, _P_FLOOR))).sum(axis=1)


def _softmax_ce_infer(ins, attrs):
    x, t = ins
    _check_float("SoftmaxCrossEntropy", [x])
    _target_kind("SoftmaxCrossEntropy", x, t)
    return [((1,), x.dtype_code), (x.dims, x.dtype_code)]


def _softmax_ce_backward_infer(ins, attrs):
    p, t = ins
    _check_float("SoftmaxCrossEntropyBackward", [p])
    _target_kind("SoftmaxCrossEntropyBackward", p, t)
    return [(p.dims, p.dtype_code)]


def _cross_entropy_fwd_infer(ins, attrs):
    p, t = ins
    _check_float("CrossEntropyFwd", [p])
    _target_kind("CrossEntropyFwd", p, t)
    return [((p.dims[0],), p.dtype_code)]


def _softmax_np(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _sample_target(g, n, c, dtype):
    kind = g.choice(["ids", "onehot", "soft"])
    if kind == "ids":
        return g.index_array((n,), c).astype(np.int32)
    npdt = _dtype.NP_DTYPE[dtype]
    if kind == "onehot":
        return np.eye(c, dtype=npdt)[g.index_array((n,), c)]
    return _softmax_np(g.array((n, c), _dtype.kDouble, -2, 2)).astype(npdt)


def _loss_sample(probabilities: bool):
    def sample(g, dtype):
        n, c = g.integers(1, 3), g.integers(1, 5)
        x = g.array((n, c), dtype, -4, 4)
        if probabilities:
            x = _softmax_np(x.astype(np.float64)).astype(x.dtype)
        return [x, _sample_target(g, n, c, dtype)], {}

    return sample


_LOSS_TOL = {_F32: (1e-4, 1e-5), _F16: (1e-2, 1e-2)}

defop("SoftmaxCrossEntropy", 2, _softmax_ce_infer, _softmax_cross_entropy_ref,
      _loss_sample(False), nout=2, dtypes=FHD, tol=_LOSS_TOL,
      doc="""Softmax followed by cross-entropy, averaged over the batch:
    ``(logits[N, C], target) -> (loss[1], probs[N, C])``; ``target`` is int32 class ids of shape
    (N,) or a dense (N, C) distribution/one-hot of the logits' dtype::

        probs = softmax(logits, axis=1)      (computed stably, subtracting the row max)
        loss  = -(1/N) * sum_{n, c} t[n, c] * log_softmax(logits)[n, c]

    Class ids must lie in [0, C).
    """)

defop("SoftmaxCrossEntropyBackward", 2, _softmax_ce_backward_infer,
      _softmax_cross_entropy_backward_ref, _loss_sample(True), dtypes=FHD, tol=_LOSS_TOL,
      doc="""Gradient of SoftmaxCrossEntropy's loss w.r.t. the logits (for d loss = 1):
    ``(probs[N, C], target) -> dlogits = (probs - t) / N``, t one-hot from int32 ids or dense.
    """)

defop("CrossEntropyFwd", 2, _cross_entropy_fwd_infer, _cross_entropy_fwd_ref,
      _loss_sample(True), dtypes=FHD, tol=_LOSS_TOL,
      doc="""Per-sample cross-entropy of probabilities (SINGA's CrossEntropyFwd):
    ``(p[N, C], target) -> loss[N]`` with ``loss[n] = -log(max(p[n, t[n]], FLT_MIN))`` for int32
    ids, ``-sum_c t[n, c] * log(max(p[n, c], FLT_MIN))`` for a dense target (FLT_MIN = float32's
    smallest normal, 1.1754944e-38, so p = 0 gives a large finite loss).
    """)

from . import _nn_index_ops  # noqa: E402, F401  (indexing, padding and resampling ops)
