"""CTensor's fields have plain names (dims, strides, offset, dtype_code); the former names
(shp, strd, off, dt), which backends written before read, still work with a warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from singa import _dtype
from singa._ctensor import CTensor


def _view():
    t = CTensor((3, 4), None, _dtype.kFloat32)
    t.copy_from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    return t._view_as((4, 2), (1, 4), 1)  # a transposed, offset view of 8 elements


def test_the_fields_describe_the_view():
    v = _view()
    assert v.dims == (4, 2) and v.strides == (1, 4) and v.offset == 1
    assert v.dtype_code == _dtype.kFloat32 and not v.contig
    base = np.arange(12, dtype=np.float32)
    want = np.array([[base[1 + i + 4 * j] for j in range(2)] for i in range(4)])
    np.testing.assert_array_equal(v.to_numpy(), want)


@pytest.mark.parametrize(("old", "new"), [("shp", "dims"), ("strd", "strides"),
                                          ("off", "offset"), ("dt", "dtype_code")])
def test_former_names_read_the_fields_with_a_deprecation_warning(old, new):
    v = _view()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert getattr(v, old) == getattr(v, new)
    assert [w.category for w in caught] == [DeprecationWarning]
    assert f"CTensor.{new}" in str(caught[0].message)
