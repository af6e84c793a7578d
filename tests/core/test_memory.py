"""MemPool and Block with a fake allocator: size classes, caching, statistics, lazy allocation.

The allocator records every call, so tests see exactly when real memory is requested, reused,
zeroed and released. Buffers are plain bytearrays: core must not care what they are.
"""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from singa._ctensor import CTensor
from singa._device import Device
from singa.memory import Block, MemPool, size_class


class RecordingAllocator:
    """Hands out bytearrays and logs (call, nbytes)."""

    def __init__(self):
        self.log: list[tuple[str, int]] = []

    def alloc(self, nbytes):
        self.log.append(("alloc", nbytes))
        return bytearray(b"\xab" * nbytes)  # garbage, like uninitialised device memory

    def free(self, buf):
        self.log.append(("free", len(buf)))

    def zero(self, buf, nbytes):
        self.log.append(("zero", nbytes))
        buf[:nbytes] = bytes(nbytes)

    def calls(self, kind):
        return [n for k, n in self.log if k == kind]


class BytesDevice(Device):
    """A device over RecordingAllocator whose native view is a float32 numpy view (tests only
    use it for host copies)."""

    def __init__(self):
        super().__init__("bytes", 0, RecordingAllocator())

    def native(self, ct):
        arr = np.frombuffer(ct.block.data, np.float32, ct.size, ct.offset * 4)
        return arr.reshape(ct.dims)

    def native_to_numpy(self, arr):
        return np.array(arr)

    def numpy_into_native(self, src, arr):
        arr[...] = src


@pytest.fixture
def pool():
    return MemPool(RecordingAllocator(), "test")


@pytest.fixture
def lazy_alloc():
    prev = Device.lazy_alloc
    Device.EnableLazyAlloc(True)
    yield
    Device.EnableLazyAlloc(prev)


# ---------------------------------------------------------------------- reservations
def test_reservation_keeps_what_the_capture_window_touched(pool):
    before, _ = pool.malloc(1000)  # allocated before the window, freed inside it
    with pool.reserve() as res:
        ws, cls = pool.malloc(1000)  # a captured kernel's workspace ...
        pool.free(ws, cls)
        again, _ = pool.malloc(1000)  # ... reused by the next captured kernel
        assert again is ws
        pool.free(again, cls)
        pool.free(before, 1024)
    assert res.nbytes == 2048 and pool.reserved_bytes == 2048
    assert pool.stats()["reserved_bytes"] == 2048
    # reserved buffers count as in use, and nothing outside the graph is handed them
    assert pool.current_bytes == 2048 and pool.cached_bytes == 0
    other, _ = pool.malloc(1000)
    assert other is not ws and other is not before
    pool.free(other, 1024)
    assert pool.cached_bytes == 1024
    res.release()
    assert pool.reserved_bytes == 0 and pool.current_bytes == 0
    assert pool.cached_bytes == 3 * 1024
    assert {id(pool.malloc(1000)[0]) for _ in range(3)} == {id(ws), id(before), id(other)}
    res.release()  # idempotent
    assert pool.reserved_bytes == 0


def test_a_buffer_allocated_in_the_window_returns_to_the_reservation_later(pool):
    with pool.reserve() as res:
        kept, cls = pool.malloc(5000)  # e.g. a scratch array a kernel keeps between calls
    assert res.nbytes == 0 and pool.current_bytes == cls
    pool.free(kept, cls)  # freed after the capture: the graph still writes it
    assert res.nbytes == cls and pool.cached_bytes == 0
    assert pool.malloc(5000)[0] is not kept
    res.release()
    assert pool.malloc(5000)[0] is kept


def test_other_threads_are_not_part_of_the_capture_window(pool):
    got = {}

    def other_thread():
        buf, cls = pool.malloc(1000)
        pool.free(buf, cls)
        got["buf"] = buf

    with pool.reserve() as res:
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
    assert res.owned == {} and pool.cached_bytes == 1024
    assert pool.malloc(1000)[0] is got["buf"]


def test_one_capture_window_at_a_time(pool):
    with pool.reserve():
        with pytest.raises(RuntimeError, match="already open"):
            with pool.reserve():
                pass


