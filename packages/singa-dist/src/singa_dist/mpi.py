"""The MPI communicator: singa.dist's primitives on mpi4py.

Buffers are numpy arrays; tensors on devices without MPI-aware buffers are staged through
host memory by :class:`singa.dist.Communicator`. MPI has no float16 datatype, so
``all_reduce`` of a float16 tensor uses a user-defined operation over 16-bit words that computes
each pairwise reduction in float32 and rounds once (what NCCL's ``ncclHalf`` sum does); the
half-precision all-reduce of float32 tensors all-gathers float16 and sums in float32 (see
:mod:`singa.dist`).

Fault handling: creating the communicator installs ``sys.excepthook`` and
``threading.excepthook`` handlers that print which rank failed and call ``MPI_Abort``, so an
uncaught exception on one rank terminates every rank (non-zero exit) instead of leaving them
blocked in a collective. A rank killed by a signal is detected by the launcher (MPICH's
``mpiexec`` and Slurm's ``srun --kill-on-bad-exit``), which terminates the others and names it.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback

import numpy as np
from singa import config
from singa.dist import Communicator, DistError

from . import half as _half

#: how often the monitor thread looks at the armed deadline (seconds)
_TICK = 0.25
#: seconds between a timed-out rank's message and its abort (see MpiCommunicator.abort)
_GRACE = 1.0


def _mpi():
    from mpi4py import MPI

    return MPI


def probe() -> None:
    """Raise when mpi4py or its MPI library cannot be loaded."""
    _mpi()


class _Half:
    """float16 reductions as MPI user operations on 16-bit words (float32 arithmetic)."""

    _ops: dict = {}

    @classmethod
    def op(cls, name):
        op = cls._ops.get(name)
        if op is None:
            MPI = _mpi()
            ufunc = {"sum": np.add, "max": np.maximum, "min": np.minimum}[name]

            def reduce(inbuf, inoutbuf, datatype):
                a = np.frombuffer(inbuf, np.float16)
                b = np.frombuffer(inoutbuf, np.float16)
                b[...] = ufunc(a.astype(np.float32), b.astype(np.float32))

            op = cls._ops[name] = MPI.Op.Create(reduce, commute=True)
        return op


class MpiCommunicator(Communicator):
    """All ranks of ``comm`` (default ``MPI.COMM_WORLD``) as a SINGA communicator.

    Parameters
    ----------
    buffSize:
        Elements of the fused all-reduce buffer (SINGA's default 4194304).
    comm:
        An ``mpi4py`` communicator (default: the world).
    abort_on_error:
        Install the excepthooks described in the module docstring (default True).
    """

    name = "mpi"

    def __init__(self, buffSize: int = 4194304, comm=None, abort_on_error: bool = True,
                 **unused):
        if unused:
            raise TypeError(f"MpiCommunicator got unknown options {sorted(unused)}")
        super().__init__(buffSize)
        MPI = _mpi()
        self.MPI = MPI
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.world_size = self.comm.Get_size()
        local = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank = local.Get_rank()
        self.local_size = local.Get_size()
        local.Free()
        self._ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}
        # put/get exchange what they call here first: a communicator of its own, so that a
        # control message never matches a receive of data (whatever its tag)
        self._control = self.comm.Dup()
        self._monitor = None  # started at the first agreement check (see _deadline)
        if abort_on_error and self.world_size > 1:
            _install_abort_hooks(self)
            if comm is None and not config.get("SINGA_DIST_NO_ABORT_HOOK"):
                from . import watchdog

                watchdog.start(self.comm, self.rank, self.local_rank)

    def __repr__(self) -> str:
        return f"<MpiCommunicator rank {self.rank}/{self.world_size}>"

    def _buf(self, a):
        if a.dtype == np.float16:
            return [a.view(np.uint16), self.MPI.UINT16_T]
        return a

    def _op(self, a, op):
        if a.dtype == np.float16:
            return _Half.op(op)
        try:
            return self._ops[op]
        except KeyError:
            raise DistError(f"unknown reduction {op!r}") from None

    def _allreduce(self, buf, op):
        if buf.size:
            self.comm.Allreduce(self.MPI.IN_PLACE, self._buf(buf), self._op(buf, op))

    def _iallreduce(self, buf, op):
        return self.comm.Iallreduce(self.MPI.IN_PLACE, self._buf(buf), self._op(buf, op))

    def _iallgather(self, send, recv):
        return self.comm.Iallgather(self._buf(send), self._buf(recv))

    def _progress(self, requests):
        self.MPI.Request.Testall(requests)

    def _to_half(self, dst, src):
        if _half.available():  # numba: the same bits as numpy's conversion, ~3x faster
            _half.to_half(src, dst)
        else:
            super()._to_half(dst, src)

    def _half_accumulate(self, recv, out):
        if _half.available():
            _half.accumulate(recv, out)
        else:
            super()._half_accumulate(recv, out)

    def _bcast(self, buf, root):
        self.comm.Bcast(self._buf(buf), root=root)

    def _allgather(self, send, recv):
        self.comm.Allgather(self._buf(send), self._buf(recv))

    def _allgatherv(self, send, recv, counts):
        MPI = self.MPI
        dt = MPI._typedict[send.dtype.char]
        self.comm.Allgatherv([send, dt], [recv, (list(counts), None), dt])

    def _send(self, buf, dest, tag):
        self.comm.Send(self._buf(np.ascontiguousarray(buf)), dest=dest, tag=tag)

    def _recv(self, buf, source, tag):
        self.comm.Recv(self._buf(buf), source=source, tag=tag)

    def _barrier(self):
        self.comm.Barrier()

    def _allgather_object(self, obj):
        return self.comm.allgather(obj)

    def _allgather_digest(self, digest, what=""):
        send = np.array([digest], np.int64)
        recv = np.empty(self.world_size, np.int64)
        with self._deadline(what or "collective"):
            self._control.Allgather(send, recv)
        return recv.tolist()

    def _exchange_object(self, obj, peer, what=""):
        with self._deadline(what or "put/get", peer):
            return self._control.sendrecv(obj, dest=peer, source=peer)

    def _deadline(self, what, peer=None):
        """The agreement check's wait, bounded by ``self.timeout``: both exchanges run on the
        control communicator, so a collective on one rank against a put/get on another (or
        a rank that never calls) leaves them waiting there, and the monitor ends the job
        with the call named instead of a hang (see :class:`_Monitor`)."""
        if self._monitor is None:
            self._monitor = _Monitor(self)
        return self._monitor.armed(float(self.timeout), what, peer)

    def abort(self, message: str, code: int = 1, grace: float = 0.0) -> None:
        """Print ``message`` and end every rank (``MPI_Abort``); ``grace`` seconds between
        the two let the launcher forward the message before another rank's abort (ranks that
        time out together all abort at once) tears the job down."""
        from . import watchdog

        watchdog.mark_done(self.rank)  # reported here: the watcher stays quiet
        sys.stderr.write(message.rstrip() + "\n")
        sys.stderr.flush()
        if grace > 0:
            time.sleep(grace)
        self.comm.Abort(code)


class _Monitor:
    """A daemon thread that ends the job when an agreement check waits past its deadline.

    The check stays one blocking MPI call (mpi4py releases the GIL in it), as fast as
    before; arming and disarming are two attribute writes. Every ``_TICK`` seconds the thread
    looks at the armed deadline; once it has passed, it prints which call waited, how long
    and the fix, and aborts (``MpiCommunicator.abort``: ``MPI_Abort``, every rank ends
    non-zero). An exception cannot be raised here: the waiting thread is inside MPI, which
    cannot be interrupted, so this ends the job the way PyTorch's NCCL watchdog does."""

    def __init__(self, comm):
        self.comm = comm
        self.deadline = None  # (monotonic deadline, seconds, what, peer) while armed
        self.thread = None

    def armed(self, seconds, what, peer):
        return _Armed(self, seconds, what, peer)

    def _run(self):
        while True:
            time.sleep(_TICK)
            armed = self.deadline
            if armed is None or time.monotonic() < armed[0] or self.deadline is not armed:
                continue
            _, seconds, what, peer = armed
            comm = self.comm
            who = (f"rank {peer}, its peer," if peer is not None
                   else f"some of the {comm.world_size} ranks")
            comm.abort(
                f"singa.dist: {what}: rank {comm.rank} of {comm.world_size} waited {seconds:g} "
                f"s (SINGA_DIST_TIMEOUT) at the check before the call and {who} did not reach "
                "it: a rank is in another collective or a put/get, has stopped, or is still "
                "busy. Every rank must make the same calls in the same order; raise "
                "SINGA_DIST_TIMEOUT (or comm.timeout) if ranks legitimately work longer "
                f"between collectives. Aborting all {comm.world_size} ranks", 1, grace=_GRACE)


