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


@pytest.fixture
def nn_fallback():
    """TEMPORARY: run NN ops whose CPU kernels are still being written through their numpy
    references. Scoped to the requesting test; removes the fallback entries it cached."""
    import warnings

    dev = get_default_device()
    before = set(dev.kernels)
    prev = dev.host_fallback
    dev.host_fallback = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield dev
    dev.host_fallback = prev
    for name in set(dev.kernels) - before:
        del dev.kernels[name]
