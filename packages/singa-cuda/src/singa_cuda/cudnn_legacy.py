"""Batch normalisation through cuDNN's NCHW kernels (``cudnnBatchNormalizationForwardTraining``,
``cudnnBatchNormalizationBackward``), the calls PyTorch makes for NCHW batch norm.

cuDNN's graph API (the frontend, :mod:`singa_cuda.cudnn_bn`) offers batch norm only on
channels-last tensors, so that path moves x and dy to NHWC and back around every call: on an
H200 those copies took 4.5 ms of ResNet-18's 12.1 ms of kernels (docs/cuda.md). These functions
of cuDNN's classic API read SINGA's NCHW tensors where they are. The frontend has no Python
binding for them, so they are called through ``ctypes`` on the ``libcudnn.so.9`` the frontend
has already loaded; the handle is our own, bound to the device's stream.

Conventions handled here, as in the graph path: cuDNN's exponential-average factor is the
weight of the *batch* statistic (``1 - momentum`` in SINGA's terms), its running variance is the
unbiased one (as SINGA's reference), and its per-channel vectors are float32 for float16
inputs (SINGA keeps them in the input's dtype: converted around the call).
"""

from __future__ import annotations

import ctypes
import glob
import os
import sysconfig
from dataclasses import dataclass

#: cudnnBatchNormMode_t: one mean/variance per channel over (N, H, W)
SPATIAL = 1
#: cudnnTensorFormat_t / cudnnDataType_t
NCHW = 0
DATA_TYPE = {"float32": 0, "float64": 1, "float16": 2}


class CudnnLibraryError(RuntimeError):
    """libcudnn or one of the functions used here is missing."""


def _load_library():
    import cudnn  # noqa: F401  (the frontend dlopens libcudnn.so.9 on import)

    tried = []
    for name in ("libcudnn.so.9", "libcudnn.so"):
        try:
            return ctypes.CDLL(name)
        except OSError as exc:
            tried.append(f"{name}: {exc}")
    for sub in ("nvidia/cudnn/lib", "nvidia/cu13/lib", "nvidia/cudnn_jit/lib"):
        for path in glob.glob(os.path.join(sysconfig.get_path("purelib"), sub,
                                           "libcudnn.so.*[0-9]")):
            try:
                return ctypes.CDLL(path)
            except OSError as exc:
                tried.append(f"{path}: {exc}")
    raise CudnnLibraryError("libcudnn.so.9 not found (" + "; ".join(tried) + ")")


_P = ctypes.c_void_p
_SIGNATURES = {
    "cudnnCreate": [ctypes.POINTER(_P)],
    "cudnnSetStream": [_P, _P],
    "cudnnGetErrorString": [ctypes.c_int],
    "cudnnCreateTensorDescriptor": [ctypes.POINTER(_P)],
    "cudnnSetTensor4dDescriptor": [_P, ctypes.c_int, ctypes.c_int] + [ctypes.c_int] * 4,
    "cudnnDeriveBNTensorDescriptor": [_P, _P, ctypes.c_int],
    "cudnnBatchNormalizationForwardTraining": (
        [_P, ctypes.c_int, _P, _P, _P, _P, _P, _P, _P, _P, _P, ctypes.c_double, _P, _P,
         ctypes.c_double, _P, _P]),
    "cudnnBatchNormalizationBackward": (
        [_P, ctypes.c_int, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P,
         ctypes.c_double, _P, _P]),
}


class Library:
    """The cuDNN functions used here, with their C signatures."""

    def __init__(self, lib=None):
        lib = lib if lib is not None else _load_library()
        for name, args in _SIGNATURES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                raise CudnnLibraryError(f"libcudnn has no {name}") from None
            fn.argtypes = args
            fn.restype = ctypes.c_char_p if name == "cudnnGetErrorString" else ctypes.c_int
            setattr(self, name, fn)

    def check(self, status: int, what: str) -> None:
        if status != 0:
            from singa.errors import KernelError

            msg = self.cudnnGetErrorString(status).decode(errors="replace")
            raise KernelError(f"cuDNN {what} failed: {msg} (status {status})")

    def descriptor(self) -> ctypes.c_void_p:
        d = _P()
        self.check(self.cudnnCreateTensorDescriptor(ctypes.byref(d)), "CreateTensorDescriptor")
        return d


@dataclass(frozen=True)
class LegacyKey:
    shape: tuple  # (N, C, H, W)
    dtype: str


class _Descriptors:
    """The x and per-channel tensor descriptors of one (shape, dtype)."""

    def __init__(self, lib: Library, key: LegacyKey):
        self.x, self.param = lib.descriptor(), lib.descriptor()
        n, c, h, w = key.shape
        lib.check(lib.cudnnSetTensor4dDescriptor(self.x, NCHW, DATA_TYPE[key.dtype], n, c, h, w),
                  "SetTensor4dDescriptor")
        lib.check(lib.cudnnDeriveBNTensorDescriptor(self.param, self.x, SPATIAL),
                  "DeriveBNTensorDescriptor")
        # alpha/beta are float for float/half data, double for double data
        ctype = ctypes.c_double if key.dtype == "float64" else ctypes.c_float
        self.one, self.zero = ctype(1.0), ctype(0.0)
        self.param_dtype = "float64" if key.dtype == "float64" else "float32"


