"""CudaGPU: cupy arrays over pooled device memory, one stream per GPU.

Every kernel of the device runs on the device's own non-blocking stream with its GPU current
(:meth:`CudaGPU.on_device` wraps each kernel of the table), so kernels are asynchronous and
ordered among themselves; host copies are issued on the same stream and wait for it, so a copy
sees every kernel queued before it. ``synchronize()`` waits for the stream. In a profiled graph
run each node is timed by a pair of CUDA events recorded around it on the stream. Copies of at
least :data:`singa_cuda.staging.THRESHOLD` bytes go through reused pinned host buffers
(:mod:`singa_cuda.staging`): uploads are then asynchronous on the stream.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from singa import config
from singa.backend import ITEMSIZE, NP_DTYPE, Device, Kernel

from ._events import EventPool
from .allocator import CupyAllocator, install_cupy_allocator
from .staging import THRESHOLD, cupy_staging
from .xp._module import cupy_module
from .xp.random import PhiloxState


def _compile_target(arch: int) -> tuple[int, bool]:
    from singa.errors import DeviceUnavailableError

    from ._nvrtc import NvrtcArchError, target_arch

    try:
        return target_arch(arch)
    except NvrtcArchError as exc:
        raise DeviceUnavailableError(str(exc)) from None


class CudaGPU(Device):
    """One CUDA GPU (SINGA's CudaGPU); ``id()`` is its ordinal."""

    lang = "cuda"

    def __init__(self, index: int):
        import cupy

        self._cupy = cupy
        self.cuda_device = cupy.cuda.Device(index)
        with self.cuda_device:
            self.stream = cupy.cuda.Stream(non_blocking=True)
            init = max(0, int(config.get("SINGA_CUDA_INIT_SIZE"))) << 20
            alloc = CupyAllocator(index, init)
            alloc.stream = self.stream
        super().__init__("cuda", index, alloc)
        install_cupy_allocator(index, self.pool)
        self.am = cupy_module()
        self.rng = PhiloxState()
        self.arch = int(self.cuda_device.compute_capability)
        #: (architecture, SASS?) that NVRTC compiles this GPU's kernels for
        self.target = _compile_target(self.arch)
        self.events = EventPool(cupy.cuda.Event, cupy.cuda.get_elapsed_time)
        self.staging = cupy_staging()
        # PyTorch's default: cuDNN may use TF32 for float32 convolutions (SINGA_CUDA_TF32)
        self.float32_precision = "high" if config.get("SINGA_CUDA_TF32") else "highest"
        from .capture import register

        register(CudaGPU)  # the cuda.graphs stage (SINGA_CUDA_GRAPHS)

    # ------------------------------------------------------------------ execution context
    def on_device(self, fn) -> Kernel:
        """The :class:`~singa.backend.Kernel` record of ``fn`` (a record or a function) whose
        call runs with this GPU current and this device's stream as cupy's stream. The
        record's fields are ``fn``'s, and so are the diagnosis attributes a kernel carries
        (``engine`` of the cuDNN kernels, ``checks_layout`` ...)."""
        dev, stream = self.cuda_device, self.stream
        record = fn if isinstance(fn, Kernel) else Kernel(fn)
        inner = record.fn

        @functools.wraps(inner)
        def kernel(ins, outs, attrs):
            with dev, stream:
                inner(ins, outs, attrs)

        wrapped = dataclasses.replace(record, fn=kernel)
        fields = {f.name for f in dataclasses.fields(Kernel)}
        # the attributes sit on fn itself: the record when fn is one, else the function
        for name, value in getattr(fn, "__dict__", {}).items():
            if name not in fields and not name.startswith("__"):
                setattr(wrapped, name, value)
        return wrapped

    def chain_compiler(self):
        """Elementwise chains compiled with NVRTC (see :mod:`singa_cuda.chains`)."""
        if getattr(self, "_chains", None) is None:
            from .chains import ChainCompiler, gpu_builder

            self._chains = ChainCompiler(gpu_builder(self), self.on_device)
        return self._chains

    # ------------------------------------------------------------------ Device interface
    def native(self, ct):
        isz = ITEMSIZE[ct.dtype_code]
        return self._cupy.ndarray(ct.dims, NP_DTYPE[ct.dtype_code], ct.block.data + ct.offset * isz,
                                  tuple(s * isz for s in ct.strides))

    def native_to_numpy(self, arr):
        with self.cuda_device, self.stream:
            if arr.nbytes >= THRESHOLD and arr.flags.c_contiguous:
                return self.staging.download(arr.data, arr.nbytes, self.stream, arr.dtype,
                                             arr.shape)
            return arr.get(stream=self.stream)  # waits for the stream: sees queued kernels

    def numpy_into_native(self, src, arr) -> None:
        src = np.asarray(src)
        with self.cuda_device, self.stream:
            same = src.dtype == arr.dtype and src.shape == arr.shape
            if arr.flags.c_contiguous and same and arr.nbytes >= THRESHOLD:
                # src is copied into a pinned buffer first: no need to wait for the stream
                self.staging.upload(src, arr.data, self.stream)
                return
            if arr.flags.c_contiguous and same:
                arr.set(np.ascontiguousarray(src), stream=self.stream)
            else:  # strided or converting: upload, then copy/cast on the device
                arr[...] = self._cupy.asarray(src)
            self.stream.synchronize()  # src may be a temporary the caller frees

    def synchronize(self) -> None:
        self.stream.synchronize()

    def _seed(self, seed: int) -> None:
        self.rng.reseed(seed)

    def _timed_call(self, fn) -> float:
        pair = self.events.acquire()
        with self.cuda_device:
            pair[0].record(self.stream)
            fn()
            pair[1].record(self.stream)
            pair[1].synchronize()
        try:
            return self.events.seconds(pair)
        finally:
            self.events.release(pair)

    # ------------------------------------------------------------------ SINGA queries
    def mem_info(self) -> tuple[int, int]:
        """(free, total) bytes of this GPU."""
        with self.cuda_device:
            free, total = self._cupy.cuda.runtime.memGetInfo()
        return int(free), int(total)

    def graph_memory_budget(self) -> int:
        """Half this GPU's free memory when a graph is analysed: graph mode recomputes
        intermediates (batch norm, ReLU) only when the arena would take more. On an H100
        those recomputes took 2.5 of ResNet-18's 20.6 ms of node time, for memory the GPU
        had to spare (docs/cuda.md)."""
        return self.mem_info()[0] // 2

    def describe(self, verbose: bool = False) -> str:
        props = self._cupy.cuda.runtime.getDeviceProperties(self.index)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        free, total = self.mem_info()
        line = (f"cuda:{self.index} {name}, sm_{self.arch}, {total >> 20} MiB "
                f"({free >> 20} MiB free)")
        if verbose:
            line += (f", {props['multiProcessorCount']} SMs, clock {props['clockRate'] // 1000} "
                     f"MHz, {props['totalConstMem']} B constant memory")
        return line
