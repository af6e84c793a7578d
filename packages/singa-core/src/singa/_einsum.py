"""Two-operand einsum and tensordot, lowered to transpose + reshape + (batched) Matmul."""

from __future__ import annotations

import math
from collections.abc import Sequence

from . import _math
from ._ctensor import CTensor
from .errors import ShapeError


def _parse(spec: str) -> tuple[str, str, str]:
    spec = spec.replace(" ", "")
    if "..." in spec:
        raise ShapeError(f"einsum: ellipsis ('...') is not supported: {spec!r}")
    if "->" in spec:
        ins, out = spec.split("->")
    else:
        ins, out = spec, None
    parts = ins.split(",")
    if len(parts) != 2:
        raise ShapeError(f"einsum takes exactly two operands, got {len(parts)} in {spec!r}")
    la, lb = parts
    if out is None:
        counts = {c: (la + lb).count(c) for c in la + lb}
        out = "".join(sorted(c for c, n in counts.items() if n == 1))
    for name, letters in (("first operand", la), ("second operand", lb), ("output", out)):
        if len(set(letters)) != len(letters):
            raise ShapeError(f"einsum: repeated index in the {name} ({letters!r}) is not "
                             "supported (no diagonals/traces)")
        if not letters.isalpha() and letters:
            raise ShapeError(f"einsum: indices must be letters, got {letters!r}")
    for c in out:
        if c not in la and c not in lb:
            raise ShapeError(f"einsum: output index {c!r} appears in no operand")
    return la, lb, out


def _sum_out(x: CTensor, letters: str, keep: set[str]) -> tuple[CTensor, str]:
    drop = tuple(i for i, c in enumerate(letters) if c not in keep)
    if not drop:
        return x, letters
    return _math.sum(x, drop), "".join(c for c in letters if c in keep)


def einsum2(spec: str, a: CTensor, b: CTensor) -> CTensor:
    r"""Einstein summation of two operands, as one (batched) Matmul.

    The indices in both operands and the output are batch axes, those in both operands only
    are contracted, the others are free; an index in one operand only and not in the output is
    summed out first. With ``spec = "ij,jk->ik"``,
    :math:`\mathrm{out}_{ik} = \sum_j a_{ij} b_{jk}`.

    Parameters
    ----------
    spec : str
        ``"<indices of a>,<indices of b>[-><output indices>]"``, one letter per axis; without
        ``->``, the output is the indices that appear once, in alphabetical order (numpy's
        rule). No ellipsis, no index repeated within one operand.
    a, b : CTensor
        The operands; an index's size must agree wherever it appears.

    Returns
    -------
    CTensor
        The result, with the output indices' sizes in their order (contiguous).

    Raises
    ------
    ShapeError
        For a spec outside the supported form or operands whose shapes do not fit it.
    """
    la, lb, lo = _parse(spec)
    if len(la) != len(a.dims) or len(lb) != len(b.dims):
        raise ShapeError(f"einsum {spec!r}: operands have shapes {a.dims} and {b.dims}")
    size: dict[str, int] = {}
    for letters, shape in ((la, a.dims), (lb, b.dims)):
        for c, d in zip(letters, shape):
            if size.setdefault(c, d) != d:
                raise ShapeError(f"einsum {spec!r}: index {c!r} has sizes {size[c]} and {d}")
    a, la = _sum_out(a, la, set(lb) | set(lo))
    b, lb = _sum_out(b, lb, set(la) | set(lo))
    batch = [c for c in la if c in lb and c in lo]
    contr = [c for c in la if c in lb and c not in lo]
    free_a = [c for c in la if c not in lb]
    free_b = [c for c in lb if c not in la]

    def arrange(x: CTensor, letters: str, order: list[str]) -> CTensor:
        return _math.transpose(x, [letters.index(c) for c in order])

    def n(cs: list[str]) -> int:
        return math.prod(size[c] for c in cs)

    at = _math.reshape(arrange(a, la, batch + free_a + contr), (n(batch), n(free_a), n(contr)))
    bt = _math.reshape(arrange(b, lb, batch + contr + free_b), (n(batch), n(contr), n(free_b)))
    prod = _math.matmul(at, bt)
    res_letters = batch + free_a + free_b
    res = _math.reshape(prod, tuple(size[c] for c in res_letters))
    perm = [res_letters.index(c) for c in lo]
    if perm != list(range(len(perm))):
        res = _math.contiguous(_math.transpose(res, perm))
    return res


def tensordot2(a: CTensor, b: CTensor,
               axes: int | Sequence[int | Sequence[int]] = 2) -> CTensor:
    r"""numpy.tensordot of two operands, as one Matmul.

    :math:`\mathrm{out}[I, J] = \sum_K a[I, K]\, b[K, J]`, where :math:`K` are the
    contracted axes, :math:`I` the other axes of ``a`` and :math:`J` those of ``b``.

    Parameters
    ----------
    a, b : CTensor
        The operands.
    axes : int or (axes of a, axes of b), default 2
        An int ``n`` contracts the last ``n`` axes of ``a`` with the first ``n`` of ``b``; a
        pair names the contracted axes of each (an int or a sequence of ints each, negative
        values counting from the end), matched in order.

    Returns
    -------
    CTensor
        Shape: the free axes of ``a`` then those of ``b``.

    Raises
    ------
    ShapeError
        An invalid ``axes``, or contracted axes of different sizes.
    """
    if isinstance(axes, int):
        if axes < 0 or axes > min(len(a.dims), len(b.dims)):
            raise ShapeError(f"tensordot: axes={axes} is invalid for shapes {a.dims}, {b.dims}")
        ax_a = list(range(len(a.dims) - axes, len(a.dims)))
        ax_b = list(range(axes))
    else:
        given_a, given_b = axes
        ax_a = [given_a] if isinstance(given_a, int) else list(given_a)
        ax_b = [given_b] if isinstance(given_b, int) else list(given_b)
        ax_a = [x % len(a.dims) for x in ax_a]
        ax_b = [x % len(b.dims) for x in ax_b]
    if len(ax_a) != len(ax_b) or any(a.dims[i] != b.dims[j] for i, j in zip(ax_a, ax_b)):
        raise ShapeError(f"tensordot: contracted axes {ax_a} of {a.dims} and {ax_b} of {b.dims} "
                         "must have equal sizes")
    free_a = [i for i in range(len(a.dims)) if i not in ax_a]
    free_b = [j for j in range(len(b.dims)) if j not in ax_b]
    k = math.prod(a.dims[i] for i in ax_a)
    fa = [a.dims[i] for i in free_a]
    fb = [b.dims[j] for j in free_b]
    at = _math.reshape(_math.transpose(a, free_a + ax_a), (math.prod(fa), k))
    bt = _math.reshape(_math.transpose(b, ax_b + free_b), (k, math.prod(fb)))
    return _math.reshape(_math.matmul(at, bt), tuple(fa + fb))
