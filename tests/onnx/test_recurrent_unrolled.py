"""ONNX LSTM and GRU on a device without the whole-sequence kernels (``LSTMSeq``/``GRUSeq``):
the handlers unroll the cell into primitive ops, which every backend runs. Oracle: onnxruntime
(onnx's evaluator for batch-major layout), on the recurrent cases of ``import_cases``."""

from __future__ import annotations

import numpy as np
import pytest
import singa_onnx
from import_cases import RNN
from singa.device import get_default_device
from test_import_attributes import build, oracle

CASES = [c for c in RNN if c.op in ("LSTM", "GRU")]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_unrolled_cell_matches_onnxruntime(case, monkeypatch):
    dev = get_default_device()
    assert not dev.host_fallback
    for name in (f"{case.op}Seq", f"{case.op}SeqBackward"):
        monkeypatch.delitem(dev.kernels, name)  # a call to it would raise MissingKernelError
    model, feeds = build(case)
    want = oracle(case, model, feeds)
    got = singa_onnx.prepare(model).run(feeds)
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-4, err_msg=f"output {i}")
