"""Shared fixtures for the nn tests (autograd ops, layers, model, optimizers, checkpoints)."""

from __future__ import annotations

import numpy as np
import pytest
from singa import autograd
from singa.device import get_default_device


@pytest.fixture(autouse=True)
def _isolate_global_state():
    """Restore ``autograd.training`` and leave the host device's graph off after each test."""
    prev = autograd.training
    yield
    autograd.training = prev
    dev = get_default_device()
    dev.EnableGraph(False)
    dev.ResetGraph()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def cpu():
    return get_default_device()

