"""Copies, casts, fills, concatenation, repetition, padding and nearest upsampling."""

from __future__ import annotations

import math

from ._module import ArrayModule


def _pad_widths(shape, pads):
    nd = len(shape)
    pads = tuple(int(p) for p in pads)
    return list(zip(pads[:nd], pads[nd:]))


def kernels(am: ArrayModule) -> dict:
    """``{op_name: kernel}`` for the data-movement ops."""
    xp = am.xp

    def copy(ins, outs, attrs):
        outs[0][...] = ins[0]

    def astype(ins, outs, attrs):
        # float -> int truncates toward zero (C conversion) in numpy and cupy alike
        outs[0][...] = ins[0]

    def set_value(ins, outs, attrs):
        outs[0].fill(attrs["value"])

    def concat(ins, outs, attrs):
        out, axis = outs[0], attrs["axis"] % outs[0].ndim
        start = 0
        for x in ins:  # slice by slice: out may be a strided view, which concatenate(out=) rejects
            n = x.shape[axis]
            idx = (slice(None),) * axis + (slice(start, start + n),)
            out[idx] = x
            start += n

    def repeat(ins, outs, attrs):
        reps = attrs["repeats"]
        counts = int(reps[0]) if len(reps) == 1 else [int(r) for r in reps]
        outs[0][...] = xp.repeat(ins[0], counts, axis=attrs["axis"] % ins[0].ndim)

    def take(ins, outs, attrs):
        x, idx = ins
        axis = attrs["axis"] % x.ndim
        am.check_indices("Take", idx, x.shape[axis])
        idx = xp.where(idx < 0, idx + x.shape[axis], idx)
        outs[0][...] = xp.take(x, idx, axis=axis)

    def pad(ins, outs, attrs):
        x, out = ins[0], outs[0]
        widths = _pad_widths(x.shape, attrs["pads"])
        mode = attrs.get("mode", "constant")
        if mode == "constant":
            out.fill(attrs.get("value", 0))
            inner = tuple(slice(lo, lo + d) for d, (lo, _hi) in zip(x.shape, widths))
            out[inner] = x
        else:
            out[...] = xp.pad(x, widths, mode=mode)

    def pad_backward(ins, outs, attrs):
        dy, dx = ins[0], outs[0]
        shape = tuple(int(d) for d in attrs["x_shape"])
        widths = _pad_widths(shape, attrs["pads"])
        mode = attrs.get("mode", "constant")
        inner = tuple(slice(lo, lo + d) for d, (lo, _hi) in zip(shape, widths))
        if mode == "constant":  # a crop: Pad copied each x cell once
            dx[...] = dy[inner]
            return
        # Pad gathered out[k] = x[src[k]]; its adjoint scatters dy back onto src, summing
        ids = xp.arange(math.prod(shape), dtype=xp.int64).reshape(shape)
        src = xp.pad(ids, widths, mode=mode).reshape(-1)
        acc = xp.zeros(math.prod(shape), am.acc_dtype(dy.dtype) or dy.dtype)
        am.add_at(acc, src, dy.reshape(-1).astype(acc.dtype))
        dx[...] = acc.reshape(shape)

    def upsample(ins, outs, attrs):
        y = ins[0]
        for ax, s in enumerate(attrs["scales"]):
            if int(s) != 1:
                y = xp.repeat(y, int(s), axis=ax)
        outs[0][...] = y

    def upsample_backward(ins, outs, attrs):
        dy = ins[0]
        shape = tuple(int(d) for d in attrs["x_shape"])
        scales = [int(s) for s in attrs["scales"]]
        split = [v for d, k in zip(shape, scales) for v in (d, k)]
        summed = dy.reshape(split).sum(axis=tuple(range(1, 2 * len(shape), 2)),
                                       dtype=am.acc_dtype(dy.dtype))
        outs[0][...] = summed

    return {
        "Copy": copy, "AsType": astype, "SetValue": set_value, "Concat": concat,
        "Repeat": repeat, "Take": take, "Pad": pad, "PadBackward": pad_backward,
        "UpsampleNearest": upsample, "UpsampleNearestBackward": upsample_backward,
    }
