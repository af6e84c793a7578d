"""Pinned host staging for large host<->device copies of a CudaGPU.

A copy from or to pageable host memory makes the driver stage it through its own pinned
buffer, in pieces, synchronously; a copy from pinned memory is one DMA transfer that can run
asynchronously on the device's stream. So copies of at least :data:`THRESHOLD` bytes go through
pinned buffers kept here and reused:

- upload (``numpy -> device``): the host data is copied into a pinned buffer, the transfer is
  queued on the stream (``copy_from_host_async``) and an event recorded after it; the call
  returns without waiting for the stream (the caller's array was already copied, so it may be
  freed at once);
- download (``device -> numpy``): the transfer is queued after the stream's kernels, an event
  recorded, waited for, and the data copied out of the pinned buffer into a fresh numpy array.

A pinned buffer is not handed out again before the event recorded after its last transfer has
completed (:meth:`PinnedStaging.acquire` polls ``event.done`` and, when every buffer of the
size class is still in flight and the pool is at its cap, waits for the oldest one). The
bookkeeping takes its allocator and event factory as arguments, so it is tested without a GPU;
on a GPU they are ``cupyx.empty_pinned`` and ``cupy.cuda.Event``.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

#: Copies of at least this many bytes are staged through pinned memory (below it, the fixed
#: cost of an event and a host memcpy outweighs the faster transfer).
THRESHOLD = 1 << 20
#: Pinned bytes the staging keeps at most (page-locked memory is a scarce system resource).
MAX_BYTES = 256 << 20


def size_class(nbytes: int) -> int:
    """Buffers are allocated in powers of two from 1 MiB, so a buffer serves every copy of up
    to its size."""
    size = THRESHOLD
    while size < nbytes:
        size <<= 1
    return size


@dataclass(eq=False)  # identity: buffers are compared by which one, not by contents
class StagingBuffer:
    """One pinned buffer (``host``: a uint8 numpy array over pinned memory) and the event
    recorded after its last transfer (None: no transfer in flight)."""

    host: object
    size: int
    event: object | None = None
    in_use: bool = field(default=False)

    def ready(self) -> bool:
        """No transfer is reading or writing the buffer any more."""
        return self.event is None or bool(self.event.done)


class PinnedStaging:
    """Reusable pinned buffers, reused only after their transfers' events completed.

    Parameters
    ----------
    alloc:
        ``alloc(nbytes)`` -> a uint8 host array of ``nbytes`` over pinned memory
        (``cupyx.empty_pinned``).
    make_event:
        ``make_event()`` -> an event with ``record(stream)``, ``done`` and ``synchronize()``
        (``cupy.cuda.Event(disable_timing=True)``).
    max_bytes:
        pinned bytes kept at most; beyond it a request waits for a buffer of its class to be
        free, or (none of its class) allocates one that is dropped after use.
    """

    def __init__(self, alloc: Callable[[int], object], make_event: Callable[[], object],
                 max_bytes: int = MAX_BYTES):
        self._alloc = alloc
        self._make_event = make_event
        self.max_bytes = max_bytes
        self.buffers: list[StagingBuffer] = []
        self.allocated = 0  # pinned bytes held by ``buffers``
        self.waits = 0  # times a request had to wait for a transfer to finish
        self._lock = threading.Lock()  # kernels may be issued from several threads

    def acquire(self, nbytes: int) -> StagingBuffer:
        """A buffer of at least ``nbytes`` whose previous transfers have completed."""
        with self._lock:
            return self._acquire(nbytes)

    def _acquire(self, nbytes: int) -> StagingBuffer:
        size = size_class(nbytes)
        fits = [b for b in self.buffers if b.size == size and not b.in_use]
        for b in fits:
            if b.ready():
                b.event, b.in_use = None, True
                return b
        if self.allocated + size <= self.max_bytes or not fits:
            buf = StagingBuffer(self._alloc(size), size, in_use=True)
            if self.allocated + size <= self.max_bytes:
                self.buffers.append(buf)
                self.allocated += size
            return buf  # over the cap with no buffer of its class: used once, not kept
        # at the cap: wait for the buffer of this class whose transfer was queued first
        oldest = fits[0]
        oldest.event.synchronize()
        self.waits += 1
        oldest.event, oldest.in_use = None, True
        return oldest

    def release(self, buf: StagingBuffer, stream=None) -> None:
        """Give ``buf`` back after queuing its transfer on ``stream``: an event recorded on
        the stream now marks when the transfer (and the work before it) is complete. With
        no stream the buffer is free at once (its transfer was waited for)."""
        event = None
        if stream is not None:
            event = self._make_event()
            event.record(stream)
        with self._lock:
            buf.event = event
            buf.in_use = False
            # queuing order: the oldest in-flight buffer comes first in ``acquire``
            if buf in self.buffers:
                self.buffers.remove(buf)
                self.buffers.append(buf)

    def upload(self, src, dst_pointer, stream) -> None:
        """Copy contiguous numpy ``src`` to device memory ``dst_pointer`` (a
        ``cupy.cuda.MemoryPointer``) asynchronously on ``stream``, through a pinned buffer;
        ``src`` may be freed as soon as this returns."""
        nbytes = src.nbytes
        buf = self.acquire(nbytes)
        view = buf.host[:nbytes]
        np.copyto(view, np.ascontiguousarray(src).reshape(-1).view(np.uint8))
        dst_pointer.copy_from_host_async(ctypes.c_void_p(view.ctypes.data), nbytes, stream)
        self.release(buf, stream)

    def download(self, src_pointer, nbytes: int, stream, dtype, shape) -> np.ndarray:
        """A new numpy array of ``shape``/``dtype`` with the ``nbytes`` at device memory
        ``src_pointer``, copied after the work queued on ``stream``."""
        buf = self.acquire(nbytes)
        try:
            view = buf.host[:nbytes]
            src_pointer.copy_to_host_async(ctypes.c_void_p(view.ctypes.data), nbytes, stream)
            done = self._make_event()
            done.record(stream)
            done.synchronize()  # the data must be there before it is copied out
            out = np.empty(shape, dtype)
            np.copyto(out.reshape(-1).view(np.uint8), view)
        finally:
            self.release(buf)  # nothing in flight: free at once
        return out


def cupy_staging() -> PinnedStaging:
    """The staging of a CudaGPU: ``cupyx.empty_pinned`` buffers, timing-free CUDA events."""
    import cupy
    import cupyx

    return PinnedStaging(lambda n: cupyx.empty_pinned((n,), np.uint8),
                         lambda: cupy.cuda.Event(block=False, disable_timing=True))
