"""Local sizes on pocl: a kernel is compiled for a few work-group sizes, not one per shape.

pocl's CPU drivers compile a kernel into a work-group function when it is enqueued, once
for every local size it meets (~70-100 ms each on a 2-core host). A launch that left the local
size to the runtime (``None``) thus compiled again for nearly every new tensor size; the
device now picks it from a small fixed set there (``pinned_local``, and one work-item per
work-group for the remainder of ``launch_exact``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from singa_opencl.device import pinned_local

POCL = "Portable Computing Language"


@settings(max_examples=300, deadline=None)
@given(gsize=st.lists(st.integers(0, 5000), min_size=1, max_size=3),
       local_size=st.sampled_from([1, 64, 256, 1024]), cus=st.sampled_from([1, 2, 16]),
       rows=st.booleans())
def test_pinned_local_divides_and_fits(gsize, local_size, cus, rows):
    local = pinned_local(tuple(gsize), local_size, cus, rows=rows)
    assert len(local) == len(gsize)
    for i, (g, d) in enumerate(zip(gsize, local)):
        assert d >= 1 and (g % d == 0 if g else d == 1)  # exact: the kernels have no guard
        if not (rows and i == 0):
            assert d & (d - 1) == 0  # a power of two
    total = int(np.prod(gsize))
    bound = max(1, min(local_size, total // (2 * cus)))
    assert int(np.prod(local)) <= bound
    if rows and gsize[0]:  # the largest divisor of the rows within the bound
        bound_pow2 = 1 << (bound.bit_length() - 1)
        assert local[0] == max(d for d in range(1, bound_pow2 + 1) if gsize[0] % d == 0)


def test_pinned_local_meets_few_sizes():
    one_d = {pinned_local((n,), 256, 2) for n in range(1, 5000)}
    assert len(one_d) <= 9  # 1, 2, 4, ..., 256
    two_d = {pinned_local((s, p), 256, 2) for s in range(1, 300) for p in (1, 3, 64, 96, 512)}
    assert all(np.prod(loc) <= 256 for loc in two_d)
    assert len(two_d) <= 45  # pairs of powers of two with a product <= 256


def test_pinned_local_spreads_small_ranges():
    assert pinned_local((64,), 256, 2) == (16,)  # four work-groups for two compute units
    assert pinned_local((4096,), 256, 2) == (256,)
    assert pinned_local((49, 16384), 256, 2) == (1, 256)  # a 7x7 plane: groups of planes
    assert pinned_local((3,), 256, 2) == (1,)
    # batch norm's planes (rows=True) whole where they fit (7x7, 14x14), else by a divisor
    assert pinned_local((49, 2048), 256, 2, rows=True) == (49, 4)
    assert pinned_local((196, 2048), 256, 2, rows=True) == (196, 1)
    assert pinned_local((3136, 1024), 256, 2, rows=True) == (224, 1)
    assert pinned_local((1, 32768), 256, 2, rows=True) == (1, 256)


_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    from singa import device, tensor
    from singa.errors import DeviceUnavailableError
    try:
        dev = device.get_device("opencl")
    except DeviceUnavailableError as exc:
        print(json.dumps({"unavailable": str(exc)}))
        sys.exit(0)
    errs = []
    rng = np.random.default_rng(0)
    for n in range(1000, 1024):  # elementwise: launch_exact's remainder, 24 different sizes
        x = rng.standard_normal(n).astype(np.float32)
        y = tensor.to_numpy(tensor.from_numpy(x).to_device(dev) * 2.0)
        errs.append(float(np.abs(y - x * 2.0).max()))
    for s in range(20, 44):  # row sums of 24 row counts: a launch that left the size to pocl
        x = rng.standard_normal((s, 7)).astype(np.float32)
        y = tensor.to_numpy(tensor.sum(tensor.from_numpy(x).to_device(dev), 1))
        errs.append(float(np.abs(y - x.sum(1)).max() / max(1.0, np.abs(x).sum())))
    print(json.dumps({"describe": dev.describe(), "pinned": dev.pins_local_size,
                      "max_err": max(errs)}))
""")


@pytest.mark.needs_hardware("pocl on a CPU its LLVM 14 knows (not AMD Zen 4 or 5)")
def test_pocl_compiles_a_kernel_for_few_local_sizes(tmp_path):
    env = {**os.environ, "SINGA_OPENCL_DEVICE": POCL, "POCL_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    if "unavailable" in facts:
        pytest.skip(f"pocl cannot run here: {facts['unavailable']}")
    assert POCL in facts["describe"] and facts["pinned"] is True
    assert facts["max_err"] < 1e-5  # the results, against numpy
    # pocl's kernel cache: <program hash>/<kernel>/<local size and flags>/<kernel>.so
    compiled = Counter(p.parent.parent.name for p in tmp_path.rglob("*.so"))
    assert compiled["MulScalar_contig"] >= 1, sorted(compiled)
    # 24 sizes: the bulk (256), the remainder at offset 0 and past it (one work-item each)
    assert compiled["MulScalar_contig"] <= 3, compiled
    # 24 row counts: (1, 1), (1, 2), (1, 4), (1, 8) at most (pocl's own choice: one per
    # row count, 24 here)
    assert 1 <= compiled["rd_sum"] <= 4, compiled
