"""Host threads for kernels whose work splits into independent chunks (convolution batches).

OpenBLAS parallelises each GEMM on its own, but a convolution layer is a pipeline of small
GEMMs and numba transforms: splitting every small GEMM across the cores scales poorly, and the
transforms between them ran on one core. :func:`run_chunks` instead gives whole chunks (pad,
transform, GEMM, transform back) to the cores, each chunk on one thread with single-threaded
BLAS, the way oneDNN parallelises over the minibatch. Measured on 2 cores: two 1024^3 SGEMMs in
two threads take as long as one (perfect scaling), where one SGEMM on two BLAS threads scales
1.9x and the small per-layer GEMMs of a ResNet about 1.3x.

How many threads: as many as numpy's BLAS uses at the time of the call (so a user's
``threadpoolctl``/``OPENBLAS_NUM_THREADS`` limit applies to us too), and one when the BLAS
thread count cannot be controlled (a BLAS other than OpenBLAS), because then concurrent GEMMs
would each start the BLAS's own threads and oversubscribe the cores.

BLAS's thread count is process-global in OpenBLAS's pthreads build (its ``*_local`` setter
also sets the global count; measured), so it is lowered to one for the duration of a parallel
section, reference-counted across Python threads, and restored afterwards.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import threading

import numpy as np
from singa.backend import Kernel


class _State(threading.local):
    busy = False  # in a chunk of run_chunks (the class default: no AttributeError per read)


_state = _State()
_lock = threading.Lock()
_depth = 0  # parallel sections in flight (any Python thread); guarded by _lock
_saved = 1  # BLAS thread count to restore when the last one ends
_pool = None
_pool_pid = None
_blas = None  # (get, set) ctypes functions, False when not found


_libs = None  # the OpenBLAS libraries this process has loaded (ctypes), read once


def _openblas_libs() -> list:
    """The OpenBLAS shared libraries mapped into this process (numpy's, loaded when numpy was
    imported), as ctypes libraries; empty where there are none or no ``/proc`` (not Linux)."""
    global _libs
    if _libs is None:
        _libs = []
        try:
            with open("/proc/self/maps") as f:
                fields = (line.split() for line in f)
                paths = {p[-1] for p in fields if len(p) >= 6 and "openblas" in p[-1].lower()
                         and ".so" in p[-1]}
        except OSError:
            return _libs
        for path in sorted(paths):
            try:
                _libs.append(ctypes.CDLL(path))
            except OSError:
                continue
    return _libs


def _symbol_pair(table):
    """``(first, second, row)``: the two functions named by the first row of ``table`` (rows
    ``(first name, second name, ...)``, in order of preference) that one of numpy's OpenBLAS
    libraries (:func:`_openblas_libs`, in order) exports both of, as ctypes functions; None
    when none does."""
    for lib in _openblas_libs():
        for row in table:
            first, second = getattr(lib, row[0], None), getattr(lib, row[1], None)
            if first is not None and second is not None:
                return first, second, row
    return None


def _find_blas():
    """numpy's OpenBLAS thread-count functions, or False (not OpenBLAS / not found)."""
    global _blas
    if _blas is not None:
        return _blas
    _blas = False
    names = [("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
             ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
             ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
             ("openblas_get_num_threads", "openblas_set_num_threads")]
    found = _symbol_pair(names)
    if found is not None:
        get, set_, _names = found
        get.restype, get.argtypes = ctypes.c_int, []
        set_.restype, set_.argtypes = None, [ctypes.c_int]
        _blas = (get, set_)
    return _blas


#: numpy's OpenBLAS CBLAS GEMM symbols, float32 and float64, and whether their integers are
#: 64-bit (ILP64, numpy's own wheels) or 32-bit (LP64 builds, conda's).
_CBLAS = (("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_", 1),
          ("cblas_sgemm64_", "cblas_dgemm64_", 1),
          ("scipy_cblas_sgemm", "scipy_cblas_dgemm", 0),
          ("cblas_sgemm", "cblas_dgemm", 0))


def _find_cblas():
    """(sgemm address, dgemm address, ILP64 flag, sgemm's symbol) of numpy's OpenBLAS (what
    :mod:`._team` calls), or None."""
    found = _symbol_pair(_CBLAS)
    if found is None:
        return None
    s, d, (s_name, _d_name, ilp64) = found
    return (ctypes.cast(s, ctypes.c_void_p).value, ctypes.cast(d, ctypes.c_void_p).value,
            ilp64, s_name)


def in_worker() -> bool:
    """True inside a chunk run by :func:`run_chunks` (nested calls then run serially)."""
    return _state.busy


def num_threads() -> int:
    """Threads :func:`run_chunks` would use now (1 inside a chunk or without BLAS control)."""
    if _state.busy:  # in_worker(), inlined: called several times per kernel
        return 1
    blas = _find_blas()
    if not blas:
        return 1
    # no lock: _depth and _saved change together under _lock, and a read between the two
    # updates only happens when another Python thread enters or leaves a section right now
    current = _saved if _depth else blas[0]()
    return max(1, min(current, _cores()))


_affinity = (None, 1)  # (pid, cores) read once per process


def _cores() -> int:
    """Cores this process may run on, read once per process (a syscall; num_threads is asked
    several times per convolution); the pool's size is fixed at the same time."""
    global _affinity
    pid = os.getpid()
    if _affinity[0] != pid:
        _affinity = (pid, len(os.sched_getaffinity(0)))
    return _affinity[1]


class _Pool:
    """Persistent worker threads, each parked on its own lock: starting a section wakes them
    directly (one futex wake each, ~20 us here; a ThreadPoolExecutor round trip measured
    74 us). One section at a time; a second Python thread that wants the pool while it is
    busy runs its chunks itself."""

    def __init__(self, n: int):
        self.busy = threading.Lock()
        self._count = threading.Lock()
        self._done = threading.Lock()
        self._starts = []
        self._job = None
        self._pending = 0
        for i in range(n):
            start = threading.Lock()
            start.acquire()
            self._starts.append(start)
            threading.Thread(target=self._loop, args=(start,), daemon=True,
                             name=f"singa-cpu-{i}").start()

    def _loop(self, start):
        while True:
            start.acquire()
            try:
                self._job()
            finally:
                with self._count:
                    self._pending -= 1
                    if self._pending == 0:
                        self._done.release()

    def run(self, job, helpers: int) -> None:
        """Run ``job()`` on ``helpers`` pool threads and the caller; return when all are done
        (``job`` must not raise: it records errors itself). Needs ``busy`` held."""
        helpers = min(helpers, len(self._starts))
        self._job = job
        self._pending = helpers
        self._done.acquire(blocking=False)  # make sure it is held before anyone can finish
        for start in self._starts[:helpers]:
            start.release()
        job()
        if helpers:
            self._done.acquire()  # released by the last helper to finish


def _executor():
    global _pool, _pool_pid
    if _pool is None or _pool_pid != os.getpid():  # a forked child has no pool threads
        _pool = _Pool(max(1, _cores() - 1))
        _pool_pid = os.getpid()
    return _pool


def _enter():
    global _depth, _saved
    blas = _find_blas()
    with _lock:
        if _depth == 0 and blas:
            _saved = blas[0]()
            if _saved != 1:  # setting costs ~0.65 us a call (already 1: one thread, or a
                blas[1](1)  # process that asked for one)
        _depth += 1


def _exit():
    global _depth
    with _lock:
        _depth -= 1
        if _depth == 0 and _blas and _saved != 1:
            _blas[1](_saved)


class single_threaded_blas:
    """Context manager (and decorator) for code that calls BLAS: inside, numpy's BLAS runs on
    the calling thread only. Every BLAS call of the CPU kernels runs like this, so OpenBLAS's
    own worker threads are never woken: after a multi-threaded call they spin for tens of
    milliseconds (OpenBLAS's THREAD_TIMEOUT) and take the cores from the chunks that
    :func:`run_chunks` runs next. Big products are split across threads by the kernels
    themselves (see :func:`matmul`)."""

    def __enter__(self):
        _enter()
        return self

    def __exit__(self, *exc):
        _exit()
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):  # _enter/_exit directly: called per kernel
            _enter()
            try:
                return fn(*args, **kwargs)
            finally:
                _exit()

        return wrapped


