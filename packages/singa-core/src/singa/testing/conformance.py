"""The backend conformance suite: every kernel of a device checked against the op table.

Run it against any installed backend, from any directory, with one command::

    pytest --pyargs singa.testing.conformance --singa-backend mydev

(``mydev`` is a device string: ``cpu``, ``opencl``, ``cuda:1``, or your plugin's backend name.)
The options come from the ``singa.testing.plugin`` pytest plugin, which pytest loads
automatically when singa-core is installed (if plugin autoloading is disabled, add
``-p singa.testing.plugin``):

``--singa-backend NAME``
    the device under test (default: ``$SINGA_DEVICE`` or ``cpu``).
``--singa-xfails PATH``
    known failures, one per line: ``OpName[:dtype][:test][?]  reason``, e.g.
    ``Erf:float16  numba has no float16 erf`` or ``Concat::layouts  needs contiguous out``.
    ``test`` is one of ``forward, special, large, layouts, inplace, random_stats,
    random_seed, fused, bound``
    (for ``fused``, ``OpName`` is the fusion's name, e.g. ``Conv2d+ReLU``); ``#`` starts
    a comment line. Listed tests are marked ``xfail(strict=True)``: when one starts passing,
    the run fails until the line is removed. A trailing ``?`` (``Neg::layouts?``) makes the
    entry non-strict, for failures that depend on memory addresses or timing rather than on
    the drawn case; say why in the reason.
``--singa-examples N``
    hypothesis examples per test (default 10; raise it for a thorough run, e.g. 200).
``--singa-no-shrink``
    report the first failing example without shrinking it (faster triage).
``--singa-randomize``
    draw new examples on every run (and use hypothesis' example database). By default each
    test draws the same examples on every run (a hypothesis seed derived from the test kind,
    op and dtype), so results and strict xfails are reproducible; use this for fuzzing runs.

To run it in a backend's own test suite, import the tests into a test module::

    from singa.testing.conformance import *  # noqa: F401,F403

What is checked, for every op in :data:`singa.ops.OPS` that the device has a kernel for
(host fallback does not count) and every dtype the kernel supports (its ``dtypes`` attribute,
else the op's ``dtypes``); test ids read ``test_forward[Add-float32]``:

``test_forward``
    inputs drawn by ``op.sample`` (see :mod:`singa.testing.cases`) are uploaded as contiguous
    tensors, the op runs through :func:`singa.ops.run`, and each output is compared with
    ``op.reference`` on float64 copies of the floating inputs, with per-dtype tolerances
    (:data:`singa.testing.checks.DEFAULT_TOLERANCES`, overridden by ``op.tol``).
``test_layouts``
    the same with inputs as strided views (transposed, offset slices of a larger
    sentinel-filled block, zero-stride broadcasts) and outputs as strided views whose
    surroundings must stay untouched, for each plan of :data:`LAYOUT_PLANS`; kernels flagged
    ``contiguous_inputs`` are skipped here because the dispatcher hands them contiguous
    copies.
``test_inplace``
    outputs aliasing inputs the way the API calls them: elementwise unary/scalar/binary ops
    with ``out`` = an input of the output's shape (``x += y`` runs ``Add`` with
    ``outs=[x]``), ``GEMM`` with ``out=c``, ``Axpy`` with ``out=y``.
``test_special``
    special values (:mod:`singa.testing.special`): the sampler's case with some elements of
    the floating inputs replaced by NaN, infinities, signed zeros, exact .5 ties and
    integers; outputs must have NaNs and infinities where the reference has them and, for
    ops whose zeros are signed, the same sign bits (``isclose`` cannot see ``-0.0``). Only
    the ops of :data:`singa.testing.special.SPECIAL`, float dtypes.
``test_large``
    large cases (:class:`singa.testing.cases.Cases` with ``large=True``): about a million
    elements, and convolutions, poolings and GEMMs big enough for the code paths backends
    choose by size (threads, Winograd, 1x1 convolution, per-image im2col, tiles); fused
    kernels too, bitwise against their ops as in ``test_fused`` (an epilogue written once per
    such path). On by
    default for the built-in backends; ``--singa-large on|off`` decides for others (off by
    default: a slow device would take minutes).
``test_random_stats``
    random ops (``op.random``): the draws' mean matches the reference's expected value, and
    known distributions pass checks of spread, range and frequencies. Every random op is
    checked on every device, native kernel or not: a device that runs them through the host
    fallback is checked the same way, and one that cannot run them fails.
``test_random_seed``
    ``SetRandSeed(s)`` twice gives identical draws; draws without reseeding differ (every
    random op, as above).
``test_fused``
    fused kernels (``singa.ops.FUSIONS``, used by graph mode): inputs drawn by the sampler of
    the op the fusion starts from, the second op's attributes by the fusion's sampler and its
    other inputs random (of the shapes the fusion's ``sample_others`` draws: a larger shape
    the first op's output broadcasts to) or an input of the first op (aliasing); the fused
    kernel must give bitwise what the device's own kernels give one after the other, in both
    operand orders for a fusion whose second op ``commutes``.
``test_bound``
    kernels with a ``bind`` attribute (graph-mode specialisation; see
    :mod:`singa.ops._registry`), ops and fusions: bound once to a drawn case's arrays, run on
    the case and again after the inputs' values are shuffled in place; bitwise what the
    general kernel gives each time.
``test_kernel_table``
    every kernel name is an op of the table (or a fusion of two) and every ``dtypes``
    attribute is valid.

The terminal summary reports how many kernel/dtype pairs were checked; a run in which the
suite was collected but no kernel test passed fails.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

try:
    import pytest
    from hypothesis import HealthCheck, Phase, assume, given, note, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st
except ModuleNotFoundError as exc:  # the testing extra is missing: say how to install it
    from . import TESTING_MODULES, testing_extra_error

    if exc.name not in TESTING_MODULES:
        raise
    raise testing_extra_error("singa.testing.conformance", [exc.name]) from None

from .. import _dtype
from .._ctensor import CTensor
from ..ops import FUSIONS, OPS, FusionDef, KernelCall, OpDef, run
from ..ops._tensor_ops import BINARY, SCALAR, UNARY
from . import checks
from .bad_inputs import test_bad_indices, test_onehot_out_of_range  # noqa: F401
from .cases import Cases
from .plugin import (
    KINDS,
    device_string,
    examples,
    large_enabled,
    randomized,
    register_kit_items,
    shrinking,
    xfail_for,
)
from .special import SPECIAL, inject

__all__ = [
    "KernelCase",
    "collect_cases",
    "pytest_generate_tests",
    "test_bound",
    "test_forward",
    "test_fused",
    "test_inplace",
    "test_kernel_table",
    "test_large",
    "test_layouts",
    "test_random_seed",
    "test_random_stats",
    "test_bad_indices",
    "test_onehot_out_of_range",
    "test_special",
]

#: Ops whose API calls pass an input tensor as the output (``out=x``): any input with the
#: output's shape and dtype may alias it.
ELEMENTWISE_INPLACE = frozenset(UNARY) | frozenset(SCALAR) | frozenset(BINARY)
#: Ops the API always runs in place on one input: op name -> index of that input.
FIXED_INPLACE = {"GEMM": 2, "Axpy": 2}


@dataclass(frozen=True)
class KernelCase:
    """One kernel of the device under test at one dtype."""

    op: OpDef
    dtype: int
    kernel: Callable | None
    contiguous_inputs: bool = False
    fusion: FusionDef | None = None  # a fused kernel: op is the fusion's first op
    native: bool = True  # False: a random op the device has no kernel of (host fallback)

    @property
    def name(self) -> str:
        return self.fusion.name if self.fusion is not None else self.op.name

    @property
    def id(self) -> str:
        return f"{self.name}-{_dtype.name_of(self.dtype)}"


# in checks (which imports neither pytest nor hypothesis): the doctor counts kernels with it
device_kernels = checks.device_kernels


def _kernel_dtypes(fn, op: OpDef) -> tuple:
    dts = getattr(fn, "dtypes", None)
    if dts is None:
        return tuple(op.dtypes)
    return tuple(_dtype.code_of(d) for d in dts)


def _binds(fn) -> bool:
    return getattr(fn, "bind", None) is not None


def _wanted(op: OpDef, kind: str, contig: bool, dtype: int) -> bool:
    if kind in ("random_stats", "random_seed"):
        return op.random
    if op.random:
        return False
    if kind == "layouts":
        return not contig
    if kind == "inplace":
        return op.name in ELEMENTWISE_INPLACE or op.name in FIXED_INPLACE
    if kind == "special":
        return op.name in SPECIAL and dtype in _dtype.FLOATS
    return True


def collect_cases(dev, kind: str) -> list[KernelCase]:
    """The kernel/dtype pairs of device ``dev`` that test kind ``kind`` checks."""
    table = device_kernels(dev)
    out = []
    if kind in ("fused", "bound", "large"):
        for name, fd in FUSIONS.items():
            entry = table.get(name)
            base = OPS[fd.base]
            if (entry is not None and not base.random
                    and (kind != "bound" or _binds(entry[0]))):
                for dt in _kernel_dtypes(entry[0], base):
                    out.append(KernelCase(base, dt, entry[0], entry[1], fd))
        if kind == "fused":
            return out
    for name, op in OPS.items():
        entry = table.get(name)
        if kind == "bound" and (entry is None or op.random or not _binds(entry[0])):
            continue
        if entry is None:
            if op.random and _wanted(op, kind, False, 0):
                # random ops are no optional extra: whatever runs them (the host fallback, or
                # nothing) is checked, so a backend without them fails
                out.extend(KernelCase(op, dt, None, native=False) for dt in op.dtypes)
            continue
        fn, contig = entry[0], entry[1]
        for dt in _kernel_dtypes(fn, op):
            if _wanted(op, kind, contig, dt):
                out.append(KernelCase(op, dt, fn, contig))
    return out


def pytest_generate_tests(metafunc):
    """Parametrize the kit's tests by the kernels of the device under test."""
    if "kernel_case" not in metafunc.fixturenames:
        return
    kind = metafunc.function.__name__.removeprefix("test_")
    if kind not in KINDS:
        return
    from ..device import get_device

    config = metafunc.config
    dev = get_device(device_string(config))
    params = []
    cases = collect_cases(dev, kind) if kind != "large" or large_enabled(config, dev) else []
    for case in cases:
        marks = [
            pytest.mark.singa_kernel(op=case.name, dtype=_dtype.name_of(case.dtype), kind=kind,
                                     native=case.native)
        ]
        known = xfail_for(config, case.name, _dtype.name_of(case.dtype), kind)
        if known is not None:
            reason = f"{known.reason} ({known.where})"
            marks.append(pytest.mark.xfail(strict=known.strict, reason=reason))
        if case.op.sample is None:
            marks.append(pytest.mark.skip(reason=f"op {case.op.name} declares no sampler"))
        params.append(pytest.param(case, id=case.id, marks=marks))
    if not params and kind == "forward":
        params.append(
            pytest.param(
                None, id="no-kernels", marks=[pytest.mark.singa_kernel(op="", dtype="", kind=kind)]
            )
        )
    register_kit_items(config, dev)
    metafunc.parametrize("kernel_case", params)


