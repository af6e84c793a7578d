"""SINGA's synthetic two-class data for the MLP examples.

400 points with x uniform in [-1, 1] and y = 5x + 1 + noise (Gaussian, std 2); the label
says whether the point lies above the line y = 5x + 1 (1) or not (0).
"""

from __future__ import annotations

import numpy as np


def boundary(x):
    """The line that separates the classes."""
    return 5 * x + 1


def make_data(n=400, seed=0):
    """``(data float32 (n, 2), label int32 (n,))``."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, n)
    y = boundary(x) + 2 * rng.standard_normal(n)
    label = (y > boundary(x)).astype(np.int32)
    data = np.stack([x, y], axis=1).astype(np.float32)
    return data, label
