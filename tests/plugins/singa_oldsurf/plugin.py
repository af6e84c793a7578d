"""Backend ``oldsurf`` in the deprecated spelling (``oldsurf = singa_oldsurf.plugin``).

It imports the records and the hook marker from ``singa.plugins``, subclasses
``singa.device.Device`` and caches its views in the CTensor fields itself, and declares its
kernels' dtypes, contiguity and graph-mode ``bind`` as function attributes. The spellings
keep working with a DeprecationWarning each (docs/plugin-authoring.md, versioning policy);
tests/core/test_plugin_surface.py checks both halves.
"""

import numpy as np
from singa.backend import NP_DTYPE, kDouble, kFloat32
from singa.device import Device
from singa.plugins import BACKEND_API_VERSION, BackendSpec, hookimpl

F32, F64 = kFloat32, kDouble


class _Alloc:
    def alloc(self, nbytes):
        return np.zeros(nbytes, np.uint8)

    def free(self, buf):
        pass

    def zero(self, buf, nbytes):
        buf[:nbytes] = 0


class OldDevice(Device):
    def __init__(self, index):
        super().__init__("oldsurf", index, _Alloc())

    def native(self, ct):
        buf = ct.block.data
        if ct._vbuf is buf:
            return ct._view
        isz = NP_DTYPE[ct.dt].itemsize
        v = np.ndarray(ct.shp, NP_DTYPE[ct.dt], buf, ct.off * isz, tuple(s * isz for s in ct.strd))
        ct._view, ct._vbuf = v, buf
        return v

    def native_to_numpy(self, arr):
        return np.array(arr)

    def numpy_into_native(self, src, arr):
        np.copyto(arr, src, casting="unsafe")


def _copy(ins, outs, attrs):
    np.copyto(outs[0], ins[0])


def _add(ins, outs, attrs):
    np.add(ins[0], ins[1], out=outs[0])


_add.dtypes = (F32, F64)


def _neg(ins, outs, attrs):
    if not ins[0].flags.c_contiguous:
        raise AssertionError("Neg declared contiguous_inputs but got a strided input")
    np.negative(ins[0], out=outs[0])


_neg.contiguous_inputs = True
_neg.dtypes = (F32, F64)


def _relu(ins, outs, attrs):
    np.maximum(ins[0], 0, out=outs[0])


def _bind_relu(ins, outs, attrs):
    x, y = ins[0], outs[0]
    return lambda _i, _o, _a: np.maximum(x, 0, out=y)


_relu.bind = _bind_relu
_relu.dtypes = (F32, F64)


@hookimpl
def singa_backends():
    return [BackendSpec(
        name="oldsurf", api_version=BACKEND_API_VERSION,
        create_device=OldDevice, kernels=lambda device: {
            "Copy": _copy, "Add": _add, "Neg": _neg, "ReLU": _relu},
        device_count=lambda: 1, install_hint="put tests/plugins on PYTHONPATH",
        host_fallback=True)]