class _Armed:
    """``with``-block arming ``monitor`` for ``seconds`` (0: no limit)."""

    __slots__ = ("monitor", "seconds", "what", "peer")

    def __init__(self, monitor, seconds, what, peer):
        self.monitor, self.seconds, self.what, self.peer = monitor, seconds, what, peer

    def __enter__(self):
        if self.seconds > 0:
            m = self.monitor
            m.deadline = (time.monotonic() + self.seconds, self.seconds, self.what, self.peer)
            if m.thread is None:
                m.thread = threading.Thread(target=m._run, name="singa-dist-deadline",
                                            daemon=True)
                m.thread.start()
        return self

    def __exit__(self, *exc):
        self.monitor.deadline = None
        return False


_HOOKED = False


def _install_abort_hooks(comm: MpiCommunicator) -> None:
    global _HOOKED
    if _HOOKED or config.get("SINGA_DIST_NO_ABORT_HOOK"):
        return
    _HOOKED = True
    prev = sys.excepthook

    def message(kind, exc_type, exc, tb):
        text = "".join(traceback.format_exception(exc_type, exc, tb))
        return (f"{text}singa.dist: rank {comm.rank} of {comm.world_size} failed ({kind} "
                f"{exc_type.__name__}: {exc}); aborting all {comm.world_size} ranks so that "
                "none waits forever for it\n")

    def hook(exc_type, exc, tb):
        if issubclass(exc_type, KeyboardInterrupt):
            prev(exc_type, exc, tb)
        comm.abort(message("uncaught", exc_type, exc, tb), 1)

    def thread_hook(args):
        if args.exc_type is SystemExit:
            return
        comm.abort(message(f"thread {args.thread.name}:", args.exc_type, args.exc_value,
                           args.exc_traceback), 1)

    sys.excepthook = hook
    threading.excepthook = thread_hook
