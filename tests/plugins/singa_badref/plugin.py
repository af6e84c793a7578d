"""Entry point of the badref and emptyref backends (built on singa_pyref's device)."""

from __future__ import annotations

import random

from singa import backend as sb
from singa.backend import BACKEND_API_VERSION, BackendSpec, hookimpl, kernel_attrs

F32 = (sb.kFloat32,)


@kernel_attrs(dtypes=F32)
def _copy(ins, outs, attrs):
    outs[0].write(ins[0].read())


@kernel_attrs(dtypes=F32)
def _set_value(ins, outs, attrs):
    outs[0].write([attrs["value"]] * outs[0].size)


@kernel_attrs(dtypes=F32)
def add_subtracts(ins, outs, attrs):
    """Wrong math: a - b."""
    out = outs[0]
    out.write([a - b for a, b in zip(ins[0].read(out.shape), ins[1].read(out.shape))])


@kernel_attrs(dtypes=F32)
def sub_ignores_strides(ins, outs, attrs):
    """Reads inputs as if they were contiguous from their offset (right only for contiguous
    inputs of the output's shape)."""
    from singa_pyref.view import PyView

    out = outs[0]

    def flat(v):
        if v.shape != out.shape:
            return v.read(out.shape)
        dense = PyView(v.buf, v.code, v.shape, _contiguous(v.shape), v.offset)
        return dense.read()

    out.write([a - b for a, b in zip(flat(ins[0]), flat(ins[1]))])


def _contiguous(shape):
    acc, rev = 1, []
    for d in reversed(shape):
        rev.append(acc)
        acc *= d
    return tuple(reversed(rev))


@kernel_attrs(dtypes=F32)
def neg_clobbers_alias(ins, outs, attrs):
    """Initialises the output before reading the input: wrong when out aliases x."""
    out = outs[0]
    out.write([0.0] * out.size)
    out.write([-v for v in ins[0].read()])


def kernels(device) -> dict:
    @kernel_attrs(dtypes=F32)
    def gaussian_wrong_std(ins, outs, attrs):
        out = outs[0]
        out.write([device.rng.gauss(attrs["mean"], 1.5 * attrs["std"]) for _ in range(out.size)])

    @kernel_attrs(dtypes=F32)
    def uniform_unseeded(ins, outs, attrs):
        out = outs[0]
        lo, hi = attrs["low"], attrs["high"]
        out.write([min(random.uniform(lo, hi), hi) for _ in range(out.size)])

    return {
        "Copy": _copy,
        "SetValue": _set_value,
        "Add": add_subtracts,
        "Sub": sub_ignores_strides,
        "Neg": neg_clobbers_alias,
        "Gaussian": gaussian_wrong_std,
        "Uniform": uniform_unseeded,
    }


def _device(name):
    def create(index):
        from singa_pyref.device import PyRefDevice

        dev = PyRefDevice(index)
        dev.backend = name
        return dev

    return create


@hookimpl
def singa_backends():
    return [
        BackendSpec(
            name="badref",
            api_version=BACKEND_API_VERSION,
            create_device=_device("badref"),
            kernels=kernels,
        ),
        BackendSpec(
            name="emptyref",
            api_version=BACKEND_API_VERSION,
            create_device=_device("emptyref"),
            kernels=lambda device: {},
            host_fallback=True,
        ),
    ]
