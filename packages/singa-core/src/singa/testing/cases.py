"""Test-case drawing for op samplers: the helper ``g`` that ``OpDef.sample(g, dtype)`` receives.

Every operator in :data:`singa.ops.OPS` has a sampler ``sample(g, dtype) -> (arrays, attrs)``
that draws one test case: the input arrays (numpy, in SINGA dtypes) and the attribute dict. The
conformance kit (:mod:`singa.testing.conformance`) calls it inside a hypothesis test, passing a
:class:`Cases` built over ``st.data()``, so every choice a sampler makes is a hypothesis draw and
a failing case shrinks to a small one (fewer dimensions, shorter sides, simpler attributes).

Writing a sampler
-----------------
::

    def _my_op_sample(g, dtype):
        x = g.array(g.shape(min_dims=2), dtype, -3, 3)
        return [x], {"axis": g.axis(x.ndim), "eps": g.choice([1e-5, 1e-3])}

    defop("MyOp", 1, infer, reference, _my_op_sample, dtypes=FHD)

Rules of thumb: keep arrays small (the defaults give sides 1..5), keep inputs inside the op's
domain (``low``/``high``, :meth:`Cases.signs` to move away from zero), and avoid exact ties
where low-precision kernels may legitimately round the other way.

The helper API
--------------
Scalars
    ``integers(lo, hi)``     int in ``[lo, hi]`` (both inclusive)
    ``floats(lo, hi)``       float in ``[lo, hi]`` on a grid of 1/64 (finer for narrow
                             intervals; see below)
    ``booleans()``           bool
    ``choice(seq)``          one element of ``seq``
    ``permutation(n)``       a tuple permuting ``range(n)``
    ``axis(ndim)``           an axis in ``[0, ndim)``; ``axis(ndim, negative=True)`` also draws
                             negative axes
    ``draw(strategy)``       any hypothesis strategy, for what the helpers do not cover
Shapes (large mode, ``g.large``: about a million elements, see :class:`Cases`)
    ``shape(min_dims=0, max_dims=4, min_side=1, max_side=5)``
    ``broadcastable_shapes(num=2, min_dims=0, max_dims=4, min_side=1, max_side=5)``
                             ``num`` shapes that broadcast together (numpy rules)
    ``image_shape(batch=(1, 3), channels=(1, 4), spatial=(1, 6), spatial_dims=2)``
                             ``(N, C, *spatial)`` for convolution/pooling/normalisation ops
Arrays
    ``array(shape, dtype, low=-3, high=3)``
                             values in ``[low, high]`` of SINGA dtype ``dtype`` (a dtype code,
                             numpy dtype or name); integer dtypes get integers
    ``distinct_array(shape, dtype, low=-3, high=3)``
                             pairwise-distinct values, separated by several ulps of ``dtype``
                             (max-pooling, argmax, sorting: no ties to break)
    ``probabilities(shape, dtype, axis=-1)``
                             positive values summing to 1 along ``axis`` (loss inputs)
    ``signs(shape)``         int8 array of -1/+1 (multiplying keeps the other operand's dtype)
    ``mask(shape)``          bool array
    ``index_array(shape, n)`` int32 indices in ``[0, n)``

Value conventions
    * Float arrays never contain NaN, infinities or subnormal numbers (accelerators may flush
      subnormals to zero, which is not an error); values lie in ``[low, high]`` after rounding
      to the dtype.
    * :meth:`Cases.floats` returns multiples of 1/64 (of a finer power of two for narrow
      intervals): exact in float16, so a scalar attribute means the same number to a float16
      kernel and to the float64 reference (``x < 0.1`` would otherwise depend on how a backend
      rounds 0.1), and never a tiny non-zero magnitude in wide intervals (guard against an
      exact 0 where you divide).
    * Arrays with at most :data:`ELEMENTWISE_LIMIT` elements are drawn element by element,
      so hypothesis can shrink every value. Larger arrays draw a seed for a numpy generator
      plus a few hypothesis-drawn elements at drawn positions (bounds, zero and other edge
      values still appear); shapes and attributes always shrink.

Outside hypothesis, :func:`sample_cases` draws ready-made cases for an op, e.g. for gradient
tests or for debugging a kernel by hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal, cast

import numpy as np

try:
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp
except ModuleNotFoundError as exc:  # the testing extra is missing: say how to install it
    from . import TESTING_MODULES, testing_extra_error

    if exc.name not in TESTING_MODULES:
        raise
    raise testing_extra_error("singa.testing.cases", [exc.name]) from None

from .. import _dtype

__all__ = ["Cases", "ELEMENTWISE_LIMIT", "FLOAT_GRID", "LARGE_ITEMS", "sample_cases"]

#: Arrays up to this many elements are drawn element by element (fully shrinkable).
ELEMENTWISE_LIMIT = 32
#: :meth:`Cases.floats` returns multiples of this step (finer only for narrow intervals).
FLOAT_GRID = 1.0 / 64
#: Default largest side of drawn shapes.
MAX_SIDE = 5
#: Elements of a shape drawn in large mode (:class:`Cases` with ``large=True``): past the
#: 2**20-element thresholds from which the built-in backends split elementwise work across
#: threads.
LARGE_ITEMS = 1 << 20


def _np_dtype(dtype) -> np.dtype:
    return _dtype.NP_DTYPE[_dtype.code_of(dtype)]


def _float_bounds(dt: np.dtype, low: float, high: float) -> tuple[float, float]:
    """The representable interval of ``dt`` inside ``[low, high]``."""
    lo = dt.type(low)
    if float(lo) < low:
        lo = np.nextafter(lo, dt.type(np.inf))
    hi = dt.type(high)
    if float(hi) > high:
        hi = np.nextafter(hi, dt.type(-np.inf))
    if lo > hi:  # the interval holds no value of this dtype: use its nearest one
        return float(dt.type(low)), float(dt.type(low))
    return float(lo), float(hi)


def _int_bounds(dt: np.dtype, low: float, high: float) -> tuple[int, int]:
    info = np.iinfo(dt)
    lo = max(math.ceil(low), int(info.min))
    hi = min(math.floor(high), int(info.max))
    if lo > hi:
        lo = hi = min(max(round((low + high) / 2), int(info.min)), int(info.max))
    return lo, hi


class Cases:
    """Draw test-case pieces from a hypothesis ``st.data()`` object (see the module doc).

    Parameters
    ----------
    data:
        The object a ``@given(st.data())`` test receives.
    max_side:
        Default largest side of shapes (:meth:`shape`, :meth:`broadcastable_shapes`).
    large:
        Draw large cases (the kit's ``test_large``): :meth:`shape` and
        :meth:`broadcastable_shapes` give shapes of :data:`LARGE_ITEMS` to twice that many
        elements unless the caller bounds the sides, and samplers with their own sizes
        (convolution, pooling, GEMM, ...) read this flag to reach the code paths that
        backends choose only for large inputs (threads, Winograd, per-image im2col, 1x1).
    """

    def __init__(self, data: Any, max_side: int = MAX_SIDE, large: bool = False):
        self.data = data
        self.max_side = max_side
        self.large = large

    # ------------------------------------------------------------------ scalars
    def draw(self, strategy: st.SearchStrategy, label: str | None = None) -> Any:
        """Draw from any hypothesis strategy."""
        return self.data.draw(strategy, label=label)

    def integers(self, lo: int, hi: int) -> int:
        """An int in ``[lo, hi]``, both inclusive."""
        return self.data.draw(st.integers(int(lo), int(hi)))

    def floats(self, lo: float, hi: float) -> float:
        """A float in ``[lo, hi]`` on a grid of :data:`FLOAT_GRID` (1/64).

        Grid values are exact in every float dtype (below 32 in magnitude), so kernels and the
        float64 reference see the same number. Intervals holding fewer than 8 grid points use
        a finer power-of-two grid with at least 64 points (``floats(1e-5, 1e-3)`` works).
        """
        if not lo <= hi:
            raise ValueError(f"floats(): empty interval [{lo}, {hi}]")
        step = FLOAT_GRID
        if (hi - lo) / step < 8:
            span = hi - lo
            step = 2.0 ** math.floor(math.log2(span / 64)) if span > 0 else 1.0
        first = math.ceil(lo / step)
        last = math.floor(hi / step)
        if first > last:
            return float(lo)
        k = self.data.draw(st.integers(first, last), label="float/grid")  # shrinks toward 0
        return k * step

    def booleans(self) -> bool:
        """``True`` or ``False`` (shrinks toward ``False``)."""
        return self.data.draw(st.booleans())

    def choice(self, seq: Sequence) -> Any:
        """One element of ``seq`` (shrinks toward the first)."""
        return self.data.draw(st.sampled_from(list(seq)))

    def permutation(self, n: int) -> tuple:
        """A permutation of ``range(n)`` (shrinks toward the identity)."""
        return tuple(self.data.draw(st.permutations(range(n))))

    def axis(self, ndim: int, negative: bool = False) -> int:
        """An axis of an ``ndim``-D array; with ``negative``, in ``[-ndim, ndim)``."""
        if ndim <= 0:
            raise ValueError("axis(): the array has no axes")
        return self.integers(-ndim if negative else 0, ndim - 1)

    # ------------------------------------------------------------------ shapes
    def shape(
        self, min_dims: int = 0, max_dims: int = 4, min_side: int = 1, max_side: int | None = None
    ) -> tuple:
        """A shape with ``min_dims..max_dims`` dimensions of ``min_side..max_side`` each.

        In large mode with ``max_side`` unset: ``max(min_dims, 1)..max_dims`` dimensions and
        :data:`LARGE_ITEMS` to ``2 * LARGE_ITEMS`` elements (one long side at a drawn place).
        """
        if self.large and max_side is None and max_dims > 0:
            return self._large_shape(max(min_dims, 1), max_dims, min_side)
        max_side = self.max_side if max_side is None else max_side
        sides = st.integers(min_side, max(min_side, max_side))
        return tuple(
            self.data.draw(st.lists(sides, min_size=min_dims, max_size=max_dims), label="shape")
        )

    def _large_shape(self, min_dims: int, max_dims: int, min_side: int) -> tuple:
        nd = self.integers(min_dims, max_dims)
        sides = [self.integers(max(min_side, 1), max(min_side, 12)) for _ in range(nd - 1)]
        total = self.integers(LARGE_ITEMS, 2 * LARGE_ITEMS)
        long_side = max(min_side, -(-total // max(1, math.prod(sides))))
        sides.insert(self.integers(0, nd - 1), long_side)
        return tuple(sides)

    def broadcastable_shapes(
        self,
        num: int = 2,
        min_dims: int = 0,
        max_dims: int = 4,
        min_side: int = 1,
        max_side: int | None = None,
    ) -> tuple:
        """``num`` shapes that broadcast together under numpy rules (some sides are 1, some
        shapes have fewer dimensions)."""
        if self.large and max_side is None and max_dims > 0:
            full = self._large_shape(max(min_dims, 1), max_dims, min_side)
            out = []
            for _ in range(num):  # drop leading axes and set some sides to 1 per input
                lead = self.integers(0, len(full) - max(min_dims, 1))
                out.append(tuple(1 if self.booleans() and min_side <= 1 else d
                                 for d in full[lead:]))
            out[self.integers(0, num - 1)] = full  # one input has the output's shape
            return tuple(out)
        max_side = self.max_side if max_side is None else max_side
        res = self.data.draw(
            hnp.mutually_broadcastable_shapes(
                num_shapes=num,
                min_dims=min_dims,
                max_dims=max_dims,
                min_side=min_side,
                max_side=max(min_side, max_side),
            ),
            label="broadcastable shapes",
        )
        return tuple(res.input_shapes)

    def image_shape(
        self, batch=(1, 3), channels=(1, 4), spatial=(1, 6), spatial_dims: int = 2
    ) -> tuple:
        """``(N, C, *spatial)`` with each part drawn from the given inclusive ranges."""
        n = self.integers(*batch)
        c = self.integers(*channels)
        return (n, c) + tuple(self.integers(*spatial) for _ in range(spatial_dims))

    # ------------------------------------------------------------------ arrays
    def array(self, shape, dtype, low: float = -3, high: float = 3) -> np.ndarray:
        """An array of ``shape`` and SINGA dtype ``dtype`` with values in ``[low, high]``.

        Integer dtypes get integers in ``[ceil(low), floor(high)]`` (clipped to the dtype).
        """
        dt = _np_dtype(dtype)
        shape = tuple(int(d) for d in shape)
        n = math.prod(shape)
        if dt.kind == "f":
            lo, hi = _float_bounds(dt, low, high)
            elem = st.floats(
                lo,
                hi,
                # SINGA's float dtypes are 2, 4 or 8 bytes: the widths hypothesis accepts
                width=cast(Literal[16, 32, 64], dt.itemsize * 8),
                allow_nan=False,
                allow_infinity=False,
                allow_subnormal=False,
            )
        else:
            lo, hi = _int_bounds(dt, low, high)
            elem = st.integers(lo, hi)
        if n <= ELEMENTWISE_LIMIT:
            vals = self.data.draw(st.lists(elem, min_size=n, max_size=n), label="values")
            return np.array(vals, dtype=dt).reshape(shape)
        rng = self._rng()
        if dt.kind == "f":
            flat = rng.uniform(lo, hi, n).astype(dt)
            flat = np.clip(flat, dt.type(lo), dt.type(hi))
            tiny = np.abs(flat) < np.finfo(dt).tiny  # never subnormal
            flat[tiny] = 0
        else:
            # int(): the float branch above binds lo, hi first, so they are typed float
            flat = rng.integers(int(lo), int(hi), n, endpoint=True).astype(dt)
        k = self.data.draw(st.integers(0, 4), label="edge values")
        for _ in range(k):
            flat[self.integers(0, n - 1)] = self.data.draw(elem)
        return flat.reshape(shape)

    def _rng(self) -> np.random.Generator:
        """A numpy generator for a large array from a drawn seed. Each call of a case mixes
        in a counter: hypothesis often draws equal seeds, and two inputs with the same values
        (dy equal to x) are a special case, not the general one."""
        self._streams = getattr(self, "_streams", 0) + 1
        seed = self.data.draw(st.integers(0, 2**32 - 1), label="values seed")
        return np.random.default_rng([seed, self._streams])

    def distinct_array(self, shape, dtype, low: float = -3, high: float = 3) -> np.ndarray:
        """Pairwise-distinct values in ``[low, high]``, at least 4 ulps of ``dtype`` apart.

        The values are an evenly spaced grid in a drawn order, so max-pooling, argmax or
        sort-like kernels face no ties. Raises ``ValueError`` when ``[low, high]`` cannot hold
        that many distinct values of ``dtype``.
        """
        dt = _np_dtype(dtype)
        shape = tuple(int(d) for d in shape)
        n = math.prod(shape)
        if n == 0:
            return np.zeros(shape, dt)
        if dt.kind == "f":
            lo, hi = _float_bounds(dt, low, high)
            grid = np.linspace(lo, hi, n) if n > 1 else np.array([(lo + hi) / 2])
            vals = grid.astype(dt)
            gap = np.min(np.diff(vals.astype(np.float64))) if n > 1 else np.inf
            ulp = float(np.spacing(dt.type(max(abs(lo), abs(hi)))))
            if gap < 4 * ulp:
                raise ValueError(
                    f"distinct_array: {n} values do not fit [{low}, {high}] with 4-ulp gaps in {dt}"
                )
        else:
            lo, hi = _int_bounds(dt, low, high)
            if hi - lo + 1 < n:
                raise ValueError(f"distinct_array: {n} distinct integers do not fit [{lo}, {hi}]")
            vals = np.linspace(lo, hi, n).round().astype(dt)
        if n <= ELEMENTWISE_LIMIT:
            order = np.array(self.permutation(n))
        else:
            order = np.random.default_rng(self.integers(0, 2**32 - 1)).permutation(n)
        return vals[order].reshape(shape)

    def probabilities(self, shape, dtype, axis: int = -1) -> np.ndarray:
        """Positive values that sum to 1 along ``axis`` (rounded to ``dtype``)."""
        raw = self.array(shape, _dtype.kDouble, 0.05, 1.0)
        p = raw / raw.sum(axis=axis, keepdims=True)
        return p.astype(_np_dtype(dtype))

    def signs(self, shape) -> np.ndarray:
        """An int8 array of -1 and +1 (``x * g.signs(x.shape)`` keeps x's dtype)."""
        n = math.prod(shape)
        if n <= ELEMENTWISE_LIMIT:
            vals = self.data.draw(st.lists(st.booleans(), min_size=n, max_size=n),
                                  label="signs")
            neg = np.array(vals, dtype=bool)
        else:
            neg = self._rng().random(n) < 0.5
        return np.where(neg, -1, 1).astype(np.int8).reshape(shape)

    def mask(self, shape) -> np.ndarray:
        """A bool array (shrinks toward all False)."""
        n = math.prod(shape)
        if n <= ELEMENTWISE_LIMIT:
            vals = self.data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="mask")
            return np.array(vals, dtype=bool).reshape(shape)
        return self._rng().random(n).reshape(shape) < 0.5

    def index_array(self, shape, n: int) -> np.ndarray:
        """int32 indices in ``[0, n)`` (for Take/Gather/embedding lookups)."""
        if n <= 0:
            raise ValueError("index_array(): no valid index for an axis of length 0")
        return self.array(shape, _dtype.kInt, 0, n - 1)


def sample_cases(op, dtype, n: int = 10, seed: int = 0, max_side: int = MAX_SIDE,
                 large: bool = False) -> list:
    """Draw ``n`` cases ``(arrays, attrs)`` from ``op.sample`` outside of a hypothesis test.

    Deterministic for a given ``seed``; the first cases tend to be the simplest ones.
    ``op`` is an :class:`singa.ops.OpDef` or an op name; ``large`` draws large cases.
    """
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    from ..ops import OPS

    op = OPS[op] if isinstance(op, str) else op
    code = _dtype.code_of(dtype)
    out: list = []

    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @hseed(seed)
    @given(st.data())
    def collect(data):
        if len(out) < n:
            out.append(op.sample(Cases(data, max_side, large), code))

    collect()
    return out
