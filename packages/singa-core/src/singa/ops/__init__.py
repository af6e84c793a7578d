"""The operator table: every operator declared once, with a numpy reference.

``OPS`` maps names to :class:`OpDef` records; :func:`run` dispatches one op. Backends register
kernels by op name: the calling convention (``kernel(ins, outs, attrs)``), kernel flags, dtype
codes and the rest of the backend contract are in ``docs/plugin-authoring.md``, and backends
import these names from the public module :mod:`singa.backend`.

``UNARY`` and ``BINARY`` map the elementwise ops' keys to their records (:class:`Unary`,
:class:`Binary`), ``REDUCTIONS`` the axis reductions' keys to theirs (:class:`Reduction`),
``REARRANGEMENTS`` the Operator names of the ops that only move cells (Reshape, Transpose, ...)
to theirs (:class:`Rearrangement`, with no op-table entry: they run views and copies): one
declaration per op, from which core builds the functional, ``tensor`` and ``autograd`` wrappers
and extensions build theirs (singa-onnx its import handlers and exporters, from each record's
:class:`Onnx`).
"""

from . import (
    _nn_ops,  # noqa: F401  (declares the neural-network ops)
    _recurrent_ops,  # noqa: F401  (declares the whole-sequence LSTM and GRU)
    _tensor_ops,  # noqa: F401  (declares the tensor-math ops)
)
from ._elementwise import BINARY, UNARY, Binary, Unary
from ._fusion import FUSIONS, ChainStep, ElementwiseChain, FusionDef, node_op, run_fused
from ._rearrangements import REARRANGEMENTS, Rearrangement
from ._records import Onnx
from ._reductions import REDUCTIONS, Reduction
from ._registry import EMPTY, OPS, Kernel, KernelCall, OpDef, as_kernel, defop, kernel_attrs, run

__all__ = ["EMPTY", "FUSIONS", "OPS", "ChainStep", "ElementwiseChain", "FusionDef", "node_op",
           "run_fused",
           "Kernel", "KernelCall", "OpDef", "as_kernel", "defop", "kernel_attrs", "run",
           "UNARY", "BINARY", "Unary", "Binary", "Onnx", "REDUCTIONS", "Reduction",
           "REARRANGEMENTS", "Rearrangement"]