#: Products smaller than this many multiply-adds run on one thread: a parallel section costs
#: about 70 us of thread wake-up on this kind of VM (measured), ~1.5 MFLOP of BLAS time.
PARALLEL_MIN_MACS = 8 << 20


def serial_matmul(a, b, out) -> None:
    """``np.matmul(a, b, out=out)`` with numpy's BLAS on the calling thread; inside a parallel
    section or a CPU graph's replay (which already hold it single-threaded) without setting
    it again (kernels bound to a replay's arrays call this every replay)."""
    if _depth:
        np.matmul(a, b, out=out)
    else:
        with single_threaded_blas():
            np.matmul(a, b, out=out)


def matmul(a, b, out) -> None:
    """``np.matmul(a, b, out=out)`` with single-threaded BLAS, split across
    :func:`num_threads` threads when it is big: by columns of the output when it is wider than
    tall, else by rows (or by the leading batch axis).

    Every thread packs the operand it does not split whole (BLAS copies its operands into
    blocks before multiplying), so splitting the longer side of the output splits the bigger
    operand and copies the smaller one twice. Measured on 2 cores (Intel Xeon, OpenBLAS 0.3.31,
    us per product, one thread / split by rows / by columns): 64x784 @ 784x512 354 / 355 / 326,
    64x512 @ (784x512).T 464 / 473 / 362, 784x64 @ 64x512 361 / 284 / 386. A split product can
    differ from the unsplit one in the last bits (BLAS picks its kernels by size); the bits
    depend only on the shapes and the thread count.

    A 2-D float32 or float64 split whose operands have BLAS layouts runs on :mod:`._team`'s
    spinning helpers (same spans, same bits); the rest on the pool (:func:`run_ranges`)."""
    _enter()  # single-threaded BLAS (what single_threaded_blas() does, minus its calls)
    try:
        small = out.ndim < 2 or out.size * a.shape[-1] < PARALLEL_MIN_MACS
        t = 1 if small else num_threads()
        axis = _split_axis(a, b, out, t) if t > 1 else None
        if axis is None:
            np.matmul(a, b, out=out)
        elif axis != "batch" and _team_matmul(a, b, out, t, axis == "columns"):
            pass
        elif axis == "columns":
            run_ranges(lambda lo, hi: np.matmul(a, b[:, lo:hi], out=out[:, lo:hi]),
                       out.shape[1], threads=t)
        elif axis == "rows":
            run_ranges(lambda lo, hi: np.matmul(a[lo:hi], b, out=out[lo:hi]), out.shape[0],
                       threads=t)
        else:
            run_ranges(lambda lo, hi: np.matmul(a[lo:hi], b[lo:hi], out=out[lo:hi]),
                       out.shape[0], threads=t)
    finally:
        _exit()


