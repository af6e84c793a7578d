"""Ordering NCCL collectives against the stream of the device that owns the tensors.

A CUDA device queues its kernels on a stream of its own (``CudaGPU.stream``, non-blocking: it
neither waits for the legacy default stream nor makes it wait). The NCCL communicator runs its
collectives on another stream and orders each one against the device's stream with two
events::

    device stream  --record e1---------------------------------wait e2--> later kernels
    NCCL stream    -----------wait e1--collective--record e2

so a collective reads its buffers after the kernels queued before it wrote them, and the
kernels queued after it read its results. A started collective (``_iallreduce``) returns a
:class:`Request`; its ``wait`` (called by ``Work.wait``) makes the device's stream wait.

The device's stream comes from the device (its ``stream`` attribute), bound by
:meth:`StreamOrder.on` around each ``Dist`` op (``Communicator._device_context``), never from
cupy's current stream: outside the device's kernels that is the legacy default stream, which
the device's stream is not ordered with. Streams and events are parameters (cupy's on a GPU),
so the order is checked without one (``tests/dist/test_stream_order.py``).
"""

from __future__ import annotations

from contextlib import contextmanager

from singa.dist import DistError


def compute_stream(dev, default):
    """The stream ``dev`` queues its kernels on: its ``stream`` attribute, else ``default``
    (the legacy default stream, where cupy runs the work of a device that names no stream)."""
    stream = getattr(dev, "stream", None)
    return default if stream is None else stream


class Request:
    """A started collective: done when the event recorded after it on the NCCL stream is."""

    def __init__(self, event, compute):
        self.event, self.compute = event, compute

    def test(self) -> bool:
        """Whether the collective finished (a poll: nothing waits)."""
        return bool(self.event.done)

    def wait(self) -> None:
        """Order the device's stream after the collective (the host does not wait)."""
        self.compute.wait_event(self.event)


class StreamOrder:
    """Issues collectives on the NCCL stream, each ordered against the compute stream that
    :meth:`on` binds (see the module docstring).

    Parameters
    ----------
    stream:
        The NCCL stream (``cupy.cuda.Stream``): ``wait_event(event)``.
    new_event:
        ``() -> event`` with ``record(stream)`` and ``done`` (``cupy.cuda.Event``).
    default_stream:
        The compute stream of a device without a ``stream`` attribute
        (``cupy.cuda.Stream.null``). Streams are context managers that make them current.
    """

    def __init__(self, stream, new_event, default_stream):
        self.stream = stream
        self._new_event = new_event
        self._default = default_stream
        self._compute = None  # the stream of the device whose Dist op runs now

    @contextmanager
    def on(self, dev):
        """Bind ``dev``'s stream as the compute stream of the collectives issued inside, and
        make it cupy's current stream there: singa.dist's array code between the collectives
        (packing, dividing, scratch buffers) then runs on it too."""
        compute = compute_stream(dev, self._default)
        outer, self._compute = self._compute, compute
        try:
            with compute:
                yield compute
        finally:
            self._compute = outer

    def run(self, issue) -> None:
        """Issue one collective: ``issue(stream)`` enqueues it on the NCCL stream after the work
        queued on the compute stream, and the compute stream then waits for it."""
        compute = self._bound()
        self._enqueue(compute, issue)
        compute.wait_event(self._record(self.stream))

    def start(self, issue) -> Request:
        """:meth:`run` whose second half (the compute stream waits) is the request's ``wait``."""
        compute = self._bound()
        self._enqueue(compute, issue)
        return Request(self._record(self.stream), compute)

    def _enqueue(self, compute, issue) -> None:
        self.stream.wait_event(self._record(compute))
        issue(self.stream)

    def _record(self, stream):
        event = self._new_event()
        event.record(stream)
        return event

    def _bound(self):
        if self._compute is None:
            raise DistError("an NCCL collective on a device's arrays was issued outside a Dist "
                            "op: it is ordered against the stream of the device that "
                            "Communicator._device_context(dev) binds, and none is bound")
        return self._compute
