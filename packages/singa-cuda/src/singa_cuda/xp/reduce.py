"""Reductions and softmax; float16 inputs accumulate in float32."""

from __future__ import annotations

from ._module import ArrayModule


def _axes(x, attrs):
    axes = attrs.get("axes")
    if axes is None:
        return tuple(range(x.ndim))
    if isinstance(axes, int):
        axes = (axes,)
    return tuple(a % x.ndim for a in axes)


def kernels(am: ArrayModule) -> dict:
    """``{op_name: kernel}`` for the reductions, norms and softmax ops."""
    xp = am.xp

    def total(ins, outs, attrs):
        x, out = ins[0], outs[0]
        keep = attrs.get("keepdims", False)
        acc = am.acc_dtype(x.dtype)
        if acc is None:
            xp.sum(x, axis=_axes(x, attrs), keepdims=keep, out=out)
        else:
            out[...] = xp.sum(x, axis=_axes(x, attrs), keepdims=keep, dtype=acc)

    def mean(ins, outs, attrs):
        x, out = ins[0], outs[0]
        out[...] = xp.mean(x, axis=_axes(x, attrs), keepdims=attrs.get("keepdims", False),
                           dtype=am.acc_dtype(x.dtype))

    def extremum(fn):
        def kernel(ins, outs, attrs):
            x = ins[0]
            # not out=: cupy 14.2's CUB path of a full min reduction with out= raises
            # TypeError (comparing an array with a dtype in _cub_reduce_dtype_compatible)
            outs[0][...] = fn(x, axis=_axes(x, attrs), keepdims=attrs.get("keepdims", False))

        return kernel

    def argmax(ins, outs, attrs):
        x, out = ins[0], outs[0]
        axis = attrs["axis"] % x.ndim
        idx = xp.argmax(x, axis=axis)
        if attrs.get("keepdims", False):
            idx = xp.expand_dims(idx, axis)
        out[...] = idx

    def acc_of(x):
        return xp.float64 if x.dtype == xp.float64 else xp.float32

    def asum(ins, outs, attrs):
        x = ins[0]
        outs[0][...] = xp.abs(x).sum(dtype=acc_of(x))

    def nrm2(ins, outs, attrs):
        x = ins[0]
        wide = x.astype(acc_of(x))
        outs[0][...] = xp.sqrt(xp.sum(wide * wide))

    def softmax(ins, outs, attrs):
        x, out = ins[0], outs[0]
        axis = attrs.get("axis", -1)
        z = x.astype(acc_of(x))  # a copy: out may alias x
        z -= z.max(axis=axis, keepdims=True)
        xp.exp(z, out=z)
        z /= z.sum(axis=axis, keepdims=True)
        out[...] = z

    def log_softmax(ins, outs, attrs):
        x, out = ins[0], outs[0]
        axis = attrs.get("axis", -1)
        z = x.astype(acc_of(x))
        z -= z.max(axis=axis, keepdims=True)
        z -= xp.log(xp.exp(z).sum(axis=axis, keepdims=True))
        out[...] = z

    def softmax_backward(ins, outs, attrs):
        y, dy = ins
        axis = attrs.get("axis", -1)
        acc = acc_of(y)
        yw, dyw = y.astype(acc), dy.astype(acc)
        s = (dyw * yw).sum(axis=axis, keepdims=True)
        outs[0][...] = yw * (dyw - s)

    return {
        "Sum": total, "ReduceMean": mean, "ReduceMax": extremum(xp.max),
        "ReduceMin": extremum(xp.min), "ArgMax": argmax, "Asum": asum, "Nrm2": nrm2,
        "Softmax": softmax, "LogSoftmax": log_softmax, "SoftmaxBackward": softmax_backward,
    }
