"""The CUDA kernel table: which implementation serves each op of the op table.

``PLAN`` maps every op name (and the fused kernels) to where its CUDA kernel comes from:

- ``"xp"``: the shared array-module code of :mod:`singa_cuda.xp`, bound to cupy on the GPU
  (elementwise ops, reductions, indexing, copies; matrix products, which cupy sends to cuBLAS);
  the same functions run on numpy in CI.
- ``"cudnn"``: cuDNN frontend graphs (:mod:`singa_cuda.cudnn_conv`, :mod:`singa_cuda.cudnn_bn`)
  for float32/float16 convolutions and 4-D batch norm; the rest falls back to the shared code.
- ``"cu"``: CUDA C from ``cu/*.cu`` compiled by NVRTC (:mod:`singa_cuda.cu_kernels`).
- ``"none"``: no CUDA kernel yet; calling the op on a CudaGPU would raise MissingKernelError
  naming it (the device enables no host fallback), and callers that can do without it check
  ``op in device.kernels`` first. No op is marked so today.

The table is data: a test compares it with :data:`singa.backend.OPS` without a device.
"""

from __future__ import annotations

from singa.backend import OPS, kernel_attrs

XP, CUDNN, CU, NONE = "xp", "cudnn", "cu", "none"

#: op name -> (source, dtypes or None for all of the op's dtypes)
PLAN: dict[str, tuple[str, tuple | None]] = {name: (XP, None) for name in OPS}
PLAN.update({
    "Conv2d": (CUDNN, None), "Conv2dBackwardX": (CUDNN, None), "Conv2dBackwardW": (CUDNN, None),
    # 4-D float32/float16 through cuDNN graphs, the rest (and refused graphs) shared code;
    # inference is the shared code's one elementwise pass (cudnn_bn's docstring says why)
    "BatchNormTrain": (CUDNN, None), "BatchNormBackward": (CUDNN, None),
    "Pooling2d": (CU, None), "Pooling2dBackward": (CU, None),
    "SoftmaxCrossEntropy": (CU, None), "SoftmaxCrossEntropyBackward": (CU, None),
    "CrossEntropyFwd": (CU, None), "ScatterAdd": (CU, None),
    "Gaussian": (CU, None), "Uniform": (CU, None), "Bernoulli": (CU, None),
    "Pooling2dBackward+ReLUBackward": (CU, None),
    # the device's Conv2d (cuDNN / shared), then an epilogue of cu/epilogue.cu
    "Conv2d+ReLU": (CU, None), "Conv2d+ReLU+Pooling2d": (CU, None),
    # the device's Conv2d, then the shared HardSwish in place (two launches)
    "Conv2d+HardSwish": (CUDNN, None),
    # one launch of cu/elementwise.cu over contiguous same-shape float operands, else the
    # shared code (two launches: the shared Add, then the shared ReLU in place / a multiply by
    # the mask)
    "Add+ReLU": (CU, None), "ReLUBackward": (CU, None),
    # the shared Sigmoid into a scratch array, then the shared Mul
    "Sigmoid+Mul": (XP, None),
})


def shared_table(am, rng_state_of) -> dict:
    """The shared array-module kernels on array module ``am`` (numpy or cupy), with the dtypes
    of :data:`PLAN` attached: every op whose plan is ``"xp"``, plus the shared versions of the
    others (the test device checks those too; the GPU replaces them)."""
    from .xp import shared_kernels

    table = shared_kernels(am, rng_state_of)
    for name, fn in table.items():
        dts = PLAN.get(name, (XP, None))[1]
        if dts is not None:
            table[name] = kernel_attrs(dtypes=dts)(fn)
    return table


def kernel_table(device) -> dict:
    """The full table of a CudaGPU device: shared kernels on cupy, then cuDNN and NVRTC
    kernels over the ops :data:`PLAN` assigns to them."""
    from . import cu_kernels, cudnn_bn, cudnn_conv

    table = shared_table(device.am, lambda: device.rng)
    table.update(cudnn_conv.kernels(device, fallback=dict(table)))
    table.update(cudnn_bn.kernels(device, fallback=dict(table)))
    table.update(cu_kernels.kernels(device, conv=table["Conv2d"]))
    # every kernel runs with the GPU current and the device's stream as cupy's stream
    table = {name: device.on_device(fn) for name, fn in table.items()}
    missing = sorted(name for name, (src, _) in PLAN.items()
                     if src != NONE and name not in table)
    if missing:  # a programming error in this package, caught by the plan test as well
        raise RuntimeError(f"singa-cuda: no kernel bound for {missing}")
    return table