# ---------------------------------------------------------------------- running cases
def _hypothesis(request, case: KernelCase, kind: str, body, scale: float = 1.0,
                large: bool = False) -> None:
    """Run ``body(g)`` as a hypothesis test with the kit's settings.

    Tests marked xfail skip shrinking (their failure is known, and shrinking it only costs
    time), as do all tests with ``--singa-no-shrink``.
    """
    config = request.config
    n = max(1, int(examples(config) * scale))
    fixed = not randomized(config)
    phases = list(Phase)
    if request.node.get_closest_marker("xfail") is not None or not shrinking(config):
        phases = [Phase.explicit, Phase.reuse, Phase.generate]

    default = settings.default
    assert default is not None  # hypothesis always has a current settings profile
    @settings(
        max_examples=n,
        deadline=None,
        print_blob=True,
        database=None if fixed else default.database,
        phases=phases,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.large_base_example,
        ],
    )
    @given(st.data())
    def inner(data):
        body(Cases(data, large=large))

    key = f"singa-conformance/{kind}/{case.id}"
    # @given attaches .hypothesis at run time; its return type does not declare it
    inner.hypothesis.inner_test._hypothesis_internal_add_digest = key.encode()  # type: ignore[attr-defined]
    if fixed:  # the same examples every run, whatever the source text of this module
        inner = hseed(zlib.crc32(key.encode()))(inner)
    inner()


