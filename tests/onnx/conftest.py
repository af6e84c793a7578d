"""Helpers for the ONNX tests: onnxruntime as the oracle."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")


def ort_run(model, feeds: dict) -> list:
    """Outputs of ``model`` (a ModelProto) in onnxruntime's CPU provider."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
