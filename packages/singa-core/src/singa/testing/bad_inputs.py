"""Bad-input checks of the conformance kit: out-of-range indices.

Every op that addresses memory with values read from a tensor (Take, which ``gather`` and
``Embedding`` use; ScatterAdd, Embedding's gradient; GatherElements; ScatterElements; the class
ids of SoftmaxCrossEntropy(+Backward) and CrossEntropyFwd) must raise
:class:`singa.errors.IndexOutOfRangeError` naming the op on every backend, before it reads or
writes anything: an output passed in stays untouched. A kernel that trusted the values would
read or write outside its buffers (a segfault on a CPU OpenCL runtime, silently wrong numbers
elsewhere). OneHot defines out-of-range indices (an all-``off_value`` row), so it is checked
against its reference instead.

``test_bad_indices[Take-huge]`` and friends run on the device of ``--singa-backend``; an op
the device has no kernel for is skipped (host fallback runs the numpy reference).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from .._dtype import NP_DTYPE
from ..errors import IndexOutOfRangeError
from ..ops import OPS, run
from . import checks

__all__ = ["BAD_INDEX_CASES", "BadIndexCase", "test_bad_indices", "test_onehot_out_of_range"]

_F = np.float32
_I = np.int32


@dataclass(frozen=True)
class BadIndexCase:
    """One op call whose index input holds a value outside the indexed axis."""

    op: str
    label: str
    arrays: tuple
    attrs: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.op}-{self.label}"


def _x(*shape):
    return np.arange(int(np.prod(shape)), dtype=_F).reshape(shape)


def _ids(*v):
    return np.array(v, _I)


def _cases() -> list[BadIndexCase]:
    out = []
    for label, bad in (("huge", 100_000_000), ("just-past", 4), ("below", -5)):
        out.append(BadIndexCase("Take", label, (_x(4, 2), np.array([[bad, 1]], _I)),
                                {"axis": 0}))
        out.append(BadIndexCase("ScatterAdd", label, (_ids(0, bad), _x(2, 3)),
                                {"shape": (4, 3), "axis": 0}))
    for label, bad in (("huge", 1 << 30), ("just-past", 3), ("below", -4)):
        out.append(BadIndexCase("GatherElements", label, (_x(3, 2), np.array([[0, bad]], _I)),
                                {"axis": 0}))
        out.append(BadIndexCase("ScatterElements", label,
                                (_x(3, 2), np.array([[bad, 0]], _I), _x(1, 2)), {"axis": 0}))
    for label, bad in (("huge", 10**9), ("just-past", 2), ("negative", -1)):
        out.append(BadIndexCase("SoftmaxCrossEntropy", label, (_x(3, 2), _ids(0, 1, bad))))
        probs = np.full((3, 2), 0.5, _F)
        out.append(BadIndexCase("SoftmaxCrossEntropyBackward", label, (probs, _ids(0, bad, 1))))
        out.append(BadIndexCase("CrossEntropyFwd", label, (probs, _ids(bad, 0, 1))))
    return out


#: The cases ``test_bad_indices`` runs.
BAD_INDEX_CASES = _cases()


def _kernel_or_skip(dev, name: str):
    from .conformance import device_kernels  # late: conformance imports this module

    if name not in device_kernels(dev):
        pytest.skip(f"{dev.name} has no kernel for {name} (host fallback is not checked)")


@pytest.mark.parametrize("bad_case", BAD_INDEX_CASES, ids=lambda c: c.id)
def test_bad_indices(bad_case, singa_device):
    """An out-of-range index raises IndexOutOfRangeError naming the op; outputs untouched."""
    op = OPS[bad_case.op]
    _kernel_or_skip(singa_device, op.name)
    ins = [checks.upload(a, singa_device) for a in bad_case.arrays]
    outs = []
    for shape, dt in op.infer(ins, bad_case.attrs):
        np_dt = np.dtype(NP_DTYPE[dt])
        outs.append(checks.upload(np.full(shape, checks.sentinel(np_dt), np_dt), singa_device))
    before = [o.to_numpy() for o in outs]
    with pytest.raises(IndexOutOfRangeError, match=op.name):
        run(op, ins, bad_case.attrs, outs)
    for o, b in zip(outs, before):
        np.testing.assert_array_equal(o.to_numpy(), b, err_msg=f"{op.name} wrote its output "
                                      "before refusing the indices")


def test_onehot_out_of_range(singa_device):
    """OneHot defines indices outside [-depth, depth) as all-off rows; no error, no OOB."""
    op = OPS["OneHot"]
    _kernel_or_skip(singa_device, op.name)
    idx = np.array([[0, 3, -1], [100_000_000, -4, -2_000_000_000]], _I)
    attrs = {"depth": 3, "axis": -1, "on_value": 1.0, "off_value": 0.0}
    got = run(op, [checks.upload(idx, singa_device)], attrs)[0].to_numpy()
    want = checks.reference_outputs(op, [idx], attrs)[0]
    np.testing.assert_array_equal(got, want)
