"""Convolutions through NVIDIA's cuDNN frontend Python API (``cudnn.pygraph``).

One graph per (direction, shapes, dtype, geometry, layout): built once with heuristics A then
FALLBACK, checked for support, its plans built, and cached per device; later calls of the same
key only execute. The workspace comes from the device's MemPool. Groups need no attribute:
cuDNN reads them from ``W``'s channel dimension (``C / group``). float16 runs with float32
compute (tensor cores); float64, which cuDNN's engines do not cover for every geometry, uses the
shared im2col kernels. The bias of ``Conv2d`` is a pointwise add in the same graph.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from singa.backend import conv2d_geometry

#: Graphs kept per device (a model has a few dozen distinct convolutions; a shape sweep evicts).
CACHE_SIZE = 256


@dataclass(frozen=True)
class ConvKey:
    """Everything a cuDNN convolution graph depends on."""

    kind: str  # "fprop", "dgrad", "wgrad"
    x_shape: tuple
    w_shape: tuple
    y_shape: tuple
    dtype: str
    pre_padding: tuple
    post_padding: tuple
    stride: tuple
    dilation: tuple
    bias: bool
    layout: str = "NCHW"
    #: float32 only: may cuDNN pick TF32 tensor-core engines (``float32_precision="high"``)
    tf32: bool = False


def conv_key(kind: str, x_shape, w_shape, dtype: str, attrs: dict, bias: bool = False,
             precision: str = "highest") -> ConvKey:
    """The cache key of a convolution; raises the op table's ShapeError on bad geometry.
    ``precision`` is the device's ``float32_precision``: "high" lets float32 use TF32."""
    g = conv2d_geometry("Conv2d", tuple(x_shape), tuple(w_shape), attrs)
    return ConvKey(kind, (g.n, g.c, g.h, g.w), tuple(int(d) for d in w_shape),
                   (g.n, g.o, g.ho, g.wo), str(dtype), (g.pt, g.pl), (g.pb, g.pr),
                   (g.sh, g.sw), (g.dh, g.dw), bool(bias),
                   tf32=str(dtype) == "float32" and precision != "highest")


def contiguous_strides(shape) -> list[int]:
    """Row-major element strides of ``shape`` (what cuDNN's tensor descriptors take)."""
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= max(int(d), 1)
    return out[::-1]


class LruCache:
    """A bounded mapping that forgets the least recently used entry."""

    def __init__(self, size: int):
        self.size = size
        self._d: OrderedDict = OrderedDict()
        self.hits = 0
        self.builds = 0

    def get(self, key, build):
        val = self._d.get(key)
        if val is not None:
            self._d.move_to_end(key)
            self.hits += 1
            return val
        val = build(key)
        self.builds += 1
        self._d[key] = val
        if len(self._d) > self.size:
            self._d.popitem(last=False)
        return val

    def __len__(self) -> int:
        return len(self._d)


class _Graph:
    """A built cuDNN graph, its tensor handles by role, and its operands' uids in one fixed
    role order for the frontend's ordered execution (``execute(buffers, ws,
    tensor_uids=...)``, whose per-graph metadata the frontend caches: no dictionary is
    normalised per call)."""

    def __init__(self, graph, ports: dict, workspace: int):
        self.graph, self.ports, self.workspace = graph, ports, workspace
        self.roles = tuple(ports)
        self.uids = tuple(int(ports[r].get_uid()) for r in self.roles)
        #: None until the first call; then whether the ordered form is used for this graph
        self.ordered: bool | None = None

    def execute(self, ptrs: dict, workspace: int, handle) -> None:
        """Run with ``ptrs`` (role -> device address)."""
        if self.ordered is not False:
            buffers = tuple(ptrs[r] for r in self.roles)
            if self.ordered:
                return self.graph.execute(buffers, workspace, handle=handle,
                                          tensor_uids=self.uids)
            try:  # the first call: a frontend without the ordered form falls back for good
                self.graph.execute(buffers, workspace, handle=handle, tensor_uids=self.uids)
                self.ordered = True
                return
            except Exception as exc:
                import warnings

                self.ordered = False
                warnings.warn(f"singa-cuda: cuDNN frontend ordered execute failed "
                              f"({type(exc).__name__}: {exc}); using the mapping form",
                              RuntimeWarning, stacklevel=3)
        self.graph.execute({self.ports[r]: p for r, p in ptrs.items()}, workspace,
                           handle=handle)


def full_float32_exclusions(cudnn) -> list:
    """The numerical notes of engines a full-float32 convolution must not use: tensor cores
    (TF32) and down-converted inputs, the filter PyTorch applies when allow_tf32 is off, and
    FFT. Not a guarantee of float32's rounding: on an H100 with cuDNN 9.19, heuristics A
    ranked first for one float32 wgrad (x 16x20x12x12, w 50x20x5x5) an engine with none of
    these notes and 9e-4 relative error (cuDNN's other direct engines: 2e-7); PyTorch's
    filter admits the same engine. Heuristics FALLBACK alone avoided it, but then
    the float32 convolutions with asymmetric or large padding failed the backend tests on
    the same GPU (not examined further), so it is not used."""
    note = cudnn.numerical_note
    return [getattr(note, n) for n in ("TENSOR_CORE", "DOWN_CONVERT_INPUTS", "FFT")
            if hasattr(note, n)]


class CudnnGraphs:
    """A cuDNN handle bound to one CudaGPU's stream, and an LRU cache of built graphs (the
    convolution and batch-norm graph families each keep one)."""

    def __init__(self, device):
        import cudnn

        self.cudnn = cudnn
        self.device = device
        with device.cuda_device:
            self.handle = cudnn.create_handle()
            cudnn.set_stream(handle=self.handle, stream=device.stream.ptr)
        self.cache = LruCache(CACHE_SIZE)