def _draw_case(g, case: KernelCase):
    sample = case.op.sample
    assert sample is not None  # pytest_generate_tests skips the ops without a sampler
    arrays, attrs = sample(g, case.dtype)
    arrays = [np.asarray(a) for a in arrays]
    for i, a in enumerate(arrays):
        try:
            _dtype.code_of(a.dtype)
        except Exception:
            raise AssertionError(
                f"the sampler of {case.op.name} returned input {i} with numpy dtype "
                f"{a.dtype}, which is not a SINGA dtype; samplers must return arrays of "
                f"SINGA dtypes (float32, float16, float64, int32, int8, uint8)"
            ) from None
    attrs = dict(attrs)
    note(f"case: {checks.describe_case(arrays, attrs)}")
    return arrays, attrs


def _compare(case: KernelCase, outs, arrays, attrs, what: str, special=None) -> None:
    with np.errstate(all="ignore"):  # special values: the reference may divide by zero
        refs = checks.reference_outputs(case.op, arrays, attrs)
    if len(refs) != len(outs):
        raise AssertionError(f"{what}: {len(outs)} outputs but the reference returns {len(refs)}")
    with np.errstate(all="ignore"):
        slack = checks.accumulation_slack(case.op, arrays, attrs, outs[0].dtype_code if outs else 0)
    for k, (o, r) in enumerate(zip(outs, refs)):
        label = f"{what}, output {k}" if len(outs) > 1 else what
        label = f"{label} ({checks.describe_case(arrays, attrs)})"
        s = 0.0 if slack is None else slack[k]
        if special is None:
            checks.assert_close(case.op, case.dtype, o.to_numpy(), r, label, s)
        else:
            checks.assert_special_matches(case.op, case.dtype, o.to_numpy(), r, label,
                                          special.signed_zero, s)


