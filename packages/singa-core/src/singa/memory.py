"""Blocks of device memory and the caching pool they come from.

A :class:`Block` is a handle to memory that does not exist yet: it gets a buffer from its
device's :class:`MemPool` at the first write (lazy allocation) and gives it back when the last
reference dies or when the scheduler frees it after its last reader. The pool keeps freed
buffers per size class and hands them to the next request of that class, so memory freed in one
step of an iteration is reused later in the same iteration.

A backend supplies an :class:`Allocator` (raw ``alloc``/``free``/``zero`` of native buffers);
everything else here is backend-independent.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

__all__ = ["Allocator", "Block", "MemPool", "Reservation", "size_class"]


class Allocator(Protocol):
    """What a backend provides for raw memory. Buffers are opaque to core."""

    def alloc(self, nbytes: int) -> Any:
        """Return a new native buffer of at least ``nbytes`` bytes."""

    def free(self, buf: Any) -> None:
        """Release a buffer obtained from :meth:`alloc` (may be a no-op for GC'd buffers)."""

    def zero(self, buf: Any, nbytes: int) -> None:
        """Fill the first ``nbytes`` bytes of ``buf`` with zeros."""

    # Optional: ``sub(buf, offset, nbytes)`` returns a buffer aliasing bytes
    # [offset, offset + nbytes) of ``buf`` (offsets are multiples of 256). With it, a graph
    # packs its intermediates into one arena at offsets instead of sharing whole buffers.


_MIN_CLASS = 256


def size_class(nbytes: int) -> int:
    """Round a request up to its size class.

    Classes are multiples of 256 bytes below 4 KiB, then four steps per power of two, so a
    cached buffer is never more than 25% larger than the request it serves.
    """
    if nbytes <= 4096:
        return max(_MIN_CLASS, (nbytes + 255) & ~255)
    top = 1 << (nbytes - 1).bit_length()  # next power of two >= nbytes
    step = top >> 3  # quarter of the lower power of two
    return (nbytes + step - 1) // step * step


#: request -> :func:`size_class`, for the requests seen (bounded): every eager op's output
#: asks for its class, and a training step repeats the same few sizes
_CLASSES: dict[int, int] = {}


class Reservation:
    """Buffers set aside for work captured once and run again later (a CUDA graph).

    A captured graph keeps the addresses of every buffer its kernels used during the capture,
    workspaces and temporaries included, and touches them again at every launch. So from
    :meth:`MemPool.reserve` until :meth:`release`, a buffer the capturing thread got from the
    pool or gave back to it during the capture window (the ``with`` block) is the
    reservation's: given back, it goes to the reservation's own free lists, not to the pool's
    cache, so nothing outside the graph is handed memory the graph writes. Inside the window
    requests are served from those lists first, so a workspace freed by one captured kernel is
    reused by the next, in stream order, as the pool would (PyTorch's private graph pools work
    the same way). A buffer another live reservation owns goes back to that one's free lists
    even when freed in this window, and this reservation claims it too (its graph touched it):
    when the owner is released, a free buffer that a live reservation claims goes to that
    one instead of the pool's cache, so memory stays reserved until every reservation whose
    window touched it is released. Reserved buffers count in the pool's ``current_bytes``;
    ``nbytes`` is what the reservation holds free.
    """

    def __init__(self, pool: MemPool):
        self.pool = pool
        self.thread = threading.get_ident()
        #: id(buffer) -> buffer of every buffer the reservation owns (in use or free)
        self.owned: dict[int, Any] = {}
        self._free: dict[int, list[Any]] = {}
        self.nbytes = 0
        self.released = False

    def __enter__(self) -> Reservation:
        if self.pool._capturing is not None:
            raise RuntimeError("MemPool.reserve: a capture window is already open on this pool")
        self.pool._capturing = self
        return self

    def __exit__(self, *exc) -> None:
        self.pool._capturing = None

    def _take(self, cls: int) -> Any:
        bucket = self._free.get(cls)
        if bucket:
            self.nbytes -= cls
            return bucket.pop()
        return None

    def _keep(self, buf: Any, cls: int) -> None:
        self.owned[id(buf)] = buf
        self._free.setdefault(cls, []).append(buf)
        self.nbytes += cls

    def release(self) -> None:
        """Give the reserved free buffers back to the pool's cache (the graph is gone), or to
        a live reservation that claims them too; a buffer still in use elsewhere goes back
        when it is freed. Idempotent."""
        if self.released:
            return
        self.released = True
        pool = self.pool
        if pool._capturing is self:
            pool._capturing = None
        pool._reservations = others = [r for r in pool._reservations if r is not self]
        for cls, bucket in self._free.items():
            for buf in bucket:
                heir = next((r for r in others if id(buf) in r.owned), None)
                if heir is None:
                    pool._cache(buf, cls)
                else:  # another live graph touched it: still reserved, now by that one
                    heir._keep(buf, cls)
        self._free.clear()
        self.owned.clear()
        self.nbytes = 0


class MemPool:
    """Caching pool of native buffers with size classes and statistics.

    ``current_bytes`` counts bytes of buffers handed out and not yet returned (reserved ones
    included, see :meth:`reserve`); ``peak_bytes`` is its maximum since the last
    :meth:`reset_peak`; ``num_allocs`` counts requests and ``num_hits`` those served from the
    cache; ``cached_bytes`` is memory held for reuse; ``reserved_bytes`` what reservations
    hold free for their graphs.
    """

    def __init__(self, allocator: Allocator, name: str = ""):
        self.allocator = allocator
        self.name = name
        self._free: dict[int, list[Any]] = {}
        self.current_bytes = 0
        self.peak_bytes = 0
        self.cached_bytes = 0
        self.num_allocs = 0
        self.num_hits = 0
        self.num_device_allocs = 0
        self._capturing: Reservation | None = None
        self._reservations: list[Reservation] = []

    def reserve(self) -> Reservation:
        """A :class:`Reservation` whose ``with`` block is the capture window: what the calling
        thread allocates or frees in it stays reserved for the captured work until
        ``release()``."""
        res = Reservation(self)
        self._reservations.append(res)
        return res

    @property
    def reserved_bytes(self) -> int:
        """Bytes the live reservations hold free for their captured graphs."""
        return sum(r.nbytes for r in self._reservations)

    def malloc(self, nbytes: int) -> tuple[Any, int]:
        """Return ``(buffer, class_bytes)`` for a request of ``nbytes``."""
        cls = _CLASSES.get(nbytes)
        if cls is None:  # a size not seen yet (a program asks for few sizes, again and again)
            cls = size_class(nbytes)
            if len(_CLASSES) < 65536:
                _CLASSES[nbytes] = cls
        self.num_allocs += 1
        res = self._capturing
        if res is not None and res.thread == threading.get_ident():
            buf = res._take(cls)
            if buf is not None:  # counted in current_bytes since the reservation got it
                self.num_hits += 1
                return buf, cls
            buf, cls = self._malloc_shared(cls)
            res.owned[id(buf)] = buf
            return buf, cls
        return self._malloc_shared(cls)

    def _malloc_shared(self, cls: int) -> tuple[Any, int]:
        bucket = self._free.get(cls)
        try:  # pop, not test-then-pop: another thread may take the last cached buffer
            buf = bucket.pop()  # type: ignore[union-attr]  # None: caught below
            self.num_hits += 1
            self.cached_bytes -= cls
        except (AttributeError, IndexError):  # no bucket yet, or it is empty
            buf = self.allocator.alloc(cls)
            self.num_device_allocs += 1
        cur = self.current_bytes + cls
        self.current_bytes = cur
        if cur > self.peak_bytes:
            self.peak_bytes = cur
        return buf, cls

    def free(self, buf: Any, cls: int) -> None:
        """Return a buffer of class ``cls`` to the cache (or to the reservation that owns it,
        or whose capture window the calling thread is in)."""
        if self._reservations:
            res = self._capturing
            if res is not None and res.thread != threading.get_ident():
                res = None  # another thread's free is not part of the capture window
            for owner in self._reservations:
                if id(buf) in owner.owned:
                    owner._keep(buf, cls)
                    if res is not None and res is not owner:  # this window touched it too
                        res.owned[id(buf)] = buf
                    return
            if res is not None:
                res._keep(buf, cls)
                return
        self._cache(buf, cls)

    def _cache(self, buf: Any, cls: int) -> None:
        self.current_bytes -= cls
        self.cached_bytes += cls
        self._free.setdefault(cls, []).append(buf)  # one call: safe against a racing free

    def malloc_exact(self, nbytes: int) -> tuple[Any, int]:
        """A buffer of exactly ``nbytes`` straight from the allocator (no size class, not
        cached on free); counted in the statistics. For long-lived arenas."""
        buf = self.allocator.alloc(nbytes)
        self.num_allocs += 1
        self.num_device_allocs += 1
        self.current_bytes += nbytes
        if self.current_bytes > self.peak_bytes:
            self.peak_bytes = self.current_bytes
        return buf, nbytes

    def free_exact(self, buf: Any, nbytes: int) -> None:
        """Release a buffer from :meth:`malloc_exact`."""
        self.current_bytes -= nbytes
        self.allocator.free(buf)

    def empty_cache(self) -> None:
        """Release every cached buffer to the allocator."""
        for bucket in self._free.values():
            for buf in bucket:
                self.allocator.free(buf)
        self._free.clear()
        self.cached_bytes = 0

    def reset_peak(self) -> None:
        """Start a new peak measurement from the current usage."""
        self.peak_bytes = self.current_bytes

    def stats(self) -> dict[str, int]:
        """Current, peak and cached bytes; request, cache-hit and real allocation counts."""
        return {
            "current_bytes": self.current_bytes,
            "peak_bytes": self.peak_bytes,
            "cached_bytes": self.cached_bytes,
            "num_allocs": self.num_allocs,
            "num_hits": self.num_hits,
            "num_device_allocs": self.num_device_allocs,
            "reserved_bytes": self.reserved_bytes,
        }


class Block:
    """Lazily allocated device memory shared by the CTensors that view it.

    ``data`` is the native buffer, or ``None`` before the first write and after
    :meth:`free_data`. ``ref_count`` counts live CTensors viewing this block; the scheduler
    compares it with the references its own nodes hold to decide whether Python still uses the
    block. ``version`` counts eager writes.
    """

    __slots__ = ("nbytes", "data", "pool", "cls", "ref_count", "version", "__weakref__")

    def __init__(self, nbytes: int, pool: MemPool):
        self.nbytes = nbytes
        self.pool = pool
        self.data = None
        self.cls = 0
        self.ref_count = 0
        self.version = 0  # bumped by every eager write: autograd detects in-place changes

    def allocate(self, zero: bool = False) -> Any:
        """Give the block memory now (normally done by Device.exec at the first write)."""
        if self.data is None:
            self.data, self.cls = self.pool.malloc(self.nbytes)
            if zero:
                self.pool.allocator.zero(self.data, self.nbytes)
        return self.data

    def free_data(self) -> None:
        """Return the memory to the pool; the Block stays usable and re-allocates on next write.

        A block whose ``cls`` is 0 borrows memory it does not own (a graph's arena): it is
        only detached.
        """
        data = self.data
        if data is not None:
            self.data = None
            if self.cls:
                self.pool.free(data, self.cls)

    def __del__(self):
        data = self.data
        if data is not None and self.cls:
            try:
                self.pool.free(data, self.cls)
            except Exception:  # interpreter shutdown: the pool may already be gone
                pass

    def __repr__(self) -> str:
        state = "allocated" if self.data is not None else "lazy"
        return f"<Block {self.nbytes}B {state} refs={self.ref_count}>"
