"""Lazily compiled *parallel* numba kernels.

Like :func:`._jit.njit`, numba is imported on the first call only. Kernel modules write their
parallel loops with a module-level ``prange`` name bound to ``range`` (so the functions also
run as plain Python, e.g. under coverage); :func:`pjit` rebinds it to ``numba.prange`` just
before compiling, which is what makes numba split those loops across threads.

Threading layer. Parallel loops alternate with OpenBLAS GEMMs that use the same cores. numba's
``omp`` layer (libgomp) keeps its idle workers spinning after each loop, and on a machine with
few cores those spinning threads take the cores the following GEMM needs (measured: conv
layers 2-10x slower on 2 cores). Unless the user chose a layer (``NUMBA_THREADING_LAYER``), we
select ``workqueue``, whose idle workers sleep. ``workqueue`` must not be entered from two
threads at once, so calls are serialised by a lock (uncontended in the normal single-threaded
execution of a device).
"""

from __future__ import annotations

import functools
import os
import threading

_LOCK = threading.Lock()


def _choose_threading_layer(numba) -> None:
    if "NUMBA_THREADING_LAYER" not in os.environ and numba.config.THREADING_LAYER == "default":
        numba.config.THREADING_LAYER = "workqueue"


def pjit(**options):
    """``numba.njit(parallel=True, cache=True, **options)`` applied on the first call."""

    def deco(fn):
        compiled = None

        @functools.wraps(fn)
        def call(*args):
            nonlocal compiled
            if compiled is None:
                import numba

                _choose_threading_layer(numba)
                fn.__globals__["prange"] = numba.prange
                compiled = numba.njit(cache=True, parallel=True, **options)(fn)
            with _LOCK:
                return compiled(*args)

        call.py_func = fn
        return call

    return deco
