"""Pooling2d forward and backward (``cl/pool.cl``): direct window loops, no workspace."""

from __future__ import annotations

import numpy as np
from singa.backend import pool2d_geometry

from ._common import make_kernel
from ._nnprog import I, launch_1d, nn_program
from .elementwise import fill_view

PL_GEOM = np.dtype([(f, np.int32) for f in ("H", "W", "kh", "kw", "sh", "sw", "pt", "pl", "ho",
                                             "wo", "is_max", "count_pad", "Hend", "Wend")])


def _geom(op, shape, attrs):
    g = pool2d_geometry(op, shape, attrs)
    s = np.zeros((), PL_GEOM)
    for f, v in (("H", g.h), ("W", g.w), ("kh", g.kh), ("kw", g.kw), ("sh", g.sh),
                 ("sw", g.sw), ("pt", g.pt), ("pl", g.pl), ("ho", g.ho), ("wo", g.wo),
                 ("is_max", int(g.is_max)), ("count_pad", int(g.count_include_pad)),
                 ("Hend", g.h + g.pb), ("Wend", g.w + g.pr)):
        s[f] = v
    return g, s


def kernels(device) -> dict:
    def forward(ins, outs, attrs):
        x, y = ins[0], outs[0]
        g, geo = _geom("Pooling2d", x.shape, attrs)
        prg = nn_program(device, "Pooling2d", "pool.cl", x.dtype_code)
        k = device.programs.kernel(prg, "pool_fwd", [I, None, None, I, None, I])
        total = g.n * g.c * g.ho * g.wo
        launch_1d(device, k, total, total, geo, x.buf, x.offset, y.buf, y.offset)

    def backward(ins, outs, attrs):
        dy, x, _y = ins
        dx = outs[0]
        g, geo = _geom("Pooling2dBackward", x.shape, attrs)
        prg = nn_program(device, "Pooling2dBackward", "pool.cl", x.dtype_code)
        args = (geo, dy.buf, dy.offset, x.buf, x.offset, dx.buf, dx.offset)
        types = [I, None, None, I, None, I, None, I]
        if g.sh >= g.kh and g.sw >= g.kw:  # windows do not overlap: one work-item per window
            fill_view(device, dx, 0)
            k = device.programs.kernel(prg, "pool_bwd_windows", types)
            total = g.n * g.c * g.ho * g.wo
        else:  # one work-item per dx cell, gathering from the windows that cover it
            k = device.programs.kernel(prg, "pool_bwd", types)
            total = g.n * g.c * g.h * g.w
        launch_1d(device, k, total, total, *args)

    return {
        "Pooling2d": make_kernel(device, "Pooling2d", forward, contiguous_inputs=True),
        "Pooling2dBackward": make_kernel(device, "Pooling2dBackward", backward,
                                         contiguous_inputs=True),
    }