def _fresh_outs(op: OpDef, ins, attrs, dev):
    return [CTensor(s, dev, d) for s, d in op.infer(ins, attrs)]


def _require(case):
    if case is None:
        pytest.fail(
            "the device under test registers no kernel for any op of singa.ops.OPS "
            "(host fallback is not checked); nothing to test",
            pytrace=False,
        )


# ---------------------------------------------------------------------- the tests
def test_forward(kernel_case, singa_device, request):
    """Each kernel matches the op's numpy reference on contiguous inputs."""
    _require(kernel_case)
    case = kernel_case

    def body(g):
        arrays, attrs = _draw_case(g, case)
        ins = [checks.upload(a, singa_device) for a in arrays]
        if case.op.nin == 0:
            outs = run(case.op, ins, attrs, _fresh_outs(case.op, ins, attrs, singa_device))
        else:
            outs = run(case.op, ins, attrs)
        _compare(case, outs, arrays, attrs, f"{case.op.name} on {singa_device.name}")

    _hypothesis(request, case, "forward", body)


def test_special(kernel_case, singa_device, request):
    """Each kernel gives the reference's NaNs, infinities, signed zeros and rounding of
    ties (see :mod:`singa.testing.special` for the semantics)."""
    case = kernel_case
    spec = SPECIAL[case.op.name]

    def body(g):
        arrays, attrs = _draw_case(g, case)
        arrays = inject(g, arrays, spec)
        note(f"with special values: {[a.tolist() if a.size <= 32 else a.shape for a in arrays]}")
        ins = [checks.upload(a, singa_device) for a in arrays]
        with np.errstate(all="ignore"):  # a NaN in is no reason for a warning
            outs = run(case.op, ins, attrs)
            outs[0].to_numpy()
        _compare(case, outs, arrays, attrs,
                 f"{case.op.name} on {singa_device.name} with special values", spec)

    _hypothesis(request, case, "special", body)


