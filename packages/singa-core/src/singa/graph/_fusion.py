"""Stage 3, fusion: pairs of nodes as one fused kernel, runs of elementwise updates as one loop.

Both are fed by tables, not by code per backend. **Pairs**: :data:`singa.ops.FUSIONS` declares
which two ops may run as one (a convolution and its ReLU, a pooling gradient and the ReLU
gradient before it); a device that registers a kernel under the fusion's name gets them
merged. **Chains**: a device whose ``chain_compiler()`` returns a compiler gets runs of
elementwise ops (an optimizer's in-place updates) merged into one compiled loop
(:class:`singa.ops.ElementwiseChain`). Switch: ``SINGA_GRAPH_FUSE`` (read at analysis).
"""

from __future__ import annotations

from typing import cast

from .._device import Device
from ..memory import Block
from ..ops._fusion import FUSIONS, ElementwiseChain
from ..ops._registry import EMPTY, KernelCall
from ._plan import Plan
from ._recording import Node, whole

__all__ = ["fuse", "fuse_pairs", "fuse_chains"]


def fuse(plan: Plan) -> None:
    """Rewrite ``plan.steps`` with fused pairs, then compiled chains; the intermediates that
    pairs remove leave ``plan.planned`` for ``plan.fused_away``."""
    steps, gone = fuse_pairs(plan.steps, plan.planned, plan.device)
    plan.fused_away = gone
    plan.planned = plan.planned - gone
    plan.steps = fuse_chains(steps, plan.planned, plan.device)


def fuse_pairs(seq: list[Node], planned: set[int],
               device: Device) -> tuple[list[Node], set[int]]:
    """``seq`` with pairs of nodes merged into calls of fused kernels, and the ids of the
    intermediate blocks that thereby disappear (see :mod:`singa.ops._fusion`).

    Node A (op ``first``, which may itself be a fused node) and node B (op ``second``) are
    merged when the device has the fused kernel for their dtype, A's single output is a
    whole block that A alone writes and B reads as its input ``link`` (a whole view of the
    same shape and dtype, and none of B's other inputs), and no node between them writes
    what A reads. Without ``keep`` the output must be planned and B its only reader: it
    disappears. With ``keep`` B must be its first reader: it is still written, for the
    later ones. The merged node runs at B's position. Passes repeat until nothing merges,
    so that a fused node can be the first op of a further fusion.
    """
    kernels = device.kernels
    by_first: dict[str, list] = {}
    for fd in FUSIONS.values():
        if fd.name in kernels:
            by_first.setdefault(fd.first, []).append(fd)
    gone: set[int] = set()
    while by_first:
        seq, more = _fuse_pass(seq, planned - gone, by_first, kernels, device)
        if more is None:
            break
        gone |= more
    return seq, gone


def _fuse_pass(seq, planned, by_first, kernels, device):
    """One pass of :func:`fuse_pairs`: the new sequence and the blocks gone, or (seq, None)
    when nothing merged."""
    readers: dict[int, list[int]] = {}
    writers: dict[int, list[int]] = {}
    for p, n in enumerate(seq):
        for b in n.reads:
            readers.setdefault(id(b), []).append(p)
        for b in n.writes:
            writers.setdefault(id(b), []).append(p)
    out = list(seq)
    merged: set[int] = set()  # positions of nodes taken into a fusion
    removed: set[int] = set()  # positions of the first nodes (their call is merged)
    gone: set[int] = set()
    for p, a in enumerate(seq):
        for fd in by_first.get(a.name, ()):
            found = _fusable(fd, p, a, seq, planned, readers, writers, merged)
            if found is None:
                continue
            q, link = found
            b = seq[q]
            fn, contig, dtypes = kernels[fd.name]
            ins = [*a.fn.ins, *(x for j, x in enumerate(b.fn.ins) if j != link)]
            if (dtypes is not None and a.fn.outs[0].dtype_code not in dtypes) or (
                    contig and not all(x.contig for x in ins)):
                continue
            k = id(a.fn.outs[0].block)
            reads = [*a.reads, *(x for x in b.reads if id(x) != k)]
            outs = [*a.fn.outs, *b.fn.outs] if fd.keep else list(b.fn.outs)
            writes = (*a.writes, *b.writes) if fd.keep else b.writes
            attrs = {**a.fn.attrs, "second": b.fn.attrs} if b.fn.attrs else a.fn.attrs
            call = KernelCall(device, fn, ins, outs, attrs)
            out[q] = Node(a.id, call, fd.name, tuple(reads), writes)
            merged.update((p, q))
            removed.add(p)
            if not fd.keep:
                gone.add(k)
            break
    if not merged:
        return seq, None
    return [n for p, n in enumerate(out) if p not in removed], gone


