"""The docstrings rendered from the op records (``singa.ops.UNARY``, ``BINARY``,
``REDUCTIONS``).

The Operator classes built from the records render theirs on first read (``RecordDoc``), not at
import: a fresh interpreter that imports ``singa.autograd`` renders none, and reading one renders
that one, once. Whatever reads it (the class, an instance, ``inspect.getdoc``, ``pydoc``) gets
the record's text. Each record's example, computed once for every layer's docstring, is the
record's reference on three points of its domain (``np.linspace`` rounded to 2 decimals: the
oracle, written independently of the record's code).
"""

from __future__ import annotations

import inspect
import json
import pydoc
import subprocess
import sys

import numpy as np
import pytest
from singa import autograd
from singa.ops import BINARY, REDUCTIONS, UNARY

OPERATOR_RECORDS = [d for d in (*UNARY.values(), *BINARY.values(), *REDUCTIONS.values())
                    if d.autograd]

_COUNT_RENDERS = """
import json
import singa.ops._elementwise as records
import singa.ops._reductions as reductions

renders = []
for cls in (records.Unary, records.Binary, reductions.Reduction):
    def doc(self, layer, *args, _doc=cls.doc, **kwargs):
        renders.append([self.op, layer])
        return _doc(self, layer, *args, **kwargs)
    cls.doc = doc

import singa.autograd as autograd

at_import = [r for r in renders if r[1] == "operator"]
text = autograd.Sigmoid.__doc__
again = autograd.Sigmoid().__doc__
reduction = autograd.ReduceMean.__doc__
print(json.dumps({"at_import": at_import,
                  "after_two_reads": [r for r in renders if r[1] == "operator"],
                  "same": text == again == records.UNARY["Sigmoid"].doc("operator"),
                  "same_reduction": reduction == autograd.ReduceMean([1]).__doc__
                  == reductions.REDUCTIONS["ReduceMean"].doc("operator")}))
"""


def test_operator_docstrings_render_on_first_read_only():
    out = subprocess.run([sys.executable, "-c", _COUNT_RENDERS], capture_output=True,
                         text=True, check=True)
    got = json.loads(out.stdout)
    assert got["at_import"] == [], "import singa.autograd rendered Operator docstrings"
    assert got["after_two_reads"] == [["Sigmoid", "operator"], ["ReduceMean", "operator"]]
    assert got["same"] and got["same_reduction"]


@pytest.mark.parametrize("decl", OPERATOR_RECORDS, ids=lambda d: d.op)
def test_operator_docstring_is_the_records_wherever_read(decl):
    cls = getattr(autograd, decl.operator or decl.op)
    want = decl.doc("operator")
    assert cls.__doc__ == want
    assert cls().__doc__ == want
    assert inspect.getdoc(cls) == inspect.cleandoc(want)
    assert want.splitlines()[0] in pydoc.render_doc(cls, renderer=pydoc.plaintext)


def test_a_subclass_documents_itself_as_before():
    class Mine(autograd.Sigmoid):
        """My sigmoid."""

    class Plain(autograd.Sigmoid):
        pass

    assert Mine.__doc__ == "My sigmoid."
    assert Plain.__doc__ is None  # a class without a docstring, as for any base class
    assert inspect.getdoc(Plain) == inspect.cleandoc(UNARY["Sigmoid"].doc("operator"))


def _fmt(values) -> str:
    return "[" + ", ".join(format(float(v), ".4g") for v in np.ravel(values)) + "]"


@pytest.mark.parametrize("decl", list(UNARY.values()), ids=lambda d: d.op)
def test_unary_example_is_the_reference_on_three_points(decl):
    x = np.round(np.linspace(*decl.domain, 3), 2)
    assert decl.example == f"{decl.name}({_fmt(x)}) = {_fmt(decl.reference(x))}"


@pytest.mark.parametrize("decl", list(BINARY.values()), ids=lambda d: d.op)
def test_binary_example_is_the_reference_on_fixed_operands(decl):
    a, b = np.array([1.0, 2.0, 3.0]), np.full(3, 2.0)
    assert decl.example == f"{decl.name}({_fmt(a)}, {_fmt(b)}) = {_fmt(decl.reference(a, b))}"


@pytest.mark.parametrize("decl", list(REDUCTIONS.values()), ids=lambda d: d.op)
def test_reduction_example_is_the_reference_on_a_matrix(decl):
    x = np.array([[1.0, -2.0, 3.0], [4.0, 0.0, 5.0]])
    want = _fmt(decl.numpy(x, axis=1))
    assert decl.example == want
    assert f"{decl.name}({x.astype(int).tolist()}, axes=(1,)) = {want}" in decl.doc("math")
    for layer in ("math", "autograd", "operator"):
        text = decl.doc(layer)
        for part in (f"y = {decl.formula},", f"op ``{decl.op}``", "keepdims", "Examples"):
            assert part in text, (layer, part)
        assert (decl.grad_formula in text) == (layer != "math"), layer
