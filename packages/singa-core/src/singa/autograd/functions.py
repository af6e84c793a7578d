"""The declarations of ``singa.autograd``'s functions, public for extensions.

:data:`FUNCTIONS` maps each function declared on its Operator class (``elu``, ``matmul``,
``gather``, ...) to its :class:`Function` declaration and the Operator class; a declaration's
``onnx`` field names the ONNX operator computing the same, from which singa-onnx builds the
Operator's exporter (and, where it only maps ONNX attributes to constructor arguments, its
import handler), as it builds those of the op records from :mod:`singa.ops`.
"""

from __future__ import annotations

from ._functions import FUNCTIONS, Function

__all__ = ["FUNCTIONS", "Function"]
