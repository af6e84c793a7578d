"""Indexing, padding and resampling ops (``cl/indexing.cl``): Where, Pad, PadBackward,
OneHot, GatherElements, ScatterElements, ScatterAdd, UpsampleNearest(+Backward).

Scatters give each fiber (every coordinate but the scattered axis) to one work-item that walks
the axis in order: duplicate indices accumulate deterministically and no atomics are needed.
"""

from __future__ import annotations

import math

import numpy as np
from singa import backend as sb
from singa.backend import KernelError

from .._build import BITS_TYPES, CL_TYPES, prelude, read_source
from ._common import EW_LAYOUT, EW_MAXD, bcast_strides, collapse, make_kernel
from ._nnprog import I, launch_1d
from .elementwise import copy_view, fill_view
from .movement import check_index_view

_PAD_MODES = {"constant": 0, "reflect": 1, "edge": 2}


def _contig(shape) -> tuple:
    acc, out = 1, []
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def _layout(op: str, shape, **fields):
    if len(shape) > EW_MAXD:
        raise KernelError(f"{op}: tensors of more than {EW_MAXD} dims are not supported by the "
                          "OpenCL indexing kernels")
    lay = np.zeros((), EW_LAYOUT)
    lay["shape"][:len(shape)] = shape
    for name, vals in fields.items():
        lay[name][:len(vals)] = vals
    return lay


def _cond_type(device, dt):
    t = CL_TYPES.get(dt)
    if t is None or (t.needs_fp64 and not device.has_fp64):
        return BITS_TYPES[sb.ITEMSIZE[dt]]  # nonzero test on the raw bits
    return t