def test_large(kernel_case, singa_device, request):
    """Each kernel matches the reference on large cases (the paths backends choose by size:
    threads, Winograd, 1x1 and per-image im2col convolutions, tiled GEMM, multi-axis
    reductions), and each fused kernel gives bitwise its ops' results there (a fused
    epilogue is written once per such path)."""
    case = kernel_case
    if case.fusion is not None:
        _hypothesis(request, case, "large", lambda g: _check_fused(g, case, singa_device),
                    scale=LARGE_FUSED_SCALE, large=True)
        return

    def body(g):
        arrays, attrs = _draw_case(g, case)
        ins = [checks.upload(a, singa_device) for a in arrays]
        given = _fresh_outs(case.op, ins, attrs, singa_device) if case.op.nin == 0 else None
        outs = run(case.op, ins, attrs, given)
        _compare(case, outs, arrays, attrs, f"{case.op.name} on {singa_device.name}, large case")

    _hypothesis(request, case, "large", body, scale=LARGE_SCALE, large=True)


#: Examples of test_large relative to the other kinds (each case is a million elements).
LARGE_SCALE = 0.1
#: ... for a fused kernel: enough examples for the drawn geometries to reach each path
#: (a large convolution is drawn as one of four kinds: Winograd, 1x1, im2col, depthwise)
LARGE_FUSED_SCALE = 0.6

#: Layout plans of test_layouts: (layout of every input, layout of every output); a plan of
#: None draws a layout per tensor.
LAYOUT_PLANS = (
    ("transposed", "transposed"),
    ("offset", "offset"),
    ("offset", "transposed"),
    ("broadcast", "offset"),
    None,
)


def _run_layout(g, case: KernelCase, dev, arrays, attrs, plan) -> None:
    ins, values = [], []
    for a in arrays:
        layout = plan[0] if plan else g.choice(checks.LAYOUTS)
        t, v = checks.input_view(g, a, dev, layout)
        ins.append(t)
        values.append(v)
    defined = case.op.defined
    if defined is not None and not defined(values, attrs):
        # a broadcast made inputs the op does not define (duplicate scatter targets): the
        # first broadcast input whose own values make them defined again stays contiguous,
        # else every broadcast input does
        changed = [i for i, a in enumerate(arrays) if values[i] is not a]
        keep = next(([i] for i in changed
                     if defined([a if j == i else v for j, (a, v) in enumerate(
                         zip(arrays, values))], attrs)), changed)
        for i in keep:
            ins[i], values[i] = checks.input_view(g, arrays[i], dev, "contiguous")
    outs, untouched, out_layouts = [], [], []
    for shape, dt in case.op.infer(ins, attrs):
        layout = plan[1] if plan else g.choice(("contiguous", "offset", "transposed"))
        out_layouts.append(layout)
        if layout == "contiguous":
            outs.append(CTensor(shape, dev, dt))
        else:
            view, check = checks.output_view(g, shape, dt, dev, layout)
            outs.append(view)
            untouched.append(check)
    strides = [t.strides if not t.contig else "contiguous" for t in ins]
    what = (
        f"{case.op.name} on {dev.name} with strided views (input strides {strides}, "
        f"offsets {[t.offset for t in ins]}; outputs {out_layouts})"
    )
    run(case.op, ins, attrs, outs)
    _compare(case, outs, values, attrs, what)
    for check in untouched:
        check(what)


def test_layouts(kernel_case, singa_device, request):
    """Each kernel reads strided inputs and writes strided outputs correctly.

    Every drawn case runs with all inputs transposed, all offset, all broadcast, and once
    with a layout drawn per tensor; outputs are strided views in a sentinel-filled block.
    """
    case = kernel_case

    def body(g):
        arrays, attrs = _draw_case(g, case)
        for plan in LAYOUT_PLANS:
            _run_layout(g, case, singa_device, arrays, attrs, plan)

    _hypothesis(request, case, "layouts", body)


