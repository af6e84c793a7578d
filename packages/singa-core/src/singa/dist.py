"""``singa.dist``: the Communicator interface for data-parallel training.

A communicator is a group of processes (ranks) that run collectives on tensors. Backends live
in plugins (``singa-dist`` provides ``"mpi"`` through mpi4py and ``"nccl"`` through
``cupy.cuda.nccl``) and register a :class:`singa.backend.CommunicatorSpec` through the
``singa_communicators`` hook; :func:`get_communicator` finds them lazily by name (argument,
else ``SINGA_COMMUNICATOR``, else ``"mpi"``).

A backend implements the array-level primitives (``_allreduce``, ``_iallreduce``, ``_bcast``,
``_allgather``, ``_allgatherv``, ``_send``, ``_recv``, ``_barrier``, ``_allgather_object``) on
its native buffers (numpy arrays for MPI, cupy arrays for NCCL). Everything tensor-level is
written here once: each operation is one ``Device.exec`` call named ``"Dist.<Op>"`` that reads
and writes the tensor blocks it touches (so graph mode records it as a node and verbosity-3
profiles show it), plus a per-device token block that every communication node reads and
writes, which keeps collectives in recorded order in any schedule (every rank must issue
them in the same order). A tensor on a device whose buffers the communicator cannot use in
place is staged through host memory. The op's body runs inside the backend's
``_device_context(dev)`` (a no-op by default; the NCCL communicator makes the device's stream
current there and orders its collectives against that stream).

Math (``n`` ranks, ``x_r`` the tensor on rank ``r``):

* ``all_reduce``: :math:`x \\leftarrow \\sum_r x_r` (``op="mean"``: divided by ``n``).
* ``all_reduce_half``: :math:`x \\leftarrow \\sum_r \\mathrm{fp16}(x_r)`: float16 on the wire
  (all-gathered), summed in float32 in rank order, so every rank gets the same bits.
* ``sparse_all_reduce``: with residual ``e`` (error feedback) :math:`g = x + e`; the kept set
  :math:`S = \\{i : |g_i| \\ge s\\}` (threshold) or the :math:`\\lceil s\\,|g|\\rceil` entries
  of largest :math:`|g_i|` (top-K); :math:`e \\leftarrow g \\odot 1_{\\bar S}`;
  :math:`x \\leftarrow \\sum_r g_r \\odot 1_{S_r}`.
"""

from __future__ import annotations

import contextlib
import math
import threading
from abc import ABC, abstractmethod

import numpy as np

from . import _distasync, _dtype
from . import config as _config
from ._ctensor import CTensor
from ._distasync import Work, _divide, _unpack
from ._distcheck import Call, agree, agree_with_peer, describe_tensors
from .errors import CollectiveMismatchError, DistError

__all__ = ["Communicator", "Work", "DistError", "get_communicator", "REDUCE_OPS"]

#: Reduction names accepted by :meth:`Communicator.all_reduce`.
REDUCE_OPS = ("sum", "mean", "max", "min")


def _ct(x) -> CTensor:
    data = getattr(x, "data", x)
    if not isinstance(data, CTensor):
        raise TypeError(f"expected a singa Tensor or CTensor, got {type(x).__name__}")
    return data


