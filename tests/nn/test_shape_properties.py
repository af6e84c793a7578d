"""Issue 29: every shape op's shape and axis arguments against numpy (hypothesis).

For each op of ``singa.tensor`` and ``singa.autograd`` that takes a shape, axes, sizes or
repeats, arguments are generated good and bad (out of range, repeated, negative, floats,
bools): where numpy (with the op's own semantics written out, e.g. ONNX Reshape's 0) refuses
them, singa must raise an exception from ``singa.errors`` whose message names the op; where
numpy accepts them, singa's result must equal numpy's. A bool or a float where an integer is
expected is always refused (3.9 is never truncated, True is never 1). Any other exception type
fails the test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from singa import autograd, tensor
from singa.errors import SingaError

SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
NOT_INTS = st.sampled_from([1.0, 2.5, -1.0, True, False, np.float32(1.0)])


def ints(lo, hi):
    """Mostly integers in [lo, hi] (numpy ones too), sometimes a bool or a float."""
    return st.one_of(st.integers(lo, hi), st.integers(lo, hi).map(np.int64), NOT_INTS)


SHAPES = st.lists(st.integers(0, 4), max_size=4).map(tuple)


def _not_int(v) -> bool:
    return isinstance(v, (bool, np.bool_, float, np.floating))


def _any_not_int(*args) -> bool:
    flat = []
    for a in args:
        flat.extend(a if isinstance(a, (list, tuple)) else [a])
    return any(_not_int(v) for v in flat)


def _x(shape):
    return np.arange(math.prod(shape), dtype=np.float32).reshape(shape)


def _t(arr):
    return tensor.from_numpy(arr)


class Refused(Exception):
    """The oracle's verdict: this call must raise a singa error."""


def compare(names, singa_fn, numpy_fn, *args):
    """Run both; a refusal by numpy (or by the oracle) must be a singa error naming one of
    ``names``, an acceptance must give numpy's array(s)."""
    try:
        if _any_not_int(*args):
            raise Refused("a bool or a float where an integer belongs")
        want = numpy_fn()
    except (Refused, ValueError, IndexError, TypeError) as exc:
        want = exc
    try:
        got = singa_fn()
    except SingaError as exc:
        assert isinstance(want, Exception), f"singa refused what numpy accepts: {exc}"
        msg = str(exc).lower()
        assert any(n.lower() in msg for n in names), f"the message names no op: {exc}"
        return
    assert not isinstance(want, Exception), \
        f"singa accepted what numpy refuses ({type(want).__name__}: {want}); args {args}"
    gots = got if isinstance(got, (list, tuple)) else [got]
    wants = want if isinstance(want, (list, tuple)) else [want]
    assert len(gots) == len(wants)
    for g, w in zip(gots, wants):
        g = tensor.to_numpy(g)
        assert g.shape == w.shape, (g.shape, w.shape, args)
        np.testing.assert_array_equal(g, w)


# ---------------------------------------------------------------- reshape
def _np_reshape(x, new):
    """numpy's reshape, except that numpy takes any negative value for -1: singa allows one
    -1 only (a -2 is a mistake, not a request to infer)."""
    if any(d < -1 for d in new):
        raise Refused("negative dimension other than -1")
    return x.reshape(new)


@SETTINGS
@given(shape=SHAPES, new=st.lists(ints(-3, 6), max_size=4))
def test_tensor_reshape(shape, new):
    x = _x(shape)
    compare(["reshape"], lambda: _t(x).reshape(new), lambda: _np_reshape(x, new), new)
    compare(["reshape"], lambda: tensor.reshape(_t(x), tuple(new)),
            lambda: _np_reshape(x, new), new)


def _onnx_reshape(x, new):
    """ONNX Reshape: 0 copies the input's dimension at that position."""
    out = []
    for i, d in enumerate(new):
        if d == 0:
            if i >= x.ndim:
                raise Refused("0 past the input's rank")
            d = x.shape[i]
        out.append(d)
    return _np_reshape(x, out)


@SETTINGS
@given(shape=SHAPES, new=st.lists(ints(-3, 6), max_size=4))
def test_autograd_reshape(shape, new):
    x = _x(shape)
    compare(["reshape"], lambda: autograd.reshape(_t(x), new), lambda: _onnx_reshape(x, new),
            new)


@SETTINGS
@given(new=st.lists(ints(-3, 5), max_size=4))
def test_tensor_constructor(new):
    def numpy_fn():
        if any(d < 0 for d in new):
            raise Refused("negative")
        return np.zeros(new, np.float32)

    compare(["shape", "tensor"], lambda: tensor.Tensor(tuple(new)).set_value(0.0), numpy_fn,
            new)


