"""Import handlers built from the ONNX forms of the functions declared on their Operator
classes (``singa.autograd.functions``): Identity, Elu, Selu, LeakyRelu.

A handler is built where the import is only "ONNX attributes -> constructor arguments": each
of the form's ONNX operands an attribute of onnx's schema, paired with an argument of the
Operator's constructor, and an attribute the node leaves out is onnx's schema's default at
the model's opset. The other declared forms keep the handlers written out in this package,
each for the reason :data:`WRITTEN_OUT` gives.
"""

from __future__ import annotations

import functools

import onnx
from singa.autograd.functions import FUNCTIONS

from ._registry import register

#: ONNX operator -> why its handler is written out, not built from the declared form
WRITTEN_OUT = {
    "PRelu": "a host slope takes x's dtype (elementwise.py)",
    "Sum": "ONNX broadcasts n operands; singa adds them in pairs (elementwise.py)",
    "Mean": "ONNX broadcasts n operands; singa adds them in pairs (elementwise.py)",
    "Max": "ONNX broadcasts n operands; singa's Max takes equal shapes (elementwise.py)",
    "Min": "ONNX broadcasts n operands; singa's Min takes equal shapes (elementwise.py)",
    "MatMul": "a host operand takes the other's dtype (nn.py)",
    "Gemm": "host B and C take A's dtype (nn.py)",
    "Softmax": "opsets before 13 normalise x coerced to 2-D at axis (elementwise.py)",
    "LogSoftmax": "opsets before 13 normalise x coerced to 2-D at axis (elementwise.py)",
    "GlobalAveragePool": "imported as a ReduceMean over the spatial axes (nn.py)",
    "Split": "sizes as an attribute or an input by opset, or num_outputs (shape.py)",
    "Gather": "checks the indices; runtime ids at axis 0 are an Embedding (shape.py)",
    "Tile": "checks repeats against the element budget; tiles high ranks axis by axis "
            "(shape.py)",
    "Expand": "checks the shape against x's and the element budget (shape.py)",
    "Shape": "a host int64 value, sliced by start and end (shape.py)",
    "ArgMax": "select_last_index, and ONNX's int64 output (reduce.py)",
}


@functools.cache
def _default(op_type: str, opset: int, name: str):
    """onnx's schema's default of attribute ``name`` of ``op_type`` at ``opset``."""
    value = onnx.defs.get_schema(op_type, opset).attributes[name].default_value
    return onnx.helper.get_attribute_value(value)


def _mappable(decl) -> bool:
    """Whether the declared form's import is only ONNX attributes -> constructor arguments."""
    form = decl.onnx
    schema = onnx.defs.get_schema(form.op_type)
    return (not form.convert and form.applies is None and not form.int64_out
            and all(name in schema.attributes and field in decl.constructor_args
                    for name, field in form.attrs))


def _handler(decl, cls):
    """The handler of ``decl``'s ONNX form: the constructor's arguments from the node's
    attributes (or onnx's defaults), the Operator called on the node's inputs."""
    form = decl.onnx

    def handler(ctx, attrs, *xs):
        values = {field: attrs[name] if name in attrs else _default(form.op_type, ctx.opset,
                                                                       name)
                  for name, field in form.attrs}
        ys = cls(**values)(*(ctx.tensor(x) for x in xs))
        return ys[0] if decl.outputs == "first" else ys

    handler.__doc__ = f"{decl.summary} (singa's {cls.__name__})."
    return handler


for _decl, _cls in FUNCTIONS.values():
    if _decl.onnx is None or _decl.onnx.op_type in WRITTEN_OUT:
        continue
    if not _mappable(_decl):
        raise TypeError(f"{_cls.__name__}: the ONNX form {_decl.onnx.op_type} does more than "
                        "map attributes to constructor arguments; write its handler out and "
                        "list it in WRITTEN_OUT")
    register(_decl.onnx.op_type, attrs=[name for name, _ in _decl.onnx.attrs])(
        _handler(_decl, _cls))