def test_a_buffer_two_windows_touched_stays_reserved_until_both_are_released(pool):
    """Graph 1 allocates A and keeps it; graph 2's capture frees it (its last use there), so
    graph 2's replays touch A too. Releasing graph 1 must not hand A out while graph 2 lives
    (found by the property test below: A went to the pool's cache)."""
    first = pool.reserve()
    with first:
        a, cls = pool.malloc(1000)
    second = pool.reserve()
    with second:
        pool.free(a, cls)
    assert first.nbytes == cls and second.nbytes == 0  # back to its owner's free list
    first.release()
    assert second.nbytes == cls and pool.cached_bytes == 0
    assert pool.malloc(1000)[0] is not a
    second.release()
    assert pool.malloc(1000)[0] is a


def test_a_buffer_in_use_when_its_owner_is_released_goes_to_a_window_that_touched_it(pool):
    """The same with A in use when graph 1 is released (graph 1's window took it again):
    freed later, outside any window, A goes to graph 2's reservation, not to the cache."""
    first = pool.reserve()
    with first:
        a, cls = pool.malloc(1000)
    second = pool.reserve()
    with second:
        pool.free(a, cls)
    with first:
        assert pool.malloc(1000)[0] is a  # from graph 1's own free list
    first.release()
    pool.free(a, cls)
    assert second.nbytes == cls and pool.cached_bytes == 0
    assert pool.malloc(1000)[0] is not a
    second.release()
    assert pool.malloc(1000)[0] is a


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["malloc", "malloc", "free", "free", "open", "close",
                                           "release"]),
                          st.sampled_from([1000, 5000])), max_size=40))
def test_no_request_outside_a_window_gets_reserved_memory(ops):
    """Random mallocs and frees around capture windows: while a reservation lives, nothing
    requested outside its window is a buffer the window touched; the byte counts add up."""
    pool = MemPool(RecordingAllocator(), "test")
    out: list[tuple[bytearray, int]] = []
    live: list = []  # reservations not released, each with the buffers its window touched
    window = None
    for op, n in ops:
        if op == "open" and window is None:
            window = pool.reserve()
            window.__enter__()
            live.append((window, set()))
        elif op == "close" and window is not None:
            window.__exit__(None, None, None)
            window = None
        elif op == "release" and live and (window is None or live[0][0] is not window):
            live.pop(0)[0].release()
        elif op == "malloc":
            buf, cls = pool.malloc(n)
            for res, touched in live:
                if res is window:
                    touched.add(id(buf))
                else:
                    assert id(buf) not in touched, "a reserved buffer was handed out"
            out.append((buf, cls))
        elif op == "free" and out:
            buf, cls = out.pop(n % len(out))
            pool.free(buf, cls)
            for res, touched in live:
                if res is window:
                    touched.add(id(buf))
    assert pool.current_bytes == sum(c for _, c in out) + pool.reserved_bytes
    if window is not None:
        window.__exit__(None, None, None)
    for res, _ in live:
        res.release()
    assert pool.reserved_bytes == 0 and pool.current_bytes == sum(c for _, c in out)


# ---------------------------------------------------------------------- size classes
@pytest.mark.parametrize(
    ("n", "cls"),
    [
        (0, 256),
        (1, 256),
        (256, 256),
        (257, 512),
        (4095, 4096),
        (4096, 4096),
        (4097, 5120),
        (8192, 8192),
        (8193, 10240),
        (1 << 20, 1 << 20),
        ((1 << 20) + 1, (1 << 20) + (1 << 18)),
    ],
)
def test_size_class_examples(n, cls):
    assert size_class(n) == cls


@given(st.integers(0, 1 << 34))
def test_size_class_bounds(n):
    c = size_class(n)
    assert c >= n and c >= 256
    if n > 4096:
        assert c <= n * 1.25 + 1  # a cached buffer is at most 25% larger than the request
    else:
        assert c % 256 == 0 and c - n < 256 or n == 0
    assert size_class(c) == c  # classes are fixed points


# ---------------------------------------------------------------------- the pool
def test_malloc_free_reuse_and_statistics(pool):
    a, ca = pool.malloc(1000)
    assert ca == 1024 and len(a) == 1024
    b, cb = pool.malloc(3000)
    assert pool.stats() == {
        "current_bytes": 1024 + 3072,
        "peak_bytes": 4096,
        "cached_bytes": 0,
        "num_allocs": 2,
        "num_hits": 0,
        "num_device_allocs": 2,
        "reserved_bytes": 0,
    }
    pool.free(a, ca)
    assert pool.current_bytes == 3072 and pool.cached_bytes == 1024
    c, cc = pool.malloc(900)  # same class as a: a cache hit hands back the same buffer
    assert c is a and cc == 1024
    assert pool.num_hits == 1 and pool.num_device_allocs == 2 and pool.cached_bytes == 0
    d, _ = pool.malloc(1025)  # next class up: a miss
    assert d is not a and pool.num_device_allocs == 3
    assert pool.allocator.calls("alloc") == [1024, 3072, 1280]
    assert pool.peak_bytes == 1024 + 3072 + 1280


