"""The OpenCL device: one context and one in-order command queue per device, cl.Buffer memory."""

from __future__ import annotations

import functools
import math

import numpy as np
from singa.backend import ITEMSIZE, NP_DTYPE, Device, KernelError

from ._build import ProgramCache


class CLView:
    """A kernel's view of a CTensor: buffer, element offset, shape, strides (elements), dtype.

    ``dt`` is the SINGA dtype code. Views are cheap to build; kernels derive reshaped or
    permuted views with :meth:`with_layout` without touching memory.
    """

    __slots__ = ("buf", "offset", "shape", "strides", "dtype_code", "contig")

    def __init__(self, buf, off: int, shape: tuple, strides: tuple, dt: int, contig: bool):
        self.buf = buf
        self.offset = off
        self.shape = shape
        self.strides = strides
        self.dtype_code = dt
        self.contig = contig

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> np.dtype:
        return NP_DTYPE[self.dtype_code]

    def with_layout(self, shape, strides, off: int | None = None) -> CLView:
        shape, strides = tuple(shape), tuple(strides)
        return CLView(self.buf, self.offset if off is None else off, shape, strides,
                      self.dtype_code, strides == _contig(shape))

    def __repr__(self) -> str:
        return (f"<CLView {self.shape} strides={self.strides} offset={self.offset} "
                f"dtype_code={self.dtype_code}>")


def _compiles_per_local_size(info) -> bool:
    """Whether the runtime compiles a kernel again for every new local size: pocl's CPU
    drivers (pthread, basic) turn the kernel into a work-group function when it is enqueued,
    once the work-group size is known (pocl's kernel-compiler documentation)."""
    import pyopencl as cl

    try:
        platform = info.platform.name
        cpu = bool(info.device.type & cl.device_type.CPU)
    except cl.Error:  # an unreadable platform or device: leave the choice to the runtime
        return False
    return cpu and "Portable Computing Language" in platform