# ---------------------------------------------------------------- axes
@SETTINGS
@given(shape=SHAPES, axes=st.one_of(st.none(), st.lists(ints(-5, 4), max_size=5)))
def test_transpose(shape, axes):
    x = _x(shape)
    compare(["transpose"], lambda: autograd.transpose(_t(x), axes),
            lambda: np.transpose(x, axes), axes or [])
    compare(["transpose"], lambda: tensor.transpose(_t(x), axes),
            lambda: np.transpose(x, axes), axes or [])


@SETTINGS
@given(shape=st.lists(st.integers(0, 3).map(lambda d: d % 2 or 1), max_size=4).map(tuple),
       axes=st.lists(ints(-5, 4), max_size=3))
def test_squeeze(shape, axes):
    x = _x(shape)

    def numpy_fn():
        if not axes:
            return np.squeeze(x)
        if x.ndim == 0:
            raise Refused("a 0-d tensor has no axis")
        return np.squeeze(x, tuple(axes))

    compare(["squeeze"], lambda: autograd.squeeze(_t(x), axes), numpy_fn, axes)


@SETTINGS
@given(shape=SHAPES, axes=st.one_of(ints(-6, 5), st.lists(ints(-6, 5), min_size=1,
                                                            max_size=3)))
def test_unsqueeze(shape, axes):
    x = _x(shape)
    as_tuple = tuple(axes) if isinstance(axes, list) else axes
    compare(["unsqueeze"], lambda: autograd.unsqueeze(_t(x), axes),
            lambda: np.expand_dims(x, as_tuple), axes)


@SETTINGS
@given(shape=SHAPES, axis=ints(-5, 5))
def test_flatten(shape, axis):
    x = _x(shape)

    def numpy_fn():
        nd = x.ndim
        ax = axis + nd if axis < 0 else axis
        if not 0 <= ax <= nd:
            raise Refused("axis out of range")
        return x.reshape(math.prod(x.shape[:ax]), math.prod(x.shape[ax:]))

    compare(["flatten"], lambda: autograd.flatten(_t(x), axis), numpy_fn, axis)


@SETTINGS
@given(shape=SHAPES, axes=st.one_of(st.none(), st.lists(ints(-5, 4), max_size=4)),
       keepdims=st.booleans())
def test_reduce_sum(shape, axes, keepdims):
    x = _x(shape)

    def numpy_fn():
        if x.ndim == 0 and axes:  # singa's rule for a scalar: axis 0 or -1 is the value
            if any(a not in (0, -1) for a in axes):
                raise Refused("a 0-d tensor has only axis 0 / -1")
            return x
        return np.sum(x, axis=None if axes is None else tuple(axes), keepdims=keepdims)

    compare(["reducesum", "axis"], lambda: autograd.reduce_sum(_t(x), axes, int(keepdims)),
            numpy_fn, axes or [])


# ---------------------------------------------------------------- several tensors
@st.composite
def concat_cases(draw):
    shape = draw(SHAPES)
    n = draw(st.integers(1, 3))
    shapes = []
    for _ in range(n):
        s = list(shape)
        if s and draw(st.booleans()):  # vary one dimension (legal only on the axis)
            s[draw(st.integers(0, len(s) - 1))] = draw(st.integers(0, 3))
        shapes.append(tuple(s))
    return shapes, draw(ints(-5, 4))


@SETTINGS
@given(case=concat_cases())
def test_concat(case):
    shapes, axis = case
    xs = [_x(s) + 100 * i for i, s in enumerate(shapes)]
    compare(["concat", "cat"], lambda: autograd.cat([_t(x) for x in xs], axis),
            lambda: np.concatenate(xs, axis), axis)
    compare(["concat", "cat"], lambda: tensor.concatenate([_t(x) for x in xs], axis),
            lambda: np.concatenate(xs, axis), axis)


@SETTINGS
@given(shape=SHAPES.filter(len), axis=ints(-5, 4),
       parts=st.one_of(st.lists(ints(-1, 4), min_size=1, max_size=3), ints(-1, 4)),
       by_count=st.booleans())