def test_inplace(kernel_case, singa_device, request):
    """Each kernel is correct when its output aliases an input, as the API calls it, and for
    every input the op declares in ``OpDef.inplace`` (the promise a graph's arena planner
    relies on when it gives the output that input's memory)."""
    case = kernel_case

    def aliased(arrays, attrs, i):
        ins = [checks.upload(a, singa_device) for a in arrays]
        note(f"output aliases input {i}")
        outs = run(case.op, ins, attrs, [ins[i]])
        assert outs[0] is ins[i]
        _compare(
            case,
            outs,
            arrays,
            attrs,
            f"{case.op.name} on {singa_device.name} writing in place into input {i}",
        )

    def body(g):
        arrays, attrs = _draw_case(g, case)
        ins = [checks.upload(a, singa_device) for a in arrays]
        ((shape, dt),) = case.op.infer(ins, attrs)
        fits = [i for i, t in enumerate(ins) if t.dims == tuple(shape) and t.dtype_code == dt]
        fixed = FIXED_INPLACE.get(case.op.name)
        cands = [i for i in fits if fixed is None or i == fixed]
        declared = [i for i in case.op.inplace if i in fits]
        assume(cands or declared)
        if cands:
            aliased(arrays, attrs, g.choice(cands))
        for i in declared:  # the planner may alias any of these: each must hold
            aliased(arrays, attrs, i)

    _hypothesis(request, case, "inplace", body)


def _compose(name: str, ins, attrs, swapped: bool = False) -> list:
    """Outputs of op or fusion ``name`` computed with the device's unfused kernels, one op
    after the other (see :mod:`singa.ops._fusion` for the fused calling convention); with
    ``swapped``, the first op's output goes into the other input of a ``commutes`` fusion's
    second op than ``link``."""
    if name in OPS:
        return run(OPS[name], ins, attrs)
    fd = FUSIONS[name]
    second = OPS[fd.second]
    n_first = len(ins) - (second.nin - 1)
    first_attrs = {k: v for k, v in attrs.items() if k != "second"}
    (mid,) = _compose(fd.first, ins[:n_first], first_attrs)
    b_ins = list(ins[n_first:])
    b_ins.insert(1 - fd.link if swapped else fd.link, mid)
    outs = run(second, b_ins, attrs.get("second", {}))
    return [mid, *outs] if fd.keep else outs


def _fused_case(g, case: KernelCase, dev):
    """``(arrays, inputs, attrs)`` of a fused kernel's case: the first op's case from its
    sampler, the second op's attributes from the fusion's sampler, its other inputs random or
    an input of the first op (aliasing)."""
    fd = case.fusion
    assert fd is not None  # called for the cases of fused kernels only
    second = OPS[fd.second]
    arrays, attrs = _draw_case(g, case)
    ins = [checks.upload(a, dev) for a in arrays]
    (mid,) = _compose(fd.first, ins, attrs)
    if fd.sample_second is not None:
        s_attrs = fd.sample_second(g, mid.dims)
        assume(s_attrs is not None)
        attrs = {**attrs, "second": s_attrs}
    mid_np = mid.to_numpy()
    shapes = iter(fd.sample_others(g, mid.dims) if fd.sample_others is not None else ())
    others = []
    for j in range(second.nin):
        if j == fd.link:
            continue
        shp = tuple(next(shapes, mid.dims))
        same = [x for x in ins if x.dims == shp and x.dtype_code == mid.dtype_code]
        if same and g.booleans():  # the second op reads an input of the first one
            note(f"second op's input {j} is an input of the first op")
            others.append(g.choice(same))
        else:
            others.append(checks.upload(g.array(shp, mid_np.dtype), dev))
    return arrays, [*ins, *others], attrs


def _assert_bitwise(got, want, what: str, arrays, attrs) -> None:
    """``got`` equals ``want`` bit for bit (NaN where NaN, and zeros of the same sign: graph
    mode swaps a fusion in for its ops, so ``-0.0`` against ``0.0`` is a difference), else an
    error starting ``what``."""
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    if got.dtype.kind == "f":
        same &= np.signbit(got) == np.signbit(want)
    if not same.all():
        bad = np.flatnonzero(~same)
        raise AssertionError(
            f"{what} at {bad.size} of {got.size} elements (first at flat index {bad[0]}: "
            f"{got.flat[bad[0]]!r} vs {want.flat[bad[0]]!r}; "
            f"{checks.describe_case(arrays, attrs)})")


