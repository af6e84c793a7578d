"""The descriptors that ranks compare before a collective or a put/get (singa._distcheck).

Property tests over generated calls: the comparison raises exactly when the calls differ,
the same message on every rank (so each rank's log names the same two calls), and put/get
pairs are judged the same from both sides. ``tests/dist/test_agreement.py`` runs the real
exchange under ``mpiexec -n 2``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from singa._distcheck import Call, agree, agree_with_peer
from singa.errors import CollectiveMismatchError, DistError, SingaError

DTYPES = st.sampled_from(["float32", "float16", "int32"])
SHAPES = st.lists(st.integers(0, 4), max_size=3).map(tuple)
TENSORS = st.lists(st.tuples(DTYPES, SHAPES), max_size=3).map(tuple)
PARAMS = st.fixed_dictionaries({}, optional={
    "op": st.sampled_from(["sum", "mean", "max", "min"]),
    "root": st.integers(0, 3),
    "half": st.booleans(),
}).map(lambda d: tuple(sorted(d.items())))
CALLS = st.builds(Call, st.sampled_from(["all_reduce", "broadcast", "all_gather",
                                         "fused_all_reduce", "barrier"]), TENSORS, PARAMS)

SETTINGS = settings(max_examples=300, deadline=None)


def _outcome(fn):
    try:
        fn()
    except CollectiveMismatchError as exc:
        return str(exc)
    return None


def test_the_error_is_a_dist_error_and_a_value_error():
    assert issubclass(CollectiveMismatchError, DistError)
    assert issubclass(CollectiveMismatchError, SingaError)
    assert issubclass(CollectiveMismatchError, ValueError)
    from singa import dist

    assert dist.DistError is DistError


@SETTINGS
@given(every=st.lists(CALLS, min_size=1, max_size=4))
def test_agree_raises_exactly_when_a_rank_differs(every):
    msg = _outcome(lambda: agree("op", every))
    assert (msg is None) == all(c == every[0] for c in every)
    if msg is not None:
        r = next(i for i, c in enumerate(every) if c != every[0])
        a, b = every[0], every[r]
        if (a.op, a.params) == (b.op, b.params):
            assert "rank 0 has" in msg and f"but rank {r} has" in msg
        else:
            assert f"rank 0 has {a}" in msg and f"rank {r} has {b}" in msg
        assert "before any data moved" in msg


@SETTINGS
@given(call=CALLS, n=st.integers(1, 4))
def test_identical_calls_pass(call, n):
    agree("op", [call] * n)


@SETTINGS
@given(base=CALLS, other=CALLS, r=st.integers(1, 3))
def test_every_rank_gets_the_same_message(base, other, r):
    """Each rank runs ``agree`` on the same all-gathered list: the message cannot depend on
    which rank computes it (it names ranks by number, never "this rank")."""
    every = [base] * r + [other]
    assert _outcome(lambda: agree("op", every)) == _outcome(lambda: agree("op", list(every)))


PEER = st.fixed_dictionaries({
    "dtype": DTYPES, "shape": SHAPES, "tag": st.integers(0, 2),
    "op": st.sampled_from(["put", "put", "get"]),
})


def _call(side, peer):
    return Call(side["op"], ((side["dtype"], side["shape"]),),
                (("peer", peer), ("tag", side["tag"])))


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


@SETTINGS
@given(a=PEER, b=PEER)
def test_put_get_pairs_are_judged_the_same_from_both_sides(a, b):
    on_0 = _outcome(lambda: agree_with_peer(_call(a, 1), _call(b, 0), 0, 1))
    on_1 = _outcome(lambda: agree_with_peer(_call(b, 0), _call(a, 1), 1, 0))
    assert on_0 == on_1  # one verdict and one message on both ranks
    pairs = {a["op"], b["op"]} == {"put", "get"}
    match = pairs and a["tag"] == b["tag"] and a["dtype"] == b["dtype"] and \
        _size(a["shape"]) == _size(b["shape"])
    assert (on_0 is None) == match, on_0
    if on_0 is not None:
        assert "rank 0 calls" in on_0 and "rank 1 calls" in on_0
        if a["dtype"] != b["dtype"] and pairs:
            assert f"the dtypes differ ({a['dtype']} vs {b['dtype']})" in on_0
        if _size(a["shape"]) != _size(b["shape"]) and pairs:
            assert f"the sizes differ ({_size(a['shape'])} vs {_size(b['shape'])}" in on_0


def test_describe_tensors_of_real_tensors():
    import numpy as np
    from singa import tensor
    from singa._distcheck import describe_tensors

    ts = [tensor.from_numpy(np.zeros((2, 3), np.float32)),
          tensor.from_numpy(np.zeros(4, np.int32))]
    assert describe_tensors([t.data for t in ts]) == (("float32", (2, 3)), ("int32", (4,)))


@pytest.mark.parametrize(("call", "text"), [
    (Call("all_reduce", (("float32", (2,)),), (("op", "sum"),)),
     "all_reduce(op='sum') of float32 (2,)"),
    (Call("barrier", ()), "barrier"),
    (Call("fused_all_reduce", (("float32", (1,)),) * 5, (("op", "mean"), ("half", True))),
     "fused_all_reduce(op='mean', half=True) of 5 tensors"),
])
def test_call_text(call, text):
    assert str(call) == text
