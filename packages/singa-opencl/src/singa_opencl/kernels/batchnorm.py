"""Batch normalisation, training, inference and backward (``cl/batchnorm.cl``)."""

from __future__ import annotations

import math

from .._build import CL_TYPES
from ._common import make_kernel
from ._nnprog import I, launch_1d, nn_program


def _ncs(x):
    n, c = x.shape[0], x.shape[1]
    return n, c, math.prod(x.shape[2:])


def _launch_planes(device, kern, n: int, c: int, s: int, *args) -> None:
    """Launch over the exact 2-D range (s, n * c); the kernels have no bounds guard. The
    planes are contiguous: on pocl a work-group takes whole planes where they fit
    (``default_local(rows=True)``)."""
    if n * c * s:
        device.launch(kern, (s, n * c), device.default_local((s, n * c), rows=True), *args)


def kernels(device) -> dict:
    progs = device.programs

    def train(ins, outs, attrs):
        x, scale, bias, rm, rv = ins
        y, mean, inv, new_rm, new_rv = outs
        n, c, s = _ncs(x)
        prg = nn_program(device, "BatchNormTrain", "batchnorm.cl", x.dtype_code)
        sc = CL_TYPES[x.dtype_code].scalar
        ks = progs.kernel(prg, "bn_stats", [I, I, I, sc, sc] + [None, I] * 7)
        launch_1d(device, ks, c, n, c, s, float(attrs.get("momentum", 0.9)),
                  float(attrs.get("eps", 1e-5)), x.buf, x.offset, rm.buf, rm.offset, rv.buf,
                  rv.offset,
                  mean.buf, mean.offset, inv.buf, inv.offset, new_rm.buf, new_rm.offset, new_rv.buf,
                  new_rv.offset)
        ka = progs.kernel(prg, "bn_apply", [I, I, I, sc] + [None, I] * 6)
        _launch_planes(device, ka, n, c, s, c, s, 0, 0.0, x.buf, x.offset, mean.buf, mean.offset,
                       inv.buf, inv.offset, scale.buf, scale.offset, bias.buf, bias.offset, y.buf,
                       y.offset)

    def infer(ins, outs, attrs):
        x, scale, bias, rm, rv = ins
        y = outs[0]
        n, c, s = _ncs(x)
        prg = nn_program(device, "BatchNormInfer", "batchnorm.cl", x.dtype_code)
        sc = CL_TYPES[x.dtype_code].scalar
        ka = progs.kernel(prg, "bn_apply", [I, I, I, sc] + [None, I] * 6)
        _launch_planes(device, ka, n, c, s, c, s, 1, float(attrs.get("eps", 1e-5)), x.buf,
                  x.offset, rm.buf, rm.offset, rv.buf, rv.offset, scale.buf, scale.offset, bias.buf,
                  bias.offset, y.buf, y.offset)

    def backward(ins, outs, attrs):
        dy, x, scale, mean, inv = ins
        dx, dscale, dbias = outs
        n, c, s = _ncs(x)
        prg = nn_program(device, "BatchNormBackward", "batchnorm.cl", x.dtype_code)
        ks = progs.kernel(prg, "bn_bwd_stats", [I, I, I] + [None, I] * 6)
        launch_1d(device, ks, c, n, c, s, dy.buf, dy.offset, x.buf, x.offset, mean.buf, mean.offset,
                  inv.buf, inv.offset, dscale.buf, dscale.offset, dbias.buf, dbias.offset)
        ka = progs.kernel(prg, "bn_bwd_apply", [I, I, I] + [None, I] * 8)
        _launch_planes(device, ka, n, c, s, c, s, n * s, dy.buf, dy.offset, x.buf, x.offset,
                  scale.buf, scale.offset, mean.buf, mean.offset, inv.buf, inv.offset, dscale.buf,
                  dscale.offset, dbias.buf, dbias.offset, dx.buf, dx.offset)

    return {
        "BatchNormTrain": make_kernel(device, "BatchNormTrain", train, contiguous_inputs=True),
        "BatchNormInfer": make_kernel(device, "BatchNormInfer", infer, contiguous_inputs=True),
        "BatchNormBackward": make_kernel(device, "BatchNormBackward", backward,
                                         contiguous_inputs=True),
    }