def test_split(shape, axis, parts, by_count):
    x = _x(shape)
    num_output = parts if by_count and not isinstance(parts, list) else None

    def numpy_fn():
        ax = axis + x.ndim if axis < 0 else axis
        if not 0 <= ax < x.ndim:
            raise Refused("axis out of range")
        n = x.shape[ax]
        if isinstance(parts, list):
            sizes = parts
        elif num_output is not None:
            if parts <= 0 or n % parts:
                raise Refused("not divisible")
            sizes = [n // parts] * parts
        else:
            sizes = [parts]
        if any(p < 0 for p in sizes) or sum(sizes) != n:
            raise Refused("parts must be non-negative and sum to the axis")
        return np.split(x, np.cumsum(sizes)[:-1].tolist(), axis)

    compare(["split"], lambda: autograd.split(_t(x), axis, parts, num_output), numpy_fn, axis,
            parts)


# ---------------------------------------------------------------- indexing and repetition
@SETTINGS
@given(shape=SHAPES, starts=st.lists(ints(-6, 6), min_size=1, max_size=3),
       ends=st.lists(ints(-6, 6), min_size=1, max_size=3),
       axes=st.one_of(st.none(), st.lists(ints(-5, 4), min_size=1, max_size=3)),
       step=st.one_of(st.none(), ints(-2, 2)))
def test_slice(shape, starts, ends, axes, step):
    x = _x(shape)
    steps = None if step is None else [step] * len(starts)

    def numpy_fn():
        if len(ends) != len(starts) or axes is not None and len(axes) != len(starts):
            raise Refused("starts, ends and axes must have one length")
        ax = list(range(len(starts))) if axes is None else [a + x.ndim if a < 0 else a
                                                              for a in axes]
        if any(not 0 <= a < x.ndim for a in ax) or len(set(ax)) != len(ax):
            raise Refused("axis out of range or repeated")
        index = [slice(None)] * x.ndim
        for a, s, e in zip(ax, starts, ends):
            index[a] = slice(s, e, step)
        out = x[tuple(index)]
        if 0 in out.shape:
            raise Refused("singa's Slice refuses an empty result (documented)")
        return out

    compare(["slice"], lambda: autograd.slice(_t(x), starts, ends, axes, steps), numpy_fn,
            starts, ends, axes or [], [] if step is None else [step])


@SETTINGS
@given(shape=SHAPES, axis=ints(-5, 4), idx=st.lists(st.integers(-5, 5), max_size=4))
def test_gather(shape, axis, idx):
    x = _x(shape)

    def numpy_fn():
        if x.ndim == 0:
            raise Refused("a 0-d tensor has no axis (numpy takes from it as if 1-D)")
        n = x.shape[axis]  # an IndexError for an axis out of range
        if any(not -n <= i < n for i in idx):  # numpy skips the check when the result is
            raise Refused("index out of range")  # empty; an index is checked regardless
        return np.take(x, np.array(idx, np.int64), axis)

    compare(["gather", "take", "index"],
            lambda: autograd.gather(_t(x), axis, np.array(idx, np.int32)), numpy_fn, axis)


@SETTINGS
@given(shape=SHAPES, reps=st.one_of(ints(-1, 3), st.lists(ints(-1, 3), max_size=5)))
def test_tile(shape, reps):
    x = _x(shape)

    def numpy_fn():
        if any(r < 0 for r in (reps if isinstance(reps, list) else [reps])):
            raise Refused("a negative count (numpy lets it through on an empty array)")
        return np.tile(x, reps)

    compare(["tile"], lambda: autograd.tile(_t(x), reps), numpy_fn, reps)


@SETTINGS
@given(shape=SHAPES, target=st.lists(ints(-1, 4), max_size=5))
def test_expand(shape, target):
    x = _x(shape)

    def numpy_fn():
        if any(d < 0 for d in target):
            raise Refused("negative")
        return np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(target))).copy()

    compare(["expand"], lambda: autograd.expand(_t(x), target), numpy_fn, target)


@SETTINGS
@given(shape=SHAPES, repeats=st.one_of(ints(-1, 3), st.lists(ints(-1, 3), min_size=1,
                                                             max_size=4)),
       axis=st.one_of(st.none(), ints(-5, 4)))
def test_repeat(shape, repeats, axis):
    x = _x(shape)

    def numpy_fn():
        if x.ndim == 0 and axis is not None:
            raise Refused("a 0-d tensor has no axis (numpy repeats it as if 1-D)")
        if any(r < 0 for r in (repeats if isinstance(repeats, list) else [repeats])):
            raise Refused("a negative count (numpy lets it through on an empty array)")
        return np.repeat(x, repeats, axis)

    compare(["repeat"], lambda: tensor.repeat(_t(x), repeats, axis), numpy_fn, repeats,
            [] if axis is None else axis)


@pytest.mark.parametrize(("fn", "name"), [
    (lambda x: autograd.transpose(x, [0, 1.5]), "transpose"),
    (lambda x: autograd.squeeze(x, [True]), "squeeze"),
    (lambda x: autograd.unsqueeze(x, 0.0), "unsqueeze"),
    (lambda x: autograd.flatten(x, 1.0), "flatten"),
    (lambda x: autograd.cat([x, x], 0.5), "concat"),
    (lambda x: autograd.split(x, 0, [1.0, 1.0]), "split"),
    (lambda x: autograd.slice(x, [0.5], [2]), "slice"),
    (lambda x: autograd.tile(x, [2.0]), "tile"),
    (lambda x: autograd.expand(x, [2, 2.0]), "expand"),
    (lambda x: autograd.reduce_sum(x, [0.0]), "axis"),
    (lambda x: tensor.repeat(x, 2.0, 0), "repeat"),
    (lambda x: x.reshape((4, True)), "reshape"),
])
def test_a_float_or_bool_argument_names_the_op(fn, name):
    x = _t(_x((2, 2)))
    with pytest.raises(SingaError, match=f"(?i){name}.*must be an integer"):
        fn(x)
