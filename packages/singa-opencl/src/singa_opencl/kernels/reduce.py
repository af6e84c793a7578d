"""Reductions (Sum, ReduceMean/Max/Min, Asum, Nrm2), ArgMax and the softmax family.

Reductions are generated from one table of ``(init, map, combine, final)`` OpenCL C snippets
(``v`` is the mapped element, ``acc`` the accumulator, ``n`` the reduced count); see
``cl/reduce.cl`` for the two-stage scheme.
"""

from __future__ import annotations

import math

import numpy as np

from .._build import CL_TYPES, prelude, read_source
from ._common import EW_LAYOUT, collapse, make_kernel

RD_MAXD = 6
RD_LAYOUT = np.dtype([("kshape", np.int32, RD_MAXD), ("kx", np.int32, RD_MAXD),
                      ("ky", np.int32, RD_MAXD), ("rshape", np.int32, RD_MAXD),
                      ("rx", np.int32, RD_MAXD)])

# kernel: (init, map, combine, final, also for int32)
REDUCERS = {
    "rd_sum": ("0", "v", "acc + v", "acc", True),
    "rd_mean": ("0", "v", "acc + v", "acc / n", False),
    "rd_max": ("RD_LOWEST", "v", "RD_MAX(acc, v)", "acc", True),
    "rd_min": ("RD_HIGHEST", "v", "RD_MIN(acc, v)", "acc", True),
    "rd_asum": ("0", "fabs(v)", "acc + v", "acc", False),
    "rd_nrm2": ("0", "v * v", "acc + v", "sqrt(acc)", False),
}
OP_REDUCER = {"Sum": "rd_sum", "ReduceMean": "rd_mean", "ReduceMax": "rd_max",
              "ReduceMin": "rd_min", "Asum": "rd_asum", "Nrm2": "rd_nrm2"}

#: Elements one work-item reduces before the work is split into parts.
_PART = 4096
#: Work-items to aim for when there are few outputs.
_TARGET_ITEMS = 64


def _program(device, op: str, dt: int):
    t = CL_TYPES[dt]
    lines = [prelude(T=t, O=t), read_source("reduce.cl")]
    for name, (init, mp, comb, fin, ints) in REDUCERS.items():
        if ints or not t.is_int:
            # the final combine of partials must not re-map them
            lines.append(f"RD_KERNEL({name}, (T_C)({init}), ({mp}), ({comb}), ({fin}))")
    src = "\n".join(lines) + "\n"
    return device.programs.program(src, op, f"reduce[{t.name}]")


def _fill(lay, field, values):
    lay[field][:len(values)] = values