def pinned_local(gsize, local_size: int, compute_units: int, rows: bool = False) -> tuple:
    """The local size for an exact launch over ``gsize`` (a kernel without a bounds guard),
    from a small fixed set: in each dimension the largest power of two that divides the global
    size, their product at most ``local_size`` and small enough to leave two work-groups per
    compute unit where the range allows (as a runtime's own choice spreads a small range over
    the cores). A kernel thus meets a few local sizes, whatever shapes it runs on.

    ``rows``: dimension 0 is a contiguous axis the runtime vectorises along (the batch-norm
    planes): it takes the largest divisor of its size within that bound instead (7x7 planes
    whole rather than one element a group, 1.8x faster on pocl), one size per plane size."""
    total = math.prod(gsize)
    budget = min(local_size, max(1, total // (2 * compute_units)))
    budget = 1 << (budget.bit_length() - 1)  # a power of two
    local = []
    for i, g in enumerate(gsize):
        if not g:
            d = 1
        elif rows and i == 0:
            d = _largest_divisor(g, budget)
        else:
            d = min(g & -g, budget)  # g & -g: the largest power of two dividing g
        local.append(d)
        budget = 1 << ((budget // d).bit_length() - 1)
    return tuple(local)


@functools.lru_cache(maxsize=1024)
def _largest_divisor(n: int, bound: int) -> int:
    """The largest divisor of ``n`` that is at most ``bound``."""
    best = 1
    i = 1
    while i * i <= n:
        if n % i == 0:
            for d in (i, n // i):
                if best < d <= bound:
                    best = d
        i += 1
    return best


def _contig(shape) -> tuple:
    acc, out = 1, []
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


class BufferAllocator:
    """Raw device memory: one ``cl.Buffer`` per pool request; zeroing runs on the queue."""

    def __init__(self, context, queue, base_align_bytes: int = 128):
        self.context = context
        self.queue = queue
        # Graphs pack their arena with sub-buffers at multiples of 256 bytes; offer them only
        # where the device accepts sub-buffer origins at that alignment.
        if 0 < base_align_bytes <= 256 and 256 % base_align_bytes == 0:
            self.sub = self._sub

    def alloc(self, nbytes: int):
        import pyopencl as cl

        return cl.Buffer(self.context, cl.mem_flags.READ_WRITE, max(int(nbytes), 4))

    def free(self, buf) -> None:
        buf.release()

    def zero(self, buf, nbytes: int) -> None:
        import pyopencl as cl

        if nbytes:
            cl.enqueue_fill_buffer(self.queue, buf, np.uint8(0), 0, int(nbytes))

    def _sub(self, buf, offset: int, nbytes: int):
        """A sub-buffer aliasing bytes [offset, offset + nbytes) of ``buf``."""
        return buf.get_sub_region(int(offset), max(int(nbytes), 4))


class OpenCLDevice(Device):
    """An OpenCL device (``opencl:N``): its context, queue, program cache and RNG state."""

    lang = "opencl"

    def __init__(self, index: int, info):
        import pyopencl as cl

        self.info = info
        self.cl_device = info.device
        self.context = cl.Context([info.device])
        # One in-order queue is the device's execution unit; profiling is always on so that
        # the graph's per-op timing (_timed_call) reads device timestamps.
        self.queue = cl.CommandQueue(
            self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        align = int(info.device.mem_base_addr_align) // 8  # reported in bits
        super().__init__("opencl", index, BufferAllocator(self.context, self.queue, align))
        self.programs = ProgramCache(self)
        self.has_fp16 = info.has_fp16
        self.has_fp64 = info.has_fp64
        self.max_work_group = int(info.device.max_work_group_size)
        self.local_size = min(256, self.max_work_group)
        # pocl's CPU drivers compile a work-group function for every local size a kernel is
        # launched with (at the first launch: ~70-100 ms each here), so where the runtime would
        # pick the local size (None) the launches pick it from a small fixed set instead
        # (see default_local); other runtimes choose their own, as before
        self.pins_local_size = _compiles_per_local_size(info)
        self.compute_units = max(1, int(info.device.max_compute_units))
        self._events: list | None = None
        self.rng_key = self.rand_seed & 0xFFFFFFFFFFFFFFFF  # SetRandSeed reseeds it (_seed)
        self.rng_calls = 0

    # ------------------------------------------------------------------ views and transfers
    def make_native(self, ct, buf) -> CLView:
        return CLView(buf, ct.offset, ct.dims, ct.strides, ct.dtype_code, ct.contig)

    def native_to_numpy(self, arr: CLView) -> np.ndarray:
        import pyopencl as cl

        out = np.empty(arr.shape, NP_DTYPE[arr.dtype_code])
        if out.size == 0:
            return out
        src = arr if arr.contig else self._packed_copy(arr)
        cl.enqueue_copy(self.queue, out, src.buf, src_offset=src.offset * ITEMSIZE[arr.dtype_code],
                        is_blocking=True)
        return out

    def numpy_into_native(self, src, arr: CLView) -> None:
        import pyopencl as cl

        host = np.ascontiguousarray(src, dtype=NP_DTYPE[arr.dtype_code])
        if host.size == 0:
            return
        if arr.contig:
            # pyopencl keeps `host` alive until the non-blocking write completes
            cl.enqueue_copy(self.queue, arr.buf, host,
                            dst_offset=arr.offset * ITEMSIZE[arr.dtype_code], is_blocking=False)
            return
        tmp, cls = self.pool.malloc(host.nbytes)
        try:
            cl.enqueue_copy(self.queue, tmp, host, is_blocking=False)
            staged = CLView(tmp, 0, arr.shape, _contig(arr.shape), arr.dtype_code, True)
            from .kernels.elementwise import copy_view

            copy_view(self, staged, arr)
        finally:
            self.pool.free(tmp, cls)

    def _packed_copy(self, arr: CLView) -> CLView:
        """A contiguous copy of a strided view in a fresh buffer (for reading it back)."""
        from .kernels.elementwise import copy_view

        nbytes = max(arr.size * ITEMSIZE[arr.dtype_code], 4)
        buf = self.pool.allocator.alloc(nbytes)
        dst = CLView(buf, 0, arr.shape, _contig(arr.shape), arr.dtype_code, True)
        copy_view(self, arr, dst)
        return dst

    # ------------------------------------------------------------------ execution
    def launch(self, kernel, gsize, lsize, *args):
        """Enqueue ``kernel`` on the device's queue; the event is kept while profiling.

        Under the device lock: a cached ``cl.Kernel`` holds its arguments, so two threads
        setting them at once would launch one thread's kernel with the other's buffers."""
        if lsize is None:
            lsize = self.default_local(gsize)
        with self._lock:
            ev = kernel(self.queue, gsize, lsize, *args)
        if self._events is not None:
            self._events.append(ev)
        return ev

    def default_local(self, gsize, rows: bool = False):
        """The local size of an exact launch over ``gsize`` that names none: the runtime's
        choice (None), except where it compiles per local size (pocl), there
        :func:`pinned_local` (``rows``: dimension 0 is contiguous, see there)."""
        if not self.pins_local_size:
            return None
        return pinned_local(gsize, self.local_size, self.compute_units, rows)

    def launch_exact(self, kernel, n: int, *args) -> None:
        """Enqueue exactly ``n`` work-items of a kernel that has no ``i < n`` guard.

        A guard (an early return) stops pocl from vectorising across work-items, which costs
        3-4x on elementwise kernels; so the bulk runs in whole work-groups and the remainder
        as a second launch at a global offset.
        """
        ls = self.local_size
        bulk = n // ls * ls
        if bulk:
            self.launch(kernel, (bulk,), (ls,), *args)
        if n > bulk:
            # the remainder (fewer than local_size items): one item per work-group where the
            # local size is pinned (one work-group function for every remainder)
            local = (1,) if self.pins_local_size else None
            with self._lock:
                ev = kernel(self.queue, (n - bulk,), local, *args, global_offset=(bulk,))
            if self._events is not None:
                self._events.append(ev)

    def workspace(self, nbytes: int):
        """A temporary buffer from the pool: ``(buf, release)``; release after enqueueing.

        Safe because the queue is in order: a later user of the buffer runs after this op.
        """
        buf, cls = self.pool.malloc(max(int(nbytes), 4))
        return buf, lambda: self.pool.free(buf, cls)

    def synchronize(self) -> None:
        self.queue.finish()

    def _seed(self, seed: int) -> None:
        self.rng_key = int(seed) & 0xFFFFFFFFFFFFFFFF
        self.rng_calls = 0

    def _timed_call(self, fn) -> float:
        """Run ``fn`` and return the device time of the kernels it enqueued (profiling events).

        Falls back to wall time for nodes that enqueue no kernel (host transfers by pyopencl
        calls that return no event to us).
        """
        import time

        self._events = []
        t0 = time.perf_counter()
        try:
            fn()
            self.queue.finish()
        finally:
            events, self._events = self._events, None
        wall = time.perf_counter() - t0
        if not events:
            return wall
        total = 0
        for ev in events:
            total += ev.profile.end - ev.profile.start
        return total * 1e-9

    def describe(self, verbose: bool = False) -> str:
        return self.info.describe()

    def mem_info(self) -> tuple[int, int]:
        """(free, total) bytes; OpenCL reports no free memory, so free is total minus pool use."""
        total = int(self.cl_device.global_mem_size)
        return max(total - self.pool.current_bytes - self.pool.cached_bytes, 0), total


def kernel_error(op: str, device, exc) -> KernelError:
    """A KernelError for an OpenCL runtime failure (out of resources, bad launch, ...)."""
    return KernelError(
        f"{op}: the OpenCL runtime failed on device {device.name} "
        f"({device.cl_device.name.strip()}): {type(exc).__name__}: {exc}. "
        "If it is out of resources or memory, use smaller batches or free tensors "
        "(device.empty_cache())."
    )
