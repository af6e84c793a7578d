"""Helper threads that wait for big products by spinning, without the GIL.

:func:`._threads.matmul` splits a big product across the cores. Through the pool of
:func:`._threads.run_chunks` each split wakes a thread parked on a lock: a futex wake, then the
GIL. On a VM whose idle vCPUs halt at once (a nested KVM guest with ``guest_halt_poll_ns=0``)
that round trip costs 130-200 us (``benchmarks/threads.py``), as much as the half product it
hands over (a 64x784 @ 784x512 float32 product takes ~350-700 us on one core there).
OpenBLAS's and OpenMP's own threads avoid it by spinning after each call, for so long (~0.1 s)
that they take the core from the convolution chunks that follow.

A team keeps one helper per extra core in a compiled loop (numba, ``nogil``) that polls its
slot of a shared ``int64`` control array with atomic loads, calling ``sched_yield`` between
polls so that a runnable thread on the same core goes first. A product is posted as plain
CBLAS arguments (pointers, leading dimensions, transposition flags of numpy's strides) and run
by the helper through the CBLAS entry point of numpy's own OpenBLAS, so a helper never needs
the GIL between posting and completion. After ``spin_us`` microseconds without work a helper
marks itself asleep and blocks on an :class:`threading.Event`; the next product sets it.

No product ever waits for a helper that has not started it: after its own part the caller
claims every part still unclaimed (a compare-and-swap on the slot's claim counter, the same
one a helper uses) and runs it itself. A sleeping, slow-to-wake or descheduled helper costs
the split its parallelism, never its correctness or a wait. Every part is the same CBLAS call
whoever runs it, so the bits of a product depend only on its shapes and the part count.

A team exists only where every piece is found: numpy's BLAS is OpenBLAS with its CBLAS
symbols (the ILP64 ``scipy_openblas64`` of numpy's wheels, or an LP64 build), and the C
library has ``sched_yield``. Elsewhere :func:`team` returns None and products split through
the pool.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
import time

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from ._threads import _find_cblas

#: int64 slots per part (256 bytes: parts never share a cache line).
ROW = 32
# per-part slots
POST, CLAIM, DONE, ASLEEP, STOP, KIND, TA, TB, M, N, K, A, LDA, B, LDB, C, LDC = range(17)
# team-wide slots, in part 0's row (the caller's part)
FN_SGEMM, FN_DGEMM, FN_YIELD, SPINS, ILP64 = 20, 21, 22, 23, 24

NO_TRANS, TRANS = 111, 112  # CBLAS_TRANSPOSE
ROW_MAJOR = 101

#: How long an idle helper keeps polling before it sleeps: longer than the gaps between the
#: products of an eager training step (ops dispatched in between; with 300 us the MLP's helper
#: was asleep at 395 of 500 products and woke too late to help), short enough to stay far
#: from OpenBLAS's ~0.1 s. Its polls yield, so chunks on the same core go first (the seed
#: CNN's step measured unchanged). docs/benchmarks.md, session 22.
SPIN_US = 2000.0


@intrinsic
def _load(typingctx, arr, idx):
    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.load_atomic(builder.gep(ary.data, [args[1]]), "seq_cst", 8)
    return types.int64(arr, idx), codegen


@intrinsic
def _store(typingctx, arr, idx, val):
    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        builder.store_atomic(args[2], builder.gep(ary.data, [args[1]]), "seq_cst", 8)
        return context.get_dummy_value()
    return types.void(arr, idx, val), codegen


@intrinsic
def _cas(typingctx, arr, idx, old, new):
    """Compare-and-swap ``arr[idx]`` from ``old`` to ``new``; 1 where it swapped."""
    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        res = builder.cmpxchg(builder.gep(ary.data, [args[1]]), args[2], args[3], "seq_cst",
                              "seq_cst")
        return builder.zext(builder.extract_value(res, 1), ir.IntType(8))
    return types.uint8(arr, idx, old, new), codegen


def _gemm_call(real, int_bits):
    """An intrinsic calling ``cblas_?gemm`` (row-major, alpha 1, beta 0) at an address given
    as an int64, with ``int_bits``-wide CBLAS integers (64: ILP64, 32: LP64)."""

    @intrinsic
    def call(typingctx, addr, ta, tb, m, n, k, a, lda, b, ldb, c, ldc):
        def codegen(context, builder, sig, args):
            i32, blasint, f = ir.IntType(32), ir.IntType(int_bits), real()
            ptr = ir.IntType(8).as_pointer()
            fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, blasint, blasint, blasint, f,
                                                   ptr, blasint, ptr, blasint, f, ptr, blasint])
            fn = builder.inttoptr(args[0], fnty.as_pointer())

            def to_int(v):
                return v if int_bits == 64 else builder.trunc(v, blasint)

            builder.call(fn, [ir.Constant(i32, ROW_MAJOR), builder.trunc(args[1], i32),
                              builder.trunc(args[2], i32), to_int(args[3]), to_int(args[4]),
                              to_int(args[5]), ir.Constant(f, 1.0),
                              builder.inttoptr(args[6], ptr), to_int(args[7]),
                              builder.inttoptr(args[8], ptr), to_int(args[9]),
                              ir.Constant(f, 0.0), builder.inttoptr(args[10], ptr),
                              to_int(args[11])])
            return context.get_dummy_value()
        return types.void(*[types.int64] * 12), codegen

    return call


_sgemm64 = _gemm_call(ir.FloatType, 64)
_dgemm64 = _gemm_call(ir.DoubleType, 64)
_sgemm32 = _gemm_call(ir.FloatType, 32)
_dgemm32 = _gemm_call(ir.DoubleType, 32)


@intrinsic
def _yield(typingctx, addr):
    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.IntType(32), [])
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [])
        return context.get_dummy_value()
    return types.void(addr), codegen


@njit(nogil=True, cache=True)
def _run_part(ctrl, part):
    o = part * ROW
    fn = ctrl[FN_SGEMM] if ctrl[o + KIND] == 0 else ctrl[FN_DGEMM]
    args = (fn, ctrl[o + TA], ctrl[o + TB], ctrl[o + M], ctrl[o + N], ctrl[o + K], ctrl[o + A],
            ctrl[o + LDA], ctrl[o + B], ctrl[o + LDB], ctrl[o + C], ctrl[o + LDC])
    if ctrl[ILP64]:
        if ctrl[o + KIND] == 0:
            _sgemm64(*args)
        else:
            _dgemm64(*args)
    elif ctrl[o + KIND] == 0:
        _sgemm32(*args)
    else:
        _dgemm32(*args)


@njit(nogil=True, cache=True)
def _helper_loop(ctrl, part):
    """A helper's wait: run each part posted to row ``part`` that it claims; return 0 after
    ``ctrl[SPINS]`` idle polls (marked asleep), -1 when told to stop."""
    o = part * ROW
    _store(ctrl, o + ASLEEP, 0)
    idle = 0
    while True:
        if _load(ctrl, o + STOP):
            return -1
        claimed = _load(ctrl, o + CLAIM)
        posted = _load(ctrl, o + POST)
        if posted != claimed:
            if _cas(ctrl, o + CLAIM, claimed, posted):
                _run_part(ctrl, part)
                _store(ctrl, o + DONE, posted)
            idle = 0
            continue
        idle += 1
        if idle > ctrl[SPINS]:
            _store(ctrl, o + ASLEEP, 1)
            if _load(ctrl, o + POST) == _load(ctrl, o + CLAIM):  # nothing slipped in
                return 0
            _store(ctrl, o + ASLEEP, 0)
            idle = 0
        _yield(ctrl[FN_YIELD])


@njit(nogil=True, cache=True)
def _run(ctrl, parts):
    """Post parts 1.., run part 0, then run each part no helper has claimed and wait for the
    others. Returns how many parts the caller took over."""
    for part in range(1, parts):
        o = part * ROW
        _store(ctrl, o + POST, _load(ctrl, o + POST) + 1)
    _run_part(ctrl, 0)
    taken = 0
    for part in range(1, parts):
        o = part * ROW
        posted = _load(ctrl, o + POST)
        if _cas(ctrl, o + CLAIM, posted - 1, posted):
            _run_part(ctrl, part)
            _store(ctrl, o + DONE, posted)
            taken += 1
        else:
            while _load(ctrl, o + DONE) != posted:
                _yield(ctrl[FN_YIELD])
    return taken


def _operand(x):
    """(CBLAS transpose flag, leading dimension) of a 2-D array, or None where its strides are
    not a BLAS layout (then the product goes through numpy). The stride of a length-1 axis is
    never used, so numpy may leave it anything."""
    e = x.itemsize
    s0, s1 = x.strides
    rows, cols = x.shape
    if s1 == e or cols == 1:  # rows contiguous: row-major as it is
        ld = s0 // e if rows > 1 else max(1, cols)
        if rows == 1 or (s0 % e == 0 and ld >= max(1, cols)):
            return NO_TRANS, ld
    if s0 == e or rows == 1:  # columns contiguous: the transpose of a row-major array
        ld = s1 // e if cols > 1 else max(1, rows)
        if cols == 1 or (s1 % e == 0 and ld >= max(1, rows)):
            return TRANS, ld
    return None


_UNSET = object()


class Team:
    """``helpers`` spinning helper threads and their control array (see the module doc)."""

    def __init__(self, helpers: int, cblas, spin_us: float | None = None):
        """``cblas``: (sgemm address, dgemm address, ILP64 flag, ...) as
        :func:`._threads._find_cblas` gives them; ``spin_us``: :data:`SPIN_US` when None."""
        self.helpers = helpers
        self.ctrl = ctrl = np.zeros((helpers + 1) * ROW, np.int64)
        ctrl[FN_SGEMM], ctrl[FN_DGEMM], ctrl[ILP64] = cblas[:3]
        ctrl[FN_YIELD] = ctypes.cast(_sched_yield(), ctypes.c_void_p).value
        spin_us = SPIN_US if spin_us is None else spin_us
        ctrl[SPINS] = max(1, int(spin_us / _poll_us(ctrl)))
        self.lock = threading.Lock()  # one product at a time
        self.taken = 0  # parts the caller ran itself (tests and benchmarks read it)
        self._wake = [threading.Event() for _ in range(helpers)]
        one = np.ones((1, 1), np.float32)
        self._post(0, one, one, np.empty((1, 1), np.float32))
        _run(ctrl, 1)  # compiled (or loaded from numba's cache) before any helper starts
        self._threads = [threading.Thread(target=self._helper, args=(part,), daemon=True,
                                          name=f"singa-cpu-gemm-{part}")
                         for part in range(1, helpers + 1)]
        for thread in self._threads:
            thread.start()

    def _helper(self, part):
        wake = self._wake[part - 1]
        while _helper_loop(self.ctrl, part) == 0:
            wake.wait()
            wake.clear()

    def stop(self, timeout: float | None = None):
        """Tell every helper to return, and wait up to ``timeout`` seconds (None: do not
        wait) for their threads to end. Products after this run wholly on the caller."""
        for part in range(1, self.helpers + 1):
            self.ctrl[part * ROW + STOP] = 1
            self._wake[part - 1].set()
        if timeout is not None:
            for thread in self._threads:
                thread.join(timeout)

    def _post(self, part, a, b, out, da=_UNSET, db=_UNSET) -> bool:
        """Write part ``part``'s CBLAS arguments; ``da``/``db``: :func:`_operand` of ``a``/``b``
        where the caller has it already (the operand no part slices). False: not a BLAS
        layout."""
        da = _operand(a) if da is _UNSET else da
        db = _operand(b) if db is _UNSET else db
        dc = _operand(out)
        if da is None or db is None or dc is None or dc[0] != NO_TRANS:
            return False
        o = part * ROW
        self.ctrl[o + KIND:o + LDC + 1] = (
            0 if out.dtype == np.float32 else 1, da[0], db[0], out.shape[0], out.shape[1],
            a.shape[1], a.ctypes.data, da[1], b.ctypes.data, db[1], out.ctypes.data, dc[1])
        return True

    def matmul(self, a, b, out, spans, by_columns: bool) -> bool:
        """``out = a @ b`` (2-D, float32 or float64, one dtype), part i over ``spans[i]``
        ((start, count) of out's columns when ``by_columns``, else of its rows), part 0 on
        the calling thread. False (nothing written) where a layout is not BLAS's, ``out``
        overlaps an operand, the team is busy with another Python thread, or there are more
        parts than threads; the caller then computes the product itself."""
        if (len(spans) > self.helpers + 1 or np.may_share_memory(out, a)
                or np.may_share_memory(out, b) or not self.lock.acquire(blocking=False)):
            return False  # BLAS must not write an operand it reads
        try:
            whole = _operand(a if by_columns else b)  # the operand every part reads whole
            for part, (lo, count) in enumerate(spans):
                hi = lo + count
                if by_columns:
                    ok = self._post(part, a, b[:, lo:hi], out[:, lo:hi], whole, _UNSET)
                else:
                    ok = self._post(part, a[lo:hi], b, out[lo:hi], _UNSET, whole)
                if not ok:
                    return False
            ctrl = self.ctrl
            for part in range(1, len(spans)):
                if ctrl[part * ROW + ASLEEP]:
                    self._wake[part - 1].set()
            self.taken += _run(ctrl, len(spans))
            return True
        finally:
            self.lock.release()


def _sched_yield():
    """The C library's ``sched_yield`` (ctypes), or None (not a POSIX C library)."""
    try:
        fn = ctypes.CDLL(None).sched_yield
    except (OSError, AttributeError, TypeError):
        return None
    fn.restype, fn.argtypes = ctypes.c_int, []
    return fn


@njit(nogil=True, cache=True)
def _polls(ctrl, n):
    for _ in range(n):
        _load(ctrl, ROW + POST)
        _yield(ctrl[FN_YIELD])


def _poll_us(ctrl) -> float:
    """Microseconds one idle poll of :func:`_helper_loop` takes here (the fastest of three
    timings of 200)."""
    n, best = 200, float("inf")
    _polls(ctrl, 1)
    for _ in range(3):
        t0 = time.perf_counter()
        _polls(ctrl, n)
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return max(0.05, best)


_team = None
_team_pid = None
_team_lock = threading.Lock()


def team(helpers: int) -> Team | None:
    """This process's team with at least ``helpers`` helpers (created on first use, again
    after a fork, grown when asked for more), or None where one cannot exist here."""
    global _team, _team_pid
    if _team and _team_pid == os.getpid() and _team.helpers >= helpers:
        return _team
    with _team_lock:
        if _team is False and _team_pid == os.getpid():
            return None
        if _team is None or _team_pid != os.getpid() or _team.helpers < helpers:
            cblas = _find_cblas()
            if cblas is None or _sched_yield() is None:
                _team, _team_pid = False, os.getpid()
                return None
            if _team and _team_pid == os.getpid():
                _team.stop()
            _team, _team_pid = Team(helpers, cblas), os.getpid()
        return _team


@atexit.register
def _stop_at_exit():
    if _team and _team_pid == os.getpid():
        _team.stop()
