"""The conformance kit itself: case helpers, the op table it relies on, comparisons, xfail
files, and (in subprocesses) that it catches each kind of kernel bug."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from core_helpers import PLUGINS_DIR, write_dist
from hypothesis import given
from hypothesis import strategies as st
from singa import _dtype
from singa.ops import OPS
from singa.testing import checks
from singa.testing.cases import FLOAT_GRID, Cases, sample_cases
from singa.testing.plugin import parse_xfails

DTYPES = [
    _dtype.kFloat32,
    _dtype.kFloat16,
    _dtype.kDouble,
    _dtype.kInt,
    _dtype.kChar,
    _dtype.kUChar,
]


# ---------------------------------------------------------------------- the case helper
@given(st.data(), st.sampled_from(DTYPES), st.integers(-5, 5), st.integers(0, 6))
def test_array_has_the_dtype_shape_and_range(data, code, low, width):
    g = Cases(data)
    shape = g.shape()
    arr = g.array(shape, code, low / 2, low / 2 + width)
    assert arr.dtype == _dtype.NP_DTYPE[code] and arr.shape == shape
    assert all(1 <= d <= 5 for d in shape) and len(shape) <= 4
    if arr.size:
        lo = low / 2
        hi = low / 2 + width
        if arr.dtype.kind in "iu":
            info = np.iinfo(arr.dtype)
            lo, hi = max(math.ceil(lo), info.min), min(math.floor(hi), info.max)
            if lo > hi:
                return
        assert arr.min() >= lo and arr.max() <= hi
        if arr.dtype.kind == "f":
            assert np.isfinite(arr).all()
            nz = np.abs(arr[arr != 0])
            assert (nz >= np.finfo(arr.dtype).tiny).all()  # no subnormals


@given(st.data())
def test_scalar_and_shape_helpers(data):
    g = Cases(data)
    assert -3 <= g.integers(-3, 3) <= 3
    f = g.floats(-2.5, 1.0)
    assert -2.5 <= f <= 1.0 and (f / FLOAT_GRID).is_integer()
    assert np.float16(f) == f  # exact in float16
    tiny = g.floats(1e-5, 1e-3)  # narrow intervals get a finer grid, not a constant
    assert 1e-5 <= tiny <= 1e-3
    assert g.choice("abc") in "abc"
    assert sorted(g.permutation(4)) == [0, 1, 2, 3]
    nd = g.integers(1, 4)
    assert 0 <= g.axis(nd) < nd and -nd <= g.axis(nd, negative=True) < nd
    sa, sb = g.broadcastable_shapes()
    np.broadcast_shapes(sa, sb)
    n, c, h, w = g.image_shape()
    assert 1 <= n <= 3 and 1 <= c <= 4 and 1 <= h <= 6 and 1 <= w <= 6
    s = g.shape(min_dims=2, max_dims=2, max_side=3)
    assert len(s) == 2 and max(s) <= 3


@given(st.data())
def test_array_helpers(data):
    g = Cases(data)
    shape = g.shape(min_dims=1)
    signs = g.signs(shape)
    assert signs.dtype == np.int8 and set(np.unique(signs)) <= {-1, 1}
    x = g.array(shape, _dtype.kFloat16)
    assert (x * signs).dtype == np.float16  # multiplying keeps the operand's dtype
    assert g.mask(shape).dtype == bool
    idx = g.index_array(shape, 3)
    assert idx.dtype == np.int32 and idx.min() >= 0 and idx.max() <= 2
    d = g.distinct_array(shape, _dtype.kFloat16, -3, 3)
    assert d.shape == shape and np.unique(d).size == d.size
    p = g.probabilities(shape, _dtype.kFloat32, axis=-1)
    assert np.allclose(p.sum(-1), 1, atol=1e-5) and (p > 0).all()


def test_sample_cases_is_deterministic():
    a = sample_cases("Add", _dtype.kFloat32, n=5, seed=3)
    b = sample_cases("Add", _dtype.kFloat32, n=5, seed=3)
    assert len(a) == 5
    for (xa, aa), (xb, ab) in zip(a, b):
        assert aa == ab and all(np.array_equal(u, v) for u, v in zip(xa, xb))


# ---------------------------------------------------------------------- the op table
@pytest.fixture
def meta_device(plugin_path):
    from singa_test_plugins.fakedev import FakeDevice

    return FakeDevice("meta", 0)


@pytest.mark.parametrize("name", sorted(n for n, op in OPS.items() if op.sample is not None))
def test_sampler_rule_and_reference_agree(name, meta_device):
    """For every op: sampled inputs have SINGA dtypes, and the shape/dtype rule predicts the
    reference's output shapes. Core table bugs show up here, not as backend failures."""
    from singa._ctensor import CTensor

    op = OPS[name]
    for code in op.dtypes:
        for arrays, attrs in sample_cases(op, code, n=3, seed=1):
            codes = [_dtype.code_of(a.dtype) for a in arrays]
            ins = [CTensor(a.shape, meta_device, c) for a, c in zip(arrays, codes)]
            rule = op.infer(ins, attrs)
            refs = checks.reference_outputs(op, arrays, attrs)
            assert len(rule) == op.nout == len(refs)
            for (shape, _dt), ref in zip(rule, refs):
                assert tuple(shape) == ref.shape, (name, _dtype.name_of(code), attrs)


