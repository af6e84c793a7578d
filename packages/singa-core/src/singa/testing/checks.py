"""The checks behind the conformance kit, usable on their own in backend tests.

- :func:`tolerance` and :data:`DEFAULT_TOLERANCES`: per-dtype ``(rtol, atol)``.
- :func:`reference_outputs`: an op's numpy reference evaluated on float64 copies of floating
  inputs (integer inputs stay integer).
- :func:`assert_matches`: compare a kernel result with the reference and explain a mismatch.
- :func:`upload`, :func:`input_view`, :func:`output_view`: put arrays on a device as contiguous
  tensors or as strided views (transposed, offset slices of a larger block, zero-stride
  broadcasts) built with :mod:`singa._math`'s view functions.
- :func:`check_random_draws`: statistical checks of random ops (mean, spread, range,
  frequencies) with margins of several standard errors.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .. import _dtype, _math
from .._ctensor import CTensor

__all__ = [
    "DEFAULT_TOLERANCES",
    "device_kernels",
    "ACC_UNITS",
    "FLOAT16_ULPS",
    "LAYOUTS",
    "assert_close",
    "assert_matches",
    "assert_special_matches",
    "assert_ulps",
    "accumulation_slack",
    "check_random_draws",
    "describe_case",
    "input_view",
    "output_view",
    "reference_outputs",
    "tolerance",
    "upload",
]

#: ``{dtype code: (rtol, atol)}`` used when the op declares no override in ``OpDef.tol``.
#: Integer outputs are compared exactly. The reference runs in float64, so these bound the
#: kernel's own rounding: rtol is ~80 ulp (float32) or ~10 ulp (float16), atol ~8 ulp
#: (float32) or 4 ulp (float16, 2**-8) of 1.0, enough for kernels that round O(1)
#: intermediates to their dtype and far below the error of a wrong formula or index.
DEFAULT_TOLERANCES = {
    _dtype.kDouble: (1e-9, 1e-10),
    _dtype.kFloat32: (1e-5, 1e-6),
    _dtype.kFloat16: (1e-2, 2.0**-8),
}

#: Default tolerance of float16 outputs, in units in the last place of the reference rounded
#: to float16 (see :func:`assert_close`): a kernel that computes in float32 and rounds once
#: is within one; an op that accumulates declares a wider ``OpDef.tol`` instead.
FLOAT16_ULPS = 1.0
#: Unit roundoffs of the accumulation dtype allowed per ``sqrt(n) * sum|terms|`` of ops with
#: an ``acc_bound`` (see :func:`accumulation_slack`).
ACC_UNITS = 4.0
#: Absolute slack of float16 comparisons: float16's smallest normal number, so a kernel that
#: flushes subnormal results to zero (as accelerators may) is no error.
_F16_TINY = float(np.finfo(np.float16).tiny)

#: Layouts of :func:`input_view` (``"broadcast"`` only for inputs).
LAYOUTS = ("contiguous", "transposed", "offset", "broadcast")


def tolerance(op, dtype: int, out_dtype: int) -> tuple[float, float]:
    """``(rtol, atol)`` for output dtype ``out_dtype`` of ``op`` tested at ``dtype``.

    ``op.tol[dtype]`` wins; otherwise :data:`DEFAULT_TOLERANCES` of the output dtype, and
    exact equality for integer outputs. (Float16 outputs of ops without an override are
    compared in ulps instead: see :func:`assert_close`.)
    """
    if dtype in op.tol:
        return op.tol[dtype]
    return DEFAULT_TOLERANCES.get(out_dtype, (0.0, 0.0))


def accumulation_slack(op, arrays, attrs, out_dtype) -> list | None:
    """Per-output absolute slack for the rounding of long sums (``op.acc_bound``), or None.

    :data:`ACC_UNITS` unit roundoffs of the accumulation dtype (float64 for float64 outputs,
    else float32: float16 kernels accumulate in float32) times ``sqrt(n) * sum|terms|``.
    """
    if op.acc_bound is None:
        return None
    ref_in = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    res = op.acc_bound(*ref_in, **attrs)
    res = res if isinstance(res, tuple) else (res,)
    u = 2.0**-53 if out_dtype == _dtype.kDouble else 2.0**-24
    return [ACC_UNITS * u * np.asarray(r, np.float64) for r in res]


def assert_close(op, dtype: int, actual: np.ndarray, expected: np.ndarray, what: str,
                 slack=0.0) -> None:
    """Compare one kernel output of ``op`` tested at ``dtype`` with its float64 reference.

    Float16 outputs of ops without a float16 override in ``op.tol`` must lie within
    :data:`FLOAT16_ULPS` ulp of the reference *rounded to float16* (plus float16's smallest
    normal number, for flushed subnormals): what computing in float32 and rounding once
    gives. Everything else uses :func:`tolerance` and :func:`assert_matches`. ``slack``
    (from :func:`accumulation_slack`) widens the absolute tolerance per element.
    """
    actual = np.asarray(actual)
    if actual.dtype == np.float16 and dtype not in op.tol:
        assert_ulps(actual, expected, FLOAT16_ULPS, what, slack)
        return
    rtol, atol = tolerance(op, dtype, _dtype.code_of(actual.dtype))
    assert_matches(actual, expected, rtol, atol + np.asarray(slack), what)


def assert_ulps(actual: np.ndarray, expected: np.ndarray, ulps: float, what: str,
                slack=0.0) -> None:
    """Fail unless float16 ``actual`` is within ``ulps`` ulp of ``expected`` rounded to
    float16 (the ulp of the rounded value; float16's smallest normal number plus ``slack``
    as absolute slack). NaNs and infinities must sit at the same places."""
    exp16 = np.asarray(expected).astype(np.float16)
    with np.errstate(invalid="ignore", over="ignore"):
        spacing = np.abs(np.spacing(np.abs(exp16))).astype(np.float64)
    spacing = np.where(np.isfinite(spacing), spacing, 0.0)
    # assert_matches with a per-element tolerance: atol carries the ulp allowance
    how = f"{ulps:g} ulp of the reference rounded to float16"
    if np.any(np.asarray(slack)):
        how += " plus the accumulation slack"
    assert_matches(actual, exp16, 0.0, ulps * spacing + _F16_TINY + np.asarray(slack), what,
                   how=how)


def assert_special_matches(op, dtype: int, actual: np.ndarray, expected: np.ndarray,
                           what: str, signed_zero: bool = True, slack=0.0) -> None:
    """:func:`assert_close` for special values: NaNs at the same places, infinities of the
    same sign, and (with ``signed_zero``) zeros with the same sign bit, which ``isclose``
    cannot see (``-0.0 == 0.0``)."""
    with np.errstate(invalid="ignore"):
        slack = np.where(np.isfinite(slack), slack, 0.0)
    assert_close(op, dtype, actual, expected, what, slack)
    a = np.asarray(actual)
    e = np.asarray(expected)
    if not signed_zero or a.dtype.kind != "f" or a.size == 0:
        return
    zeros = (e == 0) & (a == 0)
    bad = zeros & (np.signbit(a) != np.signbit(e.astype(a.dtype)))
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {a.size} zeros have the wrong sign; first at index "
            f"{idx}: kernel {a[idx]!r} vs reference {e[idx]!r} (signed zeros are part of this "
            f"op's results)\nkernel:\n{a!r}\nreference:\n{e!r}"
        )


def describe_case(arrays, attrs) -> str:
    """One line naming the input shapes/dtypes and the attributes of a case."""
    ins = ", ".join(f"{a.dtype}{list(a.shape)}" for a in arrays) or "no inputs"
    return f"inputs ({ins}), attrs {attrs!r}"


def reference_outputs(op, arrays, attrs) -> list[np.ndarray]:
    """``op.reference`` on float64 copies of floating inputs, as a list of arrays."""
    ref_in = [a.astype(np.float64) if a.dtype.kind == "f" else a.copy() for a in arrays]
    res = op.reference(*ref_in, **attrs)
    if not isinstance(res, tuple):
        res = (res,)
    return [np.asarray(r) for r in res]


def assert_matches(
    actual: np.ndarray, expected: np.ndarray, rtol: float, atol, what: str, how: str = ""
) -> None:
    """Fail unless ``|actual - expected| <= atol + rtol * |expected|`` elementwise.

    Shapes must agree; NaNs and infinities must sit at the same places. The message names
    ``what``, the tolerance, the number of mismatches and the worst element.
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        raise AssertionError(
            f"{what}: the kernel output has shape {actual.shape} but the reference gives "
            f"{expected.shape}"
        )
    if actual.size == 0:
        return
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    if rtol == 0 and np.all(np.asarray(atol) == 0):
        ok = (a == e) | (np.isnan(a) & np.isnan(e))
    else:
        ok = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    if ok.all():
        return
    bad = np.argwhere(~ok)
    with np.errstate(invalid="ignore"):
        err = np.where(ok, 0.0, np.abs(a - e))
    err = np.where(np.isnan(err), np.inf, err)
    worst = np.unravel_index(int(np.argmax(err)), a.shape) if a.ndim else ()
    raise AssertionError(
        f"{what}: {len(bad)} of {a.size} elements differ from the reference beyond "
        f"{how or f'rtol={rtol:g}, atol={float(np.max(atol)):g}'}; worst at index "
        f"{tuple(int(i) for i in worst)}: "
        f"kernel {actual[worst]!r} vs reference {expected[worst]!r} (abs err "
        f"{float(err[worst]):.3g}); first mismatches at "
        f"{[tuple(int(i) for i in b) for b in bad[:5]]}\n"
        f"kernel:\n{actual!r}\nreference:\n{expected!r}"
    )


