"""ONNX op handlers, one module per family; importing this package fills :data:`HANDLERS`."""

from . import attention, declared, elementwise, index, misc, nn, reduce, rnn, shape  # noqa: F401
from ._registry import HANDLERS, Context, Fused, OpHandler, onnx_to_np, register

__all__ = ["HANDLERS", "Context", "Fused", "OpHandler", "onnx_to_np", "register"]
