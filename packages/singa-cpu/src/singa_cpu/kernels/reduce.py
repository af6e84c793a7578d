"""Reductions and softmax."""

from __future__ import annotations

import numpy as np

from ._threads import single_threaded_blas


def _axes(x, attrs):
    axes = attrs.get("axes")
    return tuple(range(x.ndim)) if axes is None else tuple(axes)


def _reducer(fn):
    def kernel(ins, outs, attrs):
        x = ins[0]
        fn(x, axis=_axes(x, attrs), keepdims=attrs.get("keepdims", False), out=outs[0])

    return kernel


def _sum(ins, outs, attrs):
    x, out = ins[0], outs[0]
    axes = _axes(x, attrs)
    keep = attrs.get("keepdims", False)
    if x.dtype == np.float16:  # accumulate in float32 like the GPU libraries do
        out[...] = np.sum(x, axis=axes, keepdims=keep, dtype=np.float32)
    else:
        np.sum(x, axis=axes, keepdims=keep, out=out)


def _mean(ins, outs, attrs):
    x, out = ins[0], outs[0]
    axes = _axes(x, attrs)
    out[...] = np.mean(x, axis=axes, keepdims=attrs.get("keepdims", False),
                       dtype=np.float32 if x.dtype == np.float16 else None)


def _argmax(ins, outs, attrs):
    outs[0][...] = np.argmax(ins[0], axis=attrs["axis"], keepdims=attrs.get("keepdims", False))


def _asum(ins, outs, attrs):
    x = ins[0]
    outs[0][...] = np.abs(x).sum(dtype=np.float64 if x.dtype == np.float64 else np.float32)


def _nrm2(ins, outs, attrs):
    x = ins[0]
    acc = np.float64 if x.dtype == np.float64 else np.float32
    flat = x.astype(acc, copy=False).reshape(-1)
    with single_threaded_blas():
        outs[0][...] = np.sqrt(np.dot(flat, flat))


def _softmax(ins, outs, attrs):
    x, out = ins[0], outs[0]
    axis = attrs.get("axis", -1)
    np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=axis, keepdims=True)


def _log_softmax(ins, outs, attrs):
    x, out = ins[0], outs[0]
    axis = attrs.get("axis", -1)
    np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
    out -= np.log(np.exp(out).sum(axis=axis, keepdims=True))


def _softmax_backward(ins, outs, attrs):
    y, dy = ins
    out = outs[0]
    axis = attrs.get("axis", -1)
    np.multiply(dy, y, out=out)
    s = out.sum(axis=axis, keepdims=True)
    np.subtract(dy, s, out=out)
    out *= y


KERNELS = {
    "Sum": _sum,
    "ReduceMean": _mean,
    "ReduceMax": _reducer(np.max),
    "ReduceMin": _reducer(np.min),
    "ArgMax": _argmax,
    "Asum": _asum,
    "Nrm2": _nrm2,
    "Softmax": _softmax,
    "LogSoftmax": _log_softmax,
    "SoftmaxBackward": _softmax_backward,
}