# ---------------------------------------------------------------------- device tensors
def upload(arr: np.ndarray, dev) -> CTensor:
    """A new contiguous CTensor on ``dev`` holding ``arr`` (which must be a SINGA dtype)."""
    code = _dtype.code_of(arr.dtype)
    ct = CTensor(arr.shape, dev, code)
    ct.copy_from_numpy(arr)
    return ct


def sentinel(np_dt: np.dtype):
    """A value that marks memory a kernel must neither read into a result nor write."""
    if np_dt.kind == "f":
        return np_dt.type(np.nan)
    return np_dt.type(np.iinfo(np_dt).max - 7)


def _offset_slices(g, shape: tuple) -> tuple[tuple, list, list, list]:
    """Base shape and (starts, stops, steps) embedding ``shape`` with a non-zero offset."""
    starts, steps, base = [], [], []
    for i, d in enumerate(shape):
        start = 1 if i == 0 else g.integers(0, 1)
        step = 2 if i == len(shape) - 1 else g.integers(1, 2)  # never unit-stride rows
        starts.append(start)
        steps.append(step)
        base.append(start + step * d + g.integers(0, 1))
    stops = [s + st * d for s, st, d in zip(starts, steps, shape)]
    return tuple(base), starts, stops, steps


def _strided_ct(g, shape: tuple, code: int, dev, layout: str, fill: np.ndarray | None):
    """``(view, base, to_view)``: a strided view of ``shape`` into a new base tensor.

    The base holds the sentinel everywhere except the view, which holds ``fill`` (or the
    sentinel too when ``fill`` is None, for outputs). ``to_view`` maps a numpy array of the
    base's shape to the numpy view matching ``view``.
    """
    np_dt = _dtype.NP_DTYPE[code]
    nd = len(shape)
    if layout == "transposed" and nd >= 2:
        perm = g.permutation(nd)
        if perm == tuple(range(nd)):
            perm = tuple(reversed(perm))
        inv = tuple(int(i) for i in np.argsort(perm))
        base_shape = tuple(shape[p] for p in perm)

        def to_view(b):
            return np.transpose(b, inv)

        def make_view(base_ct):
            return _math.transpose(base_ct, inv)
    elif layout in ("offset", "transposed"):  # transposing < 2 dims is a no-op: offset it
        if nd == 0:
            base_shape = (3,)

            def to_view(b):
                return b[1:2].reshape(())

            def make_view(base_ct):
                return _math.squeeze_view(_math.slice_view(base_ct, [1], [2]), [0])
        else:
            base_shape, starts, stops, steps = _offset_slices(g, shape)
            sl = tuple(slice(a, b, c) for a, b, c in zip(starts, stops, steps))

            def to_view(b):
                return b[sl]

            def make_view(base_ct):
                return _math.slice_view(base_ct, starts, stops, steps)
    else:
        raise ValueError(f"unknown layout {layout!r}")
    base_np = np.full(base_shape, sentinel(np_dt), np_dt)
    if fill is not None:
        to_view(base_np)[...] = fill
    base = upload(base_np, dev)
    view = make_view(base)
    assert view.dims == tuple(shape), (view.dims, shape)
    return view, base, to_view


