"""Device memory for a CudaGPU: cupy device allocations behind SINGA's MemPool.

Two sources: an optional arena reserved when the device is created (SINGA's ``init_size``,
``SINGA_CUDA_INIT_SIZE`` MiB) that buffers are carved from first, then ``cudaMalloc`` through
``cupy.cuda.Memory``. Sub-buffers (``sub``) are pointer offsets into a buffer, so a graph's
arena works as on the CPU. cupy's own temporaries (a reduction's scratch, a mask) are served
by the same MemPool through :func:`install_cupy_allocator`, so cupy's pool never holds a second
cache and ``memory_stats()`` counts everything.
"""

from __future__ import annotations

import weakref

#: Alignment of carved buffers (the MemPool's size classes are multiples of 256 bytes too).
ALIGN = 256


class CupyAllocator:
    """Raw device buffers (``cupy.cuda.MemoryPointer``) of one GPU."""

    def __init__(self, device_id: int, init_bytes: int = 0):
        import cupy

        self.device_id = device_id
        self._cupy = cupy
        self.arena = None
        self.arena_used = 0
        self.stream = None  # set by the device: zeroing is ordered with its work
        if init_bytes > 0:
            with cupy.cuda.Device(device_id):
                self.arena = cupy.cuda.MemoryPointer(self._malloc(init_bytes), 0)

    def _malloc(self, nbytes: int):
        from ._errors import translate

        try:
            return self._cupy.cuda.Memory(nbytes)
        except Exception as exc:
            raise translate(exc, f"allocating {nbytes} bytes on cuda:{self.device_id}") from exc

    def alloc(self, nbytes: int):
        if self.arena is not None:
            start = (self.arena_used + ALIGN - 1) // ALIGN * ALIGN
            if start + nbytes <= self.arena.mem.size:
                self.arena_used = start + nbytes
                return self.arena + start
        with self._cupy.cuda.Device(self.device_id):
            return self._cupy.cuda.MemoryPointer(self._malloc(max(nbytes, 1)), 0)

    def free(self, buf) -> None:
        """Drop the reference: cupy frees the allocation with its last pointer (cudaFree
        waits for queued work). Arena pieces stay in the arena."""

    def zero(self, buf, nbytes: int) -> None:
        with self._cupy.cuda.Device(self.device_id):
            buf.memset_async(0, nbytes, self.stream)

    def sub(self, buf, offset: int, nbytes: int):
        """Bytes [offset, offset + nbytes) of ``buf``: a pointer offset, keeping ``buf``
        alive."""
        return buf + offset


class _Lease:
    """Returns a pool buffer lent to cupy when cupy drops its last reference to it."""

    __slots__ = ("pool", "buf", "cls")

    def __init__(self, pool, buf, cls):
        self.pool, self.buf, self.cls = pool, buf, cls

    def __del__(self):
        try:
            self.pool.free(self.buf, self.cls)
        except Exception:  # interpreter shutdown
            pass


_POOLS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_INSTALLED = False


def install_cupy_allocator(device_id: int, pool) -> None:
    """Route cupy's allocations on ``device_id`` to ``pool`` (a singa MemPool). All work of a
    device runs on its one stream, so a buffer freed and handed out again is reused in stream
    order, as cupy's own pool would."""
    global _INSTALLED
    import cupy

    _POOLS[device_id] = pool
    if _INSTALLED:
        return

    def allocate(nbytes: int):
        dev = cupy.cuda.runtime.getDevice()
        owner = _POOLS.get(dev)
        if owner is None:  # a device singa does not manage: plain cudaMalloc
            return cupy.cuda.MemoryPointer(cupy.cuda.Memory(nbytes), 0)
        buf, cls = owner.malloc(max(nbytes, 1))
        mem = cupy.cuda.UnownedMemory(buf.ptr, cls, _Lease(owner, buf, cls), dev)
        return cupy.cuda.MemoryPointer(mem, 0)

    cupy.cuda.set_allocator(allocate)
    _INSTALLED = True