# ---------------------------------------------------------------------- comparisons
def test_assert_matches_explains_the_worst_element():
    exp = np.array([1.0, 2.0, 3.0])
    checks.assert_matches(np.array([1.0, 2.0, 3.0 + 1e-7], np.float32), exp, 1e-5, 1e-6, "ok")
    with pytest.raises(AssertionError) as exc:
        checks.assert_matches(np.array([1.0, 2.5, 3.0]), exp, 1e-5, 1e-6, "Op on dev")
    msg = str(exc.value)
    assert "Op on dev: 1 of 3 elements differ" in msg and "worst at index (1,)" in msg
    with pytest.raises(AssertionError, match="shape"):
        checks.assert_matches(np.zeros(2), np.zeros(3), 0, 0, "x")
    with pytest.raises(AssertionError):  # NaN must match NaN, not a number
        checks.assert_matches(np.array([np.nan]), np.array([0.0]), 1, 1, "x")
    checks.assert_matches(np.array([np.nan, np.inf]), np.array([np.nan, np.inf]), 0, 0, "x")


def test_tolerance_prefers_the_op_override():
    from singa.ops import OpDef

    op = OpDef("Toy", 1, None, None, tol={_dtype.kFloat16: (0.1, 0.2)})
    assert checks.tolerance(op, _dtype.kFloat16, _dtype.kFloat16) == op.tol[_dtype.kFloat16]
    assert (
        checks.tolerance(op, _dtype.kFloat32, _dtype.kFloat32)
        == checks.DEFAULT_TOLERANCES[_dtype.kFloat32]
    )
    assert checks.tolerance(op, _dtype.kInt, _dtype.kInt) == (0.0, 0.0)


