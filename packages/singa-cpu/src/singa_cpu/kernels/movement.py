"""Copies, casts, fills and index-based data movement."""

from __future__ import annotations

import numpy as np
from singa.backend import check_indices

from . import _transpose


def _copy(ins, outs, attrs):
    """out = x; a transposed source (a batch of transposed matrices) through OpenBLAS's
    omatcopy (:mod:`._transpose`), the rest by numpy."""
    if not _transpose.copy(ins[0], outs[0]):
        np.copyto(outs[0], ins[0])


def _astype(ins, outs, attrs):
    np.copyto(outs[0], ins[0], casting="unsafe")


def _set_value(ins, outs, attrs):
    outs[0].fill(attrs["value"])


def _concat(ins, outs, attrs):
    np.concatenate(ins, axis=attrs["axis"], out=outs[0])


def _repeat(ins, outs, attrs):
    reps = attrs["repeats"]
    outs[0][...] = np.repeat(ins[0], reps if len(reps) > 1 else reps[0], axis=attrs["axis"])


def _take(ins, outs, attrs):
    x, idx = ins
    check_indices("Take", idx, x.shape[attrs["axis"]])
    np.take(x, idx, axis=attrs["axis"], out=outs[0])


KERNELS = {
    "Copy": _copy,
    "AsType": _astype,
    "SetValue": _set_value,
    "Concat": _concat,
    "Repeat": _repeat,
    "Take": _take,
}
