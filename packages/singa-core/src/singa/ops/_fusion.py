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
one run the two ops as recorded. The fused kernel's calling convention:

- inputs: ``first``'s inputs, then ``second``'s inputs other than ``link``, in order;
- outputs: ``second``'s outputs;
- attributes: ``first``'s (``second`` must have none);

and it must give, bitwise, what ``second``'s kernel gives on ``first``'s kernel's output (the
conformance kit checks this against the device's own two kernels).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FusionDef", "FUSIONS", "ChainStep", "ElementwiseChain"]


@dataclass(frozen=True)
class FusionDef:
    """Two ops the scheduler may run as one kernel, registered under ``name``."""

    name: str
    first: str
    second: str
    link: int  # index of second's input that is first's (single) output
    doc: str = ""


FUSIONS: dict[str, FusionDef] = {}


def _declare(first: str, second: str, link: int, doc: str) -> None:
    name = f"{first}+{second}"
    FUSIONS[name] = FusionDef(name, first, second, link, doc)


_declare("Conv2d", "ReLU", 0,
         "A convolution (bias included) and the ReLU of its output: the ReLU is applied to each "
         "chunk of the output as it is computed.")
_declare("Pooling2dBackward", "ReLUBackward", 0,
         "The gradient of a max/average pooling, masked by the ReLU before it: "
         "dx = pool_backward(dy, x) * (y > 0), written once.")


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
