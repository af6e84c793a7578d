"""SINGA's ONNX package, reachable as ``singa.sonnx``.

- :func:`to_onnx` (:class:`SingaFrontend`): export an autograd graph to an ONNX model.
- :func:`prepare` (:class:`SingaBackend`, an ``onnx.backend.base.Backend``): import a model;
  the returned :class:`SingaRep` runs it with ``run(inputs, last_layers=..., aux_output=...)``.
- :class:`SONNXModel`: an imported model as a trainable :class:`singa.model.Model`.
"""

from onnx import load, save
from singa.errors import SingaONNXError

from .backend import SingaBackend, SingaRep, prepare, run_node, supports_device
from .frontend import SingaFrontend, to_onnx
from .model import SONNXModel

__all__ = ["SingaBackend", "SingaRep", "SingaFrontend", "SONNXModel", "SingaONNXError",
           "prepare", "run_node", "supports_device", "to_onnx", "save", "load"]
