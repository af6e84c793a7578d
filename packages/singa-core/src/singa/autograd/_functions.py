"""SINGA's functional form of an Operator, declared once beside its class.

Most of ``singa.autograd``'s lower-case functions only build their Operator and call it:
``elu(x, alpha=1.0)`` is ``Elu(alpha)(x)[0]``. Such a function is a :class:`Function`
declaration on its Operator class (``@declares(Function(...))``): its name, its parameters in
SINGA's order (each with its type, meaning and default), which of them are the Operator's
tensor inputs (the others go to the constructor, by position, in the order given), what y is
(formula, gradient, shape and dtype) and a numpy form of the whole function with the
arguments of a docstring example. ``singa.autograd`` compiles each function with exactly
those parameters (:func:`singa.ops._signatures.compile_def`) and renders its NumPy-style
docstring from the declaration, the example computed by the numpy form.

The functions that do more than build and call their Operator are written out in
``singa.autograd`` (see docs/architecture.md).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..ops._records import Onnx, RecordDoc
from ..ops._signatures import REQUIRED, Param, compile_def, param_entries, wrap

__all__ = ["Function", "FUNCTIONS", "declares", "build", "X", "ANY"]

#: The x of most functions: a float tensor of any shape.
X = Param("x", "Tensor", "Any shape; a floating dtype (float32, float16 or float64).")
#: An x of any shape and dtype.
ANY = Param("x", "Tensor", "Any shape and dtype.")


@dataclass(frozen=True, eq=False)
class Function:
    """The ``singa.autograd`` function of one Operator class.

    name: the function's name. summary: what y is, one line (the formula). params: the
    function's parameters in SINGA's order; one named ``*xs`` is variadic. inputs: the names
    of the params that are the Operator's tensor inputs, passed to the call in their order
    (one with default None, the last input, is passed only when given); the other params go
    to the constructor by position, in their order. returns: y's shape and dtype. grad: the
    gradient in words ("" where none is stated). note: a paragraph more (why the function has
    SINGA's form). outputs: "first" returns y, "all" the tuple of every output. numpy: the
    numpy form of the function, ``numpy(**example)``, the docstring example's oracle (and the
    tests'); None: no example (a random or a handle-driven op). example: the arguments of
    the example, by name; a list given for a Tensor (an input, or a param whose kind starts
    with "Tensor") is an array (a float list float64, an int list int64).
    """

    name: str
    summary: str
    params: tuple[Param, ...]
    inputs: tuple[str, ...]
    returns: str
    grad: str = ""
    note: str = ""
    outputs: str = "first"
    numpy: Callable | None = None
    example: dict[str, Any] = field(default_factory=dict)
    onnx: Onnx | None = None

    def __post_init__(self):
        names = [p.name for p in self.params]
        if not set(self.inputs) <= set(names):
            raise TypeError(f"Function {self.name}: inputs {self.inputs} are not all among its "
                            f"params {names}")
        optional = [n for n in self.inputs if self._param(n).default is not REQUIRED]
        if optional and optional != [self.inputs[-1]]:
            raise TypeError(f"Function {self.name}: only the last input may have a default "
                            f"(None: passed only when given), not {optional}")

    def _param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    @property
    def constructor_args(self) -> tuple[str, ...]:
        """The params passed to the Operator's constructor, in order."""
        return tuple(p.name for p in self.params if p.name not in self.inputs)

    def body(self) -> str:
        """The function's body: build the Operator, call it, return y (or every output)."""
        pick = "[0]" if self.outputs == "first" else ""
        args = ", ".join(self.inputs)
        op = f"_cls({', '.join(self.constructor_args)})"
        last = self._param(self.inputs[-1]) if self.inputs else None
        if last is not None and last.default is not REQUIRED:
            given = ", ".join(self.inputs[:-1])
            return (f"_op = {op}\nif {last.name} is None:\n    return _op({given}){pick}\n"
                    f"return _op({args}){pick}")
        return f"return {op}({args}){pick}"

    def example_text(self) -> str:
        """``name(x, a=...) = y, for x = [...]``, y computed by :attr:`numpy`."""
        args = {k: _array(v) if k in self.inputs or self._param(k).kind.startswith("Tensor")
                else v for k, v in self.example.items()}
        if self.numpy is None:
            raise ValueError(f"Function {self.name}: no numpy form, so no example")
        y = self.numpy(**{k.lstrip("*"): v for k, v in args.items()})
        call = []
        for p in self.params:
            if p.name not in args:
                continue
            call.append(p.name if p.name in self.inputs else f"{p.name}={_show(args[p.name])}")
        given = ", ".join(f"{n.lstrip('*')} = {_show(args[n])}" for n in self.inputs
                          if n in args)
        return (f"{self.name}({', '.join(call)}) = {_show(y)}"
                + (f", for {given}" if given else ""))

    def class_doc(self, written: str | None, defaults: dict) -> str:
        """The Operator class's docstring: its own text (``written``), then the constructor's
        parameters as the declaration gives them, with the constructor's ``defaults``, and
        how the class relates to the function."""
        text = inspect.cleandoc(written or "")
        ctor = [replace(p, default=defaults.get(p.name, REQUIRED)) for p in self.params
                if p.name not in self.inputs]
        if ctor:
            text += f"\n\nParameters\n----------\n{param_entries(ctor)}"
        inputs = ", ".join(n.lstrip("*") for n in self.inputs)
        returns = ("the 1-tuple (y,)" if self.outputs == "first" else "the tuple of outputs",
                   "y itself" if self.outputs == "first" else "the same tuple")
        call = ", ".join(p.name for p in self.params)
        return text.rstrip() + "\n\nNotes\n-----\n" + wrap(
            f"Calling an instance on the input Tensor{'s' if ', ' in inputs else ''} {inputs} "
            f"returns {returns[0]}; "
            f"``{self.name}({call})`` builds the instance and returns {returns[1]}.") + "\n"

    def doc(self, operator: str) -> str:
        """The function's docstring (``operator``: its Operator class's name)."""
        text = wrap(f"{self.summary} (:class:`{operator}`).")
        if self.grad:
            text += "\n\n" + wrap(f"Gradient: {self.grad}.")
        if self.note:
            text += "\n\n" + wrap(self.note)
        params = param_entries(self.params)
        kind = "Tensor" if self.outputs == "first" else "tuple of Tensor"
        text += (f"\n\nParameters\n----------\n{params}\nReturns\n-------\n{kind}\n"
                 f"{wrap(self.returns, '    ')}\n")
        if self.numpy is not None:
            text += f"\nExamples\n--------\n{self.example_text()}\n"
        return text


def _array(value):
    if isinstance(value, list):
        return np.asarray(value)
    if isinstance(value, tuple) and value and all(isinstance(v, list) for v in value):
        return tuple(np.asarray(v) for v in value)
    return value


def _show(value) -> str:
    if isinstance(value, tuple) and value and all(isinstance(v, np.ndarray) for v in value):
        return "(" + ", ".join(_show(v) for v in value) + ")"
    if isinstance(value, np.ndarray):
        return str(_round4(value.tolist()))
    return repr(value)


def _round4(value):
    # Python's round on the nested lists: a numpy round costs ~20 us an array at import
    if isinstance(value, list):
        return [_round4(v) for v in value]
    return round(value, 4) if isinstance(value, float) else value


#: Function name -> (declaration, Operator class), filled by :func:`declares` as the Operator
#: modules are imported.
FUNCTIONS: dict[str, tuple[Function, type]] = {}


def declares(function: Function) -> Callable[[type], type]:
    """Class decorator: ``function`` is the Operator class's ``singa.autograd`` function.

    The constructor's leading parameters must be the declaration's constructor arguments, by
    name and in order (the function passes them by position). The class keeps its own
    docstring, followed on first read by the constructor's parameters from the declaration.
    """

    def register(cls: Any) -> Any:
        if function.name in FUNCTIONS:
            raise TypeError(f"{cls.__name__}: the function {function.name} is declared already "
                            f"on {FUNCTIONS[function.name][1].__name__}")
        code = cls.__init__.__code__
        init = code.co_varnames[1:code.co_argcount]
        args = function.constructor_args
        if init[:len(args)] != args:
            raise TypeError(f"{cls.__name__}: the constructor's parameters {init} do not start "
                            f"with the declaration's constructor arguments {args} (the "
                            f"function {function.name} passes them by position)")
        FUNCTIONS[function.name] = (function, cls)
        values = cls.__init__.__defaults__ or ()
        defaults = dict(zip(init[len(init) - len(values):], values))
        cls.__doc__ = RecordDoc(functools.partial(function.class_doc, cls.__dict__["__doc__"],
                                                  defaults))
        return cls

    return register


def build(function: Function, cls: type, module: str) -> Callable:
    """The compiled function of a declaration, with its docstring, in ``module``."""
    compiled = compile_def(function.name, (), function.params, function.body(), {"_cls": cls},
                           module)
    compiled.__doc__ = function.doc(cls.__name__)
    return compiled
