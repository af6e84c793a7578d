"""Index-based data movement: Concat, Repeat, Take (and the gather helper NN ops reuse)."""

from __future__ import annotations

import math

import numpy as np
from singa import backend as sb
from singa.backend import OPS, KernelError

from .._build import BITS_TYPES, prelude, read_source
from ._common import EW_LAYOUT, EW_MAXD, make_kernel, roundup
from .elementwise import copy_view


def _program(device, op: str, itemsize: int):
    t = BITS_TYPES[itemsize]
    return device.programs.program(prelude(T=t, O=t) + read_source("movement.cl"), op,
                                   f"movement[{t.name}]")


def contiguous_index(device, idx):
    """``(view, release)``: idx as a contiguous int32 view (copied when strided)."""
    if idx.contig:
        return idx, None
    shape = idx.shape
    buf, release = device.workspace(max(math.prod(shape), 1) * 4)
    from ..device import CLView, _contig

    dst = CLView(buf, 0, shape, _contig(shape), idx.dtype_code, True)
    copy_view(device, idx, dst)
    return dst, release


def check_index_view(device, op: str, idx, n: int, negative: bool = True,
                     what: str = "index") -> None:
    """Validate index view ``idx`` against an axis of length ``n`` before a kernel uses it.

    The kernels address memory with these values, so an unchecked one reads or writes outside
    the buffer (a segfault on CPU runtimes). One blocking read of the indices (4 bytes each)
    to the host, then the same check and error as every backend (``sb.check_indices``).
    """
    sb.check_indices(op, device.native_to_numpy(idx), n, negative=negative, what=what)


def gather(device, op: str, y, x, gdim: int, axis: int, idx_buf, idx_off: int,
           idx_stride: int = 1) -> None:
    """y[p] = x[p with coordinate gdim -> idx[p[gdim]] on x's ``axis``]; y has x's rank."""
    n = math.prod(y.shape)
    if n == 0:
        return
    nd = y.ndim
    if nd > EW_MAXD:
        raise KernelError(f"{op}: more than {EW_MAXD} dims are not supported by the OpenCL "
                          "gather kernel")
    lay = np.zeros((), EW_LAYOUT)
    lay["shape"][:nd] = y.shape
    lay["sy"][:nd] = y.strides
    lay["sa"][:nd] = x.strides
    prg = _program(device, op, sb.ITEMSIZE[y.dtype_code])
    k = device.programs.kernel(prg, "gather", [np.int32, np.int32, None] + [np.int32] * 3
                               + [None, np.int32, None, np.int32, None, np.int32, np.int32])
    ls = device.local_size
    device.launch(k, (roundup(n, ls),), (ls,), n, nd, lay, gdim, x.shape[axis],
                  x.strides[axis], y.buf, y.offset, x.buf, x.offset, idx_buf, idx_off, idx_stride)


def kernels(device) -> dict:
    index_cache: dict = {}

    def concat(ins, outs, attrs):
        y = outs[0]
        axis = attrs["axis"] % y.ndim
        pos = 0
        for x in ins:
            view = y.with_layout(x.shape, y.strides, y.offset + pos * y.strides[axis])
            copy_view(device, x, view)
            pos += x.shape[axis]

    def repeat_index(length: int, reps: tuple):
        key = (length, reps)
        buf = index_cache.get(key)
        if buf is None:
            import pyopencl as cl

            host = np.repeat(np.arange(length, dtype=np.int32),
                             reps if len(reps) > 1 else reps[0]).astype(np.int32)
            if len(index_cache) > 64:
                index_cache.clear()
            buf = cl.Buffer(device.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                            hostbuf=host if host.size else np.zeros(1, np.int32))
            index_cache[key] = buf
        return buf

    def repeat(ins, outs, attrs):
        x, y = ins[0], outs[0]
        axis = attrs["axis"] % x.ndim
        buf = repeat_index(x.shape[axis], tuple(int(r) for r in attrs["repeats"]))
        gather(device, "Repeat", y, x, axis, axis, buf, 0)

    def take(ins, outs, attrs):
        x, idx = ins
        y = outs[0]
        axis = attrs["axis"] % x.ndim
        check_index_view(device, "Take", idx, x.shape[axis])
        idx, release = contiguous_index(device, idx)
        ni = math.prod(idx.shape)
        shape = x.shape[:axis] + (ni,) + x.shape[axis + 1:]
        if y.contig:
            from ..device import _contig

            yv = y.with_layout(shape, _contig(shape))
            xv = x
            gather(device, "Take", yv, xv, axis, axis, idx.buf, idx.offset)
        else:  # write a contiguous temporary, then copy into the strided output
            from ..device import CLView, _contig

            buf, free = device.workspace(max(math.prod(shape), 1) * sb.ITEMSIZE[y.dtype_code])
            tmp = CLView(buf, 0, shape, _contig(shape), y.dtype_code, True)
            gather(device, "Take", tmp, x, axis, axis, idx.buf, idx.offset)
            copy_view(device, tmp.with_layout(y.shape, _contig(y.shape)), y)
            free()
        if release is not None:
            release()

    return {
        "Concat": make_kernel(device, "Concat", concat, OPS["Concat"].dtypes),
        "Repeat": make_kernel(device, "Repeat", repeat, OPS["Repeat"].dtypes),
        "Take": make_kernel(device, "Take", take, OPS["Take"].dtypes),
    }