def reduce_view(device, op: str, kname: str, x, y, axes) -> None:
    """y = reduction ``kname`` of x over ``axes`` (y has the kept dims, with or without
    keepdims)."""
    nd = x.ndim
    axes = tuple(range(nd)) if axes is None else tuple(sorted(a % nd for a in axes))
    keep = [i for i in range(nd) if i not in axes]
    keepdims = y.ndim == nd and nd != len(keep)
    y_st = [y.strides[i] for i in keep] if keepdims else list(y.strides)
    kshape, (kx, ky) = collapse(tuple(x.shape[i] for i in keep),
                                [tuple(x.strides[i] for i in keep), tuple(y_st)])
    rshape, (rx,) = collapse(tuple(x.shape[i] for i in axes),
                             [tuple(x.strides[i] for i in axes)])
    R = math.prod(rshape)
    nout = math.prod(kshape)
    if nout == 0:
        return
    if not rshape:
        rshape, rx = (1,), (0,)
        R = 1 if all(x.shape[i] for i in axes) else 0
    if R == 0:
        rshape, rx = (1,), (0,)
    if len(kshape) > RD_MAXD or len(rshape) > RD_MAXD:
        from singa.backend import KernelError

        raise KernelError(f"{op}: too many non-mergeable dims for the OpenCL reduction")
    lay = np.zeros((), RD_LAYOUT)
    _fill(lay, "kshape", kshape)
    _fill(lay, "kx", kx)
    _fill(lay, "ky", ky)
    _fill(lay, "rshape", rshape)
    _fill(lay, "rx", rx)
    nparts = 1
    if nout < _TARGET_ITEMS and R > _PART:
        nparts = min(-(-R // _PART), -(-_TARGET_ITEMS // nout))
    chunk = -(-R // nparts) if R else 1
    prg = _program(device, op, x.dtype_code)
    progs = device.programs
    k = progs.kernel(prg, kname, [np.int32] * 7 + [None, None, np.int32, None, np.int32, None])
    t = CL_TYPES[x.dtype_code]
    part_buf = x.buf
    release = None
    if nparts > 1:
        part_buf, release = device.workspace(nout * nparts * np.dtype(t.scalar).itemsize)
    device.launch(k, (nparts, nout), None, nout, len(kshape), len(rshape), R, chunk, nparts,
                  int(nparts == 1), lay, y.buf, y.offset, x.buf, x.offset, part_buf)
    if nparts > 1:
        kf = progs.kernel(prg, kname + "_final", [np.int32] * 4 + [None, None, np.int32, None])
        device.launch(kf, (nout,), None, nout, len(kshape), R, nparts, lay, y.buf, y.offset,
                      part_buf)
        release()


def _argmax(device, x, y, axis: int, keepdims: bool) -> None:
    nd = x.ndim
    keep = [i for i in range(nd) if i != axis]
    y_st = [y.strides[i] for i in keep] if keepdims else list(y.strides)
    kshape, (kx, ky) = collapse(tuple(x.shape[i] for i in keep),
                                [tuple(x.strides[i] for i in keep), tuple(y_st)])
    nout = math.prod(kshape)
    if nout == 0:
        return
    lay = np.zeros((), RD_LAYOUT)
    _fill(lay, "kshape", kshape)
    _fill(lay, "kx", kx)
    _fill(lay, "ky", ky)
    prg = _program(device, "ArgMax", x.dtype_code)
    k = device.programs.kernel(prg, "argmax", [np.int32] * 4 + [None, None, np.int32, None,
                                                                 np.int32])
    device.launch(k, (nout,), None, nout, len(kshape), x.shape[axis], x.strides[axis], lay,
                  y.buf, y.offset, x.buf, x.offset)


def softmax_rows(device, op: str, mode: int, axis: int, y, a, b=None) -> None:
    """Softmax (mode 0), log-softmax (1) or softmax backward (2, a = y, b = dy) along axis."""
    nd = y.ndim
    axis = axis % nd if nd else 0
    if nd == 0:
        y, a = y.with_layout((1,), (1,)), a.with_layout((1,), (1,))
        b = b.with_layout((1,), (1,)) if b is not None else None
        nd, axis = 1, 0
    b = a if b is None else b
    outer = [i for i in range(nd) if i != axis]
    shape = tuple(y.shape[i] for i in outer)
    sts = [tuple(v.strides[i] for i in outer) for v in (y, a, b)]
    cshape, cst = collapse(shape, sts)
    nrows = math.prod(shape)
    length = y.shape[axis]
    if nrows == 0 or length == 0:
        return
    lay = np.zeros((), EW_LAYOUT)
    lay["shape"][:len(cshape)] = cshape
    for field, s in zip(("sy", "sa", "sb"), cst):
        lay[field][:len(cshape)] = s
    prg = _program(device, op, y.dtype_code)
    k = device.programs.kernel(prg, "softmax_rows",
                               [np.int32, np.int32, None, np.int32, np.int32]
                               + [None, np.int32, np.int32] * 3)
    device.launch(k, (nrows,), None, nrows, len(cshape), lay, length, mode,
                  y.buf, y.offset, y.strides[axis], a.buf, a.offset, a.strides[axis],
                  b.buf, b.offset, b.strides[axis])


def kernels(device) -> dict:
    table = {}

    def reducer(op_name):
        kname = OP_REDUCER[op_name]

        def body(ins, outs, attrs):
            reduce_view(device, op_name, kname, ins[0], outs[0], attrs.get("axes"))

        return make_kernel(device, op_name, body)

    for op_name in ("Sum", "ReduceMean", "ReduceMax", "ReduceMin"):
        table[op_name] = reducer(op_name)

    def norm(op_name):
        kname = OP_REDUCER[op_name]

        def body(ins, outs, attrs):
            reduce_view(device, op_name, kname, ins[0], outs[0], None)

        return make_kernel(device, op_name, body)

    table["Asum"] = norm("Asum")
    table["Nrm2"] = norm("Nrm2")

    def argmax(ins, outs, attrs):
        x = ins[0]
        _argmax(device, x, outs[0], attrs["axis"] % max(x.ndim, 1), attrs.get("keepdims",
                                                                              False))

    table["ArgMax"] = make_kernel(device, "ArgMax", argmax)

    def softmax(mode, op_name):
        def body(ins, outs, attrs):
            softmax_rows(device, op_name, mode, attrs.get("axis", -1), outs[0], *ins)

        return make_kernel(device, op_name, body)

    table["Softmax"] = softmax(0, "Softmax")
    table["LogSoftmax"] = softmax(1, "LogSoftmax")
    table["SoftmaxBackward"] = softmax(2, "SoftmaxBackward")
    return table


