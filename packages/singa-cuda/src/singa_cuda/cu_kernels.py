"""Kernels from the shipped CUDA C sources (``cu/*.cu``), compiled by NVRTC per architecture.

Launchers here are thin: beyond the op table's shape rules they check only index values (class
ids, ScatterAdd's indices: on a host copy, as every backend does, so no kernel reads or writes
out of bounds), pick
the dtype's instantiation (``pool_fwd_f16`` ...), size the grid-stride launch and pass
arguments (device pointers, scalars, and the two small structs of ``cu/common.cuh``). Every
kernel is flagged ``contiguous_inputs`` (the dispatcher hands it contiguous inputs and
outputs) except the one-launch elementwise kernels (``checks_layout``), which run the shared
code for strided or broadcast operands rather than have them copied.

Structs go to cupy in the form its kernel guide documents ("Custom user types"): a numpy
array of size one whose structured dtype has the C struct's layout; cupy's launcher passes a
size-one ``numpy.ndarray`` by value (``CNumpyArray``: the driver copies ``sizeof(param)`` bytes
from the array's data). A ``numpy.void`` scalar is not used: whether cupy's scalar path accepts
structured scalars has changed between cupy versions. The dtypes' layouts are checked with
``static_assert``s as NVRTC and g++ compile the header (``tests/test_struct_args.py``).

The fused kernels of graph mode (``Conv2d+ReLU``, ``Conv2d+ReLU+Pooling2d``) run the device's
own Conv2d kernel (cuDNN, or the shared code for float64) and then an epilogue of
``cu/epilogue.cu`` over its output: the same arithmetic as the ReLU and Pooling2d kernels.
"""

from __future__ import annotations

import numpy as np
from singa.backend import kernel_attrs, pool2d_geometry

from ._events import launch_config
from ._nvrtc import image

#: dtype name -> suffix of the kernel instantiations
SUFFIX = {"float32": "f32", "float16": "f16", "float64": "f64", "int32": "i32"}
#: the dtypes of the elementwise.cu instantiations, per kernel name prefix
ONE_LAUNCH_DTYPES = {"relu_backward": ("float32", "float16", "float64"),
                     "add_relu": ("float32", "float16", "float64", "int32")}

POOL_GEOM = np.dtype([(f, np.int32) for f in (
    "n", "c", "h", "w", "kh", "kw", "sh", "sw", "pt", "pb", "pl", "pr", "ho", "wo", "is_max",
    "count_include_pad")], align=True)
PHILOX_KEY = np.dtype([(f, np.uint32) for f in ("k0", "k1", "call0", "call1")], align=True)


#: C struct name in ``cu/common.cuh`` -> its numpy dtype (the layout test reads this)
STRUCTS = {"PoolGeom": POOL_GEOM, "PhiloxKey": PHILOX_KEY}


def pool_geom(x_shape, attrs) -> np.ndarray:
    """The ``PoolGeom`` struct of ``cu/common.cuh`` for a pooling of ``x_shape``: a size-one
    structured array (cupy passes it by value)."""
    g = pool2d_geometry("Pooling2d", x_shape, attrs)
    rec = np.zeros(1, POOL_GEOM)
    for f in POOL_GEOM.names:
        rec[f] = int(getattr(g, f))
    return rec


def philox_key(key_call) -> np.ndarray:
    """The ``PhiloxKey`` struct of ``cu/common.cuh``: a size-one structured array."""
    rec = np.zeros(1, PHILOX_KEY)
    rec["k0"], rec["k1"], rec["call0"], rec["call1"] = key_call
    return rec


def disjoint_windows(geom: np.ndarray) -> bool:
    """No two pooling windows share a cell (stride >= kernel on both axes): the one-pass
    ReLU + pooling epilogue applies."""
    return bool(geom["sh"][0] >= geom["kh"][0] and geom["sw"][0] >= geom["kw"][0])


class CuModules:
    """The loaded modules of one device: ``function(file, name)`` compiles ``file`` for the
    device's compile target (``device.target``: its SASS, or PTX where NVRTC does not know the
    GPU) on first use (or takes it from the disk cache) and loads it."""

    def __init__(self, device):
        self.device = device
        self._modules: dict[str, object] = {}
        self._functions: dict[tuple[str, str], object] = {}

    def function(self, file: str, name: str):
        fn = self._functions.get((file, name))
        if fn is None:
            mod = self._modules.get(file)
            if mod is None:
                import cupy

                mod = cupy.cuda.function.Module()
                mod.load(image(file, *self.device.target))
                self._modules[file] = mod
            fn = self._functions[(file, name)] = mod.get_function(name)
        return fn

    def launch(self, file: str, name: str, n_items: int, args: tuple) -> None:
        grid, block = launch_config(n_items)
        self.function(file, name)(grid, block, args, stream=self.device.stream)