def fuse_chains(seq: list[Node], planned: set[int], device: Device) -> list[Node]:
    """``seq`` with runs of elementwise ops merged into compiled chains (see
    :class:`singa.ops.ElementwiseChain`), where the device compiles them.

    Walking the order, each elementwise node (an op the compiler chains, one output, every
    operand a whole contiguous block of the output's size and dtype, or one element)
    whose output is not planned (a parameter, optimizer state, a tensor Python holds)
    joins the open groups of its size and dtype that it depends on (merging them), or
    opens one. Planned outputs stay out of chains so that in-place reuse and
    rematerialisation, which decide per op, keep every option they had. A group
    closes at the first node that is not a member but reads what the group writes or
    writes what it reads or writes (the group's members will run later, at its last
    member's place, so nothing may come between them and such a node). A block read as a
    broadcast scalar is read once, before the loop: a node may not join a group that
    writes it, nor one that reads it so, if it writes it. A group of two or more nodes
    becomes one node; each element then goes through every step in order.
    """
    compiler = device.chain_compiler()
    if compiler is None:
        return seq
    groups: list[dict] = []  # every group ever opened, in order of opening
    open_groups: list[dict] = []
    for p, n in enumerate(seq):
        key = _chain_key(n, compiler, planned)
        reads = {id(b) for b in n.reads}
        writes = {id(b) for b in n.writes}
        # blocks read as broadcast scalars: a chain reads those once, before its loop
        # a node with a key is a KernelCall (_chain_key)
        scalars = {id(x.block) for x in cast(KernelCall, n.fn).ins if x.size == 1} \
            if key and key[0] > 1 \
            else set()
        sync = not n.reads and not n.writes
        joined = None
        still_open = []
        for g in open_groups:
            conflict = sync or bool(reads & g["writes"]) or bool(
                writes & (g["reads"] | g["writes"]))
            if not conflict:
                still_open.append(g)
            elif (key is not None and g["key"] == key and not scalars & g["writes"]
                  and not writes & g["scalars"]):
                if joined is None:  # n depends on the group: it continues it
                    joined = g
                    still_open.append(g)
                elif not (g["scalars"] & joined["writes"] or joined["scalars"] & g["writes"]):
                    # n depends on two groups: one group, members in order
                    for field in ("reads", "writes", "scalars"):
                        joined[field] |= g[field]
                    joined["members"] = sorted(joined["members"] + g["members"])
                    g["members"] = []
            # else: the group closes before n
        open_groups = still_open
        if key is None:
            continue
        if joined is None:
            joined = {"key": key, "members": [], "reads": set(), "writes": set(),
                      "scalars": set()}
            groups.append(joined)
            open_groups.append(joined)
        joined["members"].append(p)
        joined["reads"] |= reads
        joined["writes"] |= writes
        joined["scalars"] |= scalars
    replace: dict[int, Node] = {}
    dropped: set[int] = set()
    for g in groups:
        if len(g["members"]) < 2:
            continue
        members = [seq[p] for p in g["members"]]
        replace[g["members"][-1]] = _chain_node(members, g["key"][1], compiler, device)
        dropped.update(g["members"][:-1])
    return [replace.get(p, n) for p, n in enumerate(seq) if p not in dropped]


def _chain_key(node, compiler, planned):
    """``(elements, dtype)`` if ``node`` may join an elementwise chain, else None."""
    fn = node.fn
    if (not isinstance(fn, KernelCall) or node.name not in compiler.ops
            or len(fn.outs) != 1 or len(node.writes) != 1):
        return None
    out = fn.outs[0]
    if out.dtype_code not in compiler.dtypes or not whole(out) or id(out.block) in planned:
        return None
    n = out.size
    for x in fn.ins:
        if x.dtype_code != out.dtype_code or (x.size == 1 < n and x.block is out.block):
            return None
        if x.size == n and n > 1 and not (whole(x) and x.dims == out.dims):
            return None
        if x.size not in (1, n):
            return None
    return (n, out.dtype_code)


def _chain_node(members, dtype, compiler, device) -> Node:
    """One node running ``members`` (elementwise nodes, in order) as a compiled chain."""
    chain, operands = ElementwiseChain.of(
        [(m.name, m.fn.ins, m.fn.outs[0]) for m in members], dtype)
    call = KernelCall(device, compiler.compile(chain), operands, [], EMPTY)
    reads: dict[int, Block] = {}
    writes: dict[int, Block] = {}
    for m in members:
        reads.update((id(b), b) for b in m.reads)
        writes.update((id(b), b) for b in m.writes)
    return Node(members[-1].id, call, chain.name, tuple(reads.values()),
                tuple(writes.values()))


def _fusable(fd, p, a, seq, planned, readers, writers, merged) -> tuple[int, int] | None:
    """``(position, link)``: the node that ``a`` (at ``p``) fuses with under ``fd`` and the
    input of it that reads ``a``'s output (``fd.link``, or the other one when ``fd.commutes``),
    or None."""
    if p in merged or not isinstance(a.fn, KernelCall) or len(a.fn.outs) != 1:
        return None
    xa = a.fn.outs[0]
    k = id(xa.block)
    reads_k = readers.get(k, ())
    if not whole(xa) or len(a.writes) != 1 or writers.get(k) != [p] or not reads_k:
        return None
    if not fd.keep and (k not in planned or len(reads_k) != 1):
        return None
    q = next((r for r in reads_k if r > p), None)  # A's first reader (a parameter A
    if q is None:                                   # overwrites may be read before A)
        return None
    b = seq[q]
    if (q in merged or b.name != fd.second or not isinstance(b.fn, KernelCall)
            or fd.link >= len(b.fn.ins) or (b.fn.attrs and "second" in a.fn.attrs)):
        return None
    link = fd.link
    if fd.commutes and len(b.fn.ins) == 2 and b.fn.ins[link].block is not xa.block:
        link = 1 - link  # a symmetric op reading a's output as its other operand
    xb = b.fn.ins[link]
    if (xb.block is not xa.block or not whole(xb) or xb.dims != xa.dims
            or xb.dtype_code != xa.dtype_code
            or any(x.block is xa.block for j, x in enumerate(b.fn.ins) if j != link)
            or xa.block in b.writes):
        return None
    for blk in a.reads:
        if any(p < w < q for w in writers.get(id(blk), ())):
            return None
    return q, link
