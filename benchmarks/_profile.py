"""The per-node profile of a graph replay, summed by op (or by op and operand shapes), shared by
``train_step.py --profile`` and ``real_models.py --profile``.

The device's profiler (``SetVerbosity(2)``) times every node of a graph replay; this module
reads those times off the graph the device ran last. ``shapes=True`` keys each row by the op
and its operands too (``Matmul (2048, 128),(128, 512)* -> (2048, 512)``, ``*`` a strided
operand), which is what tells two products of one op apart when looking for where a step's
time goes.
"""

from __future__ import annotations


def operands(node) -> str:
    """``(dims),(dims)* -> (dims)`` of a node's kernel call (``*``: not contiguous), or ``""``
    for a node that is not a kernel call."""
    fn = node.fn

    def one(ct) -> str:
        return f"{tuple(ct.dims)}{'' if ct.contig else '*'}"

    ins, outs = getattr(fn, "ins", None), getattr(fn, "outs", None)
    if ins is None or outs is None:
        return ""
    return f"{','.join(one(c) for c in ins)} -> {','.join(one(c) for c in outs)}"


def node_times(graph, label=None, shapes=False) -> list[list]:
    """``[key, ms per replay, nodes]`` of the graph's profiled nodes, largest first: each
    node's mean time over the replays it was timed in, summed by ``label(node)`` (default: the
    node's op name), and by its operands' shapes too when ``shapes``."""
    label = label or (lambda node: node.name)
    totals: dict[str, list] = {}
    for node in graph.plan.steps if graph.plan else graph.recording.nodes:
        if node.time_count:
            key = label(node)
            if shapes:
                key = f"{key} {operands(node)}".rstrip()
            t = totals.setdefault(key, [0.0, 0])
            t[0] += node.time_total / node.time_count * 1e3
            t[1] += 1
    return sorted(([k, ms, n] for k, (ms, n) in totals.items()), key=lambda r: -r[1])