def input_view(g, arr: np.ndarray, dev, layout: str) -> tuple[CTensor, np.ndarray]:
    """Put ``arr`` on ``dev`` in ``layout``; return ``(tensor, values)``.

    ``"transposed"`` stores a permutation of the array and views it back; ``"offset"`` embeds
    it with steps in a larger block filled with a sentinel (NaN or a large integer) so that a
    kernel reading outside the view produces a wrong result; ``"broadcast"`` uploads one slice
    along the longest axis and broadcasts it with a zero stride, which changes the values:
    the returned ``values`` are what the tensor holds.
    """
    if layout == "contiguous":
        return upload(arr, dev), arr
    if layout == "broadcast":
        if arr.ndim == 0:
            return upload(arr, dev), arr
        axis = int(np.argmax(arr.shape))
        small = np.take(arr, [0], axis=axis)
        view = _math.broadcast_to(upload(small, dev), arr.shape)
        return view, np.broadcast_to(small, arr.shape).copy()
    view, _base, _ = _strided_ct(g, arr.shape, _dtype.code_of(arr.dtype), dev, layout, arr)
    return view, arr


def output_view(g, shape: tuple, code: int, dev, layout: str):
    """A strided output tensor of ``shape`` inside a sentinel-filled block.

    Returns ``(view, check_untouched)``; ``check_untouched(what)`` asserts that the kernel
    wrote nothing outside the view.
    """
    np_dt = _dtype.NP_DTYPE[code]
    view, base, to_view = _strided_ct(g, tuple(shape), code, dev, layout, None)
    outside = np.ones(base.dims, bool)
    to_view(outside)[...] = False

    def check_untouched(what: str) -> None:
        rest = base.to_numpy()[outside]
        s = sentinel(np_dt)
        intact = np.isnan(rest) if np_dt.kind == "f" else rest == s
        if not intact.all():
            raise AssertionError(
                f"{what}: the kernel wrote {int((~intact).sum())} element(s) outside its "
                f"strided output view (layout {layout!r}, view shape {tuple(shape)}, block "
                f"shape {base.dims})"
            )

    return view, check_untouched


