"""Stream and event bookkeeping that needs no GPU to reason about.

:class:`EventPool` recycles CUDA event pairs for per-op timing (a profiled graph iteration times
every node; creating two events per node per iteration would cost more than the small ops it
times). :func:`launch_config` sizes grid-stride kernel launches.
"""

from __future__ import annotations

from collections.abc import Callable

#: Threads per block of every grid-stride kernel in ``cu/``.
BLOCK = 256
#: Grid-stride kernels never launch more blocks than this (each thread loops over the rest).
MAX_BLOCKS = 65535


def launch_config(n_items: int, block: int = BLOCK) -> tuple[tuple[int], tuple[int]]:
    """``((blocks,), (threads,))`` covering ``n_items`` with grid-stride loops (at least one
    block, so a launch over zero items is still valid)."""
    blocks = min(MAX_BLOCKS, max(1, -(-int(n_items) // block)))
    return (blocks,), (block,)


class EventPool:
    """A free list of event pairs. ``make()`` creates one event (``cupy.cuda.Event()`` on a
    GPU); ``elapsed(start, end)`` returns milliseconds between two recorded, completed
    events (``cupy.cuda.get_elapsed_time``)."""

    def __init__(self, make: Callable[[], object], elapsed: Callable[[object, object], float]):
        self._make = make
        self._elapsed = elapsed
        self._free: list[tuple[object, object]] = []
        self.created = 0

    def acquire(self) -> tuple[object, object]:
        """A (start, end) pair, reused when one was released."""
        if self._free:
            return self._free.pop()
        self.created += 2
        return self._make(), self._make()

    def release(self, pair: tuple[object, object]) -> None:
        self._free.append(pair)

    def seconds(self, pair: tuple[object, object]) -> float:
        """Seconds between the pair's events (their work must have completed)."""
        return self._elapsed(pair[0], pair[1]) / 1e3
