"""The operator table: every operator declared once, with a numpy reference.

Backends register kernels by op name (see :mod:`singa.ops._registry` for the calling
convention). ``OPS`` maps names to :class:`OpDef` records; :func:`run` dispatches one op.
"""

from . import (
    _nn_ops,  # noqa: F401  (declares the neural-network ops)
    _tensor_ops,  # noqa: F401  (declares the tensor-math ops)
)
from ._fusion import FUSIONS, ChainStep, ElementwiseChain, FusionDef
from ._registry import EMPTY, OPS, KernelCall, OpDef, defop, kernel_attrs, run

__all__ = ["EMPTY", "FUSIONS", "OPS", "ChainStep", "ElementwiseChain", "FusionDef",
           "KernelCall", "OpDef", "defop", "kernel_attrs", "run"]
