"""``DistOpt``: data-parallel training with SINGA's API, on any :class:`singa.dist.Communicator`.

Gradients stream out of :func:`singa.autograd.backward` in reverse-use order. They are grouped
into buckets as SINGA groups them: a gradient of more than ``threshold`` elements is a bucket
of its own, smaller ones are gathered until their total exceeds ``threshold``. With
``overlap`` (default) each bucket's all-reduce is started (non-blocking) as soon as the bucket
is complete, while backward still computes the rest; without it the same buckets are started
after backward. Both paths reduce the same buffers with the same calls, so they give bitwise
equal results.
"""

from __future__ import annotations

import contextlib

from . import _math, autograd
from .dist import Communicator, DistError, get_communicator

__all__ = ["DistOpt"]

_THRESHOLD = 2097152


def _device_of(t):
    return t.data.dev


class DistOpt:
    """Wrap optimizer ``opt`` for synchronous data-parallel training (SINGA's ``DistOpt``).

    Parameters
    ----------
    opt:
        The local optimizer (``singa.opt.DistOpt`` defaults to ``SGD()``); it applies the
        synchronised gradients.
    nccl_id, local_rank, world_size:
        ``nccl_id=None`` (MPI mode): the communicator named by ``communicator`` or
        ``SINGA_COMMUNICATOR`` (default ``"mpi"``), ranks from the launcher. Otherwise
        (multiprocess mode, one process per GPU): the ``"nccl"`` communicator with this NCCL
        unique id holder, GPU ``local_rank`` and ``world_size`` ranks.
    buffSize:
        Elements of the fused all-reduce buffer (SINGA's default 4194304).
    communicator:
        A :class:`singa.dist.Communicator` or a communicator name (overrides the above).
    overlap:
        Start each bucket's all-reduce while backward is still running (eager mode).

    Attributes
    ----------
    communicator, world_size, local_rank, global_rank:
        As in SINGA.
    """

    def __init__(self, opt=None, nccl_id=None, local_rank=None, world_size=None,
                 buffSize=4194304, communicator=None, overlap=True):
        if opt is None:
            raise TypeError("DistOpt needs the optimizer to wrap (singa.opt.DistOpt defaults "
                            "to SGD())")
        self.opt = opt
        if isinstance(communicator, Communicator):
            comm = communicator
        elif nccl_id is None:
            comm = get_communicator(communicator, buffSize=buffSize)
        else:
            comm = get_communicator(communicator or "nccl", nccl_id=nccl_id,
                                    local_rank=local_rank, world_size=world_size,
                                    buffSize=buffSize)
        self.communicator = comm
        self.world_size = comm.world_size
        self.local_rank = comm.local_rank
        self.global_rank = comm.rank
        self.overlap = bool(overlap)
        self._pending: list = []  # tensors queued by fused_all_reduce(send=False)
        self._accum: dict = {}  # id(param) -> accumulated gradient (no_sync)
        self._no_sync = False
        self._checked_params = False
        self._broadcast_done = False
        self._residuals: dict = {}  # sparse error feedback, per bucket index
        self.partial = 0

    # ------------------------------------------------------------------ SINGA's small API
    def __call__(self, loss):
        return self.backward_and_update(loss)

    def __getattr__(self, name):
        # the wrapped optimizer's attributes (lr_value, step_counter, get_states...)
        if name.startswith("__") or name == "opt":
            raise AttributeError(name)
        return getattr(self.opt, name)

    @property
    def rank_in_global(self) -> int:
        return self.global_rank

    @property
    def rank_in_local(self) -> int:
        return self.local_rank

    def update(self, param, grad):
        """Divide ``grad`` by the world size in place, then apply it (SINGA's ``update``)."""
        _math.imul(grad.data, 1.0 / self.world_size)
        self._apply(param, grad)

    def _apply(self, p, g):
        if p.name is None:
            p.name = str(id(p))
        self.opt.apply(p.name, p, g)

    def _begin_step(self):
        self.opt.__dict__["_derived"] = {}  # per-step hyper-parameter cache (see Optimizer)

    def step(self):
        """Advance the wrapped optimizer's step counter and schedules (``opt.step()``)."""
        self.opt.step()

    def all_reduce(self, tensor):
        """Sum ``tensor`` (a CTensor or Tensor) over all ranks in place (SINGA's ``synch``)."""
        self.communicator.all_reduce(tensor)

    def fused_all_reduce(self, tensors, send=True):
        """Sum a list of tensors through the fused buffer. ``send=False`` only queues them;
        the next call with ``send=True`` reduces everything queued (SINGA's ``fusedSynch``)."""
        self._pending.extend(tensors)
        if send and self._pending:
            queued, self._pending = self._pending, []
            self.communicator.fused_all_reduce(queued)

    def all_reduce_half(self, tensor):
        """``all_reduce`` with float16 on the wire (SINGA's ``synchHalf``)."""
        self.communicator.all_reduce_half(tensor)

    def fused_all_reduce_half(self, tensors, send=True):
        """``fused_all_reduce`` with float16 on the wire (SINGA's ``fusedSynchHalf``)."""
        self._pending.extend(tensors)
        if send and self._pending:
            queued, self._pending = self._pending, []
            self.communicator.fused_all_reduce(queued, half=True)

    def sparsification(self, tensor, accumulation, spars, topK):
        """Sparse all-reduce of one tensor; ``accumulation`` is the error-feedback residual
        (None: no correction)."""
        self.communicator.sparse_all_reduce(tensor, spars, topK, accumulation)

    def fused_sparsification(self, tensors, accumulation, spars, topK):
        """Sparse all-reduce of a list of tensors as one flat vector."""
        self.communicator.sparse_all_reduce(list(tensors), spars, topK, accumulation)

    def wait(self):
        """Complete outstanding communication (collectives here return completed)."""
        self.communicator.wait()

    # ------------------------------------------------------------------ beyond SINGA
    def broadcast_parameters(self, source, root=0):
        """Make every rank's parameters and buffers equal to ``root``'s.

        ``source`` is a Model/Layer (its ``get_states()``: parameters and buffers such as
        BatchNorm's running statistics), a dict of tensors, or a list of tensors. Runs
        eagerly even while a graph is being recorded (it is a one-time start-up step).
        """
        if hasattr(source, "get_states"):
            tensors = list(source.get_states().values())
        elif isinstance(source, dict):
            tensors = list(source.values())
        else:
            tensors = list(source)
        if not tensors:
            return
        self._eagerly(tensors, lambda: [self.communicator.broadcast(t, root) for t in tensors])
        self._broadcast_done = True

    @staticmethod
    def _eagerly(tensors, fn):
        devs = {id(t.data.dev): t.data.dev for t in tensors}.values()
        with contextlib.ExitStack() as eager:
            for d in devs:
                eager.enter_context(d.record(None))
            fn()

    @contextlib.contextmanager
    def no_sync(self):
        """Accumulate gradients locally without communicating or updating (DDP's
        ``no_sync``): inside the block each ``backward_and_update*`` call only adds its
        gradients to a local sum; the first call after the block synchronises the sum of
        the accumulated and the new gradients, then updates."""
        prev, self._no_sync = self._no_sync, True
        try:
            yield self
        finally:
            self._no_sync = prev

    def _gradients(self, loss):
        """``(param, grad)`` pairs from backward, with no_sync accumulations folded in; None
        when the step only accumulates."""
        pairs = autograd.backward(loss, retain_graph=False)
        if self._no_sync:
            for p, g in pairs:
                acc = self._accum.get(id(p))
                if acc is None:
                    self._accum[id(p)] = (p, _math.copy(g.data))
                else:
                    _math.iadd(acc[1], g.data)
            return None
        return self._fold(pairs)

    def _fold(self, pairs):
        for p, g in pairs:
            acc = self._accum.pop(id(p), None)
            if acc is not None:
                _math.iadd(g.data, acc[1])
            yield p, g

    def _first_step(self, params):
        if not self._checked_params:
            self.communicator.check_consistent("DistOpt parameters", [p.data for p in params])
            self._checked_params = True
        if not self._broadcast_done:
            self.broadcast_parameters(params)

    # ------------------------------------------------------------------ training steps
    @staticmethod
    def _buckets(pairs, threshold, on_bucket):
        """Group gradients as SINGA does; ``on_bucket(list_of_pairs)`` for each bucket as soon
        as it is complete. Returns every pair in backward order."""
        seen, small, acc = [], [], 0
        for p, g in pairs:
            seen.append((p, g))
            if g.size() > threshold:
                on_bucket([(p, g)])
            else:
                small.append((p, g))
                acc += g.size()
                if acc > threshold:
                    on_bucket(small)
                    small, acc = [], 0
        if small:
            on_bucket(small)
        return seen

    def _sync_step(self, loss, threshold, half):
        pairs = self._gradients(loss)
        if pairs is None:
            return
        comm = self.communicator
        works, deferred = [], []

        def start(bucket):
            works.append(comm.start_all_reduce(
                [g for _, g in bucket], "mean", half=half, check=not self._checked_params,
                # after backward nothing else reads a gradient: reduce it in its own buffer
                inplace=not self.overlap, overlap=self.overlap))

        def on_bucket(bucket):
            if self.overlap:
                start(bucket)
                comm.progress()
            else:
                deferred.append(bucket)

        def progressing(it):
            for pair in it:
                comm.progress()  # MPI advances started requests only inside MPI calls
                yield pair

        seen = self._buckets(progressing(pairs), threshold, on_bucket)
        if not seen:
            return
        self._first_step([p for p, _ in seen])
        for bucket in deferred:
            start(bucket)
        for w in works:
            w.wait()
        self._begin_step()
        for p, g in seen:
            self._apply(p, g)  # already the mean over ranks
        self.opt.step()

    def backward_and_update(self, loss, threshold=_THRESHOLD):
        """Backward, all-reduce every gradient (fused in buckets), average, update, step."""
        self._sync_step(loss, threshold, half=False)

    def backward_and_update_half(self, loss, threshold=_THRESHOLD, clipping=False,
                                 clip_Value=100):
        """As :meth:`backward_and_update` with float16 on the wire (float32 parameters and
        gradients); ``clipping`` clips each gradient to [-clip_Value, clip_Value] first."""
        if clipping:
            pairs = self._gradients(loss)
            if pairs is None:
                return
            loss = None
            pre = ((p, autograd.clip(g, -clip_Value, clip_Value)) for p, g in pairs)
            self._sync_pairs(pre, threshold)
            return
        self._sync_step(loss, threshold, half=True)

    def _sync_pairs(self, pairs, threshold):
        saved = self._gradients
        self._gradients = lambda _loss: pairs
        try:
            self._sync_step(None, threshold, half=True)
        finally:
            self._gradients = saved

    def backward_and_partial_update(self, loss, threshold=_THRESHOLD):
        """Local update with every gradient, then average the parameters of one partition
        over the ranks (SINGA's partial update: partitions formed like the buckets, one per
        iteration, cycling). In graph mode the partition counter advances at run time."""
        pairs = self._gradients(loss)
        if pairs is None:
            return
        if not (self._checked_params and self._broadcast_done):
            pairs = list(pairs)  # first step: start from rank 0's parameters, then update
            self._first_step([p for p, _ in pairs])
        self._begin_step()
        parts = []

        def local(it):
            for p, g in it:
                self._apply(p, g)
                yield p, p  # partitions are formed on the parameters

        seen = self._buckets(local(pairs), threshold, lambda b: parts.append([p for p, _ in b]))
        if not seen:
            return
        self.opt.step()
        self._partial_average(parts)

    def _partial_average(self, parts):
        comm = self.communicator
        cts = [p.data for part in parts for p in part]
        bounds, pos = [], 0
        for part in parts:
            bounds.append((pos, pos + len(part)))
            pos += len(part)
        state = self  # the counter lives on self so eager and replayed graphs share it
        n = comm.world_size

        def body(arrs):
            state.partial += 1
            k = state.partial
            lo, hi = bounds[k - 1] if k <= len(bounds) else (0, 0)
            chosen = arrs[lo:hi]
            groups: dict = {}
            for a in chosen:
                groups.setdefault(a.dtype, []).append(a)
            for dt, group in groups.items():
                comm._fused_rounds(group, dt, "sum")
                for a in group:
                    a /= a.dtype.type(n)
            if k >= len(bounds):
                state.partial = 0

        comm._exec("PartialAllReduce", cts, body)

    def backward_and_sparse_update(self, loss, threshold=_THRESHOLD, spars=0.05, topK=False,
                                   corr=True):
        """Send only significant gradient entries: ``|g| >= spars`` (``topK=False``) or the
        ``spars`` fraction of largest ``|g|`` (``topK=True``), summed over ranks, divided by
        the world size, applied. ``corr`` keeps what was not sent as a residual added to the
        next step's gradients (error feedback), one residual per bucket."""
        spars = 0.05 if spars is None else float(spars)
        pairs = self._gradients(loss)
        if pairs is None:
            return
        buckets = []
        seen = self._buckets(pairs, threshold, buckets.append)
        if not seen:
            return
        self._first_step([p for p, _ in seen])
        for k, bucket in enumerate(buckets):
            grads = [g.data for _, g in bucket]
            res = None
            if corr:
                total = sum(g.Size() for g in grads)
                res = self._residuals.get(k)
                if res is None or res.Size() != total:
                    res = self._residuals[k] = self._zeros(total, grads[0].dev)
            self.communicator.sparse_all_reduce(grads, spars, topK, res, check=False)
        self._begin_step()
        for p, g in seen:
            self.update(p, g)
        self.opt.step()

    @staticmethod
    def _zeros(n, dev):
        """A zero float32 tensor made now, even while a graph records (state, not a step)."""
        from . import tensor as tensor_mod

        with dev.record(None):
            t = tensor_mod.Tensor((n,), dev, tensor_mod.float32, requires_grad=False)
            t.set_value(0.0)
        return t.data

    def get_states(self):
        """Refuse, as SINGA does: the states to save are the wrapped optimizer's.

        Raises
        ------
        singa.dist.DistError
            Always; the message names ``dist_opt.opt.get_states()``.
        """
        raise DistError("DistOpt has no get_states (as in SINGA); save the wrapped "
                        "optimizer's states: dist_opt.opt.get_states()")
