"""Scratch buffers reused across kernel calls (im2col columns, packed gradients, ...).

One :class:`Workspace` per device. Buffers are kept per name and dtype and grown when a call
needs more; they are per thread, so two threads running kernels on one device never share one.
"""

from __future__ import annotations

import math
import threading

import numpy as np


class Workspace:
    """Named, growable scratch arrays: ``ws.get("col", (rows, cols), np.float32)``."""

    def __init__(self):
        self._local = threading.local()

    def get(self, name: str, shape: tuple, dtype) -> np.ndarray:
        """An uninitialised C-contiguous array of ``shape`` backed by the buffer ``name``."""
        bufs = getattr(self._local, "bufs", None)
        if bufs is None:
            bufs = self._local.bufs = {}
        dtype = np.dtype(dtype)
        n = math.prod(shape)
        key = (name, dtype)
        buf = bufs.get(key)
        if buf is None or buf.size < n:
            buf = np.empty(max(n, 1), dtype)
            bufs[key] = buf
        return buf[:n].reshape(shape)

    def flat(self, name: str, n: int, dtype: np.dtype) -> np.ndarray:
        """``get(name, (n,), dtype)`` for a numpy dtype object, in fewer steps (called per
        replay by kernels bound to their arrays: 0.8 -> 0.4 us)."""
        bufs = getattr(self._local, "bufs", None)
        if bufs is not None:
            buf = bufs.get((name, dtype))
            if buf is not None and buf.size >= n:
                return buf[:n]
        return self.get(name, (n,), dtype)

    def nbytes(self) -> int:
        """Bytes held by this thread's buffers."""
        bufs = getattr(self._local, "bufs", {})
        return sum(b.nbytes for b in bufs.values())

    def clear(self) -> None:
        """Drop this thread's buffers."""
        self._local.bufs = {}
