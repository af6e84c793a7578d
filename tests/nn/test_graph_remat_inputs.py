"""Rematerialisation never recomputes from an input that changed after the forward pass.

A recompute runs the dropped block's kernel again just before its late use; that gives the
block's forward value only if every input still holds what it held then. Each program below
reads ``t = f(x)`` early and late with a peak in between (the planner drops and recomputes
``t`` there: checked on the unchanged program), and changes an input of ``t`` in between in
one of the ways a program can: in place, through a shallow-copy alias, through a reshaped
view, by a partial copy, or by an optimizer update (plain and with momentum). Oracle: eager
execution of the same program from the same values, over several graph replays (the input
keeps changing from one replay to the next), bitwise.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from singa import opt, tensor
from singa.device import get_default_device

N = 1024  # elements: large enough that dropping t lowers the graph's peak
REPLAYS = 3


def _t(values, dev):
    t = tensor.from_numpy(np.asarray(values, np.float32))
    t.to_device(dev)
    return t


def _program(dev, kind, change, values):
    """(body, outputs): ``kind`` is how t is made from x (and y), ``change`` how the input
    changes between t's early and late uses (None: it does not)."""
    x, y = _t(values[0], dev), _t(values[1], dev)
    g = _t(values[2], dev)
    acc = _t(np.zeros(N), dev)
    sgd = opt.SGD(lr=0.25)
    momentum = opt.SGD(lr=0.25, momentum=0.5)
    x.name = "x"
    # made with the graph off: in the graph they are persistent, as parameters are
    alias = x.copy()  # SINGA's shallow copy: a new tensor over x's block
    view = x.reshape((N // 32, 32))
    src = _t(values[2][:N // 4], dev)

    def body():
        nonlocal x, alias, view, acc
        if kind == "neg":
            t = -x
        elif kind == "mul":  # the changed input is the second operand
            t = y * x
        else:  # a two-node recompute: relu(-x), -x freed after its only use
            t = tensor.relu(-x)
        a = t + y         # t's early use
        b = a * y         # the peak: t, a, b alive
        c = a + b
        if change == "inplace":
            x += 1.0
        elif change == "alias":
            alias *= -1.5
        elif change == "view":
            view += 0.5
        elif change == "partial":
            tensor.copy_data_to_from(x, src, N // 4, dst_offset=N // 2)
        elif change == "sgd":
            sgd.update(x, g)
        elif change == "momentum":
            momentum.update(x, g)
        d = c + t         # t's late use
        acc += d

    return body, (acc, x)


def _graph_and_eager(kind, change, values):
    dev = get_default_device()
    body, want = _program(dev, kind, change, values)
    for _ in range(REPLAYS):
        body()
    body, got = _program(dev, kind, change, values)
    dev.ResetGraph()
    dev.EnableGraph(True)
    try:
        body()
    finally:
        dev.EnableGraph(False)
    gc.collect()  # the body's intermediates are the graph's alone: the planner may drop them
    for _ in range(REPLAYS):
        dev.RunGraph()
    graph = dev._graph
    return [tensor.to_numpy(t) for t in got], [tensor.to_numpy(t) for t in want], graph


def _values(seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(N).astype(np.float32) for _ in range(3)]


KINDS = ["neg", "mul", "chain"]
RECOMPUTED = {"neg": ["Neg"], "mul": ["Mul"], "chain": ["Neg", "ReLU"]}
CHANGES = ["inplace", "alias", "view", "partial", "sgd", "momentum"]


@pytest.mark.parametrize("kind", KINDS)
def test_an_unchanged_input_is_recomputed_from(kind):
    """The control: without a change, t is dropped and recomputed, and still equals eager."""
    got, want, graph = _graph_and_eager(kind, None, _values(0))
    assert graph.plan.remat_drops, "the program no longer makes the planner drop t"
    assert [n.name for n in graph.plan.steps if n.remat] == RECOMPUTED[kind]
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("kind", KINDS)
def test_a_changed_input_is_never_recomputed_from(kind, change):
    got, want, _graph = _graph_and_eager(kind, change, _values(1))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=10)
@given(kind=st.sampled_from(KINDS), change=st.sampled_from(CHANGES),
       seed=st.integers(0, 2**32 - 1))
def test_graph_equals_eager_for_generated_values(kind, change, seed):
    got, want, _graph = _graph_and_eager(kind, change, _values(seed))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
