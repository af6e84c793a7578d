"""Lazily compiled *parallel* numba kernels.

Like :func:`._jit.njit`, numba is imported on the first call only. Kernel modules write their
parallel loops with a module-level ``prange`` name bound to ``range`` (so the functions also
run as plain Python, e.g. under coverage); :func:`pjit` rebinds it to ``numba.prange`` just
before compiling, which is what makes numba split those loops across threads.

Most of the CPU backend's parallelism comes from :func:`._threads.run_chunks` (whole chunks
per core, each running the *serial* compilation of these kernels, which release the GIL). The
parallel compilation is only used outside a chunk, on machines with more than two cores, for
calls with at least PARALLEL_MIN_ITEMS elements.

Threading layer. Parallel loops alternate with BLAS GEMMs that use the same cores. numba's
``omp`` layer (libgomp) keeps its idle workers spinning after each loop, and on a machine with
few cores those spinning threads take the cores the following GEMM needs (measured: conv
layers 2-10x slower on 2 cores). Unless the user chose a layer (``NUMBA_THREADING_LAYER``), we
select ``workqueue``, whose idle workers sleep: through ``NUMBA_THREADING_LAYER`` when numba
is not imported yet (so the choice holds even if other code launches numba's threads first),
else through ``numba.config`` before our first parallel launch. ``workqueue`` must not be
entered from two threads at once, so calls are serialised by a lock (uncontended in the normal
single-threaded execution of a device).
"""

from __future__ import annotations

import functools
import os
import sys
import threading

from ._jit import compilable
from ._threads import in_worker

_LOCK = threading.Lock()

#: Calls whose largest array has fewer elements run the serial compilation: waking numba's
#: workers costs tens of microseconds per launch (measured 125-140 us with ``workqueue`` on a
#: loaded 2-core machine, about what a 1 MiB im2col chunk takes to fill).
PARALLEL_MIN_ITEMS = 1 << 20

#: On machines with two cores or fewer the numba loops run serially unless the user sets
#: NUMBA_NUM_THREADS (measured before run_chunks existed, with OpenBLAS threading each GEMM:
#: ResNet-18 batch 32 took 0.74-0.93 s/step with numba's parallel loops, 0.70 s serial).
SERIAL_BY_DEFAULT = (os.cpu_count() or 1) <= 2 and "NUMBA_NUM_THREADS" not in os.environ


def _prefer_workqueue() -> None:
    if "NUMBA_THREADING_LAYER" in os.environ:
        return  # the user's choice
    numba = sys.modules.get("numba")
    if numba is None:
        os.environ["NUMBA_THREADING_LAYER"] = "workqueue"  # read when numba is imported
    elif numba.config.THREADING_LAYER == "default":
        numba.config.THREADING_LAYER = "workqueue"


_prefer_workqueue()


def _parallel_twin(fn):
    """``fn`` as the parallel compilation compiles it: under another qualified name, for
    its own disk cache file (helpers bound as in :func:`._jit.compilable`).

    numba names a cache file after the function's module, qualified name and line, and keys
    its entries by signature, CPU and bytecode, but not by target options such as
    ``parallel`` (numba issue #6845): compiled with ``cache=True`` both ways, one function's
    serial and parallel machine code share one index, and a later process may load the
    parallel code for the serial dispatcher. That code enters numba's ``workqueue`` threading
    layer, which aborts the process when two threads enter it at once, as chunks of
    :func:`._threads.run_chunks` do with serial kernels. The twin's own name gives the
    parallel compilation its own cache file.
    """
    return compilable(fn, "__parallel")


def pjit(**options):
    """``numba.njit(parallel=True, cache=True, nogil=True, **options)`` applied on the first
    call.

    The serial compilation is called instead when numba runs one thread
    (``numba.set_num_threads(1)``), the call is small (no array argument with
    :data:`PARALLEL_MIN_ITEMS` elements: a parallel launch costs tens of microseconds), or it
    runs inside a chunk of :func:`._threads.run_chunks` (which already uses the cores). The
    kernels release the GIL, so chunks on several threads run their numba loops at once.
    ``fn.serial()`` returns the serial compilation's dispatcher itself, for kernels bound to
    small arrays (see ``bind`` in docs/plugin-authoring.md) to call directly.
    """

    def deco(fn):
        compiled = {}

        def compile_(parallel: bool):
            import numba

            _prefer_workqueue()
            fn.__globals__["prange"] = numba.prange
            twin = _parallel_twin(fn) if parallel else compilable(fn)
            compiled[parallel] = numba.njit(cache=True, nogil=True, parallel=parallel,
                                            **options)(twin)
            return compiled[parallel]

        @functools.wraps(fn)
        def call(*args):
            import numba

            parallel = (not SERIAL_BY_DEFAULT and not in_worker()
                        and numba.get_num_threads() > 1
                        and max((a.size for a in args if hasattr(a, "size")), default=0)
                        >= PARALLEL_MIN_ITEMS)
            kernel = compiled.get(parallel) or compile_(parallel)
            if not parallel:
                return kernel(*args)
            with _LOCK:
                return kernel(*args)

        call.py_func = fn
        call.serial = lambda: compiled.get(False) or compile_(False)
        return call

    return deco
