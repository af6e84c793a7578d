"""Bookkeeping of the pinned staging buffers (singa_cuda.staging), without a GPU: buffers are
reused only after the event recorded after their last transfer completed, the oldest transfer
is waited for when the pool is at its cap, and nothing is handed out twice. The allocator and
event factory are the class's parameters (``cupyx.empty_pinned`` and ``cupy.cuda.Event`` on a
GPU); here they are numpy arrays and a recording event with the same three members. The
transfers themselves run in ``test_gpu.py`` (skipped without a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from singa_cuda.staging import THRESHOLD, PinnedStaging, size_class

MIB = 1 << 20


class RecordingEvent:
    """What the staging uses of ``cupy.cuda.Event``: record(stream), done, synchronize()."""

    def __init__(self, log):
        self.log, self.done, self.stream = log, False, None

    def record(self, stream):
        self.stream = stream
        self.log.append(("record", stream))

    def synchronize(self):
        self.log.append(("wait", self.stream))
        self.done = True


@pytest.fixture
def log():
    return []


def staging(log, max_bytes=64 * MIB):
    allocs = []

    def alloc(n):
        allocs.append(n)
        return np.empty(n, np.uint8)

    st = PinnedStaging(alloc, lambda: RecordingEvent(log), max_bytes=max_bytes)
    st.allocs = allocs
    return st


def test_size_classes_are_powers_of_two_from_the_threshold():
    assert THRESHOLD == MIB
    assert [size_class(n) for n in (1, MIB, MIB + 1, 3 * MIB, 4 * MIB)] == \
        [MIB, MIB, 2 * MIB, 4 * MIB, 4 * MIB]


def test_a_buffer_is_reused_only_after_its_transfer_completed(log):
    st = staging(log)
    a = st.acquire(MIB)
    st.release(a, stream="s1")  # a transfer queued on s1
    assert log == [("record", "s1")] and not a.ready()
    b = st.acquire(MIB)  # a is in flight: a second buffer
    assert b is not a and st.allocs == [MIB, MIB]
    st.release(b, stream="s1")
    a.event.done = True  # the first transfer finished
    assert st.acquire(MIB) is a and st.allocs == [MIB, MIB]


def test_a_buffer_in_use_is_never_handed_out_again(log):
    st = staging(log)
    a = st.acquire(MIB)
    b = st.acquire(MIB)  # a not released yet
    assert a is not b and a.in_use and b.in_use
    st.release(a)  # no stream: free at once
    assert st.acquire(MIB) is a


def test_at_the_cap_the_oldest_transfer_is_waited_for(log):
    st = staging(log, max_bytes=2 * MIB)
    a, b = st.acquire(MIB), st.acquire(MIB)
    st.release(b, stream="s")  # b queued first
    st.release(a, stream="s")
    c = st.acquire(MIB)  # both in flight, cap reached: wait for b
    assert c is b and st.waits == 1 and st.allocs == [MIB, MIB]
    assert log[-1] == ("wait", "s") and b.event is None and not a.event.done


def test_over_the_cap_without_a_buffer_of_the_class_one_is_used_once(log):
    st = staging(log, max_bytes=MIB)
    st.release(st.acquire(MIB))
    big = st.acquire(4 * MIB)
    assert big.size == 4 * MIB and big not in st.buffers and st.allocated == MIB
    st.release(big, stream="s")
    assert big not in st.buffers


def test_sizes_are_served_by_their_class_only(log):
    st = staging(log)
    small = st.acquire(MIB)
    st.release(small)
    large = st.acquire(2 * MIB + 1)
    assert large is not small and large.size == 4 * MIB and len(large.host) == 4 * MIB
