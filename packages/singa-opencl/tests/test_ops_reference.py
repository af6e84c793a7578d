"""Every OpenCL kernel against its op's numpy reference, for every dtype it declares.

The conformance kit (``pytest tests/backend --singa-backend opencl``) is the full check; this
is the package's own quick version, drawing a few cases per op and dtype with the ops'
samplers.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, reference, to_device
from singa import _dtype
from singa._ctensor import CTensor
from singa.ops import OPS, run

sample_cases = pytest.importorskip("singa.testing.cases").sample_cases


def _kernel_cases():
    from singa.device import get_device

    dev = get_device("opencl:0")
    out = []
    for name, (fn, *_flags) in sorted(dev.kernels.items()):
        op = OPS.get(name)
        if op is None or op.random:
            continue
        for dt in fn.dtypes if fn.dtypes is not None else op.dtypes:  # fn: a Kernel record
            out.append(pytest.param(name, dt, id=f"{name}-{_dtype.name_of(dt)}"))
    return out


@pytest.mark.parametrize("name,dt", _kernel_cases())
def test_kernel_matches_reference(cl_device, name, dt):
    op = OPS[name]
    for i, (arrays, attrs) in enumerate(sample_cases(op, dt, n=6, seed=1)):
        ins = [to_device(a, cl_device) for a in arrays]
        outs = None
        if op.nin == 0:  # fills: the output tensor comes from the attributes
            outs = [CTensor._new(s, cl_device, d) for s, d in op.infer([], attrs)]
        outs = run(op, ins, dict(attrs), outs)
        want = reference(op, arrays, attrs)
        for k, (o, w) in enumerate(zip(outs, want)):
            got = o.to_numpy()
            w = np.asarray(w).astype(got.dtype) if got.dtype.kind in "iu" else w
            assert_close(got, w, o.dtype_code, op, f"{name} case {i} output {k} attrs={attrs} "
                         f"shapes={[a.shape for a in arrays]}")


def test_int32_division_never_traps(cl_device):
    # x86's idiv traps on a zero divisor and on INT_MIN / -1; the kernel avoids both
    imin = np.iinfo(np.int32).min
    a = np.array([7, -7, 7, -7, imin, imin, 5, 0, imin], np.int32)
    b = np.array([2, 2, -2, -2, -1, 1, 0, 0, 2], np.int32)
    got = run(OPS["Div"], [to_device(a, cl_device), to_device(b, cl_device)], {})[0]
    want = [3, -3, -3, 3, imin, imin, 0, 0, imin // 2]
    np.testing.assert_array_equal(got.to_numpy(), np.array(want, np.int32))
