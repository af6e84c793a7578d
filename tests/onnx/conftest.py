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


@pytest.fixture
def eval_mode():
    """``autograd.training`` off for the test (batch norm on running statistics, dropout off),
    restored after."""
    from singa import autograd

    saved = autograd.training
    autograd.training = False
    yield
    autograd.training = saved