def kernels(device) -> dict:
    progs = device.programs

    def program(op, dt, cond_dt=None, bits=False):
        t = BITS_TYPES[sb.ITEMSIZE[dt]] if bits else CL_TYPES[dt]
        k = t if cond_dt is None else _cond_type(device, cond_dt)
        return progs.program(prelude(T=t, O=t, K=k) + read_source("indexing.cl"), op,
                             f"indexing[{t.name},{k.name}]")

    def where(ins, outs, attrs):
        cond, a, b = ins
        y = outs[0]
        shape = y.shape
        cshape, cst = collapse(shape, [y.strides, bcast_strides(cond, shape),
                                       bcast_strides(a, shape), bcast_strides(b, shape)])
        lay = _layout("Where", cshape, sy=cst[0], sa=cst[1], sb=cst[2], sc=cst[3])
        k = progs.kernel(program("Where", y.dtype_code, cond.dtype_code), "where_nd",
                         [I, I, None] + [None, I] * 4)
        n = math.prod(shape)
        launch_1d(device, k, n, n, len(cshape), lay, y.buf, y.offset, cond.buf, cond.offset,
                  a.buf, a.offset, b.buf, b.offset)

    def pad(ins, outs, attrs):
        x, y = ins[0], outs[0]
        nd = x.ndim
        pads = tuple(int(p) for p in attrs.get("pads", ()))
        mode = _PAD_MODES[attrs.get("mode", "constant")]
        lay = _layout("Pad", y.shape, sy=x.shape, sa=x.strides, sb=pads[:nd])
        t = CL_TYPES[y.dtype_code]
        k = progs.kernel(program("Pad", y.dtype_code), "pad_fwd", [I, I, None, I, t.scalar, None, I,
                                                           None, I])
        n = math.prod(y.shape)
        launch_1d(device, k, n, n, nd, lay, mode, t.scalar(attrs.get("value", 0)), x.buf,
                  x.offset, y.buf, y.offset)

    def pad_backward(ins, outs, attrs):
        dy, dx = ins[0], outs[0]
        x_shape = tuple(int(d) for d in attrs["x_shape"])
        nd = len(x_shape)
        pads = tuple(int(p) for p in attrs.get("pads", ()))
        mode = attrs.get("mode", "constant")
        lo, hi = pads[:nd], pads[nd:]
        if mode == "constant":  # the adjoint of zero padding is a crop
            off = dy.offset + sum(p * s for p, s in zip(lo, dy.strides))
            copy_view(device, dy.with_layout(x_shape, dy.strides, off), dx)
            return
        axes = [d for d in range(nd) if lo[d] or hi[d]]
        if not axes:
            copy_view(device, dy, dx)
            return
        k = progs.kernel(program("PadBackward", dx.dtype_code), "pad_fold",
                         [I] * 6 + [None, I, None, I])
        cur, cur_shape, frees = dy, list(dy.shape), []
        isz = sb.ITEMSIZE[dx.dtype_code]
        for pos, d in enumerate(axes):
            new_shape = cur_shape[:d] + [x_shape[d]] + cur_shape[d + 1:]
            if pos == len(axes) - 1:
                dst = dx
            else:
                buf, free = device.workspace(max(math.prod(new_shape), 1) * isz)
                frees.append(free)
                dst = dx.with_layout(tuple(new_shape), _contig(new_shape), 0)
                dst.buf = buf
            n = math.prod(new_shape)
            post = math.prod(cur_shape[d + 1:])
            launch_1d(device, k, n, n, x_shape[d], post, lo[d], hi[d], _PAD_MODES[mode],
                      cur.buf, cur.offset, dst.buf, dst.offset)
            cur, cur_shape = dst, new_shape
        for free in frees:
            free()

    def onehot(ins, outs, attrs):
        idx, y = ins[0], outs[0]
        depth = int(attrs["depth"])
        r = idx.ndim
        ax = attrs.get("axis", -1) % (r + 1)
        post = math.prod(idx.shape[ax:])
        t = CL_TYPES[y.dtype_code]
        k = progs.kernel(program("OneHot", y.dtype_code), "onehot", [I, I, I, None, I, t.scalar,
                                                             t.scalar, None, I])
        n = math.prod(y.shape)
        launch_1d(device, k, n, n, depth, post, idx.buf, idx.offset,
                  t.scalar(attrs.get("on_value", 1)), t.scalar(attrs.get("off_value", 0)),
                  y.buf, y.offset)

    def gather_elements(ins, outs, attrs):
        x, idx = ins
        y = outs[0]
        ax = attrs.get("axis", 0) % x.ndim
        check_index_view(device, "GatherElements", idx, x.shape[ax])
        lay = _layout("GatherElements", idx.shape, sa=x.strides)
        k = progs.kernel(program("GatherElements", y.dtype_code, bits=True), "gather_elements",
                         [I, I, None, I, I, None, I, None, I, None, I])
        n = math.prod(idx.shape)
        launch_1d(device, k, n, n, idx.ndim, lay, ax, x.shape[ax], x.buf, x.offset, idx.buf,
                  idx.offset, y.buf, y.offset)

    def scatter(op, out, upd, idx, shape, axis, alen, add, out_st, upd_st, idx_st):
        nfib = math.prod(shape) // max(shape[axis], 1) if shape[axis] else 0
        lay = _layout(op, shape, sy=out_st, sa=upd_st, sb=idx_st)
        k = progs.kernel(program(op, out.dtype_code), "scatter_fibers",
                         [I, I, None, I, I, I, None, I, None, I, None, I])
        launch_1d(device, k, nfib, nfib, len(shape), lay, axis, alen, int(add), out.buf,
                  out.offset, upd.buf, upd.offset, idx.buf, idx.offset)

    def scatter_elements(ins, outs, attrs):
        x, idx, upd = ins
        y = outs[0]
        ax = attrs.get("axis", 0) % x.ndim
        check_index_view(device, "ScatterElements", idx, x.shape[ax])
        copy_view(device, x, y)
        scatter("ScatterElements", y, upd, idx, idx.shape, ax, x.shape[ax],
                attrs.get("reduction", "none") == "add", y.strides, upd.strides, idx.strides)

    def scatter_add(ins, outs, attrs):
        idx, src = ins
        y = outs[0]
        shape = y.shape
        ax = attrs.get("axis", 0) % len(shape)
        check_index_view(device, "ScatterAdd", idx, shape[ax])
        fill_view(device, y, 0)
        pre, kk, post = math.prod(shape[:ax]), shape[ax], math.prod(shape[ax + 1:])
        j = math.prod(idx.shape)
        scatter("ScatterAdd", y, src, idx, (pre, j, post), 1, kk, True,
                (kk * post, post, 1), (j * post, post, 1), (0, 1, 0))

    def upsample(ins, outs, attrs):
        x, y = ins[0], outs[0]
        scales = tuple(int(s) for s in attrs["scales"])
        lay = _layout("UpsampleNearest", y.shape, sa=x.strides, sb=scales)
        k = progs.kernel(program("UpsampleNearest", y.dtype_code, bits=True), "upsample_nearest",
                         [I, I, None, None, I, None, I])
        n = math.prod(y.shape)
        launch_1d(device, k, n, n, y.ndim, lay, x.buf, x.offset, y.buf, y.offset)

    def upsample_backward(ins, outs, attrs):
        dy, dx = ins[0], outs[0]
        scales = tuple(int(s) for s in attrs["scales"])
        lay = _layout("UpsampleNearestBackward", dx.shape, sa=dy.strides, sb=scales)
        k = progs.kernel(program("UpsampleNearestBackward", dx.dtype_code), "upsample_bwd",
                         [I, I, I, None, None, I, None, I])
        n = math.prod(dx.shape)
        launch_1d(device, k, n, n, dx.ndim, math.prod(scales), lay, dy.buf, dy.offset, dx.buf,
                  dx.offset)

    def k(name, fn, contiguous=True):
        return make_kernel(device, name, fn, contiguous_inputs=contiguous, check_output=True)

    return {
        "Where": k("Where", where, contiguous=False),
        "Pad": k("Pad", pad),
        "PadBackward": k("PadBackward", pad_backward),
        "OneHot": k("OneHot", onehot),
        "GatherElements": k("GatherElements", gather_elements),
        "ScatterElements": k("ScatterElements", scatter_elements),
        "ScatterAdd": k("ScatterAdd", scatter_add),
        "UpsampleNearest": k("UpsampleNearest", upsample),
        "UpsampleNearestBackward": k("UpsampleNearestBackward", upsample_backward),
    }