# ---------------------------------------------------------------------- random ops
def _margin(k_sigma: float, std: float, n: int) -> float:
    return k_sigma * std / math.sqrt(max(n, 1))


def check_random_draws(
    op_name: str,
    draws: np.ndarray,
    expected_mean: np.ndarray,
    attrs: dict,
    what: str,
    k_sigma: float = 6.0,
) -> None:
    """Statistical checks of one batch of draws of a random op.

    Every random op: draws are finite, and their mean matches the mean of the op's
    reference (which for random ops gives the expected value) within ``k_sigma`` standard
    errors, plus a rounding allowance for the draws' dtype. Known ops add checks of their
    distribution: Gaussian (standard deviation, fraction within one sigma, no absurd
    outliers), Uniform (range, variance, quarter-interval frequencies), Bernoulli (values in
    {0, 1}, frequency of ones).
    """
    x = np.asarray(draws, dtype=np.float64).reshape(-1)
    n = x.size
    if n == 0:
        return
    eps = float(np.finfo(draws.dtype).eps) if draws.dtype.kind == "f" else 0.0
    if not np.isfinite(x).all():
        raise AssertionError(f"{what}: draws contain NaN or infinity")
    mu = float(np.mean(np.asarray(expected_mean, dtype=np.float64)))
    sd = float(np.std(x))
    scale = max(abs(mu), float(np.max(np.abs(x))), 1.0)
    _check(
        abs(float(x.mean()) - mu) <= _margin(k_sigma, sd, n) + 2 * eps * scale,
        what,
        f"sample mean {x.mean():.5g} is not within {k_sigma} standard errors of the "
        f"expected mean {mu:.5g} (n={n}, sample std {sd:.4g})",
    )
    check = _DISTRIBUTION_CHECKS.get(op_name)
    if check is not None:
        check(x, attrs, eps, n, k_sigma, what)


