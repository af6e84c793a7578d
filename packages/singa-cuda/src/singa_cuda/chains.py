"""Elementwise chains for graph mode: several elementwise ops as one generated CUDA kernel.

The scheduler hands over an :class:`singa.backend.ElementwiseChain` (an optimizer's in-place
updates of one parameter: ``buf *= momentum; buf += g; p -= lr * buf``). :func:`source` writes
one grid-stride kernel that runs every step for each element; it is compiled once per distinct
chain (NVRTC to SASS on a GPU) with ``--fmad=false``: each step then rounds exactly as the op's
own kernel does (cupy runs ``Axpy`` as a product, then a sum, two roundings), so a chain gives
bitwise what the ops give one after the other while reading and writing each array once.
"""

from __future__ import annotations

import threading

from singa import backend as sb

#: Scalar expression of each op over its operands ``{0}``, ``{1}`` ... and the constants
#: ``zero``/``one`` of the chain's dtype, as the shared kernels compute it: ReLU is
#: ``maximum(x, 0)`` (NaN stays NaN, -0.0 becomes +0.0), ReLUBackward multiplies by the
#: comparison as a number, Axpy is ``y + x * alpha``.
TEMPLATES = {
    "Add": "{0} + {1}",
    "Sub": "{0} - {1}",
    "Mul": "{0} * {1}",
    "Axpy": "{2} + {1} * {0}",
    "ReLU": "(({0} > zero || {0} != {0}) ? {0} : zero)",
    "ReLUBackward": "{0} * ({1} > zero ? one : zero)",
}
CTYPE = {sb.kFloat32: "float", sb.kDouble: "double"}
#: NVRTC options that keep every step's rounding (no fused multiply-add contraction).
OPTIONS = ("--fmad=false",)


def kernel_name(chain) -> str:
    return "singa_chain"


def source(chain) -> str:
    """CUDA C of the chain: ``singa_chain(T* o0, T* o1, ..., long long n)``."""
    t = CTYPE[chain.dtype]
    params = ", ".join(f"{t}* o{k}" for k in range(len(chain.scalar)))
    lines = [f'extern "C" __global__ void singa_chain({params}, long long n) {{',
             f"    const {t} zero = 0, one = 1;"]
    for k, is_scalar in enumerate(chain.scalar):
        if is_scalar:  # read once, before any step writes (the chain never writes a scalar)
            lines.append(f"    const {t} s{k} = o{k}[0];")
    lines += ["    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;",
              "         i += (long long)gridDim.x * blockDim.x) {"]
    for step in chain.steps:
        vals = [f"s{k}" if chain.scalar[k] else f"o{k}[i]" for k in step.ins]
        lines.append(f"        o{step.out}[i] = {TEMPLATES[step.op].format(*vals)};")
    lines += ["    }", "}"]
    return "\n".join(lines) + "\n"


class ChainCompiler:
    """A device's ``chain_compiler()``. ``build(source, name)`` compiles a kernel source and
    returns ``launch(args, n_items)`` (the GPU: NVRTC + the device's stream)."""

    ops = frozenset(TEMPLATES)
    dtypes = frozenset(CTYPE)

    def __init__(self, build, wrap=lambda fn: fn):
        self._build = build
        self._wrap = wrap
        self._kernels: dict = {}
        self._lock = threading.Lock()

    def compile(self, chain):
        with self._lock:
            kernel = self._kernels.get(chain)
            if kernel is None:
                kernel = self._kernels[chain] = self._wrap(self._kernel(chain))
        return kernel

    def _kernel(self, chain):
        import numpy as np

        launch = self._build(source(chain), kernel_name(chain))
        full = [k for k, s in enumerate(chain.scalar) if not s]

        def kernel(ins, outs, attrs):
            n = ins[full[0]].size if full else 1
            launch(tuple(ins) + (np.int64(n),), n)

        kernel.__name__ = f"cuda_{chain.name}"
        kernel.source = source(chain)
        return kernel


def gpu_builder(device):
    """``build`` for a CudaGPU: NVRTC for its compile target (``device.target``), launched on
    its stream."""
    import cupy

    from ._events import launch_config
    from ._nvrtc import compile_source, loadable

    arch, sass = device.target

    def build(src: str, name: str):
        mod = cupy.cuda.function.Module()
        mod.load(loadable(compile_source(src, "chain.cu", arch, sass=sass, extra=OPTIONS), sass))
        fn = mod.get_function(name)

        def launch(args, n_items):
            grid, block = launch_config(n_items)
            fn(grid, block, args, stream=device.stream)

        launch.module = mod  # keep the module loaded as long as the kernel lives
        return launch

    return build