class CudnnConv(CudnnGraphs):
    """The cuDNN convolution graphs of one CudaGPU."""

    def _dtype(self, name: str):
        dt = self.cudnn.data_type
        return {"float32": dt.FLOAT, "float16": dt.HALF}[name]

    def _build(self, key: ConvKey) -> _Graph:
        cudnn = self.cudnn
        io = self._dtype(key.dtype)
        graph = cudnn.pygraph(io_data_type=io, intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT, handle=self.handle)

        def tensor(name, shape):
            return graph.tensor(name=name, dim=list(shape), stride=contiguous_strides(shape),
                                data_type=io)

        geo = dict(pre_padding=list(key.pre_padding), post_padding=list(key.post_padding),
                   stride=list(key.stride), dilation=list(key.dilation))
        ports = {}
        if key.kind == "fprop":
            ports["x"], ports["w"] = tensor("x", key.x_shape), tensor("w", key.w_shape)
            out = graph.conv_fprop(image=ports["x"], weight=ports["w"], **geo)
            if key.bias:
                ports["b"] = tensor("b", (1, key.w_shape[0], 1, 1))
                out = graph.bias(name="bias", input=out, bias=ports["b"])
            shape = key.y_shape
        elif key.kind == "dgrad":
            ports["dy"], ports["w"] = tensor("dy", key.y_shape), tensor("w", key.w_shape)
            out = graph.conv_dgrad(loss=ports["dy"], filter=ports["w"], **geo)
            shape = key.x_shape
        else:
            ports["dy"], ports["x"] = tensor("dy", key.y_shape), tensor("x", key.x_shape)
            out = graph.conv_wgrad(image=ports["x"], loss=ports["dy"], **geo)
            shape = key.w_shape
        out.set_output(True).set_data_type(io).set_dim(list(shape)).set_stride(
            contiguous_strides(shape))
        ports["out"] = out
        if key.dtype == "float32" and not key.tf32:
            graph.deselect_numeric_notes(full_float32_exclusions(cudnn))
        graph.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        return _Graph(graph, ports, int(graph.get_workspace_size()))

    def run(self, key: ConvKey, arrays: dict, out) -> None:
        """Execute the graph of ``key`` with ``arrays`` (role -> contiguous cupy array)."""
        g = self.cache.get(key, self._build)
        pool = self.device.pool
        ws, cls = pool.malloc(max(g.workspace, 1))
        try:
            ptrs = {role: arr.data.ptr for role, arr in arrays.items()}
            ptrs["out"] = out.data.ptr
            g.execute(ptrs, ws.ptr, self.handle)
        finally:
            pool.free(ws, cls)  # reused in stream order by later work on the same stream


def kernels(device, fallback: dict) -> dict:
    """Conv2d, Conv2dBackwardX and Conv2dBackwardW for ``device``, and the fused
    Conv2d+HardSwish (this Conv2d, then ``fallback``'s HardSwish); float64 goes to
    ``fallback`` (the shared im2col kernels)."""
    from singa.backend import kernel_attrs

    conv = None

    def engine():
        nonlocal conv
        if conv is None:
            conv = CudnnConv(device)
        return conv

    @kernel_attrs(contiguous_inputs=True)
    def forward(ins, outs, attrs):
        x, w = ins[0], ins[1]
        if x.dtype.name == "float64":
            return fallback["Conv2d"](ins, outs, attrs)
        key = conv_key("fprop", x.shape, w.shape, x.dtype.name, attrs, bias=len(ins) == 3,
                       precision=device.float32_precision)
        arrays = {"x": x, "w": w}
        if len(ins) == 3:
            arrays["b"] = ins[2]
        engine().run(key, arrays, outs[0])

    @kernel_attrs(contiguous_inputs=True)
    def backward_x(ins, outs, attrs):
        dy, w = ins
        if dy.dtype.name == "float64":
            return fallback["Conv2dBackwardX"](ins, outs, attrs)
        key = conv_key("dgrad", attrs["x_shape"], w.shape, dy.dtype.name, attrs,
                       precision=device.float32_precision)
        engine().run(key, {"dy": dy, "w": w}, outs[0])

    @kernel_attrs(contiguous_inputs=True)
    def backward_w(ins, outs, attrs):
        dy, x = ins
        if dy.dtype.name == "float64":
            return fallback["Conv2dBackwardW"](ins, outs, attrs)
        key = conv_key("wgrad", x.shape, attrs["w_shape"], dy.dtype.name, attrs,
                       precision=device.float32_precision)
        engine().run(key, {"dy": dy, "x": x}, outs[0])

    @kernel_attrs(contiguous_inputs=True)
    def forward_hard_swish(ins, outs, attrs):
        """The fused Conv2d+HardSwish of graph mode (singa.ops.FUSIONS): this Conv2d, then the
        table's HardSwish in place on its output, so bitwise what the two ops give (two
        launches; the one-pass epilogue is the CPU backend's)."""
        forward(ins, outs, {k: v for k, v in attrs.items() if k != "second"})
        fallback["HardSwish"](outs, outs, {})

    for fn in (forward, backward_x, backward_w):
        fn.engine = engine  # diagnosis: engine().cache holds the built graphs
    return {"Conv2d": forward, "Conv2dBackwardX": backward_x, "Conv2dBackwardW": backward_w,
            "Conv2d+HardSwish": forward_hard_swish}
