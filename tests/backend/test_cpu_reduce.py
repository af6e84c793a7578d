"""The CPU backend's reductions over trailing axes (a bias gradient's Sum, a global average
pooling's ReduceMean), which run as compiled row sums (numba) instead of
numpy's per-row reductions. Oracle: numpy's float64 reduction, within the float32 rounding
of a sum of that many terms."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def dev(singa_device):
    if singa_device.backend != "cpu":
        pytest.skip("the CPU backend's reduction kernels")
    return singa_device


def _reduced(shape, axes, keepdims):
    return (
        tuple(1 if a in axes else d for a, d in enumerate(shape))
        if keepdims
        else tuple(d for a, d in enumerate(shape) if a not in axes)
    )


# (shape, axes as the op receives them): global average pooling (also with negative axes and
# without keepdims), a squeeze over the last axis only, a middle run kept, all axes
CASES = [
    ((2, 24, 7, 9), (2, 3)),
    ((1, 96, 56, 56), (-2, -1)),
    ((3, 5, 17), (2,)),
    ((4, 6, 5, 3), (0, 2, 3)),
    ((4, 6, 5), (0, 1, 2)),
    ((2, 8, 1, 1), (2, 3)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("keepdims", [True, False])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", ["ReduceMean", "Sum"])
def test_reductions_over_trailing_axes_match_numpy(dev, name, case, keepdims, dtype):
    shape, axes = case
    norm = tuple(a % len(shape) for a in axes)
    x = np.random.default_rng(4).standard_normal(shape).astype(dtype) + 1
    out = np.full(_reduced(shape, norm, keepdims), np.nan, dtype)
    dev.kernels[name][0]([x], [out], {"axes": axes, "keepdims": keepdims})
    ref = (np.mean if name == "ReduceMean" else np.sum)(
        x.astype(np.float64), axis=norm, keepdims=keepdims
    )
    terms = x.size // max(1, out.size)
    eps = np.finfo(dtype).eps * max(4, terms)
    np.testing.assert_allclose(out, ref, rtol=eps, atol=eps * np.abs(ref).max())
