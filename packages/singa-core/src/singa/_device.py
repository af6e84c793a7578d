"""The Device base class: one choke point (``exec``) for every operation on device memory."""

from __future__ import annotations

import contextvars
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol, cast

import numpy as np

from ._dtype import NP_DTYPE
from ._kernel import Kernel, as_kernel
from ._kernelguard import FAULTS, kernel_failure
from ._spec import BackendSpec
from .errors import (
    GraphError,
    HostFallbackWarning,
    HyperparameterError,
    MissingKernelError,
    SingaError,
)
from .memory import Allocator, Block, MemPool

__all__ = ["Device", "HOST_DRAWS", "Recorder", "set_graph_class"]

#: What ``EnableGraph`` creates when the calling thread has no graph yet: the
#: :class:`singa.graph.Graph` class, set by :mod:`singa.graph` when it is imported (the graph
#: plans over CTensors and the op table, which sit above the device layer, so the device never
#: imports it). Backends import :mod:`singa.backend`, which imports :mod:`singa.graph`, so it
#: is set before their devices exist; with a device from elsewhere, ``EnableGraph`` before
#: anything imported :mod:`singa.graph` raises a GraphError that says so.
class _DeviceGraph(Protocol):
    """What a device records into and replays (:class:`singa.graph.Graph`, which the device
    layer never imports): the calls the device makes on a graph."""

    device: Device
    iteration: int
    profiler: Any

    def add_operation(self, fn: Callable[[], Any], reads: Sequence[Block],
                      writes: Sequence[Block], name: str = "") -> Any: ...

    def run(self, serial: bool = False) -> None: ...

    def reset(self) -> None: ...

    def profiling_report(self) -> str: ...

    def export_chrome_trace(self, path: str) -> None: ...


_graph_class: Callable[[Device], _DeviceGraph] | None = None


def set_graph_class(cls: Callable[[Device], _DeviceGraph]) -> None:
    """Make ``cls(device)`` what ``Device.EnableGraph`` records into by default.

    Parameters
    ----------
    cls : callable
        ``cls(device)`` returns a new graph of ``device`` (:class:`singa.graph.Graph`).
    """
    global _graph_class
    _graph_class = cls


class Recorder:
    """``with dev.record(graph):`` the calling context's ops are recorded into ``graph`` (None:
    run eagerly), and whatever recorded before is restored on exit, exception or not.

    ``graph`` is anything with ``add_operation(fn, reads, writes, name)``. Not reentrant: each
    ``record`` call makes a new one.
    """

    __slots__ = ("_var", "_graph", "_token")

    def __init__(self, var: contextvars.ContextVar[_DeviceGraph | None],
                 graph: _DeviceGraph | None):
        self._var = var
        self._graph = graph
        self._token: contextvars.Token[_DeviceGraph | None] | None = None

    def __enter__(self) -> _DeviceGraph | None:
        self._token = self._var.set(self._graph)
        return self._graph

    def __exit__(self, *exc: object) -> Literal[False]:
        assert self._token is not None  # __enter__ ran
        self._var.reset(self._token)
        return False


def _uniform(rng: np.random.Generator, shape: tuple[int, ...], dtype: int, low: float,
             high: float) -> np.ndarray:
    """Draws on [low, high): a draw that rounds up to ``high`` in the output dtype is moved to
    the largest value below it."""
    x = rng.uniform(low, high, shape).astype(NP_DTYPE[dtype])
    top = np.nextafter(NP_DTYPE[dtype].type(high), NP_DTYPE[dtype].type(low))
    return np.minimum(x, top) if x.dtype.kind == "f" else x


#: Host samplers of the random ops, ``draw(rng, **attrs) -> array``: what the host fallback
#: runs for an op declared ``random`` (whose numpy reference is only the expected value).
HOST_DRAWS: dict[str, Callable[..., Any]] = {
    "Gaussian": lambda rng, shape, dtype, mean, std: rng.normal(mean, std, shape),
    "Uniform": _uniform,
    "Bernoulli": lambda rng, shape, dtype, p: rng.random(shape) < p,
}