def legacy_key(x_shape, dtype: str) -> LegacyKey | None:
    shape = tuple(int(d) for d in x_shape)
    if dtype not in ("float32", "float16") or len(shape) != 4:
        return None
    n, c, h, w = shape
    if n * h * w < 2:  # the unbiased running variance would divide by zero
        return None
    return LegacyKey(shape, dtype)


class CudnnLegacyBatchNorm:
    """cuDNN's NCHW batch-norm kernels on one CudaGPU's stream."""

    def __init__(self, device, lib: Library | None = None):
        self.device = device
        self.lib = lib if lib is not None else Library()
        self.handle = _P()
        with device.cuda_device:
            self.lib.check(self.lib.cudnnCreate(ctypes.byref(self.handle)), "Create")
            self.lib.check(self.lib.cudnnSetStream(self.handle, _P(device.stream.ptr)),
                           "SetStream")
        self._desc: dict[LegacyKey, _Descriptors] = {}

    def _descriptors(self, key: LegacyKey) -> _Descriptors:
        d = self._desc.get(key)
        if d is None:
            d = self._desc[key] = _Descriptors(self.lib, key)
        return d

    def train(self, key: LegacyKey, ins, outs, attrs) -> None:
        xp = self.device.am.xp
        x, scale, bias, rmean, rvar = ins
        y, smean, sinv, nmean, nvar = outs
        d = self._descriptors(key)
        pdt = d.param_dtype
        direct = all(a.dtype.name == pdt for a in (scale, bias, nmean, nvar, smean, sinv))
        if direct:
            # cuDNN updates the running statistics in place: start from the inputs' values
            if nmean.data.ptr != rmean.data.ptr:
                nmean[...] = rmean
            if nvar.data.ptr != rvar.data.ptr:
                nvar[...] = rvar
            p_scale, p_bias, p_mean, p_var, p_smean, p_sinv = (scale, bias, nmean, nvar,
                                                               smean, sinv)
        else:
            p_scale, p_bias, p_mean, p_var = (xp.ascontiguousarray(a, dtype=pdt)
                                              for a in (scale, bias, rmean, rvar))
            p_smean, p_sinv = xp.empty_like(p_mean), xp.empty_like(p_mean)
        self.lib.check(self.lib.cudnnBatchNormalizationForwardTraining(
            self.handle, SPATIAL, ctypes.byref(d.one), ctypes.byref(d.zero),
            d.x, _P(x.data.ptr), d.x, _P(y.data.ptr), d.param,
            _P(p_scale.data.ptr), _P(p_bias.data.ptr),
            1.0 - float(attrs.get("momentum", 0.9)), _P(p_mean.data.ptr), _P(p_var.data.ptr),
            float(attrs.get("eps", 1e-5)), _P(p_smean.data.ptr), _P(p_sinv.data.ptr)),
            "BatchNormalizationForwardTraining")
        if not direct:
            for out, val in ((smean, p_smean), (sinv, p_sinv), (nmean, p_mean),
                             (nvar, p_var)):
                out[...] = val

    def backward(self, key: LegacyKey, ins, outs, attrs) -> None:
        xp = self.device.am.xp
        dy, x, scale, smean, sinv = ins
        dx, dscale, dbias = outs
        d = self._descriptors(key)
        pdt = d.param_dtype
        direct = all(a.dtype.name == pdt for a in (scale, smean, sinv, dscale, dbias))
        if direct:
            p_scale, p_mean, p_inv, p_ds, p_db = scale, smean, sinv, dscale, dbias
        else:
            p_scale, p_mean, p_inv = (xp.ascontiguousarray(a, dtype=pdt)
                                      for a in (scale, smean, sinv))
            p_ds, p_db = xp.empty_like(p_scale), xp.empty_like(p_scale)
        self.lib.check(self.lib.cudnnBatchNormalizationBackward(
            self.handle, SPATIAL, ctypes.byref(d.one), ctypes.byref(d.zero),
            ctypes.byref(d.one), ctypes.byref(d.zero),
            d.x, _P(x.data.ptr), d.x, _P(dy.data.ptr), d.x, _P(dx.data.ptr), d.param,
            _P(p_scale.data.ptr), _P(p_ds.data.ptr), _P(p_db.data.ptr),
            float(attrs.get("eps", 1e-5)), _P(p_mean.data.ptr), _P(p_inv.data.ptr)),
            "BatchNormalizationBackward")
        if not direct:
            dscale[...] = p_ds
            dbias[...] = p_db
