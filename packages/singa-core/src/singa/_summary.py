"""What a model is made of, for people: the nested ``repr`` of a Layer and ``Model.summary()``.

Both walk the layer tree that attribute assignment builds (``Layer._layers``, in assignment
order). Parameter counts come from ``get_params()`` (trainable tensors) and ``get_states()``
(those plus buffers such as BatchNorm's running statistics), so they exist only once the
layers have seen an input (``Model.compile``). Output shapes are the ones recorded by the
forward pass that ``Model.compile`` runs on its placeholders.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

__all__ = ["ModelSummary", "SummaryRow", "layer_repr", "record_output_shapes", "summarize"]

#: Constructor settings shown in a layer's repr, when the layer has them and they are set.
_SHOWN = ("in_features", "out_features", "in_channels", "nb_kernels", "channels",
          "kernel_size", "stride", "padding", "axis", "activation")
_UNSET = (None, "NOTSET", "")
_OUTPUT_SHAPE = "_summary_output_shape"


def _children(layer) -> list:
    return list(layer.__dict__.get("_layers", {}).items())


def _count(tensors: dict) -> int:
    return sum(int(t.size()) for t in tensors.values())


def param_count(layer) -> int | None:
    """Number of trainable values of ``layer`` and its sub-layers (None before they exist)."""
    if not layer.__dict__.get("_initialized", False) and not layer.get_params():
        return None
    return _count(layer.get_params())


def _settings(layer) -> str:
    parts = []
    for attr in _SHOWN:
        v = layer.__dict__.get(attr)
        if v in _UNSET or isinstance(v, bool) or not isinstance(v, (int, str, tuple, list)):
            continue
        parts.append(f"{attr}={tuple(v) if isinstance(v, list) else v!r}")
    return ", ".join(parts)


def layer_repr(layer, indent: str = "") -> str:
    """``Type(settings)`` with the parameter count, then each sub-layer indented beneath.

    Example (the seed CNN after ``compile``)::

        CNN(  # 431,080 params
          (conv1): Conv2d(in_channels=1, nb_kernels=20, kernel_size=(5, 5), ...) 520 params
          ...
        )
    """
    head = f"{type(layer).__name__}({_settings(layer)})"
    n = param_count(layer)
    count = "not initialised: call compile()" if n is None else f"{n:,} params"
    kids = _children(layer)
    if not kids:
        return f"{head} {count}" if n else head
    lines = [f"{type(layer).__name__}(  # {count}"]
    for name, child in kids:
        lines.append(f"{indent}  ({name}): {layer_repr(child, indent + '  ')}")
    lines.append(f"{indent})")
    return "\n".join(lines)


def _shape_of(out):
    shape = getattr(out, "shape", None)
    if isinstance(shape, tuple):
        return shape
    if isinstance(out, (list, tuple)) and out:
        shapes = [_shape_of(o) for o in out]
        return shapes if all(s is not None for s in shapes) else None
    return None


def _walk(layer, prefix=""):
    for name, child in _children(layer):
        path = prefix + name
        yield path, child, path.count(".")
        yield from _walk(child, path + ".")


@contextlib.contextmanager
def record_output_shapes(model):
    """While active, every layer of ``model`` (and the model) remembers the shape of what its
    ``forward`` returned; ``Model.compile`` wraps its placeholder forward pass in this."""
    layers = [model] + [child for _, child, _ in _walk(model)]
    patched = []
    for layer in layers:
        if "forward" in layer.__dict__:  # an instance-level forward: leave it alone
            continue
        bound = layer.forward

        def forward(*args, _bound=bound, _layer=layer, **kwargs):
            out = _bound(*args, **kwargs)
            _layer.__dict__[_OUTPUT_SHAPE] = _shape_of(out)
            return out

        layer.__dict__["forward"] = forward
        patched.append(layer)
    try:
        yield
    finally:
        for layer in patched:
            layer.__dict__.pop("forward", None)


@dataclass
class SummaryRow:
    """One layer of :class:`ModelSummary`: dotted name, type, output shape, parameters."""

    name: str
    type: str
    depth: int
    output_shape: tuple | list | None
    params: int | None


@dataclass
class ModelSummary:
    """``Model.summary()``: rows per layer (depth first) and totals; prints as a table."""

    model: str
    rows: list = field(default_factory=list)
    total_params: int = 0
    non_trainable_states: int = 0
    input_shapes: list = field(default_factory=list)
    output_shape: tuple | list | None = None

    def __str__(self) -> str:
        cells = [(("  " * r.depth) + f"{r.name.rsplit('.', 1)[-1]} ({r.type})",
                  "-" if r.output_shape is None else str(r.output_shape),
                  "-" if r.params is None else f"{r.params:,}") for r in self.rows]
        head = ("Layer (type)", "Output shape", "Params")
        w = [max([len(head[i])] + [len(c[i]) for c in cells]) for i in range(3)]
        rule = "=" * (w[0] + w[1] + w[2] + 4)
        fmt = f"{{:<{w[0]}}}  {{:<{w[1]}}}  {{:>{w[2]}}}"
        lines = [f"Model: {self.model}", rule, fmt.format(*head), rule]
        lines += [fmt.format(*c) for c in cells]
        lines.append(rule)
        if self.input_shapes:
            lines.append("Input shapes: " + ", ".join(str(s) for s in self.input_shapes))
        if self.output_shape is not None:
            lines.append(f"Output shape: {self.output_shape}")
        lines.append(f"Total params: {self.total_params:,}")
        lines.append(f"Non-trainable states: {self.non_trainable_states:,}"
                     " (e.g. BatchNorm running statistics)")
        return "\n".join(lines)

    __repr__ = __str__


def summarize(model) -> ModelSummary:
    """The :class:`ModelSummary` of ``model`` (see ``Model.summary``)."""
    rows = [SummaryRow(path, type(child).__name__, depth,
                       child.__dict__.get(_OUTPUT_SHAPE), param_count(child))
            for path, child, depth in _walk(model)]
    params, states = model.get_params(), model.get_states()
    return ModelSummary(
        model=type(model).__name__, rows=rows, total_params=_count(params),
        non_trainable_states=_count({k: v for k, v in states.items() if k not in params}),
        input_shapes=list(model.__dict__.get("_summary_input_shapes", [])),
        output_shape=model.__dict__.get(_OUTPUT_SHAPE))
