"""ScatterElements without a reduction is defined only where no two updates share a target
(ONNX leaves the winner unspecified): ``OpDef.defined`` says so, against a loop over the
targets, and the conformance kit keeps the indices contiguous where a zero-stride broadcast
would make duplicates (a GPU's scatter picks any winner; the kit once failed on cuda:0 for it).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from singa.ops import OPS

DEFINED = OPS["ScatterElements"].defined


def _loop(x, idx, axis):
    seen = set()
    for p in itertools.product(*map(range, idx.shape)):
        t = list(p)
        t[axis] = int(idx[p]) % x.shape[axis]
        if tuple(t) in seen:
            return False
        seen.add(tuple(t))
    return True


@pytest.mark.parametrize("seed", range(40))
def test_defined_is_no_duplicate_target(seed):
    rng = np.random.default_rng(seed)
    x = np.zeros(tuple(rng.integers(1, 4, 3)))
    axis = int(rng.integers(-3, 3))
    shape = [int(rng.integers(1, d + 1)) for d in x.shape]
    idx = rng.integers(-x.shape[axis], x.shape[axis], shape).astype(np.int32)
    want = _loop(x, idx, axis % 3)
    assert DEFINED([x, idx, idx.astype(x.dtype)], {"axis": axis}) is want
    assert DEFINED([x, idx, idx.astype(x.dtype)], {"axis": axis, "reduction": "add"})


def test_a_broadcast_index_is_a_duplicate():
    x = np.zeros((3, 2, 3))
    idx = np.broadcast_to(np.array([[[0, 1]]], np.int32), (2, 1, 2))  # the kit's failing case
    assert not DEFINED([x, idx, np.zeros((2, 1, 2))], {"axis": 0})
    assert DEFINED([x, idx[:1], np.zeros((1, 1, 2))], {"axis": 0})


def test_the_kit_keeps_undefined_broadcasts_contiguous(monkeypatch):
    """The broadcast layout plan on the CPU device: x is broadcast as planned, the indices
    (whose broadcast would duplicate targets) are not, and the result matches the reference."""
    from singa import _dtype
    from singa.device import get_default_device
    from singa.testing import conformance

    class _Draws:  # the kit's draw interface, as far as these layouts use it
        def choice(self, xs):
            return xs[0]

    given = []
    real_run = conformance.run

    def run(op, ins, attrs, outs=None):
        given.append(["contiguous" if t.contig else t.strides for t in ins])
        return real_run(op, ins, attrs, outs)

    monkeypatch.setattr(conformance, "run", run)
    dev = get_default_device()
    case = conformance.KernelCase(OPS["ScatterElements"], _dtype.kFloat32,
                                  dev.kernel(OPS["ScatterElements"])[0])
    x = np.arange(18, dtype=np.float32).reshape(3, 2, 3)
    idx = np.array([[[0, 1]], [[2, 0]]], np.int32)
    upd = np.ones((2, 1, 2), np.float32)
    conformance._run_layout(_Draws(), case, dev, [x, idx, upd],
                            {"axis": 0, "reduction": "none"}, ("broadcast", "contiguous"))
    assert given[0][1] == "contiguous"
    assert given[0][0] != "contiguous"
