"""The ``singa.autograd`` functions declared on their Operator classes
(:mod:`singa.autograd._functions`): signature, docstring and numbers against the declaration.

Each declaration's numpy form is the oracle: written in numpy alone, independently of the
Operator, it renders the docstring example, and here the compiled function must give its
numbers on the example's arguments and on drawn float inputs of the same shapes. The
signatures must be the declarations' (and SINGA's: ``tests/core/test_public_api_snapshot.py``
pins those), and each docstring must list every parameter with its type and default.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from singa import autograd, tensor
from singa.autograd._functions import FUNCTIONS
from singa.ops._signatures import REQUIRED

DECLS = [decl for decl, _ in FUNCTIONS.values()]
WITH_EXAMPLE = [decl for decl in DECLS if decl.numpy is not None]

#: SINGA's functions that only build their Operator and call it, each generated from its
#: declaration; a hand-written def of one of these names fails test_every_wrapper_is_declared
GENERATED = {
    "identity", "elu", "selu", "leakyrelu", "hardsigmoid", "prelu", "clip", "cast", "sum",
    "mean", "max", "min", "matmul", "add_bias", "gemm", "softmax", "log_softmax",
    "globalaveragepool", "shape", "split", "slice", "gather", "tile", "expand", "pad",
    "upsample", "where", "scatter_elements", "constant_of_shape", "nonzero", "onehot",
    "cossim", "embedding", "dropout", "conv2d", "batchnorm_2d", "pooling_2d",
    "softmax_cross_entropy", "cross_entropy", "binary_cross_entropy", "mse_loss",
    "ranking_loss", "argmax", "conv_transpose2d"}


def _id(decl):
    return decl.name


def test_every_wrapper_is_declared():
    assert set(FUNCTIONS) == GENERATED
    for name in GENERATED:
        function = getattr(autograd, name)
        assert function.__module__ == "singa.autograd" and function.__name__ == name
        # compiled from the declaration: its text is the generated one
        assert inspect.getsourcefile(function) is None or "<singa generated" in \
            function.__code__.co_filename


@pytest.mark.parametrize("decl", DECLS, ids=_id)
def test_signature_is_the_declarations(decl):
    got = [(p.name, p.kind, p.default)
           for p in inspect.signature(getattr(autograd, decl.name)).parameters.values()]
    want = [(p.name.lstrip("*"),
             inspect.Parameter.VAR_POSITIONAL if p.name.startswith("*") else
             inspect.Parameter.POSITIONAL_OR_KEYWORD,
             inspect.Parameter.empty if p.default is REQUIRED else p.default)
            for p in decl.params]
    assert got == want


@pytest.mark.parametrize("decl", DECLS, ids=_id)
def test_docstring_lists_every_parameter(decl):
    doc = getattr(autograd, decl.name).__doc__
    _, _, params = doc.partition("\nParameters\n----------\n")
    params, _, returns = params.partition("\nReturns\n-------\n")
    listed = [line.split(" : ")[0] for line in params.splitlines()
              if line and not line.startswith(" ")]
    assert listed == [p.name for p in decl.params]
    for p in decl.params:
        head = f"{p.name} : {p.kind}"
        if p.default is None:
            head += ", optional"
        elif p.default is not REQUIRED:
            head += f", default {p.default!r}"
        assert f"\n{head}\n" in f"\n{params}"
    assert returns.split("\n")[0] in ("Tensor", "tuple of Tensor")
    assert doc.startswith(decl.summary.split(" ")[0]) and "(:class:`" in doc.split("\n\n")[0]
    if decl.grad:
        assert decl.grad.split(" ")[0] in doc
    if decl.numpy is not None:
        assert "\nExamples\n--------\n" in doc and decl.example_text() in doc


def _tensor(a: np.ndarray):
    a = np.asarray(a)
    return tensor.from_numpy(a.astype(np.int32 if a.dtype.kind in "iu" else np.float32))


def _call(decl, args: dict):
    """The function on ``args``: arrays of inputs and Tensor params as Tensors."""
    function = getattr(autograd, decl.name)
    kwargs, varargs = {}, ()
    for p in decl.params:
        if p.name not in args:
            continue
        value = args[p.name]
        is_tensor = p.name in decl.inputs or p.kind.startswith("Tensor")
        if p.name.startswith("*"):
            varargs = tuple(_tensor(v) for v in value)
        else:
            kwargs[p.name] = _tensor(value) if is_tensor else value
    return function(*varargs, **kwargs)


def _oracle(decl, args: dict):
    arrays = {k.lstrip("*"): (tuple(np.asarray(v) for v in a) if k.startswith("*") else
                              np.asarray(a) if k in decl.inputs or
                              decl._param(k).kind.startswith("Tensor") else a)
              for k, a in args.items()}
    return decl.numpy(**arrays)


def _check(decl, args):
    got, want = _call(decl, args), _oracle(decl, args)
    if decl.outputs == "all":
        assert len(got) == len(want)
        pairs = list(zip(got, want))
    else:
        pairs = [(got, want)]
    for g, w in pairs:
        g = tensor.to_numpy(g)
        assert g.shape == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("decl", WITH_EXAMPLE, ids=_id)
def test_the_example_is_the_numpy_forms(decl):
    _check(decl, dict(decl.example))


@pytest.mark.parametrize("decl", [d for d in WITH_EXAMPLE if all(
    isinstance(d.example[n], list) and np.asarray(d.example[n]).dtype.kind == "f"
    for n in d.inputs if n in d.example) and d.name not in (
        "cross_entropy", "binary_cross_entropy", "cast")], ids=_id)
def test_drawn_float_inputs_against_the_numpy_form(decl, rng):
    # the example's shapes with other values (probabilities stay in (0, 1) above)
    args = dict(decl.example)
    for n in decl.inputs:
        if n in args:
            args[n] = (rng.standard_normal(np.shape(args[n])) * 2).tolist()
    _check(decl, args)


def test_optional_input_passed_only_when_given():
    a = tensor.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = tensor.from_numpy(np.ones((3, 2), np.float32))
    y = autograd.gemm(a, b)
    assert len(y.creator.src) == 2
    y = autograd.gemm(a, b, tensor.from_numpy(np.ones(2, np.float32)), beta=3.0)
    np.testing.assert_allclose(tensor.to_numpy(y), tensor.to_numpy(a) @ np.ones((3, 2)) + 3)


@pytest.mark.parametrize("decl", DECLS, ids=_id)
def test_class_docstring_adds_the_constructors_parameters(decl):
    cls = FUNCTIONS[decl.name][1]
    doc = cls.__doc__
    for name in decl.constructor_args:
        assert f"\n{name} : " in doc
    assert f"``{decl.name}(" in doc and doc == cls.__doc__


def test_a_declaration_must_match_its_constructor():
    from singa.autograd._engine import Operator
    from singa.autograd._functions import Function, declares
    from singa.ops._signatures import Param

    decl = Function("f_test_only", "y", (Param("x", "Tensor", "x."), Param("b", "int", "b."),
                                         Param("a", "int", "a.")), ("x",), "y.")

    class Swapped(Operator):
        def __init__(self, a, b):
            super().__init__()

    with pytest.raises(TypeError, match="do not start with the declaration's"):
        declares(decl)(Swapped)
    assert "f_test_only" not in FUNCTIONS


def test_a_subclass_of_a_declared_class_documents_itself():
    class Mine(autograd.Elu):
        """My elu."""

    assert Mine.__doc__ == "My elu." and Mine(0.5).alpha == 0.5