def _suffix(arr) -> str:
    return SUFFIX[arr.dtype.name]


def kernels(device, modules=None, conv=None) -> dict:
    """``{op_name: kernel}`` of the NVRTC-compiled kernels for ``device``. ``modules`` launches
    them (default: :class:`CuModules`, cubins on the device's stream); temporaries come from
    the device's array module. ``conv`` is the device's Conv2d kernel that the fused
    convolutions run before their epilogue (default: the shared array-module one)."""
    from .xp.elementwise import kernels as shared_elementwise

    xp = device.am.xp
    mods = modules if modules is not None else CuModules(device)
    if conv is None:
        from .xp.conv import kernels as shared_conv

        conv = shared_conv(device.am)["Conv2d"]
    shared_ew = shared_elementwise(device.am)

    @kernel_attrs(contiguous_inputs=True)
    def pooling(ins, outs, attrs):
        x, y = ins[0], outs[0]
        mods.launch("pool.cu", f"pool_fwd_{_suffix(x)}", y.size,
                    (x, y, pool_geom(x.shape, attrs)))

    @kernel_attrs(contiguous_inputs=True)
    def pooling_backward(ins, outs, attrs):
        dy, x, _y = ins  # the max is found again from x (first maximal cell, as the table says)
        mods.launch("pool.cu", f"pool_bwd_{_suffix(x)}", x.size,
                    (dy, x, outs[0], pool_geom(x.shape, attrs)))

    @kernel_attrs(contiguous_inputs=True)
    def pooling_backward_relu(ins, outs, attrs):
        dy, x, _y, relu_x = ins
        mods.launch("pool.cu", f"pool_bwd_relu_{_suffix(x)}", x.size,
                    (dy, x, relu_x, outs[0], pool_geom(x.shape, attrs)))

    am = device.am

    def target_args(logits, target, op):
        use_ids = target.ndim == 1
        if use_ids:  # class ids: no negative ids (-1 is not "the last class")
            am.check_indices(op, target, logits.shape[1], negative=False, what="class id")
        ids = target if use_ids else xp.zeros(1, xp.int32)
        dense = logits[:1] if use_ids else target
        return ids, dense, np.int32(use_ids)

    def acc_dtype(x):
        return xp.float64 if x.dtype == xp.float64 else xp.float32

    @kernel_attrs(contiguous_inputs=True)
    def softmax_ce(ins, outs, attrs):
        logits, target = ins
        loss, probs = outs
        n, c = logits.shape
        rows = xp.empty(n, acc_dtype(logits))
        ids, dense, use_ids = target_args(logits, target, "SoftmaxCrossEntropy")
        mods.launch("loss.cu", f"softmax_ce_fwd_{_suffix(logits)}", n,
                    (logits, ids, dense, use_ids, np.int32(n), np.int32(c), probs, rows))
        loss[...] = rows.sum() / n

    @kernel_attrs(contiguous_inputs=True)
    def softmax_ce_backward(ins, outs, attrs):
        probs, target = ins
        n, c = probs.shape
        ids, dense, use_ids = target_args(probs, target, "SoftmaxCrossEntropyBackward")
        mods.launch("loss.cu", f"softmax_ce_bwd_{_suffix(probs)}", n * c,
                    (probs, ids, dense, use_ids, np.int32(n), np.int32(c), outs[0]))

    @kernel_attrs(contiguous_inputs=True)
    def cross_entropy(ins, outs, attrs):
        p, target = ins
        n, c = p.shape
        ids, dense, use_ids = target_args(p, target, "CrossEntropyFwd")
        mods.launch("loss.cu", f"cross_entropy_fwd_{_suffix(p)}", n,
                    (p, ids, dense, use_ids, np.int32(n), np.int32(c), outs[0]))

    @kernel_attrs(contiguous_inputs=True)
    def scatter_add(ins, outs, attrs):
        idx, src = ins
        out = outs[0]
        axis = attrs.get("axis", 0) % out.ndim
        am.check_indices("ScatterAdd", idx, out.shape[axis])
        outer = int(np.prod(out.shape[:axis], dtype=np.int64))
        inner = int(np.prod(out.shape[axis + 1:], dtype=np.int64))
        acc = xp.zeros(out.shape, xp.float32 if out.dtype == xp.float16 else out.dtype)
        mods.launch("scatter.cu", f"scatter_add_{_suffix(src)}", src.size,
                    (idx, src, acc, np.int64(outer), np.int64(idx.size), np.int64(inner),
                     np.int64(out.shape[axis])))
        out[...] = acc

    def philox(kind, a_key, b_key):
        @kernel_attrs(contiguous_inputs=True)
        def kernel(ins, outs, attrs):
            out = outs[0]
            key = philox_key(device.rng.next_call())
            b = attrs[b_key] if b_key else 0.0
            mods.launch("philox.cu", f"philox_{kind}_{_suffix(out)}", out.size,
                        (out, np.int64(out.size), key, np.float64(attrs[a_key]), np.float64(b)))

        return kernel

    def relu(y):
        mods.launch("epilogue.cu", f"relu_{_suffix(y)}", y.size, (y, np.int64(y.size)))

    def one_launch(name, shared_kernel):
        """``name`` of elementwise.cu over contiguous operands of one shape and dtype;
        anything else (broadcasting, strided views, other dtypes) runs ``shared_kernel``,
        the two launches whose arithmetic the kernel repeats."""

        dtypes = ONE_LAUNCH_DTYPES[name]

        def kernel(ins, outs, attrs):
            out = outs[0]
            if (out.dtype.name in dtypes and out.flags.c_contiguous
                    and all(a.shape == out.shape and a.dtype == out.dtype
                            and a.flags.c_contiguous for a in ins)):
                mods.launch("elementwise.cu", f"{name}_{_suffix(out)}", out.size,
                            (*ins, out, np.int64(out.size)))
            else:
                shared_kernel(ins, outs, attrs)

        kernel.__name__ = kernel.__qualname__ = name
        kernel.checks_layout = True  # not contiguous_inputs: strided operands are served as is
        return kernel

    def conv_only(attrs):
        return {k: v for k, v in attrs.items() if k != "second"}

    @kernel_attrs(contiguous_inputs=True)
    def conv_relu(ins, outs, attrs):
        conv(ins, outs, conv_only(attrs))
        relu(outs[0])

    @kernel_attrs(contiguous_inputs=True)
    def conv_relu_pool(ins, outs, attrs):
        y, pooled = outs  # y: the ReLU's output, kept for the backward pass
        conv(ins, [y], conv_only(attrs))
        geom = pool_geom(y.shape, attrs["second"])
        if disjoint_windows(geom):
            mods.launch("epilogue.cu", f"relu_pool_{_suffix(y)}", pooled.size + y.size,
                        (y, pooled, geom))
        else:  # overlapping windows: the two kernels, one after the other
            relu(y)
            mods.launch("pool.cu", f"pool_fwd_{_suffix(y)}", pooled.size, (y, pooled, geom))

    return {
        "Conv2d+ReLU": conv_relu, "Conv2d+ReLU+Pooling2d": conv_relu_pool,
        "Pooling2d": pooling, "Pooling2dBackward": pooling_backward,
        "Pooling2dBackward+ReLUBackward": pooling_backward_relu,
        "ReLUBackward": one_launch("relu_backward", shared_ew["ReLUBackward"]),
        "Add+ReLU": one_launch("add_relu", shared_ew["Add+ReLU"]),
        "SoftmaxCrossEntropy": softmax_ce, "SoftmaxCrossEntropyBackward": softmax_ce_backward,
        "CrossEntropyFwd": cross_entropy, "ScatterAdd": scatter_add,
        "Uniform": philox("uniform", "low", "high"),
        "Gaussian": philox("gaussian", "mean", "std"),
        "Bernoulli": philox("bernoulli", "p", None),
    }


#: op name -> (file, kernel name prefix): what the compile and plan tests check
SOURCES = {
    "Conv2d+ReLU": ("epilogue.cu", "relu"), "Conv2d+ReLU+Pooling2d": ("epilogue.cu", "relu_pool"),
    "Pooling2d": ("pool.cu", "pool_fwd"), "Pooling2dBackward": ("pool.cu", "pool_bwd"),
    "Pooling2dBackward+ReLUBackward": ("pool.cu", "pool_bwd_relu"),
    "ReLUBackward": ("elementwise.cu", "relu_backward"), "Add+ReLU": ("elementwise.cu", "add_relu"),
    "SoftmaxCrossEntropy": ("loss.cu", "softmax_ce_fwd"),
    "SoftmaxCrossEntropyBackward": ("loss.cu", "softmax_ce_bwd"),
    "CrossEntropyFwd": ("loss.cu", "cross_entropy_fwd"),
    "ScatterAdd": ("scatter.cu", "scatter_add"),
    "Uniform": ("philox.cu", "philox_uniform"), "Gaussian": ("philox.cu", "philox_gaussian"),
    "Bernoulli": ("philox.cu", "philox_bernoulli"),
}