def _split_axis(a, b, out, t: int) -> str | None:
    """How :func:`matmul` splits a big product over ``t`` threads: ``"columns"`` of b / out
    when the output is wider than tall (b is the bigger operand), else ``"rows"`` of a / out,
    else columns, or the leading ``"batch"`` axis of N-D operands; None: not at all."""
    two_d = out.ndim == a.ndim == b.ndim == 2
    if two_d and out.shape[1] > out.shape[0] and out.shape[1] >= 2 * t:
        return "columns"
    if out.ndim == a.ndim == 2 and out.shape[0] >= 2 * t:
        return "rows"
    if two_d and out.shape[1] >= 2 * t:
        return "columns"
    if (out.ndim > 2 and a.ndim == b.ndim == out.ndim
            and a.shape[0] == b.shape[0] == out.shape[0] > 1):
        return "batch"
    return None


#: Whether big 2-D float32/float64 products split through :mod:`._team`'s spinning helpers
#: (else through the pool, as other dtypes and batched products always do). Measured on the
#: 2-vCPU Zen 3 host of docs/benchmarks.md (session 22): the MLP's eager step 0.86-0.96x and
#: graph step 0.77-0.87x the pool's time, the seed CNN unchanged within noise.
USE_TEAM = True


def _team_matmul(a, b, out, t, by_columns: bool) -> bool:
    """:func:`matmul`'s split of a 2-D product on :mod:`._team`'s helpers, by columns or
    rows as :func:`_split_axis` chose; False where it does not apply (then the pool's split
    runs)."""
    if not (USE_TEAM and out.ndim == a.ndim == b.ndim == 2 and out.dtype in _TEAM_DTYPES
            and a.dtype == b.dtype == out.dtype):
        return False
    from . import _team

    team = _team.team(t - 1)
    return team is not None and team.matmul(
        a, b, out, split_spans(out.shape[1] if by_columns else out.shape[0], t), by_columns)


_TEAM_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def run_chunks(fn, items, threads: int | None = None) -> None:
    """Call ``fn(item)`` once for every item, spread over ``threads`` threads (default
    :func:`num_threads`), each with single-threaded BLAS. ``fn`` must only write what its item
    owns (and per-thread workspace buffers). Items are handed out in order as threads become
    free. Returns after every call has finished; the first exception raised is re-raised."""
    items = list(items)
    t = min(num_threads() if threads is None else threads, len(items))
    pool = _executor() if t > 1 else None
    if pool is None or not pool.busy.acquire(blocking=False):  # serial, or the pool is busy
        for item in items:                                      # with another Python thread
            fn(item)
        return
    counter = itertools.count()
    errors = []

    def worker():
        _state.busy = True
        try:
            for i in iter(counter.__next__, None):
                if i >= len(items):
                    return
                fn(items[i])
        except BaseException as exc:  # this thread stops; the others finish the items
            errors.append(exc)
        finally:
            _state.busy = False

    _enter()
    try:
        pool.run(worker, t - 1)
    finally:
        _exit()
        pool.busy.release()
    if errors:
        raise errors[0]