def test_random_checks_reject_wrong_distributions():
    rng = np.random.default_rng(0)
    attrs = {"mean": 1.0, "std": 2.0}
    good = rng.normal(1.0, 2.0, 3000).astype(np.float32)
    checks.check_random_draws("Gaussian", good, np.full(3000, 1.0), attrs, "g")
    for bad in (
        rng.normal(1.0, 3.0, 3000),
        rng.normal(1.5, 2.0, 3000),
        rng.uniform(1 - 2 * 3**0.5, 1 + 2 * 3**0.5, 3000),
    ):
        with pytest.raises(AssertionError):
            checks.check_random_draws(
                "Gaussian", bad.astype(np.float32), np.full(3000, 1.0), attrs, "g"
            )
    u = {"low": -1.0, "high": 2.0}
    checks.check_random_draws("Uniform", rng.uniform(-1, 2, 3000), np.full(3000, 0.5), u, "u")
    with pytest.raises(AssertionError, match="outside"):
        checks.check_random_draws(
            "Uniform", rng.uniform(-1.25, 2.25, 3000), np.full(3000, 0.5), u, "u"
        )
    b = {"p": 0.3}
    checks.check_random_draws(
        "Bernoulli", (rng.random(3000) < 0.3).astype(np.float32), np.full(3000, 0.3), b, "b"
    )
    with pytest.raises(AssertionError, match="0 or 1"):
        checks.check_random_draws(
            "Bernoulli", rng.uniform(0, 0.6, 3000), np.full(3000, 0.3), b, "b"
        )


# ---------------------------------------------------------------------- xfail files
def test_parse_xfails():
    entries = parse_xfails(
        "# known failures\n\nErf:float16  numba has no half erf\nConcat  all dtypes\n"
        "Sigmoid::layouts?  numpy negative bug\nAdd:float32:inplace\taliasing\n",
        "f.txt",
    )
    assert [(e.op, e.dtype, e.kind) for e in entries] == [
        ("Erf", "float16", None),
        ("Concat", None, None),
        ("Sigmoid", None, "layouts"),
        ("Add", "float32", "inplace"),
    ]
    assert entries[0].reason == "numba has no half erf" and entries[0].where == "f.txt:3"
    assert [e.strict for e in entries] == [True, True, False, True]
    assert entries[3].reason == "aliasing"
    assert entries[2].matches("Sigmoid", "float64", "layouts")
    assert not entries[2].matches("Sigmoid", "float64", "forward")
    assert not entries[0].matches("Erf", "float32", "forward")


@pytest.mark.parametrize(
    "line", ["Add:float12  x", "Add:float32:backward  x", "A:b:c:d  x", ":float32  x"]
)
def test_parse_xfails_rejects_bad_lines(line):
    with pytest.raises(pytest.UsageError, match="f.txt:1"):
        parse_xfails(line, "f.txt")


