"""What each rank asks of a communication, compared across ranks before any data moves.

Every public operation of :class:`singa.dist.Communicator` first builds a :class:`Call`
describing itself (operation, reduction, root, dtypes and shapes; for put/get also the peer
and tag) and exchanges it through the communicator's own primitives (one small all-gather of
picklable objects for a collective, one exchange with the peer for put/get: mpi4py's
``allgather`` / ``sendrecv`` on MPI). When the calls do not match, every rank involved raises
the same :class:`~singa.errors.CollectiveMismatchError` naming the calls of both ranks,
instead of reducing with different operators, broadcasting from different roots,
reinterpreting bits, filling part of a buffer, or waiting forever in mismatched collectives.

What must match: a collective's whole :class:`Call` (operation, reduction, root, options, every
tensor's dtype and shape) on every rank; a put and its get: the roles (one put, one get, each
naming the other rank), the tag, the dtype and the number of elements.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ._dtype import name_of
from .errors import CollectiveMismatchError

__all__ = ["Call", "agree", "agree_with_peer", "describe_tensors"]


@dataclass(frozen=True)
class Call:
    """One rank's side of a communication (compared with ``==``; small and picklable).

    Attributes
    ----------
    op:
        The operation (``"all_reduce"``, ``"broadcast"``, ``"put"``, ...).
    tensors:
        ``(dtype name, shape)`` of each tensor, in argument order.
    params:
        The arguments every rank must agree on, as ``(name, value)`` pairs: the reduction
        (``op``), the ``root``, ``half``, ``spars``, ``topK``; for put/get the ``peer`` and
        ``tag``.
    """

    op: str
    tensors: tuple[tuple[str, tuple[int, ...]], ...]
    params: tuple[tuple[str, object], ...] = ()

    def param(self, name: str, default: object = None) -> object:
        """The value of parameter ``name`` of this call.

        Parameters
        ----------
        name : str
            A name in :attr:`params` (``"root"``, ``"peer"``, ``"tag"``, ...).
        default : object, default None
            What to return when the call has no such parameter.

        Returns
        -------
        object
            The value, or ``default``.
        """
        return dict(self.params).get(name, default)

    def digest(self) -> int:
        """A signed 64-bit hash of the call (its repr: the same on every rank), all-gathered
        first so that agreeing ranks exchange 8 bytes each; the calls themselves are
        exchanged only when the digests differ, to name them."""
        raw = hashlib.blake2b(repr(self).encode(), digest_size=8).digest()
        return int.from_bytes(raw, "little", signed=True)

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params)
        of = f" of {_tensors_text(self.tensors)}" if self.tensors else ""
        return f"{self.op}{f'({args})' if args else ''}{of}"


def describe_tensors(cts) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """``Call.tensors`` of CTensors."""
    return tuple((name_of(c.dtype_code), tuple(c.dims)) for c in cts)


def _tensors_text(tensors) -> str:
    if len(tensors) == 1:
        dt, shape = tensors[0]
        return f"{dt} {shape}"
    if len(tensors) <= 4:
        return "[" + ", ".join(f"{dt} {shape}" for dt, shape in tensors) + "]"
    return f"{len(tensors)} tensors"


def _difference(a: Call, b: Call) -> str:
    """What differs between two calls of the same operation (for long tensor lists)."""
    if a.op != b.op or a.params != b.params:
        return ""
    if len(a.tensors) != len(b.tensors):
        return f" ({len(a.tensors)} tensors vs {len(b.tensors)})"
    for i, (x, y) in enumerate(zip(a.tensors, b.tensors)):
        if x != y:
            return f" (tensor {i}: {x[0]} {x[1]} vs {y[0]} {y[1]})"
    return ""


def agree(what: str, every: list) -> None:
    """Raise the same CollectiveMismatchError on every rank unless all ``every`` (the calls of
    ranks 0..n-1, all-gathered) equal rank 0's."""
    first = every[0]
    for r, theirs in enumerate(every):
        if theirs == first:
            continue
        groups: dict = {}
        for rank, call in enumerate(every):
            groups.setdefault(call, []).append(rank)
        if len(groups) > 2:
            others = "; ".join(f"rank{'s' if len(rs) > 1 else ''} "
                               f"{', '.join(map(str, rs))} {call}"
                               for call, rs in groups.items())
            extra = f" (in all: {others})"
        else:
            extra = ""
        if (first.op, first.params) == (theirs.op, theirs.params):  # only the tensors
            said = (f"the ranks pass different tensors to {first.op}: rank 0 has "
                    f"{_tensors_text(first.tensors)} but rank {r} has "
                    f"{_tensors_text(theirs.tensors)}{_difference(first, theirs)}")
        else:
            said = f"the ranks called different collectives: rank 0 has {first} but rank {r} " \
                   f"has {theirs}"
        raise CollectiveMismatchError(
            f"{what}: {said}{extra} (checked before any data moved). Every rank must make the "
            "same calls in the same order, with the same reduction, root, and tensors of the "
            "same shapes and dtypes")


def agree_with_peer(mine: Call, theirs: Call, rank: int, peer: int) -> None:
    """Raise CollectiveMismatchError (on both ranks: each runs this on the two calls) unless
    ``mine`` (this rank's put or get with ``peer``) and ``theirs`` (``peer``'s call, exchanged)
    form a matching put/get pair: one put and one get naming each other, the same tag, dtype
    and number of elements."""
    problems = []
    roles = {mine.op, theirs.op}
    if roles != {"put", "get"}:
        problems.append("one rank must put and the other get")
    if theirs.param("peer") != rank:
        problems.append(f"rank {peer}'s call names rank {theirs.param('peer')}, not {rank}")
    if mine.param("tag") != theirs.param("tag"):
        problems.append("the tags differ")
    a, b = (mine, theirs) if rank < peer else (theirs, mine)  # one message on both ranks
    if len(a.tensors) == len(b.tensors) == 1:
        (dt_a, shape_a), (dt_b, shape_b) = a.tensors[0], b.tensors[0]
        if dt_a != dt_b:
            problems.append(f"the dtypes differ ({dt_a} vs {dt_b}): the bits would be "
                            "reinterpreted")
        size_a, size_b = _size(shape_a), _size(shape_b)
        if size_a != size_b:
            problems.append(f"the sizes differ ({size_a} vs {size_b} elements): the receiving "
                            "tensor would be partly filled or overrun")
    if not problems:
        return
    lo, hi = min(rank, peer), max(rank, peer)
    raise CollectiveMismatchError(
        f"put/get: rank {lo} calls {_p2p_text(a)} but rank {hi} calls {_p2p_text(b)} "
        f"(checked before any data moved): {'; '.join(problems)}. A put on one rank pairs "
        "with a get on the other, with the same tag, dtype and number of elements")


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _p2p_text(call: Call) -> str:
    direction = "to" if call.op == "put" else "from"
    return (f"{call.op} of {_tensors_text(call.tensors)} {direction} rank "
            f"{call.param('peer')} (tag {call.param('tag')})")
