"""Helpers shared by the kernel modules: dtype support, layouts, launch sizes, error mapping."""

from __future__ import annotations

import functools

import numpy as np
from singa import backend as sb
from singa.backend import OPS, KernelError

from .._build import CL_TYPES

EW_MAXD = 6  # must match cl/elementwise.cl

EW_LAYOUT = np.dtype([("shape", np.int32, EW_MAXD), ("sy", np.int32, EW_MAXD),
                      ("sa", np.int32, EW_MAXD), ("sb", np.int32, EW_MAXD),
                      ("sc", np.int32, EW_MAXD)])


def device_dtypes(device) -> tuple:
    """dtype codes this device's kernels handle: float32, int32, float16 (stored as half,
    computed in float), and float64 when the device has cl_khr_fp64."""
    dts = [sb.kFloat32, sb.kInt, sb.kFloat16]
    if device.has_fp64:
        dts.append(sb.kDouble)
    return tuple(dts)


def claim(device, op_name: str, only=None) -> tuple:
    """The dtypes to declare for op ``op_name``: op's dtypes & device's (& ``only``)."""
    op_dts = OPS[op_name].dtypes if op_name in OPS else device_dtypes(device)
    dts = tuple(d for d in op_dts if d in device_dtypes(device))
    if only is not None:
        dts = tuple(d for d in dts if d in only)
    return dts


def make_kernel(device, op_name: str, body, dtypes=None, contiguous_inputs: bool = False,
                check_output: bool = False):
    """Wrap ``body(ins, outs, attrs)`` as the device's kernel for ``op_name``.

    The wrapper rejects dtypes the kernel does not declare and turns OpenCL runtime errors
    (out of resources, invalid launch) into KernelError naming the op and the device. The
    dtype checked is the first input's, or the first output's with ``check_output`` (ops whose
    first input is an index or a condition).
    """
    dts = claim(device, op_name) if dtypes is None else tuple(dtypes)
    allowed = frozenset(dts)

    @functools.wraps(body)
    def kernel(ins, outs, attrs):
        first = outs[0] if check_output or not ins else ins[0]
        if first.dtype_code not in allowed:
            raise KernelError(
                f"{op_name}: dtype {sb.dtype_name(first.dtype_code)} is not supported by the "
                "OpenCL "
                f"kernel on {device.name} (supported: "
                f"{', '.join(sb.dtype_name(d) for d in dts)}); convert first, e.g. "
                "x.as_type(tensor.float32)"
            )
        try:
            body(ins, outs, attrs)
        except KernelError:
            raise
        except OverflowError as exc:  # a size or attribute past the kernels' int32 arguments
            raise KernelError(f"{op_name} on {device.name}: a size or attribute does not fit "
                              f"the OpenCL kernel's 32-bit arguments ({exc}); use smaller "
                              "tensors or attributes") from exc
        except Exception as exc:
            import pyopencl as cl

            if isinstance(exc, (cl.Error, cl.MemoryError)):
                from ..device import kernel_error

                raise kernel_error(op_name, device, exc) from exc
            raise

    kernel.__name__ = f"opencl_{op_name}"
    return sb.Kernel(kernel, dtypes=dts, contiguous_inputs=contiguous_inputs)


def cltype(dt: int):
    return CL_TYPES[dt]


def bcast_strides(view, shape: tuple) -> tuple:
    """Strides of ``view`` broadcast (numpy rules) to ``shape``; 0 on broadcast dims."""
    pad = len(shape) - len(view.shape)
    out = []
    for i, d in enumerate(shape):
        j = i - pad
        if j < 0 or (view.shape[j] == 1 and d != 1):
            out.append(0)
        else:
            out.append(view.strides[j] if view.shape[j] != 1 else 0)
    return tuple(out)


def collapse(shape: tuple, strides: list) -> tuple:
    """Drop size-1 dims and merge adjacent dims that are contiguous for every operand.

    Returns ``(shape, [strides per operand])`` with the fewest dims describing the same
    element order.
    """
    dims = [i for i, d in enumerate(shape) if d != 1]
    new_shape: list[int] = []
    new_st: list[list[int]] = [[] for _ in strides]
    for i in dims:
        if new_shape and all(st[i] * shape[i] == ns[-1] for st, ns in zip(strides, new_st)):
            new_shape[-1] *= shape[i]
            for st, ns in zip(strides, new_st):
                ns[-1] = st[i]
            continue
        new_shape.append(shape[i])
        for st, ns in zip(strides, new_st):
            ns.append(st[i])
    return tuple(new_shape), [tuple(s) for s in new_st]


def roundup(n: int, m: int) -> int:
    return (n + m - 1) // m * m
