"""SONNXModel: an imported ONNX model as a :class:`singa.model.Model` to fine-tune."""

from __future__ import annotations

from singa import model, tensor
from singa.errors import SingaONNXError

from .backend import SingaBackend

__all__ = ["SONNXModel"]


class SONNXModel(model.Model):
    """An ONNX model whose float initializers are trainable parameters.

    ``forward(*x, aux_output=(), **kw)`` runs the imported graph through singa's autograd ops
    (so it trains and runs in graph mode like any Model) and returns the list of outputs
    (Tensors). Subclass it to add layers and a ``train_one_batch``, as SINGA's examples do::

        class Classifier(sonnx.SONNXModel):
            def __init__(self, onnx_model):
                super().__init__(onnx_model)
                self.linear = layer.Linear(10)

            def forward(self, *x):
                y = super().forward(*x, last_layers=-1)[0]
                return self.linear(y)

    Parameters are named after their initializers; ``get_params``/``set_params`` and
    checkpoints (``save_states``) include them and the batch-norm running statistics.
    """

    def __init__(self, onnx_model, device=None, **prepare_kwargs):
        super().__init__()
        if prepare_kwargs.pop("use_graph", False):
            raise SingaONNXError("SONNXModel runs in graph mode through Model.compile(..., "
                                 "use_graph=True) and train_one_batch; do not pass use_graph")
        rep = SingaBackend.prepare(onnx_model, device=device, **prepare_kwargs)
        rep.is_graph = True
        # kept out of the Layer attribute machinery: the rep is not a sub-layer
        self.__dict__["sg_ir"] = rep
        self.__dict__["_initialized"] = True

    def forward(self, *x, aux_output=(), **kwargs):
        """The imported graph's outputs (Tensors), then ``aux_output``'s named values."""
        return self.sg_ir.run(list(x), aux_output=aux_output, **kwargs)

    def get_params(self) -> dict:
        """The imported trainable initializers (by initializer name) and the parameters of added
        layers.
        """
        params = dict(self.sg_ir.trainable)
        params.update(super().get_params())
        return params

    def set_params(self, parameters: dict) -> None:
        """Copy values into the imported initializers and the added layers' parameters of the
        same names.

        Parameters
        ----------
        parameters : dict[str, Tensor or numpy.ndarray]
            Values by name; each is cast to the parameter's dtype and reshaped to its shape.
        """
        for name, t in self.sg_ir.trainable.items():
            if name in parameters:
                _copy_into(t, parameters[name])
        super().set_params(parameters)

    def get_states(self) -> dict:
        """The parameters plus the imported batch-norm running statistics and the added layers'
        states.
        """
        states = dict(self.sg_ir.states)
        states.update(super().get_states())
        states.update(self.get_params())
        return states

    def set_states(self, states: dict) -> None:
        """Copy values into the states and parameters of the same names (see
        [`set_params`][singa_onnx.SONNXModel.set_params])."""
        for name, t in self.sg_ir.states.items():
            if name in states:
                _copy_into(t, states[name])
        super().set_states(states)
        self.set_params(states)


def _copy_into(dst, src):
    arr = tensor.to_numpy(src) if isinstance(src, tensor.Tensor) else src
    dst.copy_from_numpy(arr.astype(tensor.to_numpy(dst).dtype).reshape(dst.shape))
