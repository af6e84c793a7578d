"""Fixtures for the OpenCL backend's own tests (they need a usable OpenCL device)."""

from __future__ import annotations

import numpy as np
import pytest
from singa import _dtype


@pytest.fixture(scope="session")
def cl_device():
    from singa.device import get_device

    return get_device("opencl:0")


def to_device(arr, dev):
    from singa._ctensor import CTensor

    arr = np.asarray(arr)
    t = CTensor(arr.shape, dev, _dtype.code_of(arr.dtype))
    t.copy_from_numpy(arr)
    return t


TOL = {
    _dtype.kFloat32: (1e-4, 1e-5),
    _dtype.kFloat16: (1e-2, 1e-2),
    _dtype.kDouble: (1e-10, 1e-12),
    _dtype.kInt: (0, 0),
    _dtype.kUChar: (0, 0),
    _dtype.kChar: (0, 0),
}


def reference(op, arrays, attrs):
    """The op's numpy reference, computed in float64 for float inputs as the kit does."""
    wide = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    res = op.reference(*wide, **attrs)
    return res if isinstance(res, tuple) else (res,)


def assert_close(got, want, dt, op=None, what=""):
    rtol, atol = TOL[dt]
    if op is not None and dt in op.tol:
        rtol, atol = op.tol[dt]
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=atol, err_msg=what)