# ---------------------------------------------------------------------- the kit end to end
@pytest.fixture(scope="module")
def bad_site(tmp_path_factory):
    site = tmp_path_factory.mktemp("bad_site")
    for pkg in ("singa_pyref", "singa_badref"):
        shutil.copytree(PLUGINS_DIR / pkg, site / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    write_dist(site, "singa-badref", {"badref": "singa_badref.plugin"})
    return site


def _kit(site, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SINGA_")}
    env["PYTHONPATH"] = str(site)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        "singa.testing.conformance",
        "-q",
        "-rA",
        "-p",
        "no:cacheprovider",
        "--singa-examples",
        "4",
        "--singa-no-shrink",
        *args,
    ]
    proc = subprocess.run(cmd, cwd=site, env=env, capture_output=True, text=True, timeout=600)
    outcomes = dict(
        (t, o)
        for o, t in re.findall(
            r"^(PASSED|FAILED|XFAIL|XPASS|SKIPPED|ERROR) \S*::(test_\w+(?:\[[\w-]+\])?)",
            proc.stdout,
            re.M,
        )
    )
    return proc, outcomes


#: test id -> the xfail line that covers it
BUGS = {
    "test_forward[Add-float32]": "Add:float32  wrong math (fails every test kind)",
    "test_layouts[Add-float32]": "Add:float32  wrong math (fails every test kind)",
    "test_inplace[Add-float32]": "Add:float32  wrong math (fails every test kind)",
    "test_layouts[Sub-float32]": "Sub:float32:layouts  ignores strides",
    "test_inplace[Neg-float32]": "Neg:float32:inplace  clobbers an aliased input",
    "test_random_stats[Gaussian-float32]": "Gaussian::random_stats  wrong std",
    "test_random_seed[Uniform-float32]": "Uniform:float32:random_seed  ignores SetRandSeed",
    "test_random_stats[Bernoulli-float32]": "Bernoulli  no kernel and no host fallback",
    "test_random_seed[Bernoulli-float64]": "Bernoulli  no kernel and no host fallback",
}
SOUND = [
    "test_forward[Sub-float32]",
    "test_forward[Neg-float32]",
    "test_layouts[Neg-float32]",
    "test_random_seed[Gaussian-float32]",
    "test_random_stats[Uniform-float32]",
    "test_forward[Copy-float32]",
    "test_kernel_table",
]


def test_kit_catches_each_kind_of_kernel_bug(bad_site):
    proc, outcomes = _kit(bad_site, "--singa-backend", "badref")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    for test_id in BUGS:
        assert outcomes.get(test_id) == "FAILED", (test_id, proc.stdout[-3000:])
    for test_id in SOUND:
        assert outcomes.get(test_id) == "PASSED", (test_id, proc.stdout[-3000:])
    assert "kernel/dtype pairs of" in proc.stdout


def test_xfail_file_marks_known_failures_strictly(bad_site, tmp_path):
    known = tmp_path / "xfails.txt"
    known.write_text("# badref\n" + "\n".join(sorted(set(BUGS.values()))) + "\n")
    proc, outcomes = _kit(bad_site, "--singa-backend", "badref", "--singa-xfails", str(known))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert all(outcomes.get(t) == "XFAIL" for t in BUGS), outcomes
    # an entry for a kernel that passes is a strict XPASS: the run fails until it is removed
    known.write_text(known.read_text() + "Copy:float32:forward  fixed long ago\n")
    proc, outcomes = _kit(
        bad_site, "--singa-backend", "badref", "--singa-xfails", str(known), "-k", "Copy or Add"
    )
    assert proc.returncode == 1
    assert outcomes.get("test_forward[Copy-float32]") == "FAILED"
    assert "XPASS(strict)" in proc.stdout


def test_kit_fails_a_backend_without_kernels(bad_site):
    proc, outcomes = _kit(bad_site, "--singa-backend", "emptyref")
    assert proc.returncode != 0
    assert outcomes.get("test_forward[no-kernels]") == "FAILED"
    assert "registers no kernel" in proc.stdout


def test_kit_reports_an_unusable_backend(bad_site):
    proc, _ = _kit(bad_site, "--singa-backend", "nosuchdev")
    assert proc.returncode != 0
    assert "'nosuchdev' was requested" in proc.stdout + proc.stderr


def test_conformance_module_documents_the_one_command():
    import singa.testing.conformance as kit

    assert "pytest --pyargs singa.testing.conformance --singa-backend" in kit.__doc__
    assert set(kit.KINDS) == {"forward", "special", "large", "layouts", "inplace",
                              "random_stats", "random_seed", "fused", "bound"}
    for kind in kit.KINDS:  # every kind is documented and exported
        assert f"``test_{kind}``" in kit.__doc__ and f"test_{kind}" in kit.__all__


# ---------------------------------------------------------------------- blind spots, closed
#: A copy of the CPU backend's kernel table with one deliberate bug per kit blind spot of
#: issue 10 ("Make the kit catch what it misses today"). At commit 1d3b78c (before the
#: special/large kinds, the float16 ulp rule, multi-axis reductions, the larger random
#: samples and random ops checked without a kernel) the kit passed every one of them.
MUTANTS = r'''
"""CPU kernels with deliberate bugs: backend mutcpu (all bugs at once) and norandcpu (no
random kernels, no host fallback)."""
import numpy as np
from singa.backend import BACKEND_API_VERSION, BackendSpec, Kernel, hookimpl

import singa_cpu.plugin as cpu


def _wrap(orig, body):
    def kernel(ins, outs, attrs):
        body(orig, ins, outs, attrs)

    return Kernel(kernel, dtypes=orig.dtypes, contiguous_inputs=orig.contiguous_inputs) \
        if isinstance(orig, Kernel) else kernel


def pool_ignores_nan(orig, ins, outs, attrs):
    """Max pooling that skips NaN (window [1, NaN, 2, 0.5] -> 2.0)."""
    x = ins[0]
    orig([np.where(np.isnan(x), -np.inf, x).astype(x.dtype)], outs, attrs)


def round_loses_zero_sign(orig, ins, outs, attrs):
    """Round(-0.3) = +0.0 (C's round and numpy give -0.0)."""
    orig(ins, outs, attrs)
    outs[0] += 0.0


def exp_f16_off(orig, ins, outs, attrs):
    """float16 results 0.78% (2**-7) too large."""
    orig(ins, outs, attrs)
    if outs[0].dtype == np.float16:
        outs[0] *= np.float16(1 + 2**-7)


def sum_outer_axes(orig, ins, outs, attrs):
    """Reducing leading and trailing axes around a kept middle run (a bias gradient's
    (0, 2, 3)) sums only the first slice of the leading axes."""
    x, axes = ins[0], attrs.get("axes")
    axes = tuple(range(x.ndim)) if axes is None else tuple(a % x.ndim for a in axes)
    kept = [a for a in range(x.ndim) if a not in axes]
    if kept and kept[0] > 0 and kept[-1] < x.ndim - 1 and x.shape[0] > 1:
        lead = kept[0]
        inner = x[(0,) * lead]
        res = np.sum(inner, axis=tuple(a - lead for a in axes if a >= lead),
                     keepdims=attrs.get("keepdims", False))
        outs[0][...] = res.reshape(outs[0].shape)
        return
    orig(ins, outs, attrs)


def add_threads(orig, ins, outs, attrs):
    """Past 2**20 elements (the threaded path), the last of two slices is never written."""
    orig(ins, outs, attrs)
    if outs[0].size >= 1 << 20:
        flat = outs[0].reshape(-1)
        flat[flat.size // 2:] = 0


def conv_many_channels(orig, ins, outs, attrs):
    """3x3 convolutions with >= 16 input channels (the Winograd path) off by 1e-3."""
    orig(ins, outs, attrs)
    w = ins[1]
    if w.shape[1] >= 16 and w.shape[2:] == (3, 3):
        outs[0] += outs[0].dtype.type(1e-3)


def relu_bound_stale(orig):
    """Bound to its arrays in graph mode, ReLU computes its first result and copies it out
    again on every later call (a specialisation that captured values, not arrays)."""
    def kernel(ins, outs, attrs):
        orig(ins, outs, attrs)

    def bind(ins, outs, attrs):
        first = []

        def bound(i, o, a):
            if not first:
                orig(i, o, a)
                first.append(o[0].copy())
            else:
                o[0][...] = first[0]

        return bound

    return Kernel(kernel, bind=bind)


def gaussian_wide(dev):
    def kernel(ins, outs, attrs):
        out = outs[0]
        out[...] = dev.rng.normal(attrs["mean"], 1.05 * attrs["std"], out.shape)

    return Kernel(kernel, dtypes=(0, 2))  # float32, float64


def mutated(device):
    table = dict(cpu._kernels(device))
    for name, body in (("Pooling2d", pool_ignores_nan), ("Round", round_loses_zero_sign),
                       ("Exp", exp_f16_off), ("Sum", sum_outer_axes), ("Add", add_threads),
                       ("Conv2d", conv_many_channels)):
        table[name] = _wrap(table[name], body)
    table["Gaussian"] = gaussian_wide(device)
    table["ReLU"] = relu_bound_stale(table["ReLU"])
    return table


def no_random(device):
    table = dict(cpu._kernels(device))
    for name in ("Gaussian", "Uniform", "Bernoulli"):
        del table[name]
    return table


def _device(name):
    def create(index):
        dev = cpu._create(index)
        dev.backend = name
        return dev

    return create


@hookimpl
def singa_backends():
    return [BackendSpec(name="mutcpu", api_version=BACKEND_API_VERSION,
                        create_device=_device("mutcpu"), kernels=mutated),
            BackendSpec(name="norandcpu", api_version=BACKEND_API_VERSION,
                        create_device=_device("norandcpu"), kernels=no_random)]
'''

#: test id -> what the mutation breaks (every one FAILED by the kit)
CAUGHT = {
    "test_special[Pooling2d-float32]": "max pooling ignores NaN",
    "test_special[Round-float32]": "Round loses the sign of zero",
    "test_forward[Exp-float16]": "float16 0.78% off (passed rtol=1e-2 before)",
    "test_forward[Sum-float32]": "outer-axis sum (no multi-axis subset was drawn before)",
    "test_large[Add-float32]": "threaded elementwise path",
    "test_large[Conv2d-float32]": "Winograd path (>= 16 channels)",
    "test_random_stats[Gaussian-float32]": "std 5% off (passed with ~2000 draws before)",
    "test_bound[ReLU-float32]": "a graph-bound kernel that replays its first result",
}
#: the kinds the kit had before pass the same mutants: only the new checks see the bugs
MISSED_BY_OLD_KINDS = ["test_forward[Pooling2d-float32]", "test_forward[Round-float32]",
                       "test_forward[Add-float32]", "test_forward[Conv2d-float32]",
                       "test_forward[ReLU-float32]"]


@pytest.fixture(scope="module")
def mutant_site(tmp_path_factory):
    pytest.importorskip("singa_cpu")
    site = tmp_path_factory.mktemp("mutant_site")
    (site / "singa_mutcpu").mkdir()
    (site / "singa_mutcpu" / "__init__.py").write_text(MUTANTS)
    write_dist(site, "singa-mutcpu", {"mutcpu": "singa_mutcpu"})
    return site


def test_kit_catches_each_blind_spot_mutation(mutant_site):
    select = " or ".join(t.split("[")[1].rstrip("]") for t in CAUGHT)
    proc, outcomes = _kit(mutant_site, "--singa-backend", "mutcpu", "--singa-large", "on",
                          "--singa-examples", "10",  # the default: what CI runs
                          "-k", f"(forward or special or large or random_stats or bound) "
                          f"and ({select})")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    for test_id, bug in CAUGHT.items():
        assert outcomes.get(test_id) == "FAILED", (test_id, bug, proc.stdout[-3000:])
    for test_id in MISSED_BY_OLD_KINDS:
        assert outcomes.get(test_id) == "PASSED", (test_id, proc.stdout[-3000:])


def test_kit_fails_a_backend_without_random_kernels(mutant_site):
    """Random ops are checked whatever runs them: a backend with neither kernels nor host
    fallback for them fails (the kit used to skip random_stats/random_seed there)."""
    proc, outcomes = _kit(mutant_site, "--singa-backend", "norandcpu", "-k",
                          "random and float32")
    assert proc.returncode == 1, proc.stdout[-3000:]
    for op in ("Gaussian", "Uniform", "Bernoulli"):
        for kind in ("random_stats", "random_seed"):
            assert outcomes.get(f"test_{kind}[{op}-float32]") == "FAILED", proc.stdout[-3000:]
    assert "does not enable host fallback" in proc.stdout


def test_old_tolerances_missed_what_the_new_ones_catch():
    """The float16 and random-sample blind spots in numbers: a float16 Exp 2**-7 off passed
    the old per-dtype tolerance (rtol 1e-2) and fails the 1-ulp rule; a Gaussian with its std
    5% off passed with the old sampler's ~2000 draws and fails with its ~60000."""
    x = np.linspace(-3, 3, 97).astype(np.float16)
    ref = np.exp(x.astype(np.float64))
    off = (np.exp(x) * np.float16(1 + 2**-7)).astype(np.float16)
    checks.assert_matches(off, ref, 1e-2, 2.0**-8, "old float16 tolerance")  # passed before
    with pytest.raises(AssertionError, match="1 ulp"):
        checks.assert_close(OPS["Exp"], _dtype.kFloat16, off, ref, "Exp")
    rng = np.random.default_rng(7)
    attrs = {"mean": 0.5, "std": 1.0}
    old = rng.normal(0.5, 1.05, 300 * 7).astype(np.float32)
    checks.check_random_draws("Gaussian", old, np.full(old.size, 0.5), attrs, "old sample")
    new = rng.normal(0.5, 1.05, 250 * 250).astype(np.float32)
    with pytest.raises(AssertionError, match="std"):
        checks.check_random_draws("Gaussian", new, np.full(new.size, 0.5), attrs, "new")


# ---------------------------------------------------------------------- the report
def test_report_tables_a_backend_and_writes_json(mutant_site, tmp_path):
    """``python -m singa.testing --backend NAME --json PATH``: op x dtype -> native / host
    fallback / failed / not declared, a summary line, the same as JSON; exit status 1 when
    a pair failed. (mutcpu: the CPU table with deliberate bugs.)"""
    out = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SINGA_")}
    env["PYTHONPATH"] = str(mutant_site)
    cmd = [sys.executable, "-m", "singa.testing", "--backend", "mutcpu", "--json", str(out),
           "--examples", "10", "--", "-k", "special and (Round or Neg)", "--singa-no-shrink"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    rows = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()
            if line.split() and line.split()[0] in ("Round", "Neg", "Add", "Erf")}
    assert rows["Round"][:3] == ["FAILED", "FAILED", "FAILED"], proc.stdout  # all float dtypes
    assert rows["Neg"][:4] == ["native"] * 4 and rows["Add"][:4] == ["native"] * 4
    m = re.search(r"^summary: mutcpu: (\d+) native, (\d+) host fallback, (\d+) failed, "
                  r"(\d+) not declared \(of (\d+) op/dtype pairs\)$", proc.stdout, re.M)
    assert m, proc.stdout[-2000:]
    native, fallback, failed, undeclared, total = map(int, m.groups())
    assert failed == 3 and fallback == 0 and native + undeclared + failed == total
    data = __import__("json").loads(out.read_text())
    assert data["summary"]["failed"] == 3 and data["summary"]["pairs"] == total
    assert data["ops"]["Round"]["float32"]["tests"] == {"special": "failed"}
    assert data["ops"]["Neg"]["float16"] == {"status": "native", "known_failure": False,
                                             "tests": {"special": "passed"}}


def test_report_counts_host_fallback_and_undeclared(mutant_site, tmp_path):
    """Without a kit run (``--no-run``): norandcpu has no random kernels and no host
    fallback: its random ops are "not declared"; on the pyref test backend (host fallback
    on) the ops it lacks are "host fallback"."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SINGA_")}
    site = tmp_path / "site"
    shutil.copytree(mutant_site, site)
    shutil.copytree(PLUGINS_DIR / "singa_pyref", site / "singa_pyref",
                    ignore=shutil.ignore_patterns("__pycache__"))
    write_dist(site, "singa-pyref", {"pyref": "singa_pyref.plugin"})
    env["PYTHONPATH"] = str(site)
    for backend, op, want in (("norandcpu", "Gaussian", "-"), ("pyref", "Tanh", "fallback"),
                              ("pyref", "Add", "native")):
        proc = subprocess.run([sys.executable, "-m", "singa.testing", "--backend", backend,
                               "--no-run"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        row = next(line.split() for line in proc.stdout.splitlines()
                   if line.startswith(op + " "))
        assert row[1] == want, (backend, row)
        assert re.search(rf"^summary: {backend}: \d+ native, \d+ host fallback, 0 failed",
                         proc.stdout, re.M)