class Communicator(ABC):
    """A group of ranks running collectives on tensors (SINGA's ``Communicator``).

    Attributes
    ----------
    rank, world_size, local_rank:
        This process's global rank, the number of ranks, and its rank among the ranks of
        its host (SINGA's ``MPIRankInGlobal``, ``totalMPIRanksInGlobal``, ``MPIRankInLocal``).
    buff_size:
        Elements of the flat buffer used by :meth:`fused_all_reduce` (SINGA's ``buffSize``).
    validate:
        When True (default) every public operation first checks that the ranks made the same
        call (:mod:`singa._distcheck`): a collective all-gathers a small description of itself
        (operation, reduction, root, options, the tensors' dtypes and shapes) and a put or get
        exchanges one with its peer (dtype, size, tag), before any data moves. A mismatch is
        a :class:`~singa.errors.CollectiveMismatchError` on every rank naming both ranks'
        calls. A call's ``check`` argument overrides it; DistOpt checks its first step and
        then passes ``check=False`` (the check costs one small all-gather per call).
    timeout:
        Seconds a rank waits at that check for the other ranks (``SINGA_DIST_TIMEOUT``,
        default 600; 0 waits forever) before the job ends with a message naming the call and
        the fix: a rank in another collective or a put/get, or one that stopped, would
        otherwise hang the job. The MPI communicator applies it; NCCL's exchanges have no
        timeout.
    """

    name = "abstract"
    #: The array module of the native buffers (numpy; cupy for NCCL) used by the shared code.
    xp = np
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    def __init__(self, buff_size: int = 4194304):
        if int(buff_size) <= 0:
            raise ValueError(f"buffSize must be a positive element count, got {buff_size}")
        self.buff_size = int(buff_size)
        self.validate = True
        from . import config

        self.timeout = config.get("SINGA_DIST_TIMEOUT")
        self._tokens: dict = {}
        self._pending: list = []  # started requests that progress() advances
        self._usable: dict = {}  # device -> whether the primitives take its arrays in place
        self._free_host: dict = {}  # (elements, dtype) -> idle in-flight host buffers
        self._scratches: dict = {}  # (tag, elements, dtype) -> buffer used within one call
        self._self_puts: list = []  # Calls of puts to this rank, awaiting their get

    # ------------------------------------------------------------------ backend primitives
    def accepts(self, arr) -> bool:
        """Whether ``arr`` (a device's native array) can be used by the primitives in place."""
        return isinstance(arr, np.ndarray) and arr.flags.c_contiguous and arr.flags.writeable

    @abstractmethod
    def _allreduce(self, buf, op: str) -> None:
        """Reduce ``buf`` in place over all ranks (op: sum, max, min; dtype of buf)."""

    @abstractmethod
    def _iallreduce(self, buf, op: str):
        """Start an in-place reduction; returns an object with ``wait()`` and ``test()``."""

    @abstractmethod
    def _iallgather(self, send, recv):
        """Start ``_allgather``; returns an object with ``wait()`` and ``test()``."""

    @abstractmethod
    def _bcast(self, buf, root: int) -> None:
        """Overwrite ``buf`` with ``root``'s."""

    @abstractmethod
    def _allgather(self, send, recv) -> None:
        """``recv[r] = send of rank r``; recv has shape (world_size, *send.shape)."""

    @abstractmethod
    def _allgatherv(self, send, recv, counts) -> None:
        """Concatenate every rank's 1-D ``send`` (``counts[r]`` elements) into ``recv``."""

    @abstractmethod
    def _send(self, buf, dest: int, tag: int) -> None:
        """Blocking point-to-point send."""

    @abstractmethod
    def _recv(self, buf, source: int, tag: int) -> None:
        """Blocking point-to-point receive into ``buf``."""

    @abstractmethod
    def _barrier(self) -> None:
        """Wait until every rank reached the barrier."""

    @abstractmethod
    def _allgather_object(self, obj) -> list:
        """Every rank's small picklable ``obj``, in rank order (control messages)."""

    def _allgather_digest(self, digest: int, what: str = "") -> list:
        """Every rank's signed 64-bit ``digest``, in rank order (the agreement check's fast
        path). This default uses :meth:`_allgather_object`; a backend may all-gather one int64
        buffer instead (MPI does)."""
        return self._allgather_object(int(digest))

    def _exchange_object(self, obj, peer: int, what: str = ""):
        """Send the small picklable ``obj`` to rank ``peer`` and return the one ``peer`` sent
        here (control messages of put/get). This default runs on :meth:`_send` and
        :meth:`_recv` of host buffers, the lower rank sending first; a backend overrides it
        with its library's exchange (MPI: ``sendrecv`` on a communicator of its own)."""
        import pickle

        raw = np.frombuffer(pickle.dumps(obj), np.uint8)
        size = np.array([raw.size], np.int64)
        got = np.empty(1, np.int64)

        def swap(out, into):
            if self.rank < peer:
                self._send(out, peer, 0)
                self._recv(into, peer, 0)
            else:
                self._recv(into, peer, 0)
                self._send(out, peer, 0)

        swap(size, got)
        data = np.empty(int(got[0]), np.uint8)
        swap(raw, data)
        return pickle.loads(data.tobytes())

    def _progress(self, requests) -> None:
        """Let the library advance started requests (MPI progresses only inside calls)."""
        for r in requests:
            r.test()

    def abort(self, message: str, code: int = 1) -> None:
        """Terminate every rank (a failed rank must never leave the others hanging)."""
        raise SystemExit(code)

    def _device_context(self, dev):
        """The context every ``Dist`` op on ``dev`` runs its body in (entered inside the op, so
        also when a graph replays it): the primitives and the shared array code between them
        (packing, dividing) run there. The default does nothing. A backend whose arrays live
        on a device that queues its kernels on a stream of its own enters that stream here
        (the device's ``stream`` attribute), so that its work is ordered with the device's
        kernels: singa-dist's NCCL communicator does."""
        return contextlib.nullcontext()

    def host_buffer(self, n: int, dtype):
        """A flat array the primitives accept (host memory for MPI, device memory for NCCL)."""
        return self.xp.empty(n, dtype)

    # ------------------------------------------------------------------ tensor-level plumbing
    def _token(self, dev) -> CTensor:
        tok = self._tokens.get(dev)
        if tok is None:
            tok = self._tokens[dev] = CTensor((1,), dev, _dtype.kInt)
        return tok

    def _stage(self, dev, ct):
        """``(array, staged)``: the native array, or a host copy when it is not usable."""
        arr = dev.native(ct)
        if self.accepts(arr):
            return arr, False
        return self._host_copy(dev, arr), True

    def _host_copy(self, dev, arr):
        """A copy the primitives accept of a native array they cannot use in place (host
        staging; a backend without host buffers raises here, naming the device)."""
        return np.ascontiguousarray(dev.native_to_numpy(arr))

    def _exec(self, name, cts, body, write=True, extra_reads=()) -> None:
        """Run ``body(arrays)`` on the tensors' buffers as one ``Dist.<name>`` device op."""
        dev = cts[0].dev
        for c in cts[1:]:
            if c.dev is not dev:
                raise DistError(f"{name}: tensors are on {dev.name} and {c.dev.name}; move "
                                "them to one device first (x.to_device(dev))")
        tok = self._token(dev)

        def fn():
            with self._device_context(dev):
                staged = [self._stage(dev, c) for c in cts]
                body([a for a, _ in staged])
                if write:
                    for c, (a, s) in zip(cts, staged):
                        if s:
                            dev.numpy_into_native(a, dev.native(c))

        blocks = [c.block for c in cts]
        reads = blocks + [tok.block] + [c.block for c in extra_reads]
        writes = (blocks if write else []) + [tok.block]
        dev.exec(fn, reads, writes, "Dist." + name)

    def check_consistent(self, what: str, cts, **params) -> None:
        """Raise :class:`~singa.errors.CollectiveMismatchError` on every rank, naming both
        ranks' calls, unless every rank calls ``what`` with the same ``params`` (reduction,
        root, ...) on tensors of the same shapes and dtypes (one small all-gather)."""
        call = Call(what, describe_tensors(cts), tuple(params.items()))
        digests = self._allgather_digest(call.digest(), what)
        if any(d != digests[0] for d in digests):  # every rank sees it: all exchange calls
            agree(what, self._allgather_object(call))

    def _checked(self, what, cts, check=None, **params):
        if (self.validate if check is None else check) and self.world_size > 1:
            self.check_consistent(what, cts, **params)

    def _checked_peer(self, what: str, c, peer: int, tag: int, check=None) -> None:
        """Exchange this put's or get's :class:`~singa._distcheck.Call` with ``peer`` and
        raise on both ranks unless they pair (see :func:`singa._distcheck.agree_with_peer`).
        A put to this rank itself waits, as a Call, for the get that takes it."""
        if not (self.validate if check is None else check):
            return
        peer = int(peer)
        mine = Call(what, describe_tensors([c]), (("peer", peer), ("tag", int(tag))))
        if peer == self.rank:
            if what == "put":
                self._self_puts.append(mine)
                return
            if not self._self_puts:
                raise CollectiveMismatchError(
                    f"get: rank {self.rank} gets from itself, but it put nothing to itself "
                    "before; call put(x, dest=rank) first")
            agree_with_peer(mine, self._self_puts.pop(0), self.rank, peer)
            return
        agree_with_peer(mine, self._exchange_object(mine, peer, what), self.rank, peer)

    # ------------------------------------------------------------------ public operations
    def all_reduce(self, x, op: str = "sum") -> None:
        """In place: ``x`` becomes the elementwise sum (mean, max, min) over all ranks."""
        c = _ct(x)
        # first: a rank alone with a bad argument raises with the others, never hangs them
        self._checked("all_reduce", [c], op=op)
        if op not in REDUCE_OPS:
            raise ValueError(f"all_reduce: op must be one of {REDUCE_OPS}, got {op!r}")
        n = self.world_size

        def body(arrs):
            a = arrs[0]
            self._allreduce(a, "sum" if op == "mean" else op)
            if op == "mean":
                _divide(a, n)

        self._exec("AllReduce", [c], body)

    def fused_all_reduce(self, xs, op: str = "sum", half: bool = False, check=None) -> None:
        """All-reduce a list of tensors through one flat buffer of ``buff_size`` elements.

        Tensors are grouped by dtype; each group streams through the buffer, so a tensor or a
        group larger than the buffer takes several rounds. ``half``: float32 tensors travel
        as float16 (SINGA's ``fusedSynchHalf``).
        """
        cts = [_ct(x) for x in xs]
        self._checked("fused_all_reduce", cts, check, op=op, half=bool(half))
        if not cts:
            return
        if op not in REDUCE_OPS:
            raise ValueError(f"fused_all_reduce: op must be one of {REDUCE_OPS}, got {op!r}")
        n = self.world_size
        red = "sum" if op == "mean" else op

        def body(arrs):
            groups: dict = {}
            for a in arrs:
                groups.setdefault(a.dtype, []).append(a)
            for dt, group in groups.items():
                if half and dt == np.float32 and red == "sum":
                    self._fused_half(group)
                else:
                    self._fused_rounds(group, dt, red)
                if op == "mean":
                    for a in group:
                        _divide(a, n)

        self._exec("FusedAllReduceHalf" if half else "FusedAllReduce", cts, body)

    def _fused_rounds(self, arrs, dt, op) -> None:
        buf = self._scratch(min(self.buff_size, sum(a.size for a in arrs)), dt, "fused")
        cap = buf.size
        pieces: list[tuple] = []  # (array flat view, start, stop) pending in buf
        fill = 0

        def flush():
            nonlocal fill
            self._allreduce(buf[:fill], op)
            pos = 0
            for flat, s, e in pieces:
                flat[s:e] = buf[pos:pos + e - s]
                pos += e - s
            pieces.clear()
            fill = 0

        for a in arrs:
            flat = a.reshape(-1)
            s = 0
            while s < flat.size:
                take = min(cap - fill, flat.size - s)
                buf[fill:fill + take] = flat[s:s + take]
                pieces.append((flat, s, s + take))
                fill += take
                s += take
                if fill == cap:
                    flush()
        if fill:
            flush()

    def _fused_half(self, arrs) -> None:
        self._half_sum([a.reshape(-1) for a in arrs])

    def _half_chunks(self, n):
        step = max(1, self.buff_size // self.world_size)  # gathered: world x step elements
        return [(s, min(n, s + step)) for s in range(0, n, step)]

    def _to_half(self, dst, src) -> None:
        """``dst[...] = src``: flat contiguous float32 into float16, rounded to nearest even.
        A backend may replace numpy's conversion (one element at a time) by a faster one that
        gives the same bits (singa-dist's MPI communicator does, with numba)."""
        dst[...] = src

    def _half_accumulate(self, recv, out) -> None:
        """``out = Σ_r float32(recv[r])``, in rank order: the same bits on every rank (a
        backend may replace it by a faster loop with the same bits, as :meth:`_to_half`)."""
        out[...] = recv[0]
        for r in range(1, recv.shape[0]):
            out += recv[r]

    def _pack_half(self, send, parts):
        """:func:`_pack` of float32 ``parts`` into the float16 wire buffer ``send``."""
        pos = 0
        for p in parts:
            self._to_half(send[pos:pos + p.size], p)
            pos += p.size
        return send

    def _half_sum(self, parts) -> None:
        """Every flat float32 array of ``parts`` (one vector, concatenated) becomes
        ``Σ_r fp16(·)_r``: float16 on the wire, float32 accumulation.

        numpy converts float16 one element at a time, so the conversions dominate: each
        element is converted once into the wire buffer and once per rank out of the gathered
        one, straight into reused buffers (no concatenated copy, no allocation per call).
        """
        n = self.world_size
        total = sum(p.size for p in parts)
        send = self._pack_half(self._scratch(total, np.float16, "send"), parts)
        for lo, hi in self._half_chunks(total):
            recv = self._scratch(n * (hi - lo), np.float16, "recv").reshape(n, hi - lo)
            self._allgather(send[lo:hi], recv)
            acc = self._scratch(hi - lo, np.float32, "acc")
            self._half_accumulate(recv, acc)
            _unpack(acc, lo, parts)

    def all_reduce_half(self, x, op: str = "sum") -> None:
        """All-reduce a float32 tensor with float16 on the wire (SINGA's ``synchHalf``)."""
        c = _ct(x)
        self._checked("all_reduce_half", [c], op=op)
        if c.dtype_code != _dtype.kFloat32:
            raise DistError(f"all_reduce_half: expects a float32 tensor, got "
                            f"{_dtype.name_of(c.dtype_code)}; use all_reduce for other dtypes")
        n = self.world_size

        def body(arrs):
            a = arrs[0].reshape(-1)
            self._half_sum([a])
            if op == "mean":
                _divide(a, n)

        self._exec("AllReduceHalf", [c], body)

    def sparse_all_reduce(self, x, spars: float = 0.05, topK: bool = False,
                          residual=None, check=None) -> None:
        """Sum only the significant entries of ``x`` over all ranks (see the module doc).

        ``spars`` is the threshold on :math:`|g|` (``topK=False``) or the kept fraction
        (``topK=True``). ``residual`` (a tensor of x's size, or None) is the error-feedback
        accumulation: added to x first, then set to what was not sent.
        """
        grads = [_ct(g) for g in (x if isinstance(x, (list, tuple)) else [x])]
        self._checked("sparse_all_reduce", grads, check, spars=spars, topK=bool(topK))
        for c in grads:
            if c.dtype_code != _dtype.kFloat32:
                raise DistError("sparse_all_reduce: expects float32 tensors, got "
                                f"{_dtype.name_of(c.dtype_code)}")
        if topK and not 0 < spars <= 1:
            raise ValueError(f"sparse_all_reduce: with topK, spars is the kept fraction in "
                             f"(0, 1], got {spars}")
        total = sum(c.Size() for c in grads)
        cts = list(grads)
        if residual is not None:
            r = _ct(residual)
            if r.Size() != total or r.dtype_code != _dtype.kFloat32:
                raise DistError(f"sparse_all_reduce: residual has {r.Size()} elements "
                                f"({_dtype.name_of(r.dtype_code)}), the tensors {total} (float32)")
            cts.append(r)
        ng = len(grads)

        def body(arrs):
            res = arrs[ng].reshape(-1) if residual is not None else None
            if ng == 1:
                self._sparse(arrs[0].reshape(-1), res, float(spars), bool(topK))
                return
            flat = self.xp.concatenate([a.reshape(-1) for a in arrs[:ng]])
            self._sparse(flat, res, float(spars), bool(topK))
            pos = 0
            for a in arrs[:ng]:
                a.reshape(-1)[...] = flat[pos:pos + a.size]
                pos += a.size

        self._exec("SparseAllReduce", cts, body)

    def _sparse(self, g, res, spars, topk) -> None:
        xp = self.xp
        if res is not None:
            g += res
        if topk:
            k = min(g.size, int(math.ceil(spars * g.size)))
            idx = _top_k(xp, xp.abs(g), k)
        else:
            idx = xp.flatnonzero(xp.abs(g) >= spars)
        idx = idx.astype(np.int32)
        vals = g[idx]
        if res is not None:
            res[...] = g
            res[idx] = 0
        counts = self._allgather_object(int(idx.size))
        total = sum(counts)
        all_idx = xp.empty(total, np.int32)
        all_val = xp.empty(total, np.float32)
        self._allgatherv(idx, all_idx, counts)
        self._allgatherv(xp.ascontiguousarray(vals, np.float32), all_val, counts)
        g[...] = 0
        pos = 0
        for cnt in counts:  # rank order, so every rank sums in the same order
            # a rank's indices are distinct, so a fancy-index add is exact (no add.at needed)
            sel = all_idx[pos:pos + cnt]
            g[sel] += all_val[pos:pos + cnt]
            pos += cnt

    def broadcast(self, x, root: int = 0) -> None:
        """In place: every rank's ``x`` becomes ``root``'s."""
        c = _ct(x)
        self._checked("broadcast", [c], root=root)
        self._check_rank("broadcast", root)
        self._exec("Broadcast", [c], lambda arrs: self._bcast(arrs[0], root))

    def all_gather(self, x):
        """A new tensor of shape ``(world_size, *x.shape)``: every rank's ``x`` in rank order."""
        from .tensor import Tensor

        c = _ct(x)
        self._checked("all_gather", [c])
        out = CTensor._new((self.world_size,) + tuple(c.dims), c.dev, c.dtype_code)

        def body(arrs):
            self._allgather(self.xp.ascontiguousarray(arrs[0]), arrs[1])

        self._exec_rw("AllGather", [c], [out], body)
        return Tensor._wrap(out)

    def _exec_rw(self, name, ins, outs, body) -> None:
        dev = ins[0].dev
        tok = self._token(dev)

        def fn():
            with self._device_context(dev):
                staged_in = [self._stage(dev, c)[0] for c in ins]
                staged_out = [self._stage(dev, c) for c in outs]
                body(staged_in + [a for a, _ in staged_out])
                for c, (a, s) in zip(outs, staged_out):
                    if s:
                        dev.numpy_into_native(a, dev.native(c))

        dev.exec(fn, [c.block for c in ins] + [tok.block],
                 [c.block for c in outs] + [tok.block], "Dist." + name)

    def barrier(self) -> None:
        """Wait for every rank (not recorded in graphs: it touches no tensor)."""
        self._checked("barrier", [])
        self._barrier()

    def put(self, x, dest: int, tag: int = 0, check=None) -> None:
        """Send ``x`` to rank ``dest`` (the seed's ``put``); pairs with ``get`` there. With
        validation (``check``, default :attr:`validate`) the two ranks first exchange what
        they call, and a get of another dtype, size or tag is an error on both."""
        self._check_rank("put", dest)
        c = _ct(x)
        self._checked_peer("put", c, dest, tag, check)
        self._exec("Put", [c], lambda arrs: self._send(arrs[0], dest, tag), write=False)

    def get(self, x, source: int, tag: int = 0, check=None) -> None:
        """Receive into ``x`` what rank ``source`` ``put`` (same dtype and number of
        elements, checked as in :meth:`put`)."""
        self._check_rank("get", source)
        c = _ct(x)
        self._checked_peer("get", c, source, tag, check)
        self._exec("Get", [c], lambda arrs: self._recv(arrs[0], source, tag))

    def start_all_reduce(self, xs, op: str = "sum", half: bool = False, check=None,
                         inplace: bool = False, overlap: bool = True) -> Work:
        """Start summing ``xs`` (one tensor or a list of one dtype, fused) without waiting;
        returns a :class:`Work` whose ``wait()`` completes it. Between the two the tensors
        may be read but not written. Recorded in graphs as ``Dist.AllReduceStart`` and
        ``Dist.AllReduceWait``, which the ``dist.overlap`` graph stage places (see
        :mod:`singa._distasync`): with ``overlap`` the start right after the tensors' last
        writer, else as late as possible; the wait right before their first reader.

        The values are copied at the start into the request's in-flight buffer (so a gradient
        that backward still reads is never changed under it): a tensor of the device when the
        communicator can use its arrays (in graph mode the memory planner then reserves it
        from the start to the wait), else a reused host buffer. ``inplace``: a single tensor
        is reduced in its own buffer (the start then counts as writing it: nothing may read it
        until the wait; the same values, so the same result). ``half``: float32 tensors
        travel as float16 and are summed in float32 in rank order, as
        :meth:`all_reduce_half`.
        """
        cts = [_ct(x) for x in (xs if isinstance(xs, (list, tuple)) else [xs])]
        # first: a rank alone with a bad argument raises with the others, never hangs them
        self._checked("start_all_reduce", cts, check, op=op, half=bool(half))
        if op not in ("sum", "mean"):
            raise ValueError(f"start_all_reduce: op must be 'sum' or 'mean', got {op!r}")
        dts = sorted({_dtype.name_of(c.dtype_code) for c in cts})
        if len(dts) > 1:
            raise DistError(f"start_all_reduce: the tensors of one call share one buffer and "
                            f"must have one dtype, got {', '.join(dts)}; start one call per "
                            "dtype")
        if half and cts[0].dtype_code != _dtype.kFloat32:
            raise DistError(f"start_all_reduce(half=True) expects float32 tensors, got "
                            f"{dts[0]}; use half=False for other dtypes")
        return _distasync.start_all_reduce(self, cts, op, half, inplace, overlap)

    def _device_arrays_usable(self, dev) -> bool:
        """Whether the primitives accept ``dev``'s native arrays in place (else: staging)."""
        ok = self._usable.get(dev)
        if ok is None:
            probe = CTensor._new((1,), dev, _dtype.kFloat32)
            probe.block.allocate()
            ok = self._usable[dev] = bool(self.accepts(dev.native(probe)))
        return ok

    def _take_host(self, n: int, dtype):
        """A flat host buffer of ``n`` elements, reused across calls (see :meth:`_give_host`)."""
        free = self._free_host.get((n, np.dtype(dtype)))
        return free.pop() if free else self.host_buffer(n, dtype)

    def _give_host(self, a) -> None:
        self._free_host.setdefault((a.size, a.dtype), []).append(a)

    def _scratch(self, n: int, dtype, tag: str):
        """A flat buffer of ``n`` elements for use within one call (one per tag, size and
        dtype, kept for the next call of the same size)."""
        key = (tag, n, np.dtype(dtype))
        a = self._scratches.get(key)
        if a is None:
            a = self._scratches[key] = self.host_buffer(n, dtype)
        return a

    def progress(self) -> None:
        """Advance started collectives (call while computing, e.g. between gradients)."""
        pending = self._pending
        if pending:
            self._progress(pending)

    def _check_rank(self, what, r) -> None:
        if not 0 <= int(r) < self.world_size:
            raise DistError(f"{what}: rank {r} does not exist (world size {self.world_size})")

    # SINGA's C++ names
    @property
    def MPIRankInGlobal(self) -> int:
        return self.rank

    @property
    def totalMPIRanksInGlobal(self) -> int:
        return self.world_size

    @property
    def MPIRankInLocal(self) -> int:
        return self.local_rank

    def synch(self, x) -> None:
        """SINGA's name for [`all_reduce`][singa.dist.Communicator.all_reduce]."""
        self.all_reduce(x)

    def fusedSynch(self, xs, send: bool = True) -> None:
        """SINGA's name for ``fused_all_reduce(xs)``.

        ``send`` is accepted for SINGA's signature; the tensors are reduced now either way.
        """
        self.fused_all_reduce(xs)

    def synchHalf(self, x) -> None:
        """SINGA's name for [`all_reduce_half`][singa.dist.Communicator.all_reduce_half]."""
        self.all_reduce_half(x)

    def wait(self) -> None:
        """SINGA's ``wait``: collectives here complete before returning (except started
        ones, which complete at their ``Work.wait``), so there is nothing to wait for."""
        return None


def _top_k(xp, mag, k):
    """Indices (ascending) of the ``k`` largest ``mag``, ties to the lower index: what a
    stable descending sort would keep, in O(n) (argpartition) instead of a full sort."""
    if k >= mag.size:
        return xp.arange(mag.size)
    if k == 0:
        return xp.zeros(0, np.int64)
    kth = xp.partition(mag, mag.size - k)[mag.size - k]
    above = xp.flatnonzero(mag > kth)
    ties = xp.flatnonzero(mag == kth)[:k - above.size]
    return xp.sort(xp.concatenate([above, ties]))


_COMMS: dict = {}
_COMMS_LOCK = threading.Lock()


def get_communicator(name: str | None = None, **options) -> Communicator:
    """The process's communicator of backend ``name`` (default ``SINGA_COMMUNICATOR``, else
    ``"mpi"``), created once per name and options by the plugin that provides it.

    Raises :class:`singa.errors.DeviceUnavailableError` naming the install command when no
    installed plugin provides it or it cannot run here, and :class:`singa.errors.PluginError`
    naming the plugin when its ``create`` raises, exits or returns something that is not a
    :class:`Communicator`.
    """
    name = name or _config.get("SINGA_COMMUNICATOR") or "mpi"
    key = (name, tuple(sorted(options.items(), key=lambda kv: kv[0])))
    with _COMMS_LOCK:
        comm = _COMMS.get(key) if _hashable(key) else None
        if comm is not None:
            return comm
        from ._plugins import registry

        # the plugin's create runs through the loader's guard: an exception, sys.exit() or
        # a result that is not a Communicator is a PluginError naming the plugin
        comm = registry().create_communicator(name, options, _returns_communicator)
        if _hashable(key):
            _COMMS[key] = comm
        return comm


def _returns_communicator(value) -> str | None:
    if isinstance(value, Communicator):
        return None
    return "a communicator's create(**options) must return a singa.dist.Communicator"


def _hashable(key) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True

