"""Training batch normalisation through the cuDNN frontend (``cudnn.pygraph``: ``batchnorm``,
``batchnorm_backward``), with the shared array-module code as fallback.

cuDNN's normalisation engines work on channels-last tensors with float32 statistics, while
SINGA's tensors are NCHW with statistics in the input's dtype. So :func:`kernels` moves x
(and dy) to NHWC and the per-channel vectors to float32 ``(1, C, 1, 1)`` on the device, runs the
graph, and writes the results back in SINGA's layout and dtype; the conversions are plain
array-module code (:func:`train`, :func:`backward`) that a test runs on numpy
against the op table's references with a numpy model of the documented cuDNN formulas.

What cuDNN computes differs from SINGA's op in a convention, handled here: its momentum is the
weight of the *batch* statistic (PyTorch's), SINGA's the weight of the running one, so cuDNN
gets ``1 - momentum``. Inference (``BatchNormInfer``) is one elementwise pass that the shared
code runs as it is: cuDNN 9.19 proposed no engine for a ``batchnorm_inference`` graph of an
ordinary (8, 16, 12, 12) float32 input on an H200 (docs/cuda.md), and its layout changes would
cost two more passes. Shapes cuDNN is not used for
(not 4-D, float64, one value per channel: the unbiased running variance would divide by zero)
and graphs cuDNN refuses to build go to the shared kernels; a refused graph is remembered per
key (``CudnnBatchNorm.refused``) so it is tried once.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from .cudnn_conv import CudnnGraphs


@dataclass(frozen=True)
class BnKey:
    """Everything a batch-norm graph depends on."""

    kind: str  # "train", "backward"
    shape: tuple  # (N, C, H, W)
    dtype: str


def bn_key(kind: str, x_shape, dtype: str) -> BnKey | None:
    """The graph key, or None where the shared code serves the call."""
    shape = tuple(int(d) for d in x_shape)
    if dtype not in ("float32", "float16") or len(shape) != 4:
        return None
    n, c, h, w = shape
    if kind == "train" and n * h * w < 2:  # cuDNN's unbiased variance would divide by m - 1 = 0
        return None
    return BnKey(kind, shape, dtype)


def nhwc_strides(shape) -> list[int]:
    """Element strides of an NCHW-indexed tensor stored channels-last."""
    n, c, h, w = shape
    return [h * w * c, 1, w * c, c]


def param_strides(c: int) -> list[int]:
    return [c, 1, c, c]


def cudnn_momentum(momentum: float) -> float:
    """cuDNN's (PyTorch's) momentum: the weight of the batch statistic."""
    return 1.0 - float(momentum)


# ----------------------------------------------------------------- layout and dtype glue
def _nhwc(xp, a):
    return xp.ascontiguousarray(a.transpose(0, 2, 3, 1))


def _param(xp, v):
    return xp.ascontiguousarray(v, dtype=xp.float32).reshape(1, -1, 1, 1)


def _nchw_into(out, nhwc):
    out[...] = nhwc.transpose(0, 3, 1, 2)


def train(xp, run, key, ins, outs, attrs) -> None:
    """BatchNormTrain through ``run(key, inputs, outputs, scalars)`` (role -> array)."""
    x, scale, bias, rmean, rvar = ins
    y, smean, sinv, nmean, nvar = outs
    n, c, h, w = key.shape
    # every input is copied before any output is written: outs[3], outs[4] may alias ins[3], [4]
    inputs = {"x": _nhwc(xp, x), "scale": _param(xp, scale), "bias": _param(xp, bias),
              "in_mean": _param(xp, rmean), "in_var": _param(xp, rvar)}
    res = {"y": xp.empty((n, h, w, c), x.dtype),
           **{r: xp.empty((1, c, 1, 1), xp.float32)
              for r in ("saved_mean", "saved_inv_var", "out_mean", "out_var")}}
    run(key, inputs, res, {"epsilon": attrs.get("eps", 1e-5),
                           "momentum": cudnn_momentum(attrs.get("momentum", 0.9))})
    _nchw_into(y, res["y"])
    for out, role in ((smean, "saved_mean"), (sinv, "saved_inv_var"), (nmean, "out_mean"),
                      (nvar, "out_var")):
        out[...] = res[role].reshape(c)


def backward(xp, run, key, ins, outs, attrs) -> None:
    """BatchNormBackward: (dy, x, scale, saved_mean, saved_inv_std) -> (dx, dscale, dbias)."""
    dy, x, scale, smean, sinv = ins
    dx, dscale, dbias = outs
    n, c, h, w = key.shape
    inputs = {"dy": _nhwc(xp, dy), "x": _nhwc(xp, x), "scale": _param(xp, scale),
              "mean": _param(xp, smean), "inv_var": _param(xp, sinv)}
    res = {"dx": xp.empty((n, h, w, c), x.dtype),
           "dscale": xp.empty((1, c, 1, 1), xp.float32),
           "dbias": xp.empty((1, c, 1, 1), xp.float32)}
    run(key, inputs, res, {})
    _nchw_into(dx, res["dx"])
    dscale[...] = res["dscale"].reshape(c)
    dbias[...] = res["dbias"].reshape(c)


GLUE = {"BatchNormTrain": ("train", train), "BatchNormBackward": ("backward", backward)}


# ----------------------------------------------------------------- the cuDNN graphs (GPU only)
class CudnnBatchNorm(CudnnGraphs):
    """The cuDNN batch-norm graphs of one CudaGPU."""

    def __init__(self, device):
        super().__init__(device)
        self.refused: dict[BnKey, str] = {}  # key -> why cuDNN would not build it

    def _build(self, key: BnKey):
        cudnn = self.cudnn
        dt = cudnn.data_type
        io = {"float32": dt.FLOAT, "float16": dt.HALF}[key.dtype]
        graph = cudnn.pygraph(io_data_type=io, intermediate_data_type=dt.FLOAT,
                              compute_data_type=dt.FLOAT, handle=self.handle)
        c = key.shape[1]

        def big(name):
            return graph.tensor(name=name, dim=list(key.shape), stride=nhwc_strides(key.shape),
                                data_type=io)

        def vec(name):
            return graph.tensor(name=name, dim=[1, c, 1, 1], stride=param_strides(c),
                                data_type=dt.FLOAT)

        def scalar(name):
            return graph.tensor(name=name, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1],
                                data_type=dt.FLOAT, is_pass_by_value=True)

        ports: dict = {}
        if key.kind == "train":
            ports.update(x=big("x"), scale=vec("scale"), bias=vec("bias"),
                         in_mean=vec("in_mean"), in_var=vec("in_var"),
                         epsilon=scalar("epsilon"), momentum=scalar("momentum"))
            kw = dict(input=ports["x"], scale=ports["scale"], bias=ports["bias"],
                      in_running_mean=ports["in_mean"], in_running_var=ports["in_var"],
                      epsilon=ports["epsilon"], momentum=ports["momentum"], name="bn")
            try:
                outs = graph.batchnorm(**kw)
            except TypeError:  # frontends before 1.x take the phase as an argument
                outs = graph.batchnorm(norm_forward_phase=cudnn.norm_forward_phase.TRAINING,
                                       **kw)
            roles = ("y", "saved_mean", "saved_inv_var", "out_mean", "out_var")
        else:
            ports.update(dy=big("dy"), x=big("x"), scale=vec("scale"), mean=vec("mean"),
                         inv_var=vec("inv_var"))
            outs = graph.batchnorm_backward(grad=ports["dy"], input=ports["x"],
                                            scale=ports["scale"], mean=ports["mean"],
                                            inv_variance=ports["inv_var"], name="bn_bwd")
            roles = ("dx", "dscale", "dbias")
        for role, t in zip(roles, outs):
            if role in ("y", "dx"):
                t.set_output(True).set_data_type(io).set_dim(list(key.shape)).set_stride(
                    nhwc_strides(key.shape))
            else:
                t.set_output(True).set_data_type(dt.FLOAT)
            ports[role] = t
        graph.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        return graph, ports, int(graph.get_workspace_size())

    def usable(self, key: BnKey) -> bool:
        """Build the graph of ``key`` (once); False if cuDNN refuses it."""
        if key in self.refused:
            return False
        try:
            self.cache.get(key, self._build)
        except Exception as exc:  # no engine for this shape/layout: the shared code serves it
            self.refused[key] = f"{type(exc).__name__}: {exc}"
            warnings.warn(f"singa-cuda: cuDNN did not build the batch-norm graph {key} "
                          f"({self.refused[key]}); the shared kernels run it instead",
                          RuntimeWarning, stacklevel=2)
            return False
        return True

    def run(self, key: BnKey, inputs: dict, outputs: dict, scalars: dict) -> None:
        import numpy as np

        graph, ports, workspace = self.cache.get(key, self._build)
        pool = self.device.pool
        ws, cls = pool.malloc(max(workspace, 1))
        # pass-by-value scalars: host pointers to float32 values, alive until execute returns
        host = {role: np.array([v], np.float32) for role, v in scalars.items()}
        try:
            pack = {ports[r]: a.data.ptr for r, a in {**inputs, **outputs}.items()}
            pack.update({ports[r]: h.ctypes.data for r, h in host.items()})
            graph.execute(pack, ws.ptr, handle=self.handle)
        finally:
            pool.free(ws, cls)  # reused in stream order by later work on the same stream


def kernels(device, fallback: dict) -> dict:
    """BatchNormTrain and BatchNormBackward for ``device``, first of what accepts the call:
    cuDNN's NCHW kernels (:mod:`singa_cuda.cudnn_legacy`, no layout copies), cuDNN's
    channels-last graphs (this module), the shared kernels (``fallback``).
    ``SINGA_CUDA_BATCHNORM`` ('graph', 'shared') skips the first or the first two. A cuDNN
    library without the NCHW functions, or a shape they refuse, warns once and moves on to
    the next. Nothing GPU-side happens before the first call."""
    from singa import config
    from singa.backend import kernel_attrs
    from singa.errors import KernelError

    from .cudnn_legacy import CudnnLegacyBatchNorm, legacy_key

    mode = config.get("SINGA_CUDA_BATCHNORM")
    bn = None
    legacy: list = []  # [engine or None], filled at the first call
    legacy_refused: dict = {}  # LegacyKey -> reason

    def engine():
        nonlocal bn
        if bn is None:
            bn = CudnnBatchNorm(device)
        return bn

    def legacy_engine():
        if not legacy:
            try:
                legacy.append(CudnnLegacyBatchNorm(device))
            except Exception as exc:  # no libcudnn NCHW functions: the graph path serves
                legacy.append(None)
                warnings.warn(f"singa-cuda: cuDNN's NCHW batch norm is unavailable "
                              f"({type(exc).__name__}: {exc}); using cuDNN's graph path",
                              RuntimeWarning, stacklevel=3)
        return legacy[0]

    def make(op):
        kind, glue = GLUE[op]

        @kernel_attrs(contiguous_inputs=True)
        def kernel(ins, outs, attrs):
            x = ins[1] if kind == "backward" else ins[0]
            if mode == "auto":
                lkey = legacy_key(x.shape, x.dtype.name)
                eng = legacy_engine() if lkey is not None else None
                if eng is not None and lkey not in legacy_refused:
                    try:
                        return getattr(eng, kind)(lkey, ins, outs, attrs)
                    except KernelError as exc:  # e.g. NOT_SUPPORTED for this shape
                        legacy_refused[lkey] = str(exc)
                        warnings.warn(f"singa-cuda: {exc}; cuDNN's graph path runs {lkey}",
                                      RuntimeWarning, stacklevel=2)
            key = bn_key(kind, x.shape, x.dtype.name) if mode != "shared" else None
            if key is None or not engine().usable(key):
                return fallback[op](ins, outs, attrs)
            glue(device.am.xp, engine().run, key, ins, outs, attrs)

        kernel.__name__ = f"cudnn_{op}"
        kernel.engine = engine  # diagnosis: engine().refused lists the graphs cuDNN refused
        kernel.legacy = legacy_engine  # None where cuDNN's NCHW functions are unavailable
        kernel.legacy_refused = legacy_refused
        return kernel

    return {op: make(op) for op in GLUE}
