"""The NCCL communicator: singa.dist's primitives on ``cupy.cuda.nccl`` for CUDA tensors.

The machines this project is developed and tested on have no GPU: there its tests skip. On one
GPU (an H200; cupy-cuda13x 14.2, nvidia-nccl-cu13 2.32; world size 1, multiprocess mode)
``tests/dist/test_nccl.py`` and the ops, DistOpt and overlap suites with this communicator
passed; more than one GPU has never been run. Everything it shares with the MPI communicator
(bucketing, fused buffers, half precision, sparsification, DistOpt) is the array-generic code
in :mod:`singa.dist`, tested there with numpy buffers.

Two ways to form the group, as in SINGA:

* MPI mode (``nccl_id=None``): ranks from ``mpiexec``; rank 0 creates the NCCL unique id and
  broadcasts it over MPI; GPU = local rank.
* multiprocess mode: the launcher creates an :class:`NcclIdHolder` and passes it with
  ``local_rank`` (the GPU) and ``world_size`` to each process it starts.

Collectives run on the communicator's own stream, each ordered with events against the stream
of the device that owns the tensors (:mod:`singa_dist._streams`): the device's kernels that
wrote a buffer finish before the collective reads it, and its kernels after the collective
(for a started one, after ``Work.wait``) see the result. singa.dist enters
:meth:`NcclCommunicator._device_context` around every ``Dist`` op, which makes the device's
stream current for the array code between the collectives.
"""

from __future__ import annotations

import pickle
from contextlib import contextmanager

import numpy as np
from singa.dist import Communicator, DistError

from ._stack import cuda_major, install_hint, nccl_fix
from ._streams import StreamOrder


def _cupy():
    try:
        import cupy
    except ImportError as exc:
        raise ImportError(f"cupy cannot be imported ({exc}); fix: {install_hint(None)}") from exc
    return cupy


def _nccl():
    """``cupy.cuda.nccl``, or a RuntimeError naming the NCCL wheel of cupy's CUDA stack."""
    from cupy.cuda import nccl

    # without NCCL's library cupy (14) still imports the module, as a stub: available is
    # False and it has neither get_unique_id nor NcclCommunicator
    if not getattr(nccl, "available", True) or not hasattr(nccl, "get_unique_id"):
        major = cuda_major()
        stack = f"CUDA {major}" if major else "an unknown CUDA version"
        raise RuntimeError(f"cupy ({stack}) cannot load NCCL's library (libnccl.so.2), so "
                           f"cupy.cuda.nccl is a stub; fix: {nccl_fix(major)}")
    return nccl


def probe() -> None:
    """Raise unless cupy, NCCL and at least one CUDA GPU are usable (the message names the
    install command for the CUDA stack of the installed cupy)."""
    cupy = _cupy()
    _nccl()
    if not cupy.cuda.is_available():
        raise RuntimeError("no CUDA GPU is visible (cupy.cuda.is_available() is False)")