def run_ranges(fn, n: int, parallel: bool = True, threads: int | None = None) -> None:
    """``fn(lo, hi)`` over contiguous ranges covering ``range(n)``: one range per thread
    (:func:`num_threads`, or ``threads``) when ``parallel``, else one range on the caller."""
    t = (num_threads() if threads is None else threads) if parallel else 1
    run_chunks(lambda span: fn(span[0], span[0] + span[1]), split_spans(n, t), t)


def split_flat(kernel, min_items, whole=()):
    """An elementwise ``kernel(ins, outs, attrs)`` run on flat slices in parallel when every
    sliced array is C-contiguous with the output's shape (no broadcasting) and the output has
    at least ``min_items()`` elements (read per call). Element i of the output depends only on
    element i of the inputs, so slices are independent (and an output aliasing an input stays
    correct). ``whole``: indices of inputs passed unsliced (e.g. Axpy's scalar alpha)."""
    def wrapped(ins, outs, attrs):
        out = outs[0]
        if out.size < min_items() or num_threads() <= 1 or any(
                a.shape != out.shape or not a.flags.c_contiguous
                for a in [*(a for i, a in enumerate(ins) if i not in whole), *outs]):
            kernel(ins, outs, attrs)
            return
        flat_ins = [a if i in whole else a.reshape(-1) for i, a in enumerate(ins)]
        flat_outs = [a.reshape(-1) for a in outs]

        def part(lo, hi):
            kernel([a if i in whole else a[lo:hi] for i, a in enumerate(flat_ins)],
                   [a[lo:hi] for a in flat_outs], attrs)

        run_ranges(part, out.size)

    def bind(ins, outs, attrs):
        """Bound to a graph's arrays (see ``bind`` in docs/plugin-authoring.md): an output below
        ``min_items()`` (read once, when the plan is built) runs ``kernel`` directly, or what
        ``kernel``'s own ``bind`` returns for these arrays where it has one."""
        if outs[0].size >= min_items():
            return None
        inner = getattr(kernel, "bind", None)
        return (inner(ins, outs, attrs) if inner is not None else None) or kernel

    wrapped.__name__ = getattr(kernel, "__name__", "elementwise")
    return Kernel(wrapped, bind=bind)


class ThreadSums:
    """Partial sums of a reduction over chunks (a weight gradient summed over batch chunks),
    with bits that do not depend on which thread ran which chunk or when it finished.

    :meth:`run` cuts the chunks into one contiguous group per thread (the group count is fixed
    by the thread count, not by timing), runs the groups with :func:`run_chunks` and the chunks
    of a group in order: group 0 accumulates into ``out``, group g > 0 into ``make(g)`` (a
    buffer of its own; g is in the key so that a thread running two groups keeps them apart).
    :meth:`finish` adds groups 1, 2, ... into ``out`` in that order. So the sum is the same on
    every run with the same thread count; a different thread count groups differently and may
    differ in the last bits.

    Each chunk calls :meth:`target` for the array it writes its contribution into, then adds
    it to the returned accumulator unless that is None (a group's first chunk writes its
    accumulator directly)."""

    def __init__(self, out, make):
        self.out, self.make = out, make
        self.partial = {}  # group -> accumulator
        self._current = threading.local()  # (group, whether its accumulator is written yet)

    def run(self, chunk, spans, threads: int | None = None):
        """``chunk(span)`` for every span, grouped as described above."""
        spans = list(spans)
        groups = split_spans(len(spans), num_threads() if threads is None else threads)

        def group(g):
            lo, count = groups[g]
            self._current.group, self._current.started = g, False
            for span in spans[lo:lo + count]:
                chunk(span)

        run_chunks(group, range(len(groups)), len(groups))

    def target(self, scratch):
        """(array to write into, accumulator to add it to or None); ``scratch()`` makes the
        array for a group's later chunks."""
        g = self._current.group
        if not self._current.started:
            self._current.started = True
            acc = self.partial[g] = self.out if g == 0 else self.make(g)
            return acc, None
        return scratch(), self.partial[g]

    def finish(self):
        """``out`` = the sum of every group's partial sum, added in group order."""
        for g in range(1, len(self.partial)):
            self.out += self.partial[g]
        return self.out


def chunk_spans(n: int, nb: int) -> list[tuple[int, int]]:
    """(start, count) chunks of ``range(n)`` of at most ``nb`` items, split further so that
    their number is a multiple of :func:`num_threads` (when there are enough items): every
    thread gets the same share."""
    count = -(-n // max(1, nb))
    t = num_threads()
    if t > 1:
        count = min(n, -(-count // t) * t)
    return split_spans(n, count)


def split_spans(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` (start, count) chunks covering ``range(n)`` as evenly as possible."""
    parts = max(1, min(parts, n))
    q, r = divmod(n, parts)
    spans, lo = [], 0
    for i in range(parts):
        m = q + (i < r)
        spans.append((lo, m))
        lo += m
    return spans