def test_reset_peak_starts_from_current_usage(pool):
    a, ca = pool.malloc(5000)
    b, cb = pool.malloc(5000)
    pool.free(a, ca)
    assert pool.peak_bytes == 2 * cb
    pool.reset_peak()
    assert pool.peak_bytes == pool.current_bytes == cb
    pool.malloc(100)
    assert pool.peak_bytes == cb + 256


def test_empty_cache_releases_only_cached_buffers(pool):
    a, ca = pool.malloc(300)
    b, cb = pool.malloc(300)
    pool.free(a, ca)
    pool.empty_cache()
    assert pool.allocator.calls("free") == [ca]
    assert pool.cached_bytes == 0 and pool.current_bytes == cb
    c, _ = pool.malloc(300)
    assert c is not a and pool.num_hits == 0


# ---------------------------------------------------------------------- blocks
def test_block_is_lazy_and_returns_memory_when_freed(pool):
    blk = Block(100, pool)
    assert blk.data is None and pool.num_allocs == 0
    buf = blk.allocate()
    assert blk.data is buf and pool.current_bytes == 256
    blk.free_data()
    assert blk.data is None and pool.current_bytes == 0 and pool.cached_bytes == 256
    assert blk.allocate() is buf  # re-allocates on next use, from the cache
    assert pool.num_hits == 1


def test_dropped_block_returns_its_buffer(pool):
    blk = Block(100, pool)
    blk.allocate()
    del blk
    gc.collect()
    assert pool.current_bytes == 0 and pool.cached_bytes == 256


def test_memory_is_allocated_at_first_write_not_at_creation(lazy_alloc):
    dev = BytesDevice()
    t = CTensor((4, 5), dev)
    assert not t.initialized() and dev.pool.num_allocs == 0
    t.copy_from_numpy(np.arange(20, dtype=np.float32))
    assert t.initialized()
    assert dev.pool.allocator.calls("alloc") == [256]
    assert dev.pool.allocator.calls("zero") == []  # a write needs no zeroing
    assert (t.to_numpy() == np.arange(20).reshape(4, 5)).all()


def test_never_written_block_reads_zeros(lazy_alloc):
    dev = BytesDevice()
    t = CTensor((3, 2), dev)
    out = t.to_numpy()
    assert out.shape == (3, 2) and (out == 0).all()  # the fake allocator returns 0xAB bytes
    assert dev.pool.allocator.calls("zero") == [24]


def test_eager_allocation_when_lazy_alloc_is_off():
    prev = Device.lazy_alloc
    Device.EnableLazyAlloc(False)
    try:
        dev = BytesDevice()
        t = CTensor((10,), dev)
        assert t.initialized() and dev.pool.num_allocs == 1
    finally:
        Device.EnableLazyAlloc(prev)


def test_exec_allocates_written_blocks_and_zeroes_unwritten_reads(lazy_alloc):
    dev = BytesDevice()
    src, dst = Block(64, dev.pool), Block(64, dev.pool)
    seen = []
    dev.exec(lambda: seen.append((bytes(src.data[:64]), dst.data is not None)), [src], [dst])
    assert seen == [(bytes(64), True)]
    assert dev.pool.allocator.calls("zero") == [64]


def test_device_memory_stats_follow_tensor_lifetimes(lazy_alloc):
    dev = BytesDevice()
    t = CTensor((1000,), dev)
    t.copy_from_numpy(np.ones(1000, np.float32))
    stats = dev.memory_stats()
    assert stats["current_bytes"] == 4096 and stats["peak_bytes"] == 4096
    del t
    gc.collect()
    stats = dev.memory_stats()
    assert stats["current_bytes"] == 0 and stats["cached_bytes"] == 4096
    dev.reset_peak_memory_stats()
    assert dev.memory_stats()["peak_bytes"] == 0
    dev.empty_cache()
    assert dev.memory_stats()["cached_bytes"] == 0
    assert dev.pool.allocator.calls("free") == [4096]
