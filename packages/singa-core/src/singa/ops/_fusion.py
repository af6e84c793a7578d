"""Fused kernels: ops run as one kernel in graph mode.

Two kinds. **Pairs** (:data:`FUSIONS`): an op and the one op that reads its output, fused by a
kernel the backend writes by hand. **Elementwise chains** (:class:`ElementwiseChain`): runs of
elementwise ops over arrays of one size (an optimizer's in-place updates of one parameter),
compiled by the backend into one loop over the elements (``Device.chain_compiler``).

A recorded graph knows which intermediate results nothing else reads. When op ``first``
writes a block that only op ``second`` reads (as its input ``link``), and Python holds no
reference to it, the scheduler may replace the two nodes by one call of the fused kernel
``first+second``: the intermediate is never written, and its memory is never planned. A
convolution followed by its ReLU then applies the ReLU to each batch chunk while the chunk is
still in cache, instead of a second pass over the whole output.

A fusion is only used where the device registers a kernel under its name; backends without
one run the ops as recorded. ``first`` may itself be a fusion (``Conv2d+ReLU+Pooling2d``
fuses the fused ``Conv2d+ReLU`` with the pooling of its output). The fused kernel's calling
convention:

- inputs: ``first``'s inputs, then ``second``'s inputs other than ``link``, in order;
- outputs: ``second``'s outputs; with ``keep``, ``first``'s output before them (it is still
  written, for readers after ``second``);
- attributes: ``first``'s, plus ``second``'s under the key ``"second"`` when it has any;

and it must give, bitwise, what ``second``'s kernel gives on ``first``'s kernel's output (the
conformance kit checks this against the device's own kernels).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from .._ctensor import CTensor
from .._dtype import ITEMSIZE
from ._registry import EMPTY, OPS, KernelCall, run

__all__ = ["FusionDef", "FUSIONS", "ChainStep", "ElementwiseChain", "node_op", "run_chain",
           "run_fused", "whole"]


@dataclass(frozen=True)
class FusionDef:
    """Two ops the scheduler may run as one kernel, registered under ``name``."""

    name: str
    first: str
    second: str
    link: int  # index of second's input that is first's (single) output
    doc: str = ""
    keep: bool = False  # first's output is kept (written) for readers after second
    #: ``sample_second(g, shape) -> attrs | None``: attributes of ``second`` valid on an input
    #: of ``shape`` (the conformance kit draws them), None if there are none
    sample_second: Callable | None = None
    #: ``sample_others(g, shape) -> [shape, ...]``: shapes of ``second``'s inputs other than
    #: ``link`` (in order) for first's output of ``shape``, which the conformance kit draws;
    #: None: each of ``shape`` (a fusion whose second op broadcasts says so here)
    sample_others: Callable | None = None
    #: as :class:`singa.ops.OpDef`'s, for the graph's memory planning and rematerialisation
    #: (a fused node would otherwise lose what its ops allowed): inputs whose memory the
    #: fused kernel's single output may take over (the kernel reads element i of each before
    #: writing element i), and whether the fused node may run again to rebuild its output
    inplace: tuple = ()
    recompute: bool = False
    #: ``second`` takes two inputs and is symmetric in them (Mul): first's output may be
    #: either one, ``link`` or the other. The fused kernel's inputs are the same both ways
    #: (first's inputs, then the other operand), and it must give bitwise what ``second``
    #: gives in either order (the conformance kit checks both)
    commutes: bool = False
    random = False  # not fields: fused kernels are deterministic
    state = ()  # and update no running state

    @property
    def base(self) -> str:
        """The op of the table the chain of fusions starts from (whose sampler draws inputs)."""
        return FUSIONS[self.first].base if self.first in FUSIONS else self.first


FUSIONS: dict[str, FusionDef] = {}


def node_op(name: str):
    """The op record of a graph node named ``name``: its :class:`OpDef`, or the
    :class:`FusionDef` of a fused node (which carries the same ``inplace``, ``recompute``,
    ``random`` and ``state`` fields), or None."""
    return OPS.get(name) or FUSIONS.get(name)


def _declare(first: str, second: str, link: int, doc: str, **kw) -> None:
    name = f"{first}+{second}"
    FUSIONS[name] = FusionDef(name, first, second, link, doc, **kw)


def _pool_attrs(g, shape):
    """Pooling2d attributes valid on an NCHW input of ``shape``: the common 2x2/stride-2 max
    pooling more often than the others."""
    h, w = shape[2], shape[3]
    choices = [dict(kernel=(2, 2), stride=(2, 2), mode="max")] * 3 + [
        dict(kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1), mode="max"),
        dict(kernel=(2, 2), stride=(1, 1), mode="avg")]
    fit = [c for c in choices if h >= c["kernel"][0] and w >= c["kernel"][1]]
    return g.choice(fit) if fit else None


def _broadcast_target(g, shape):
    """``shape``, or a larger shape that ``shape`` broadcasts to (its sides of 1 grown, a
    leading axis added), at most 16 times its size and about 4 million elements: what a
    (N, C, 1, 1) gate multiplies, its (N, C, H, W) map."""
    if not g.booleans():  # shrinks toward the same shape
        return shape
    size = max(1, math.prod(shape))
    room = max(1, min(16, (4 << 20) // size))
    out = []
    for d in shape:
        grow = g.integers(1, min(6, room)) if d == 1 and room > 1 else 1
        room //= grow
        out.append(d * grow)
    lead = g.integers(1, min(3, room)) if room > 1 and g.booleans() else 1
    return ((lead,) if lead > 1 else ()) + tuple(out)


_declare("Conv2d", "ReLU", 0,
         "A convolution (bias included) and the ReLU of its output: the ReLU is applied to each "
         "chunk of the output as it is computed.")
_declare("Conv2d+ReLU", "Pooling2d", 0,
         "A convolution and its ReLU, and the pooling of the ReLU's output, which is kept for "
         "the backward pass: each chunk of the output is pooled while in cache.",
         keep=True, sample_second=_pool_attrs)
_declare("Conv2d", "HardSwish", 0,
         "A convolution (bias included) and the HardSwish of its output (MobileNetV3's "
         "activation): the HardSwish is applied to each chunk of the output as it is "
         "computed, in the pass that adds the bias.")
_declare("Add", "ReLU", 0,
         "A sum and the ReLU of it (a residual block's join, a bias and its activation): "
         "one pass over the elements instead of two.", inplace=(0, 1), recompute=True)
_declare("Sigmoid", "Mul", 1,
         "A sigmoid and the product of another tensor with it, a * sigmoid(x) or sigmoid(x) * "
         "a: SiLU (x * sigmoid(x), EfficientNet's activation) and sigmoid gates (a "
         "squeeze-excitation block's (N, C, 1, 1) gate times its (N, C, H, W) map); one pass "
         "over the elements instead of two.", inplace=(0, 1), recompute=True, commutes=True,
         sample_others=lambda g, shape: [_broadcast_target(g, shape)])
_declare("Pooling2dBackward", "ReLUBackward", 0,
         "The gradient of a max/average pooling, masked by the ReLU before it: "
         "dx = pool_backward(dy, x) * (y > 0), written once.")


def run_fused(name: str, ins: list, attrs: dict = EMPTY) -> list | None:
    """Run fusion ``name`` now, outside a graph, on the device of ``ins`` (CTensors): its
    output, or None when the device registers no kernel under that name (run the two ops then).

    Inputs and attributes follow the fused kernel's calling convention (module docstring):
    ``first``'s inputs, then ``second``'s other inputs. ``first`` is an op of the table, and
    ``second`` a one-input op (``Conv2d+ReLU``, ``Conv2d+HardSwish``: the output has
    ``first``'s shape and dtype) or an op of fixed arity whose attributes are ``attrs``'
    ``"second"`` (``Sigmoid+Mul``: its output shape is what ``second`` gives for ``first``'s
    output and the other inputs, broadcast). The pair's intermediate is not kept. The result is
    bitwise the two ops' (the conformance kit's fused checks); nothing is recorded for a
    backward pass, so callers use it where no gradient is asked for (inference: singa_onnx's
    eager runs with ``autograd.training`` off). A shape the ops refuse raises their error.
    """
    fusion = FUSIONS.get(name)
    first = OPS.get(fusion.first) if fusion is not None else None
    second = OPS.get(fusion.second) if fusion is not None else None
    if (fusion is None or first is None or second is None or fusion.keep
            or second.nin < 1 or (second.nin > 1 and first.nin < 1)):
        raise ValueError(f"run_fused: {name!r} is not a fusion of an op of the table and an "
                         "op of fixed arity")
    dev = ins[0].dev
    if name not in dev.kernels:
        return None
    if second.nin == 1:
        shapes = first.infer(ins, attrs)
    else:  # second's output for first's output (a placeholder: no memory) and the others
        k = first.nin
        if len(ins) != k + second.nin - 1:
            raise ValueError(f"run_fused: {name!r} takes {k + second.nin - 1} inputs "
                             f"({first.name}'s {k}, then {second.name}'s other "
                             f"{second.nin - 1}), got {len(ins)}")
        (shape, dtype), = first.infer(ins[:k], attrs)
        link = CTensor._new(shape, dev, dtype)
        others = list(ins[k:])
        shapes = second.infer(others[:fusion.link] + [link] + others[fusion.link:],
                              attrs.get("second", EMPTY))
    outs = [CTensor._new(s, dev, d) for s, d in shapes]
    return run(fusion, ins, attrs, outs)  # type: ignore[arg-type]  # run reads .name only


@dataclass(frozen=True)
class ChainStep:
    """One op of an elementwise chain: ``operands[out] = op(operands[ins]...)`` per element."""

    op: str
    ins: tuple
    out: int


@dataclass(frozen=True)
class ElementwiseChain:
    """Elementwise ops run in one pass over ``n`` elements, in order, for each element.

    ``scalar[k]``: operand k has one element, broadcast (read once; never written by the chain);
    every other operand is a contiguous array of ``n`` elements of dtype ``dtype``. Each step
    computes element i from elements i of its operands, so running all steps for element 0,
    then all for element 1, ... gives what running the ops one after the other gives, in-place
    updates included. Equal chains (same ops, operand pattern and dtype) compile once.
    """

    steps: tuple
    scalar: tuple
    dtype: int

    @property
    def name(self) -> str:
        return "Elementwise[" + ",".join(s.op for s in self.steps) + "]"

    @classmethod
    def of(cls, calls, dtype: int) -> tuple[ElementwiseChain, list]:
        """The chain of ``calls``, ``(op, inputs, output)`` in order, over the first output's
        elements, and its operands: each array once (by block: an array an op writes and a
        later op reads is one operand), each one-element input of a longer chain its own
        scalar operand."""
        operands: list = []
        index: dict = {}
        scalar: list[bool] = []

        def operand(x, full):
            key = id(x.block) if full else ("scalar", id(x))
            if key not in index:
                index[key] = len(operands)
                operands.append(x)
                scalar.append(not full)
            return index[key]

        n = calls[0][2].size
        steps = []
        for op, ins, out in calls:
            idx = tuple(operand(x, x.size == n) for x in ins)
            steps.append(ChainStep(op, idx, operand(out, True)))
        return cls(tuple(steps), tuple(scalar), dtype), operands


def whole(ct) -> bool:
    """Whether CTensor ``ct`` is a contiguous view of all of its block."""
    return ct.contig and ct.offset == 0 and ct.size * ITEMSIZE[ct.dtype_code] == ct.block.nbytes


def _eager_chain(calls, compiler, dev):
    """``((kernel, name), operands)``: ``calls`` as one compiled chain on ``dev`` and its
    operands (each array once, by block; each one-element input its own scalar operand), or
    None where the chain cannot take them. It takes ops the compiler chains, every tensor on
    ``dev`` and of one dtype it takes, every output a whole block of the first output's shape,
    every input of that shape too (a whole block) or of one element, and no one-element input
    of an array the chain writes (a chain reads those once, first).

    One pass over the tensors: the kernel is looked up by the operand pattern, in a cache
    kept on the device, so a step builds no chain record (an MLP's update of a bias costs
    about what its separate ops did)."""
    first = calls[0][2]
    dt, dims, n = first.dtype_code, first.dims, first.size
    if dt not in compiler.dtypes:
        return None
    nbytes = n * ITEMSIZE[dt]  # a whole block of the first output's shape (``whole``)
    chained = compiler.ops
    written = {id(out.block) for _op, _ins, out in calls}
    index: dict = {}
    operands: list = []
    scalar: list[bool] = []
    pattern = []
    for op, ins, out in calls:
        if (op not in chained or out.dev is not dev or out.dtype_code != dt
                or out.dims != dims or not (out.contig and out.offset == 0
                                            and out.block.nbytes == nbytes)):
            return None
        idx = [op]
        for x in (*ins, out):  # the output last
            if x.dev is not dev or x.dtype_code != dt:
                return None
            if x.dims == dims:
                if n > 1 and x is not out and not (x.contig and x.offset == 0
                                                   and x.block.nbytes == nbytes):
                    return None
                key = id(x.block)
            else:
                size = x.size
                if size == n:  # another shape of as many elements
                    if n > 1:
                        return None
                    key = id(x.block)
                elif size == 1 and id(x.block) not in written:
                    key = -1 - id(x)  # a scalar operand per tensor (block ids are positive)
                else:
                    return None
            k = index.get(key)
            if k is None:
                k = index[key] = len(operands)
                operands.append(x)
                scalar.append(key < 0)
            idx.append(k)
        pattern.append(tuple(idx))
    signature = (tuple(pattern), tuple(scalar), dt)
    cache = dev.workspace("eager chains", dict)
    entry = cache.get(signature)
    if entry is None:
        # the chain is the pattern it is keyed by: each step's input operands, then its output
        chain = ElementwiseChain(tuple(ChainStep(op, tuple(idx[:-1]), idx[-1])
                                       for op, *idx in pattern), tuple(scalar), dt)
        entry = cache[signature] = (compiler.compile(chain), chain.name)
    return entry, operands


def run_chain(calls) -> None:
    """Run elementwise ops in order, each writing an existing tensor: for every ``(op, inputs,
    output)`` of ``calls``, ``output = op(*inputs)`` (an optimizer's in-place updates of one
    parameter: ``buf *= momentum``, ``buf += (1 - dampening) g``, ``p -= lr buf``).

    When the ops run now (no graph is being recorded) on a device whose
    ``chain_compiler()`` takes them (see :func:`_eager_chain`), they run as one compiled
    :class:`ElementwiseChain`: each element goes through every op in turn, which gives
    bitwise what the ops give one after the other (the compiler's contract), reading and
    writing each array once and dispatching once. Otherwise each op is dispatched by
    :func:`run`; a graph being recorded thus gets the ops as its nodes, and its fusion stage
    makes the same chain of them.
    """
    dev = calls[0][2].dev
    compiler = dev.chain_compiler() if dev.recorder() is None else None
    found = None if compiler is None else _eager_chain(calls, compiler, dev)
    if found is None:
        for op, ins, out in calls:
            run(OPS[op], list(ins), EMPTY, [out])
        return
    (kernel, name), operands = found
    reads = {id(x.block): x.block for x in operands}
    writes = {id(out.block): out.block for _op, _ins, out in calls}
    dev.exec(KernelCall(dev, kernel, operands, [], EMPTY), list(reads.values()),
             list(writes.values()), name)