class Device:
    """A compute device: memory pool, kernel table, execution and graph control.

    Backends subclass it and implement :meth:`native`, :meth:`native_to_numpy`,
    :meth:`numpy_into_native`, :meth:`synchronize` and (optionally) :meth:`_seed` and
    :meth:`_timed_call`. Everything else (lazy allocation, graph buffering, profiling, block
    freeing, host fallback) is backend-independent and lives here.

    Every operation that touches device memory goes through :meth:`exec`.
    """

    #: Language tag, as SINGA's ``lang_``: ``"cpp"``, ``"cuda"``, ``"opencl"``.
    lang = "cpp"
    #: SINGA's static lazy-allocation switch (``Device.EnableLazyAlloc``).
    lazy_alloc = True
    #: The float32 precisions a device accepts (PyTorch's ``set_float32_matmul_precision``
    #: names): ``"highest"``, full float32 arithmetic; ``"high"``, the backend may use a
    #: reduced-precision float32 format where the hardware has one (TF32 convolutions on
    #: NVIDIA GPUs, about 1e-3 relative error). Backends without one ignore it.
    FLOAT32_PRECISIONS = ("highest", "high")
    _float32_precision = "highest"

    @property
    def float32_precision(self) -> str:
        """How precisely this device computes float32 convolutions (see
        :data:`FLOAT32_PRECISIONS`); settable, read by the kernels at each call."""
        return self._float32_precision

    @float32_precision.setter
    def float32_precision(self, value: str) -> None:
        if value not in self.FLOAT32_PRECISIONS:
            raise HyperparameterError(
                f"{self.name}: float32_precision={value!r} is not one of "
                f"{', '.join(map(repr, self.FLOAT32_PRECISIONS))}; use 'highest' for full "
                "float32 or 'high' to allow TF32-like formats")
        self._float32_precision = value


    def __init__(self, backend: str, index: int, allocator: Allocator):
        self.backend = backend
        self.index = index
        self.pool = MemPool(allocator, self.name)
        self.kernels: dict[str, tuple[Kernel, bool, frozenset | None]] = {}
        self._workspaces: dict[str, Any] = {}
        self.spec: BackendSpec | None = None
        self.host_fallback = False
        self.fallback_ops: dict[str, int] = {}
        # What exec records into (None: run now), and the graph that the SINGA calls
        # (EnableGraph, RunGraph, ResetGraph, use_graph) work on. Context variables: a thread
        # starts with an empty context, so with no graph and recording off, and threads that
        # train their own models on one device never record into each other's graphs (see
        # docs/architecture.md, "Threads").
        self._recorder: contextvars.ContextVar[_DeviceGraph | None] = contextvars.ContextVar(
            f"singa.recorder[{self.name}]", default=None)
        self._slot: contextvars.ContextVar[_DeviceGraph | None] = contextvars.ContextVar(
            f"singa.graph_slot[{self.name}]", default=None)
        # what PrintTimeProfiling reports on (set by Graph.run)
        self._last_run_graph: _DeviceGraph | None = None
        self._verbosity = 0
        self._skip_iteration = 5
        # one seed for every generator of the device, until SetRandSeed replaces it
        # a SeedSequence made without entropy draws an int from the OS
        self._seed_value = int(cast(int, np.random.SeedSequence().entropy) % (1 << 63))
        self._host_rng: np.random.Generator | None = None  # created at first use
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ recording
    def record(self, graph: _DeviceGraph | None) -> Recorder:
        """``with dev.record(graph):`` record this context's ops on the device into
        ``graph`` (a :class:`singa.graph.Graph` of this device), then restore what recorded
        before; ``dev.record(None)`` runs the block eagerly (state made mid-recording)."""
        if graph is not None and getattr(graph, "device", self) is not self:
            raise GraphError(f"record: the graph belongs to {graph.device.name}, "
                             f"not {self.name}")
        return Recorder(self._recorder, graph)

    def recorder(self) -> _DeviceGraph | None:
        """The graph this context's ops are recorded into, or None when they run now."""
        return self._recorder.get()

    @property
    def _graph(self) -> _DeviceGraph | None:
        """The calling context's graph of the SINGA calls (``EnableGraph``, ``RunGraph``)."""
        return self._slot.get()

    @property
    def _graph_enabled(self) -> bool:
        return self._recorder.get() is not None

    # ------------------------------------------------------------------ identity
    @property
    def name(self) -> str:
        """Canonical device string, e.g. ``"cpu"`` or ``"opencl:0"``."""
        return self.backend if self.index < 0 else f"{self.backend}:{self.index}"

    def id(self) -> int:
        """SINGA's device id: -1 for the CPU, the ordinal for accelerators."""
        return self.index

    def host(self) -> Device:
        """The host (CPU) device (not the default device, which SINGA_DEVICE may change)."""
        from ._plugins import registry

        return registry().device("cpu", 0)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def _attach(self, spec: BackendSpec, kernel_table: Mapping[str, Any]) -> None:
        """Called by the registry after construction with the backend record and kernels.

        Each entry of ``kernel_table`` becomes a :class:`~singa.backend.Kernel` record (see
        :func:`singa.ops.as_kernel`); :attr:`kernels` maps op names to
        ``(record, contiguous_inputs, frozenset of dtypes or None)``, the tuple the dispatcher
        unpacks per call."""
        self.spec = spec
        self.host_fallback = bool(spec.host_fallback)
        owner = getattr(spec, "name", self.backend)
        table = {}
        for op_name, value in dict(kernel_table).items():
            k = as_kernel(value, op_name, owner)
            table[op_name] = (k, k.contiguous_inputs,
                              frozenset(k.dtypes) if k.dtypes is not None else None)
        self.kernels = table

    def workspace(self, key: str, create: Callable[[], Any] | None = None) -> Any:
        """The object a backend keeps per device under ``key`` (scratch buffers, plan caches):
        made by ``create()`` on the first request and kept for the device's life.

        Without ``create``, the object made earlier; a ``key`` never created raises
        :class:`~singa.errors.MissingKernelError` naming the keys that exist.
        """
        found = self._workspaces.get(key)
        if found is None:
            if create is None:
                raise MissingKernelError(
                    f"device {self.name} has no workspace {key!r} (it has: "
                    f"{', '.join(sorted(self._workspaces)) or 'none'}); a backend creates one "
                    "with device.workspace(key, create)")
            found = self._workspaces[key] = create()
        return found

    # ------------------------------------------------------------------ backend interface
    def native(self, ct: Any) -> Any:
        """The backend's array view of CTensor ``ct`` (shape, strides, offset applied).

        Backends implement :meth:`make_native`; this caches its view on ``ct`` until the
        tensor's block holds another buffer (a graph's arena, a reallocation), so an op pays
        one identity check per tensor. A backend may override ``native`` itself instead."""
        buf = ct.block.data
        if ct._vbuf is buf:  # core owns the cache fields; backends never touch them
            return ct._view
        view = self.make_native(ct, buf)
        ct._view = view
        ct._vbuf = buf
        return view

    def make_native(self, ct: Any, buf: Any) -> Any:
        """A new native view of CTensor ``ct`` over ``buf`` (its block's allocator buffer):
        ``ct.dims`` elements of dtype ``ct.dtype_code`` starting ``ct.offset`` elements in,
        ``ct.strides`` elements apart (``ct.contig``: row-major). Called by :meth:`native` on a
        cache miss."""
        raise NotImplementedError(
            f"{type(self).__name__} implements neither make_native(ct, buf) nor native(ct)")

    def native_to_numpy(self, arr: Any) -> Any:
        """Copy a native array view to a new numpy array of the same shape."""
        raise NotImplementedError

    def numpy_into_native(self, src: np.ndarray, arr: Any) -> None:
        """Copy numpy array ``src`` (same shape) into native view ``arr``, converting to the
        view's dtype (the host fallback passes the reference's result as computed)."""
        raise NotImplementedError

    def synchronize(self) -> None:
        """Block until all queued work on this device has finished."""

    def _seed(self, seed: int) -> None:
        """Reseed the backend's own random generator (called by :meth:`SetRandSeed`, after
        :attr:`host_generator` was reseeded). Backends with native random kernels override
        it; the default does nothing."""

    def chain_compiler(self) -> Any:
        """What compiles elementwise chains for graph mode and for eager optimizer updates (see
        :class:`singa.ops.ElementwiseChain`), or None (the default: no chain fusion). It has
        ``ops`` (the op names it can chain) and ``dtypes`` (dtype codes), and
        ``compile(chain)`` returns a kernel ``fn(ins, outs, attrs)`` whose ``ins`` are the
        chain's operands in order (written ones included; ``outs`` is empty)."""
        return None

    def _timed_call(self, fn: Callable[[], Any]) -> float:
        """Run ``fn`` and return its duration in seconds, measured by the device's clock."""
        import time

        self.synchronize()
        t0 = time.perf_counter()
        fn()
        self.synchronize()
        return time.perf_counter() - t0

    # ------------------------------------------------------------------ execution
    def new_block(self, nbytes: int) -> Block:
        """A new :class:`~singa.memory.Block` of ``nbytes`` bytes from this device's pool.

        Parameters
        ----------
        nbytes : int
            Size of the block in bytes.

        Returns
        -------
        Block
            Without memory until first written (lazy allocation), or allocated now when
            :attr:`lazy_alloc` is off (``EnableLazyAlloc(False)``).
        """
        blk = Block(nbytes, self.pool)
        if not Device.lazy_alloc:
            blk.allocate()
        return blk

    def exec(self, fn: Callable[[], Any], reads: Sequence[Block], writes: Sequence[Block],
             name: str = "") -> None:
        """Run ``fn()`` now, or record it as a graph node when the graph is enabled.

        ``reads`` and ``writes`` are the Blocks ``fn`` reads and writes. Written blocks get
        memory here (lazy allocation); a read block that was never written reads zeros. An
        operation that writes only part of a block must list it in ``reads`` too, so that the
        rest reads as zeros (``ops.run`` does this for outputs that do not cover their block).
        """
        graph = self._recorder.get()
        if graph is not None:
            # a recorded write counts as a write for autograd's in-place check, which runs
            # while recording: a backward through a recorded update is caught as in eager mode
            for b in writes:
                b.version += 1
            graph.add_operation(fn, reads, writes, name)
            return
        for b in reads:  # first: an in-place op reads its never-written output as zeros
            if b.data is None:
                b.allocate(zero=True)
        for b in writes:
            if b.data is None:
                b.data, b.cls = b.pool.malloc(b.nbytes)
            b.version += 1
        try:
            fn()
        except SingaError:
            raise
        except FAULTS as exc:  # plugin code: never a raw library error or a process exit
            raise kernel_failure(exc, name, self) from exc

    def kernel(self, op: Any) -> tuple[Kernel, bool, frozenset | None]:
        """``(kernel, needs_contiguous_inputs, dtypes or None)`` for op record ``op``.

        An op without a kernel runs on the host when the backend opted in
        (``BackendSpec.host_fallback``): the first lookup warns once for that op with a
        :class:`singa.errors.HostFallbackWarning` naming it, and every call is counted in
        :meth:`fallback_stats`. Random ops fall back to :attr:`host_generator` (seeded by
        :meth:`SetRandSeed`); a random op core has no host sampler for is refused.
        """
        try:
            return self.kernels[op.name]
        except KeyError:
            pass
        if not self.host_fallback:
            raise MissingKernelError(
                f"operator {op.name!r} has no kernel on device {self.name} (backend "
                f"{self.backend!r}) and the backend does not enable host fallback. "
                f"Move the tensors to a device that supports it, e.g. x.to_device("
                f"singa.device.get_default_device()), or add a {op.name!r} kernel to the backend."
            )
        if op.random and op.name not in HOST_DRAWS:
            raise MissingKernelError(
                f"random operator {op.name!r} has no kernel on device {self.name} (backend "
                f"{self.backend!r}) and cannot fall back to the host: its numpy reference gives "
                f"the expected value, not draws, and core has no host sampler for it. Add a "
                f"{op.name!r} kernel to the backend."
            )
        fallen = sorted([n for n, e in self.kernels.items()
                         if e[0].host_fallback] + [op.name])
        warnings.warn(
            f"operator {op.name!r} has no kernel on {self.name} (backend {self.backend!r}); "
            f"running it on the host through "
            + ("the host generator (seeded by SetRandSeed)" if op.random else
               "its numpy reference")
            + f" (slow: copies to host and back). Ops on the host fallback so far: "
            f"{', '.join(fallen)}; call counts: device.fallback_stats()",
            HostFallbackWarning,
            stacklevel=4,
        )
        entry = (self._make_fallback(op), True, None)  # the reference wants whole arrays
        self.kernels[op.name] = entry
        return entry

    def _make_fallback(self, op: Any) -> Kernel:
        """A kernel running ``op`` on the host: copy the inputs to numpy, compute, copy back.

        Deterministic ops compute their numpy reference; random ops draw from
        :attr:`host_generator` through :data:`HOST_DRAWS` (their reference is only the
        expected value).
        """
        dev = self
        draw = HOST_DRAWS.get(op.name) if op.random else None

        def host_fallback(ins: list[Any], outs: list[Any], attrs: dict[str, Any]) -> None:
            counts = dev.fallback_ops
            counts[op.name] = counts.get(op.name, 0) + 1
            if draw is not None:
                res = draw(dev.host_generator, **attrs)
            else:
                res = op.reference(*[dev.native_to_numpy(a) for a in ins], **attrs)
            if not isinstance(res, tuple):
                res = (res,)
            for o, r in zip(outs, res):
                dev.numpy_into_native(np.asarray(r), o)

        return Kernel(host_fallback, host_fallback=True)

    def fallback_stats(self) -> dict[str, int]:
        """``{op name: calls}`` of the ops that ran through the host fallback on this device.

        Each call counts once, also when a graph replays it; ops with native kernels never
        appear. :meth:`memory_stats` has the total as ``host_fallback_calls``.
        """
        return dict(self.fallback_ops)

    @property
    def rand_seed(self) -> int:
        """The seed of the device's random generators: the last :meth:`SetRandSeed` value, or
        one drawn from the OS at construction. A backend that creates its own generator in
        ``__init__`` seeds it with this (``SetRandSeed`` then reseeds it through ``_seed``)."""
        return self._seed_value

    @property
    def host_generator(self) -> np.random.Generator:
        """The numpy generator the host fallback of random ops draws from; seeded from
        :attr:`rand_seed` and reseeded by :meth:`SetRandSeed`. Backends may use it too."""
        rng = self._host_rng
        if rng is None:
            rng = self._host_rng = np.random.default_rng(self._seed_value)
        return rng

    # ------------------------------------------------------------------ SINGA device API
    def SetRandSeed(self, seed: int) -> None:
        """Seed the device's random number generators: the backend's own (through the
        ``_seed`` hook) and :attr:`host_generator`, so draws after it are reproducible."""
        self._seed_value = int(seed)
        self._host_rng = np.random.default_rng(self._seed_value)
        self._seed(self._seed_value)

    def Sync(self) -> None:
        """Wait for queued work; in graph mode this records a "Waiting" sync node."""
        self.exec(self.synchronize, [], [], "Waiting")

    sync = Sync

    # SINGA's graph calls work on the calling context's graph slot; a Model records with
    # ``record`` into a graph it owns and replays it itself, never through the slot.
    def _ensure_graph(self) -> _DeviceGraph:
        graph = self._slot.get()
        if graph is None:
            if _graph_class is None:
                raise GraphError(f"EnableGraph on {self.name}: singa.graph is not imported "
                                 "(import singa.graph, or singa.backend, first)")
            graph = _graph_class(self)
            self._slot.set(graph)
        return graph

    def use_graph(self, graph: _DeviceGraph | None) -> _DeviceGraph | None:
        """Install ``graph`` (a :class:`singa.scheduler.Graph` of this device) as the one that
        EnableGraph records into and RunGraph runs, for the calling thread; returns the
        thread's previous one. While recording into the previous one, recording moves to
        ``graph``. ``with dev.record(graph):`` is the scoped form."""
        if graph is not None and graph.device is not self:
            raise GraphError(f"use_graph: the graph belongs to {graph.device.name}, "
                             f"not {self.name}")
        prev = self._slot.get()
        self._slot.set(graph)
        if prev is not None and self._recorder.get() is prev:
            self._recorder.set(graph)
        return prev

    def EnableGraph(self, enable: bool = True) -> None:
        """Start (True) or stop (False) recording the calling thread's exec'd operations into
        its graph (other threads keep running eagerly or recording into their own). The
        unscoped form of :meth:`record`: nothing is restored afterwards."""
        self._recorder.set(self._ensure_graph() if enable else None)

    def graph_enabled(self) -> bool:
        """Whether the calling thread's ops on this device are being recorded."""
        return self._recorder.get() is not None

    def RunGraph(self, serial: bool = False) -> None:
        """Run the recorded graph once: BFS order, or insertion order when ``serial``."""
        graph = self._slot.get()
        if graph is None:
            raise GraphError(f"RunGraph on {self.name}: no graph was recorded (EnableGraph first)")
        graph.run(serial)

    def ResetGraph(self) -> None:
        """Discard the recorded graph (its nodes and profiling data)."""
        graph = self._slot.get()
        if graph is not None:
            graph.reset()

    def Reset(self) -> None:
        """Disable the graph, sync, clear it and reset verbosity and skip count."""
        self._recorder.set(None)
        self.synchronize()
        self.ResetGraph()
        self._verbosity = 0
        self._skip_iteration = 5

    def SetVerbosity(self, verbosity: int) -> None:
        """Time-profiling level: 0 off, 1 forward/backward totals, 2 per op, 3 Dist ops."""
        self._verbosity = int(verbosity)

    def verbosity(self) -> int:
        """The time-profiling level set by :meth:`SetVerbosity` (0: off)."""
        return self._verbosity

    def SetSkipIteration(self, n: int) -> None:
        """Number of warm-up graph iterations excluded from time profiling (default 5)."""
        self._skip_iteration = int(n)

    def skip_iteration(self) -> int:
        """The number of warm-up graph iterations that time profiling skips
        (:meth:`SetSkipIteration`)."""
        return self._skip_iteration

    def PrintTimeProfiling(self) -> None:
        """Print SINGA's time-profiling report for the graph runs so far."""
        print(self.time_profiling_report())

    def time_profiling_report(self) -> str:
        """The report of the graph that ran last on this device (a Model keeps its own)."""
        graph = self._last_run_graph or self._graph
        if graph is None:
            return "Time Profiling:\n(no graph has run on this device)"
        return graph.profiling_report()

    def export_chrome_trace(self, path: str) -> None:
        """Write the profiled runs of the last graph as a Chrome/Perfetto trace (JSON).

        Only replays after the first :meth:`skip_iteration` ones, run while the verbosity is
        above 0, are timed; when none was, :class:`~singa.errors.GraphError` says why instead
        of writing a trace without events.
        """
        graph = self._last_run_graph or self._graph
        if graph is None:
            raise GraphError(f"export_chrome_trace on {self.name}: no graph has run")
        profiled = graph.profiler.wall_count
        if profiled == 0:
            ran = graph.iteration
            if self._verbosity <= 0:
                why = (f"profiling is off (verbosity {self._verbosity}); call "
                       "dev.SetVerbosity(1) before training in graph mode")
            else:
                why = (f"the graph ran {ran} iteration(s) and the first {self._skip_iteration}"
                       " are skipped as warm-up (SetSkipIteration); run more than "
                       f"{self._skip_iteration} graph iterations, or call "
                       f"dev.SetSkipIteration(n) with n < {max(ran, 1)} before training")
            raise GraphError(f"export_chrome_trace on {self.name}: 0 profiled iterations, so "
                             f"the trace would be empty: {why}")
        graph.export_chrome_trace(path)

    @staticmethod
    def EnableLazyAlloc(enable: bool) -> None:
        """Turn lazy allocation on or off for every device (SINGA's static switch): with it
        on, a block gets memory when first written, otherwise when created."""
        Device.lazy_alloc = bool(enable)

    # ------------------------------------------------------------------ memory
    def memory_stats(self) -> dict[str, int]:
        """Pool statistics: current/peak/cached bytes, allocation count, cache hits, and
        ``host_fallback_calls``, the total of :meth:`fallback_stats` (calls per op)."""
        stats = self.pool.stats()
        stats["host_fallback_calls"] = sum(self.fallback_ops.values())
        return stats

    def graph_memory_budget(self) -> int:
        """Bytes the arena of a graph's intermediates may take before graph mode recomputes
        cheap intermediates to lower it (``SINGA_GRAPH_RECOMPUTE=auto``, the default).

        0 here: always lower the peak as far as recomputes can. Host memory is shared with
        the rest of the machine, and on a CPU the recomputes cost little (1.5% of a ResNet-18
        step, docs/benchmarks.md). A backend whose recomputes cost more returns what its
        memory can hold (a CudaGPU: half its free memory), so that they run only where
        memory runs short.
        """
        return 0

    def reset_peak_memory_stats(self) -> None:
        """Restart the pool's peak-bytes statistic from the bytes in use now."""
        self.pool.reset_peak()

    def empty_cache(self) -> None:
        """Release cached (unused) pool memory back to the backend."""
        self.synchronize()
        self.pool.empty_cache()


def _register_with_the_loader() -> None:
    from ._plugins import expect_device_class

    expect_device_class(Device)  # the type the loader requires of a plugin's create_device


_register_with_the_loader()