def _mpi_world(comm):
    """``(MPI, comm or the world)``: the group over which MPI mode shares the NCCL id."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise DistError(f"NCCL's MPI mode (nccl_id=None) shares the NCCL id over MPI, and "
                        f"mpi4py cannot be imported ({exc}); fix: pip install "
                        '"singa-dist[mpi]", or pass nccl_id=NcclIdHolder(), local_rank and '
                        "world_size (multiprocess mode)") from exc
    return MPI, comm if comm is not None else MPI.COMM_WORLD


def _id_bytes(uid) -> bytes:
    """An NCCL unique id as cupy (14 and newer) takes it: bytes. A sequence of chars, as
    cupy 13 returned (signed), converts."""
    if isinstance(uid, bytes):
        return uid
    return bytes(int(c) & 0xFF for c in uid)


class NcclIdHolder:
    """A picklable NCCL unique id (SINGA's ``singa_wrap.NcclIdHolder``): create it in the
    launcher and pass it to every process. ``id`` is 128 bytes."""

    def __init__(self, uid=None):
        self.id = _id_bytes(uid if uid is not None else _nccl().get_unique_id())


class NcclCommunicator(Communicator):
    """NCCL over the GPUs of all ranks (see the module docstring for the two modes)."""

    name = "nccl"

    def __init__(self, nccl_id=None, local_rank=None, world_size=None, buffSize=4194304,
                 comm=None):
        super().__init__(buffSize)
        cupy, nccl = _cupy(), _nccl()
        self.xp = cupy
        if nccl_id is None:
            MPI, mpi = _mpi_world(comm)
            self.rank, self.world_size = mpi.Get_rank(), mpi.Get_size()
            local = mpi.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
            self.local_rank = local.Get_rank()
            local.Free()
            uid = mpi.bcast(nccl.get_unique_id() if self.rank == 0 else None, root=0)
        else:
            if local_rank is None or world_size is None:
                raise DistError("NCCL multiprocess mode needs local_rank and world_size "
                                "with nccl_id (DistOpt(opt, nccl_id, local_rank, world_size))")
            uid = getattr(nccl_id, "id", nccl_id)
            self.rank = self.local_rank = int(local_rank)
            self.world_size = int(world_size)
        self.device = cupy.cuda.Device(self.local_rank)
        self.device.use()
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.order = StreamOrder(self.stream, _event_factory(cupy), cupy.cuda.Stream.null)
        self.comm = nccl.NcclCommunicator(self.world_size, _id_bytes(uid), self.rank)
        self._types = {np.dtype(np.float32): nccl.NCCL_FLOAT32,
                       np.dtype(np.float16): nccl.NCCL_FLOAT16,
                       np.dtype(np.float64): nccl.NCCL_FLOAT64,
                       np.dtype(np.int32): nccl.NCCL_INT32,
                       np.dtype(np.int8): nccl.NCCL_INT8,
                       np.dtype(np.uint8): nccl.NCCL_UINT8}
        self._ops = {"sum": nccl.NCCL_SUM, "max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN}

    def __repr__(self) -> str:
        return f"<NcclCommunicator rank {self.rank}/{self.world_size} on GPU {self.local_rank}>"

    def accepts(self, arr) -> bool:
        """Whether ``arr`` is a C-contiguous cupy array, which NCCL reduces in place."""
        return isinstance(arr, self.xp.ndarray) and arr.flags.c_contiguous

    def _host_copy(self, dev, arr):
        raise DistError(f"the NCCL communicator moves CUDA tensors only; this tensor is on "
                        f"{dev.name}. Move it with x.to_device(device.create_cuda_gpu_on("
                        f"{self.local_rank})) or use the MPI communicator (SINGA_COMMUNICATOR=mpi)")

    @contextmanager
    def _device_context(self, dev):
        """This rank's GPU current and ``dev``'s stream bound and current (see
        :class:`singa_dist._streams.StreamOrder`) for one ``Dist`` op."""
        if getattr(dev, "backend", None) == "cuda" and dev.index != self.local_rank:
            raise DistError(f"the NCCL communicator of rank {self.rank} runs on GPU "
                            f"{self.local_rank}, but this tensor is on {dev.name}; create it "
                            f"on device.create_cuda_gpu_on({self.local_rank})")
        with self.device, self.order.on(dev):
            yield

    def _type(self, a):
        try:
            return self._types[a.dtype]
        except KeyError:
            raise DistError(f"NCCL has no datatype for {a.dtype}") from None

    def _op(self, op):
        try:
            return self._ops[op]
        except KeyError:
            raise DistError(f"unknown reduction {op!r}") from None

    # each primitive is one NCCL call that the StreamOrder issues on the NCCL stream
    def _allreduce(self, buf, op):
        self.order.run(self._allreduce_call(buf, op))

    def _iallreduce(self, buf, op):
        return self.order.start(self._allreduce_call(buf, op))

    def _allreduce_call(self, buf, op):
        ptr, n, dt, red = buf.data.ptr, buf.size, self._type(buf), self._op(op)
        return lambda s: self.comm.allReduce(ptr, ptr, n, dt, red, s.ptr)

    def _allgather(self, send, recv):
        self.order.run(self._allgather_call(send, recv))

    def _iallgather(self, send, recv):
        return self.order.start(self._allgather_call(send, recv))

    def _allgather_call(self, send, recv):
        src, dst, n, dt = send.data.ptr, recv.data.ptr, send.size, self._type(send)
        return lambda s: self.comm.allGather(src, dst, n, dt, s.ptr)

    def _progress(self, requests):
        return None  # NCCL progresses on its own stream

    def _bcast(self, buf, root):
        ptr, n, dt = buf.data.ptr, buf.size, self._type(buf)
        self.order.run(lambda s: self.comm.bcast(ptr, n, dt, root, s.ptr))

    def _allgatherv(self, send, recv, counts):
        # NCCL has no all-gather-v: gather max(counts) per rank, then compact (as SINGA did);
        # the padding and compaction run on the device's stream (current in a Dist op)
        cupy = self.xp
        most = max(counts) if counts else 0
        if most == 0:
            return
        pad = cupy.zeros(most, send.dtype)
        pad[:send.size] = send
        full = cupy.empty(most * self.world_size, send.dtype)
        self._allgather(pad, full)
        pos = 0
        for r, c in enumerate(counts):
            recv[pos:pos + c] = full[r * most:r * most + c]
            pos += c

    def _send(self, buf, dest, tag):
        # the device's later kernels wait for the send (they may overwrite buf): no host wait
        ptr, n, dt = buf.data.ptr, buf.size, self._type(buf)
        self.order.run(lambda s: self.comm.send(ptr, n, dt, dest, s.ptr))

    def _recv(self, buf, source, tag):
        ptr, n, dt = buf.data.ptr, buf.size, self._type(buf)
        self.order.run(lambda s: self.comm.recv(ptr, n, dt, source, s.ptr))

    # barrier and control messages touch no tensor: they run on the NCCL stream alone, in
    # buffers of their own, and the host waits for that stream
    def _barrier(self):
        with self.device, self.stream:
            one = self.xp.ones(1, np.int32)
            self.comm.allReduce(one.data.ptr, one.data.ptr, 1, self._type(one),
                                self._op("sum"), self.stream.ptr)
            self.stream.synchronize()

    def _allgather_object(self, obj):
        raw = np.frombuffer(pickle.dumps(obj), np.uint8)
        sizes = self._gather_host(np.array([raw.size], np.int32))
        most = int(sizes.max())
        pad = np.zeros(most, np.uint8)
        pad[:raw.size] = raw
        full = self._gather_host(pad)
        return [pickle.loads(full[r * most:r * most + int(n)].tobytes())
                for r, n in enumerate(sizes)]

    def _exchange_object(self, obj, peer, what=""):
        """``obj`` to rank ``peer`` and its object back: its size, then its pickled bytes,
        each one NCCL send and receive grouped on the NCCL stream in buffers of their own."""
        raw = np.frombuffer(pickle.dumps(obj), np.uint8)
        size = self._swap_host(np.array([raw.size], np.int32), 1, peer)
        return pickle.loads(self._swap_host(raw, int(size[0]), peer).tobytes())

    def _swap_host(self, host, n_in, peer):
        """Send the host array ``host`` to ``peer`` and receive ``n_in`` elements of its dtype
        from it (one grouped NCCL send/receive), on the host."""
        cupy, nccl = self.xp, _nccl()
        with self.device, self.stream:
            send = cupy.asarray(host)
            recv = cupy.empty(n_in, host.dtype)
            nccl.groupStart()
            self.comm.send(send.data.ptr, send.size, self._type(send), peer, self.stream.ptr)
            self.comm.recv(recv.data.ptr, n_in, self._type(recv), peer, self.stream.ptr)
            nccl.groupEnd()
            return cupy.asnumpy(recv, stream=self.stream)  # waits for the NCCL stream

    def _gather_host(self, host):
        """Every rank's host array ``host`` (one size on all ranks), concatenated in rank
        order, on the host."""
        cupy = self.xp
        with self.device, self.stream:
            send = cupy.asarray(host)
            recv = cupy.empty(host.size * self.world_size, host.dtype)
            self.comm.allGather(send.data.ptr, recv.data.ptr, send.size, self._type(send),
                                self.stream.ptr)
            return cupy.asnumpy(recv, stream=self.stream)  # waits for the NCCL stream

    def wait(self) -> None:
        """SINGA's ``wait``: the host waits for every collective issued so far."""
        self.stream.synchronize()

    def abort(self, message: str, code: int = 1) -> None:
        """Write ``message`` to stderr, abort the NCCL communicator (so no rank waits forever in
        a collective) and exit with ``code``.
        """
        import sys

        sys.stderr.write(message.rstrip() + "\n")
        self.comm.abort()
        raise SystemExit(code)


def _event_factory(cupy):
    """New CUDA events for ordering only (no timing: cheaper to record and wait on)."""
    return lambda: cupy.cuda.Event(block=False, disable_timing=True)