def _general_outputs(case: KernelCase, dev, ins, attrs, shapes) -> list:
    """Host copies of the outputs (``shapes``: ``[(shape, dtype)]``) of the case's kernel, the
    general one (not bound), run on ``ins`` through the device."""
    outs = [CTensor(shp, dev, dt) for shp, dt in shapes]
    dev.exec(KernelCall(dev, case.kernel, ins, outs, attrs), [x.block for x in ins],
             [o.block for o in outs], case.name)
    return [o.to_numpy() for o in outs]


def _check_fused(g, case: KernelCase, dev) -> None:
    """One drawn case of a fused kernel against its ops run one after the other, bitwise."""
    fd = case.fusion
    assert fd is not None  # called for the cases of fused kernels only
    arrays, f_ins, attrs = _fused_case(g, case, dev)
    expected = _compose(fd.name, f_ins, attrs)
    got = _general_outputs(case, dev, f_ins, attrs, [(e.dims, e.dtype_code) for e in expected])
    for swapped in (False, True) if fd.commutes else (False,):
        if swapped:  # the other operand order of a symmetric second op
            expected = _compose(fd.name, f_ins, attrs, swapped=True)
        order = " (first's output as the other operand)" if swapped else ""
        for k, (o, e) in enumerate(zip(got, expected)):
            _assert_bitwise(o, e.to_numpy(),
                            f"fused kernel {fd.name} on {dev.name}, output {k}: differs from "
                            f"its ops run one after the other{order}", arrays, attrs)


def test_fused(kernel_case, singa_device, request):
    """Each fused kernel gives bitwise what the device's own kernels give one after the
    other."""
    case = kernel_case
    _hypothesis(request, case, "fused", lambda g: _check_fused(g, case, singa_device))


def test_bound(kernel_case, singa_device, request):
    """Each kernel with a ``bind`` attribute, bound once to a case's arrays, gives bitwise
    what the general kernel gives, on the case's contents and again after they change (a
    replay rewrites the inputs of the arrays it was bound to)."""
    case = kernel_case
    dev = singa_device

    def body(g):
        if case.fusion is not None:
            arrays, ins, attrs = _fused_case(g, case, dev)
            shapes = [(o.dims, o.dtype_code) for o in _compose(case.fusion.name, ins, attrs)]
        else:
            arrays, attrs = _draw_case(g, case)
            ins = [checks.upload(a, dev) for a in arrays]
            shapes = case.op.infer(ins, attrs)
        outs = [CTensor(shp, dev, dt) for shp, dt in shapes]
        for o in outs:  # allocated, and filled with what a kernel that wrote nothing leaves
            np_dt = np.dtype(_dtype.NP_DTYPE[o.dtype_code])
            o.copy_from_numpy(np.full(o.dims, checks.sentinel(np_dt), np_dt))
        nat_in = [dev.native(x) for x in ins]
        nat_out = [dev.native(o) for o in outs]
        bound = case.kernel.bind(nat_in, nat_out, attrs)
        if bound is None:
            note("bind returned None: the general kernel runs (nothing to compare)")
            return
        assert callable(bound), f"{case.name}: bind returned {type(bound).__name__}"
        rng = np.random.default_rng(g.integers(0, 2**31))
        for round_ in ("the case's contents", "new contents of the same arrays"):
            if round_ != "the case's contents":  # each input's values, shuffled
                for x in {id(x): x for x in ins}.values():
                    x.copy_from_numpy(rng.permutation(x.to_numpy().reshape(-1))
                                      .reshape(x.dims))
            want = _general_outputs(case, dev, ins, attrs, shapes)
            bound(nat_in, nat_out, attrs)
            dev.synchronize()
            for k, (o, w) in enumerate(zip(outs, want)):
                _assert_bitwise(o.to_numpy(), w,
                                f"bound kernel {case.name} on {dev.name}, output {k}, "
                                f"{round_}: differs from the general kernel", arrays, attrs)

    _hypothesis(request, case, "bound", body)