def _check(ok: bool, what: str, msg: str) -> None:
    if not ok:
        raise AssertionError(f"{what}: {msg}")


def _frac_margin(p: float, n: int, k_sigma: float) -> float:
    return k_sigma * math.sqrt(p * (1 - p) / n) + 1.0 / n


def _gaussian(x, attrs, eps, n, k, what):
    mean, std = attrs["mean"], attrs["std"]
    sd = float(np.std(x))
    # the sample std has standard error ~ std / sqrt(2n)
    _check(
        abs(sd / std - 1) <= k / math.sqrt(2 * n) + 4 * eps,
        what,
        f"sample std {sd:.5g} is far from std={std:g} (n={n})",
    )
    within = float(np.mean(np.abs(x - mean) <= std))
    p = math.erf(1 / math.sqrt(2))
    _check(
        abs(within - p) <= _frac_margin(p, n, k) + 4 * eps,
        what,
        f"{within:.3f} of the draws lie within one std of the mean; a normal "
        f"distribution puts {p:.3f} there (n={n})",
    )
    z = float(np.max(np.abs(x - mean))) / std
    _check(z < 8, what, f"a draw lies {z:.1f} std from the mean (n={n})")


def _uniform(x, attrs, eps, n, k, what):
    low, high = attrs["low"], attrs["high"]
    width = high - low
    slack = 2 * eps * max(abs(low), abs(high))
    _check(
        float(x.min()) >= low - slack and float(x.max()) <= high + slack,
        what,
        f"draws span [{x.min():.6g}, {x.max():.6g}], outside [low, high] = [{low:g}, {high:g}]",
    )
    var = float(np.var(x))
    # the variance estimate of U(low, high) has relative standard error ~ 0.894/sqrt(n)
    _check(
        abs(var / (width**2 / 12) - 1) <= k * 0.9 / math.sqrt(n) + 8 * eps,
        what,
        f"sample variance {var:.5g} is far from (high-low)^2/12 = {width**2 / 12:.5g}",
    )
    quarters = np.clip(((x - low) / width * 4).astype(np.int64), 0, 3)
    freq = np.bincount(quarters, minlength=4) / n
    _check(
        bool(np.all(np.abs(freq - 0.25) <= _frac_margin(0.25, n, k) + 0.01)),
        what,
        f"frequencies of the four quarters of [low, high] are {freq.round(3).tolist()}, "
        "expected about 0.25 each",
    )


def _bernoulli(x, attrs, eps, n, k, what):
    p = attrs["p"]
    _check(
        bool(np.all((x == 0) | (x == 1))),
        what,
        f"draws must be 0 or 1, got values {np.unique(x)[:8].tolist()}",
    )
    freq = float(x.mean())
    _check(
        abs(freq - p) <= _frac_margin(p, n, k),
        what,
        f"frequency of ones {freq:.4f} is far from p={p:g} (n={n})",
    )


_DISTRIBUTION_CHECKS: dict[str, Callable] = {
    "Gaussian": _gaussian,
    "Uniform": _uniform,
    "Bernoulli": _bernoulli,
}


def _is_host_fallback(kernel) -> bool:
    return bool(getattr(kernel, "host_fallback", False))


def device_kernels(dev) -> dict:
    """``{op_name: entry}`` of the device's own kernels (no host fallback); ``entry[0]`` is
    the kernel's :class:`~singa.backend.Kernel` record and ``entry[1]`` its
    ``contiguous_inputs`` flag (see ``Device.kernels``)."""
    return {name: entry for name, entry in dev.kernels.items() if not _is_host_fallback(entry[0])}
