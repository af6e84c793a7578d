"""The NCCL communicator: singa.dist's primitives on ``cupy.cuda.nccl`` for CUDA tensors.

Written against the documented cupy/NCCL API; no GPU exists on the machines this project is
developed and tested on, so this module has never run on hardware. Everything it shares with
the MPI communicator (bucketing, fused buffers, half precision, sparsification, DistOpt) is the
array-generic code in :mod:`singa.dist`, tested there with numpy buffers.

Two ways to form the group, as in SINGA:

* MPI mode (``nccl_id=None``): ranks from ``mpiexec``; rank 0 creates the NCCL unique id and
  broadcasts it over MPI; GPU = local rank.
* multiprocess mode: the launcher creates an :class:`NcclIdHolder` and passes it with
  ``local_rank`` (the GPU) and ``world_size`` to each process it starts.

Collectives run on a dedicated communication stream; the compute stream waits for it through
events (so ``Work.wait`` and the blocking calls order communication after the kernels that
produced the data, and the kernels after it that read the result).
"""

from __future__ import annotations

import pickle

import numpy as np
from singa.dist import Communicator, DistError


def _cupy():
    import cupy

    return cupy


def _nccl():
    from cupy.cuda import nccl

    return nccl


def probe() -> None:
    """Raise unless cupy, NCCL and at least one CUDA GPU are usable."""
    cupy = _cupy()
    _nccl()
    if not cupy.cuda.is_available():
        raise RuntimeError("no CUDA GPU is visible (cupy.cuda.is_available() is False)")


class NcclIdHolder:
    """A picklable NCCL unique id (SINGA's ``singa_wrap.NcclIdHolder``): create it in the
    launcher and pass it to every process."""

    def __init__(self, uid=None):
        self.id = tuple(uid) if uid is not None else tuple(_nccl().get_unique_id())


class _Event:
    """A started NCCL collective: done when its event on the communication stream is."""

    def __init__(self, event):
        self.event = event

    def test(self) -> bool:
        return self.event.done

    def wait(self) -> None:
        _cupy().cuda.get_current_stream().wait_event(self.event)


class NcclCommunicator(Communicator):
    """NCCL over the GPUs of all ranks (see the module docstring for the two modes)."""

    name = "nccl"

    def __init__(self, nccl_id=None, local_rank=None, world_size=None, buffSize=4194304,
                 comm=None):
        super().__init__(buffSize)
        cupy, nccl = _cupy(), _nccl()
        self.xp = cupy
        if nccl_id is None:
            from mpi4py import MPI

            mpi = comm if comm is not None else MPI.COMM_WORLD
            self.rank, self.world_size = mpi.Get_rank(), mpi.Get_size()
            local = mpi.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
            self.local_rank = local.Get_rank()
            local.Free()
            uid = mpi.bcast(tuple(nccl.get_unique_id()) if self.rank == 0 else None, root=0)
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
        self.comm = nccl.NcclCommunicator(self.world_size, tuple(uid), self.rank)
        self._types = {np.dtype(np.float32): nccl.NCCL_FLOAT32,
                       np.dtype(np.float16): nccl.NCCL_FLOAT16,
                       np.dtype(np.float64): nccl.NCCL_FLOAT64,
                       np.dtype(np.int32): nccl.NCCL_INT32,
                       np.dtype(np.int8): nccl.NCCL_INT8,
                       np.dtype(np.uint8): nccl.NCCL_UINT8}
        self._ops = {"sum": nccl.NCCL_SUM, "max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN}

    def accepts(self, arr) -> bool:
        return isinstance(arr, self.xp.ndarray) and arr.flags.c_contiguous

    def _host_copy(self, dev, arr):
        raise DistError(f"the NCCL communicator moves CUDA tensors only; this tensor is on "
                        f"{dev.name}. Move it with x.to_device(device.create_cuda_gpu_on("
                        f"{self.local_rank})) or use the MPI communicator (SINGA_COMMUNICATOR=mpi)")

    def _type(self, a):
        try:
            return self._types[a.dtype]
        except KeyError:
            raise DistError(f"NCCL has no datatype for {a.dtype}") from None

    def _after_compute(self):
        # communication starts after the kernels already queued on the compute stream
        ev = self.xp.cuda.get_current_stream().record()
        self.stream.wait_event(ev)

    def _before_compute(self):
        self.xp.cuda.get_current_stream().wait_event(self.stream.record())

    def _allreduce(self, buf, op):
        self._after_compute()
        self.comm.allReduce(buf.data.ptr, buf.data.ptr, buf.size, self._type(buf),
                            self._ops[op], self.stream.ptr)
        self._before_compute()

    def _iallreduce(self, buf, op):
        self._after_compute()
        self.comm.allReduce(buf.data.ptr, buf.data.ptr, buf.size, self._type(buf),
                            self._ops[op], self.stream.ptr)
        return _Event(self.stream.record())

    def _iallgather(self, send, recv):
        self._after_compute()
        self.comm.allGather(send.data.ptr, recv.data.ptr, send.size, self._type(send),
                            self.stream.ptr)
        return _Event(self.stream.record())

    def _progress(self, requests):
        return None  # NCCL progresses on its own stream

    def _bcast(self, buf, root):
        self._after_compute()
        self.comm.bcast(buf.data.ptr, buf.size, self._type(buf), root, self.stream.ptr)
        self._before_compute()

    def _allgather(self, send, recv):
        self._after_compute()
        self.comm.allGather(send.data.ptr, recv.data.ptr, send.size, self._type(send),
                            self.stream.ptr)
        self._before_compute()

    def _allgatherv(self, send, recv, counts):
        # NCCL has no all-gather-v: gather max(counts) per rank, then compact (as SINGA did)
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
        self._after_compute()
        self.comm.send(buf.data.ptr, buf.size, self._type(buf), dest, self.stream.ptr)
        self.stream.synchronize()

    def _recv(self, buf, source, tag):
        self._after_compute()
        self.comm.recv(buf.data.ptr, buf.size, self._type(buf), source, self.stream.ptr)
        self._before_compute()

    def _barrier(self):
        one = self.xp.ones(1, np.int32)
        self._allreduce(one, "sum")
        self.stream.synchronize()

    def _allgather_object(self, obj):
        cupy = self.xp
        raw = np.frombuffer(pickle.dumps(obj), np.uint8)
        sizes = cupy.empty(self.world_size, np.int32)
        self._allgather(cupy.asarray([raw.size], np.int32), sizes)
        sizes = cupy.asnumpy(sizes)
        most = int(sizes.max())
        pad = cupy.zeros(most, np.uint8)
        pad[:raw.size] = cupy.asarray(raw)
        full = cupy.empty(most * self.world_size, np.uint8)
        self._allgather(pad, full)
        host = cupy.asnumpy(full)
        return [pickle.loads(host[r * most:r * most + int(n)].tobytes())
                for r, n in enumerate(sizes)]

    def wait(self) -> None:
        self._before_compute()

    def abort(self, message: str, code: int = 1) -> None:
        import sys

        sys.stderr.write(message.rstrip() + "\n")
        self.comm.abort()
        raise SystemExit(code)