def _draw_random(g, case: KernelCase, dev, seed: int):
    arrays, attrs = _draw_case(g, case)
    ins = [checks.upload(a, dev) for a in arrays]
    dev.SetRandSeed(seed)
    outs = _fresh_outs(case.op, ins, attrs, dev)
    if not case.native and not dev.host_fallback:
        pytest.fail(
            f"device {dev.name} has no {case.op.name} kernel and its backend does not enable "
            "host fallback: random ops initialise every model's weights, so each backend "
            f"must run them (register a {case.op.name!r} kernel that draws from the device's "
            "generator, seeded by SetRandSeed)", pytrace=False)
    run(case.op, ins, attrs, outs)
    return arrays, attrs, ins, outs


def test_random_stats(kernel_case, singa_device, request):
    """Random kernels draw from the right distribution (margins of several std errors)."""
    case = kernel_case

    def body(g):
        seed = g.integers(0, 2**31 - 1)
        arrays, attrs, _ins, outs = _draw_random(g, case, singa_device, seed)
        refs = checks.reference_outputs(case.op, arrays, attrs)
        for o, r in zip(outs, refs):
            draws = o.to_numpy()
            assert draws.shape == r.shape, (draws.shape, r.shape)
            checks.check_random_draws(
                case.op.name,
                draws,
                r,
                attrs,
                f"{case.op.name} on {singa_device.name} (seed {seed}, "
                f"{checks.describe_case(arrays, attrs)})",
            )

    _hypothesis(request, case, "random_stats", body, scale=0.5)


def test_random_seed(kernel_case, singa_device, request):
    """SetRandSeed(s) makes draws reproducible; without reseeding draws differ."""
    case = kernel_case

    def body(g):
        seed = g.integers(0, 2**31 - 1)
        arrays, attrs, ins, outs = _draw_random(g, case, singa_device, seed)
        first = [o.to_numpy() for o in outs]
        again = _fresh_outs(case.op, ins, attrs, singa_device)
        run(case.op, ins, attrs, again)  # the generator advanced: new draws
        second = [o.to_numpy() for o in again]
        singa_device.SetRandSeed(seed)
        replay = _fresh_outs(case.op, ins, attrs, singa_device)
        run(case.op, ins, attrs, replay)
        what = f"{case.op.name} on {singa_device.name} (seed {seed})"
        for a, b, c in zip(first, [o.to_numpy() for o in replay], second):
            if not np.array_equal(a, b, equal_nan=True):
                raise AssertionError(f"{what}: SetRandSeed({seed}) twice gave different draws")
            if a.size >= 16 and np.unique(a).size > 1 and np.array_equal(a, c):
                raise AssertionError(
                    f"{what}: two draws without reseeding were identical; "
                    "the generator does not advance"
                )

    _hypothesis(request, case, "random_seed", body, scale=0.3)


def test_kernel_table(singa_device):
    """Every kernel is registered under an op name of the table, with valid ``dtypes``."""
    problems = []
    for name, entry in device_kernels(singa_device).items():
        fn = entry[0]
        op = OPS.get(name)
        if op is None and name in FUSIONS:
            op = OPS[FUSIONS[name].base]
        if op is None:
            problems.append(
                f"kernel {name!r} matches no op of singa.ops.OPS (typo? "
                "undeclared op?); it can never run"
            )
            continue
        dts = getattr(fn, "dtypes", None)
        if dts is None:
            continue
        try:
            codes = [_dtype.code_of(d) for d in dts]
        except Exception as exc:
            problems.append(f"kernel {name!r}: invalid dtypes attribute {dts!r}: {exc}")
            continue
        extra = [_dtype.name_of(c) for c in codes if c not in op.dtypes]
        if extra:
            problems.append(
                f"kernel {name!r} claims dtypes {extra} that op {name} does not "
                f"define (op dtypes: {[_dtype.name_of(c) for c in op.dtypes]})"
            )
    assert not problems, f"kernel table of {singa_device.name}:\n  " + "\n  ".join(problems)
