"""SoftmaxCrossEntropy (+Backward) and CrossEntropyFwd over (N, C) rows (``cl/loss.cl``)."""

from __future__ import annotations

import numpy as np
from singa import backend as sb

from .._build import CL_TYPES
from ._common import make_kernel
from ._nnprog import I, launch_1d, nn_program
from .movement import check_index_view


def _target_args(t, x, device=None, op: str = ""):
    """(ids flag, id buffer, id offset, dense buffer, dense offset) for target view t; with
    ``op``, class ids are first checked to lie in [0, C) (the kernels index rows with them)."""
    if t.dtype_code == sb.kInt:
        if op:
            check_index_view(device, op, t, x.shape[1], negative=False, what="class id")
        return 1, t.buf, t.offset, x.buf, 0
    return 0, x.buf, 0, t.buf, t.offset


def kernels(device) -> dict:
    progs = device.programs

    def sce(ins, outs, attrs):
        x, t = ins
        loss, probs = outs
        n, c = x.shape
        targs = _target_args(t, x, device, "SoftmaxCrossEntropy")
        prg = nn_program(device, "SoftmaxCrossEntropy", "loss.cl", x.dtype_code)
        kr = progs.kernel(prg, "sce_rows", [I, I, I, None, I, None, I, None, I, None, I, None])
        sc = np.dtype(CL_TYPES[x.dtype_code].scalar).itemsize
        rows, free = device.workspace(max(n, 1) * sc)
        launch_1d(device, kr, n, n, c, targs[0], x.buf, x.offset, *targs[1:], probs.buf,
                  probs.offset, rows)
        kt = progs.kernel(prg, "sce_total", [I, None, None, I])
        launch_1d(device, kt, 1, n, rows, loss.buf, loss.offset)
        free()

    def sce_backward(ins, outs, attrs):
        p, t = ins
        dx = outs[0]
        n, c = p.shape
        prg = nn_program(device, "SoftmaxCrossEntropyBackward", "loss.cl", p.dtype_code)
        k = progs.kernel(prg, "sce_backward", [I, I, I, None, I, None, I, None, I, None, I])
        ids, tb, to, db, do = _target_args(t, p, device, "SoftmaxCrossEntropyBackward")
        launch_1d(device, k, n * c, n, c, ids, p.buf, p.offset, tb, to, db, do, dx.buf, dx.offset)

    def ce_fwd(ins, outs, attrs):
        p, t = ins
        loss = outs[0]
        n, c = p.shape
        prg = nn_program(device, "CrossEntropyFwd", "loss.cl", p.dtype_code)
        k = progs.kernel(prg, "ce_fwd", [I, I, I, None, I, None, I, None, I, None, I])
        ids, tb, to, db, do = _target_args(t, p, device, "CrossEntropyFwd")
        launch_1d(device, k, n, n, c, ids, p.buf, p.offset, tb, to, db, do, loss.buf, loss.offset)

    return {
        "SoftmaxCrossEntropy": make_kernel(device, "SoftmaxCrossEntropy", sce,
                                           contiguous_inputs=True),
        "SoftmaxCrossEntropyBackward": make_kernel(device, "SoftmaxCrossEntropyBackward",
                                                   sce_backward, contiguous_inputs=True),
        "CrossEntropyFwd": make_kernel(device, "CrossEntropyFwd", ce_fwd,
                                       contiguous_inputs=True),
    }
