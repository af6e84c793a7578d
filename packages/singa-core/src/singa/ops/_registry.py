"""The operator table and the dispatcher.

Each operator is declared once with :func:`defop`: its name, arity, a shape/dtype rule, a
numpy reference and a sampler of test inputs. Backends register kernels under the op's name.

Kernel calling convention (``BACKEND_API_VERSION`` 1)::

    kernel(ins: list[native], outs: list[native], attrs: dict) -> None

``ins``/``outs`` are the device's native array views (:meth:`Device.native`) of the input and
output CTensors, in declaration order. Kernels write every element of each output and must not
keep references to the lists or mutate ``attrs``. Inputs may be strided views (transposed,
broadcast with zero strides, offset slices) unless the kernel is declared
``contiguous_inputs``, in which case the dispatcher materialises them first (and routes
non-contiguous outputs through a temporary). Binary elementwise ops receive inputs whose shapes
broadcast (numpy rules) to the output shape. Outputs may alias inputs for in-place calls
(``x += y`` runs ``Add`` with ``outs=[x]``; ``GEMM``/``Axpy`` update C/y in place), so a kernel
must read what it needs before overwriting an aliased output.

A kernel table maps op names to such callables or to :class:`~singa._kernel.Kernel` records
of them (dtypes, contiguity, graph-mode ``bind``): see :mod:`singa._kernel`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from .. import _dtype
from .._ctensor import CTensor, check_same_device
from .._dtype import ITEMSIZE
from .._kernel import Kernel, as_kernel, kernel_attrs
from ._rules import ShapeRule

__all__ = ["OpDef", "OPS", "defop", "run", "Kernel", "KernelCall", "EMPTY", "kernel_attrs",
           "as_kernel"]

#: Shared empty attribute dict (kernels must not mutate attrs).
EMPTY: dict = {}

F = (_dtype.kFloat32,)
FH = (_dtype.kFloat32, _dtype.kFloat16)
FD = (_dtype.kFloat32, _dtype.kDouble)
FHD = (_dtype.kFloat32, _dtype.kFloat16, _dtype.kDouble)
NUM = (_dtype.kFloat32, _dtype.kFloat16, _dtype.kDouble, _dtype.kInt)


@dataclass(eq=False)
class OpDef:
    """One operator of the table.

    Attributes
    ----------
    name: kernel-table key, e.g. ``"Add"``.
    nin: number of inputs (-1: variadic).
    nout: number of outputs.
    infer: ``infer(ins, attrs) -> [(shape, dtype_code), ...]`` for the outputs; raises
        :class:`singa.errors.ShapeError`/``DtypeMismatchError`` on bad input.
    reference: numpy reference ``reference(*arrays, **attrs) -> array | tuple``.
    sample: ``sample(g, dtype) -> (arrays, attrs)`` drawing a test case with helper ``g``
        (see :mod:`singa.testing.cases`); used by the conformance kit.
    dtypes: dtype codes the op is defined for (kernels may support a subset).
    random: outputs are random draws (checked statistically, not elementwise).
    tol: per-dtype ``(rtol, atol)`` overrides for the conformance kit.
    inplace: indices of the inputs whose memory the (single) output may take over when the
        input is not needed afterwards: a graph's arena planner then gives the output that
        input's memory. A promise about every backend's kernel: for identical, contiguous
        input and output views it reads element i of the input before writing element i of
        the output and reads no other element after writing one (elementwise ops).
    recompute: a graph may run the op a second time to rematerialise an output it dropped
        (:mod:`singa.scheduler`). A promise about every backend's kernel: cheap (memory-bound;
        never a convolution or GEMM), no effect besides writing its outputs, and
        deterministic: the same input values give bitwise the same outputs, wherever the
        outputs are placed. Never set together with ``random``.
    acc_bound: for ops whose outputs are sums of many terms (GEMM, convolution, reductions):
        ``acc_bound(*arrays, **attrs) -> array | tuple`` (like the reference's outputs) giving
        ``sqrt(n) * sum(|term|)`` per output element, n the number of terms. The conformance
        kit allows a few unit roundoffs of the accumulation dtype times this on top of the
        dtype's tolerance: a tolerance that grows with the reduction length.
    state: ``(input, output)`` index pairs of running state the op updates (callers pass the
        output aliasing the input, e.g. BatchNormTrain's running statistics). The input is
        read only to compute that output: a recompute writes the output to scratch memory,
        and the other outputs do not depend on the input's current value.
    defined: ``defined(arrays, attrs) -> bool``, for ops whose result is unspecified for
        some inputs the sampler never draws (ScatterElements' duplicate targets without a
        reduction): whether the op's semantics fix the outputs of these inputs. The
        conformance kit's layouts that change values (zero-stride broadcasts) keep an input
        contiguous where the broadcast values would not be defined.
    """

    name: str
    nin: int
    infer: ShapeRule
    reference: Callable
    sample: Callable | None = None
    nout: int = 1
    dtypes: tuple = FHD
    random: bool = False
    tol: dict = field(default_factory=dict)
    doc: str = ""
    inplace: tuple = ()
    recompute: bool = False
    state: tuple = ()
    acc_bound: Callable | None = None
    defined: Callable | None = None

    def __repr__(self) -> str:
        return f"<op {self.name}>"


OPS: dict[str, OpDef] = {}


def defop(name: str, nin: int, infer: ShapeRule, reference: Callable[..., Any],
          sample: Callable[..., Any] | None = None, **kw: Any) -> OpDef:
    """Declare an operator (once; redefinition is a programming error)."""
    if name in OPS:
        raise ValueError(f"operator {name!r} declared twice")
    op = OpDef(name, nin, infer, reference, sample, **kw)
    if op.recompute and op.random:
        raise ValueError(f"operator {name!r}: a random op cannot be declared recomputable")
    OPS[name] = op
    return op


class KernelCall:
    """A bound kernel invocation: what ``Device.exec`` runs or the graph records."""

    __slots__ = ("dev", "fn", "ins", "outs", "attrs")

    def __init__(self, dev, fn, ins, outs, attrs):
        self.dev = dev
        self.fn = fn
        self.ins = ins
        self.outs = outs
        self.attrs = attrs

    def __call__(self):
        nat = self.dev.native
        self.fn(list(map(nat, self.ins)), list(map(nat, self.outs)), self.attrs)

    @property
    def ctensors(self):
        """The CTensors this call holds (the scheduler counts them as graph references)."""
        return (*self.ins, *self.outs)


def _materialize(x: CTensor) -> CTensor:
    return run(OPS["Copy"], [x])[0]


def run(op: OpDef, ins: list, attrs: dict = EMPTY, outs: list | None = None) -> list:
    """Dispatch ``op`` on the device of its tensors and return the output CTensors.

    ``outs`` (optional) are existing tensors to write (in-place ops, fills); otherwise fresh
    outputs are created from the op's shape/dtype rule.
    """
    if ins:
        dev = ins[0].dev
        for x in ins:
            if x.dev is not dev:
                check_same_device(op.name, ins + (outs or []))
    elif outs is None:  # the contract of an op without inputs (the fills)
        raise TypeError(f"{op.name}: an op without inputs needs outs, the tensors to write")
    else:
        dev = outs[0].dev
    given = outs is not None
    if outs is None:
        made = op.infer(ins, attrs)
        if len(made) == 1:  # most ops: no comprehension to set up
            outs = [CTensor._new(made[0][0], dev, made[0][1])]
        else:
            outs = [CTensor._new(s, dev, d) for s, d in made]
    elif ins and outs[0].dev is not dev:
        check_same_device(op.name, ins + outs)
    entry = dev.kernels.get(op.name)
    fn, contig, dtypes = entry if entry is not None else dev.kernel(op)
    if dtypes is not None:
        dt = (ins[0] if ins else outs[0]).dtype_code
        if dt not in dtypes:
            _unsupported_dtype(op, dev, dt, dtypes)
    if contig:
        for x in ins:
            if not x.contig:
                ins = [x if x.contig else _materialize(x) for x in ins]
                break
        if given and not all(o.contig for o in outs):  # fresh outputs are contiguous
            tmp = [CTensor._new(o.dims, dev, o.dtype_code) for o in outs]
            run(op, ins, attrs, tmp)
            for o, t in zip(outs, tmp):
                run(OPS["Copy"], [t], EMPTY, [o])
            return outs
    reads = list(map(_BLOCK, ins))
    if given:
        for o in outs:  # a partial write keeps the rest of the block: it reads it too
            if o.size * ITEMSIZE[o.dtype_code] != o.block.nbytes:
                reads.append(o.block)
    dev.exec(KernelCall(dev, fn, ins, outs, attrs), reads, list(map(_BLOCK, outs)), op.name)
    return outs


_BLOCK = attrgetter("block")


def _unsupported_dtype(op, dev, dt, dtypes):
    from ..errors import DtypeMismatchError

    names = ", ".join(sorted(_dtype.name_of(d) for d in dtypes))
    raise DtypeMismatchError(
        f"{op.name}: device {dev.name} has no {_dtype.name_of(dt)} kernel for this op (it "
        f"supports {names}); convert the tensors with x.as_type(...) or use another device"
    )
