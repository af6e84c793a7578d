"""Reverse-mode autodiff over recorded Operators (SINGA's contract).

Calling an :class:`Operator` records, for each input, ``(creator, id(x), x if stores_grad,
stores_grad)`` in ``op.src`` and wraps the CTensors returned by :meth:`Operator.forward` as
Tensors whose ``creator`` is the op. :func:`backward` walks these records in reverse and yields
``(param, grad)`` for every tensor with ``stores_grad=True`` as soon as its gradient is
complete, each parameter once.
"""

from __future__ import annotations

import itertools
import weakref
from collections import Counter, deque
from collections.abc import Callable

from .. import _math
from .._ctensor import CTensor
from ..errors import SingaError
from ..tensor import Tensor

__all__ = ["Operator", "Operation", "Dummy", "backward", "gradients", "infer_dependency",
           "is_training", "axis_helper", "back_broadcast", "ctensor2numpy", "add_all"]

# The switch is SINGA's `singa.autograd.training`, a plain attribute of the package that users
# (and Model.train) assign. The package imports this module before it defines the switch, so
# this module cannot import the package at its top (a cycle), and an import statement in
# every op call would slow the hot path; instead the package registers a reader of its attribute,
# once, right after defining it (register_training_switch). Ops never run before that: only
# after `import singa.autograd` has finished.
_read_training: Callable[[], object]


def register_training_switch(read: Callable[[], object]) -> None:
    """Make :func:`is_training` read the switch through ``read``.

    ``singa.autograd`` calls it once, on import, with ``lambda: training``: a function of the
    package's namespace, so it sees every later ``autograd.training = ...``.
    """
    global _read_training
    _read_training = read


def is_training() -> bool:
    """The value of ``singa.autograd.training``."""
    return bool(_read_training())


_op_counter = itertools.count()


class Operator:
    """Base of every differentiable operation.

    Subclasses implement ``forward(*CTensors) -> CTensor | tuple`` and
    ``backward(*dy CTensors) -> CTensor | tuple`` (``None`` for inputs without a gradient).
    Calling the op returns a tuple of Tensors.
    """

    op_count = 0

    def __init__(self, name=None):
        self._name = name
        self._idx = next(_op_counter)
        Operator.op_count += 1

    @property
    def name(self) -> str:
        if self._name is None:
            self._name = f"{type(self).__name__}#{self._idx}"
        return self._name

    @name.setter
    def name(self, value):
        self._name = value

    def __call__(self, *xs):
        return self._do_forward(*xs)

    def output_name(self, idx: int) -> str:
        """The name of output ``idx`` in a traced graph: ``<op name>:<idx>``."""
        return f"{self.name}:{idx}"

    def grad_name(self, idx: int) -> str:
        """The name of the gradient of output ``idx``: ``<op name>:<idx>_g``."""
        return f"{self.name}:{idx}_g"

    def _do_forward(self, *xs):
        # the hot path of every eager op: one pass over the inputs, the training switch read
        # once, and while training off nothing but the records backward and export read
        rg = False
        needs = []
        src = []
        datas = []
        for x in xs:
            if not isinstance(x, Tensor):
                raise TypeError(
                    f"{type(self).__name__}: inputs must be singa.tensor.Tensor, got "
                    f"{type(x).__name__} (wrap numpy data with tensor.from_numpy)"
                )
            c = x._creator
            if c is None:  # a leaf: its Dummy creator is made once, on first use
                c = x.creator
            xr = x.requires_grad
            xs_grad = x.stores_grad
            if xr:
                rg = True
                # a leaf input that does not store its gradient never receives one: ops may
                # skip it
                needs.append(bool(xs_grad or not isinstance(c, Dummy)))
            else:
                needs.append(False)
            src.append((c, id(x), x if xs_grad else None, xs_grad))
            datas.append(x.data)
        self.requires_grad = rg
        self.needs_input_grad = tuple(needs)
        self.src = src
        self._released = False
        training = _read_training()
        if not training:
            self._saved_names = ()
            ys = self.forward(*datas)
        else:  # what backward will check: the inputs' blocks and their versions
            self._versions = [(weakref.ref(c.block), c.block.version) for c in datas]
            d = self.__dict__
            before = d.copy()
            ys = self.forward(*datas)
            # what forward saved for backward (set or replaced during this call): backward
            # may free it
            saved = []
            for k, v in d.items():
                if before.get(k, _MISSING) is not v and (
                        isinstance(v, CTensor)
                        or isinstance(v, (tuple, list)) and _any_ctensor(v)):
                    saved.append(k)
            self._saved_names = saved
        if not isinstance(ys, tuple):
            ys = (ys,)
        if training:  # an output the op keeps (exp, sigmoid, tanh, sqrt keep y) counts too
            self._out_versions = [(weakref.ref(y.block), y.block.version) for y in ys]
        rg = self.requires_grad  # as SINGA: a forward may have turned it off for its outputs
        if len(ys) == 1:
            out = Tensor._wrap(ys[0], rg, False, self)
            self.y_id2idx = {id(out): 0}
            return (out,)
        outs = tuple([Tensor._wrap(y, rg, False, self) for y in ys])
        self.y_id2idx = {id(y): i for i, y in enumerate(outs)}
        return outs

    def _do_backward(self, *dys):
        if self.__dict__.get("_released"):
            raise SingaError(
                f"{type(self).__name__} ({self.name}): backward ran through this part of the "
                "graph already and freed the tensors its forward saved; run the forward pass "
                "again, or pass retain_graph=True to the first backward to keep them")
        _check_versions(self)
        dxs = self.backward(*dys)
        if not isinstance(dxs, tuple):
            dxs = (dxs,)
        return dxs

    def forward(self, *xs):
        """Compute the outputs from the input CTensors.

        Subclasses implement it: one CTensor or a tuple of them.

        Raises
        ------
        NotImplementedError
            In the base class.
        """
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, *dys):
        """Map the gradients of the outputs (CTensors) to those of the inputs.

        Subclasses implement it: one CTensor or a tuple, None for an input without a gradient.

        Raises
        ------
        NotImplementedError
            In the base class.
        """
        raise NotImplementedError(f"{type(self).__name__}.backward")

    def get_params(self):
        """The parameters the op owns (none for the ops of this module)."""
        return []

    def needs_grad(self, i: int) -> bool:
        """Whether :func:`backward` needs the gradient of input ``i`` of the last call: ops may
        skip heavy work for the others and return None. A direct ``op.backward(dy)`` call
        (SINGA's tests do this) always gets every gradient."""
        flags = getattr(self, "needs_input_grad", None)
        if not self.__dict__.get("_in_engine") or flags is None or i >= len(flags):
            return True
        return flags[i]

    def _need_cache(self, what: str = "inputs"):
        raise SingaError(
            f"{type(self).__name__}.backward needs the {what} cached by forward, which happens "
            "only while singa.autograd.training is True; set autograd.training = True "
            "(or model.train()) before the forward pass"
        )


Operation = Operator


class Dummy(Operator):
    """The creator of a leaf tensor (no inputs, no backward)."""

    def __init__(self, tensor, name=None):
        object.__setattr__(self, "tensor", tensor)
        super().__init__(name if name is not None else tensor.name)
        self.src = []
        self.y_id2idx = {id(tensor): 0}
        self.requires_grad = False

    def output_name(self, idx):
        """The name of the wrapped tensor (a placeholder has one output)."""
        return self.name

    def grad_name(self, idx):
        """The name of the wrapped tensor's gradient: ``<name>_g``."""
        return f"{self.name}_g"

    def __getattr__(self, name):
        if name == "tensor":
            raise AttributeError(name)
        return getattr(self.tensor, name)


_MISSING = object()


def _any_ctensor(seq) -> bool:
    """Whether the tuple or list ``seq`` holds a CTensor (a forward saved tensors in it)."""
    for c in seq:
        if isinstance(c, CTensor):
            return True
    return False


def _release_saved(op) -> None:
    """Drop the tensors ``op``'s forward saved for its backward (PyTorch frees them too): the
    graph of the previous step no longer holds activations while the next forward runs."""
    for k in op.__dict__.get("_saved_names", ()):
        op.__dict__[k] = None
    op._released = True


def _check_versions(op) -> None:
    """Raise if an input or output that ``op`` kept for its gradient was overwritten after the
    forward.

    Like PyTorch's saved-tensor version check: only blocks the op still references count, so
    changing an input the op does not need (e.g. of an addition) is allowed.
    """
    saved = op.__dict__.get("_versions") or []
    outs = op.__dict__.get("_out_versions") or []
    for ref, version in saved:  # the common case: nothing changed, nothing more to look at
        blk = ref()
        if blk is not None and blk.version != version:
            break
    else:
        for ref, version in outs:
            blk = ref()
            if blk is not None and blk.version != version:
                break
        else:
            return
    kept = set()
    for v in op.__dict__.values():
        if isinstance(v, CTensor):
            kept.add(id(v.block))
        elif isinstance(v, (tuple, list)):
            kept.update(id(c.block) for c in v if isinstance(c, CTensor))
    for i, (what, (ref, version)) in enumerate(
            [("input", s) for s in saved] + [("output", o) for o in outs]):
        blk = ref()
        if blk is not None and id(blk) in kept and blk.version != version:
            i = i if what == "input" else i - len(saved)
            param = _leaf_input(op, i) if what == "input" else None
            if param is not None and param.stores_grad:
                which = f"input {i} (parameter {param.name!r}, shape {tuple(param.shape)})"
                fix = (
                    "A parameter changes in place when an optimizer updates it: here a second "
                    "backward runs through a forward pass whose weights were updated since "
                    "(e.g. `for p, g in autograd.backward(loss): opt.apply(p.name, p, g)` "
                    "followed by `opt(loss)` on the same loss). Back-propagate each loss once "
                    "and apply all its gradients in that pass, or run the forward pass again "
                    "after the update")
            else:
                which = f"{what} {i}"
                fix = ("Modify a copy instead (e.g. x.clone()), or change the tensor only "
                       "after backward")
            raise SingaError(
                f"{type(op).__name__} ({op.name}): one of the tensors needed for gradient "
                f"computation has been modified by an in-place operation: {which}, which it "
                f"needs to compute gradients, was modified in place after the forward pass "
                f"(version {version} -> {blk.version}); the gradient would be wrong. {fix}")


def _leaf_input(op, i):
    """The leaf Tensor that was input ``i`` of ``op`` (a parameter or a constant), else None."""
    src = op.__dict__.get("src") or []
    if i >= len(src):
        return None
    creator, _, kept, _ = src[i]
    if kept is not None:
        return kept
    return creator.__dict__.get("tensor") if isinstance(creator, Dummy) else None


def _consumers(op, key):
    """Walk the graph behind ``op`` once: (consumers per op, consumers per ``key(creator,
    tensor id)`` of each input)."""
    op_count: Counter = Counter()
    input_count: Counter = Counter()
    queue = deque([op])
    while queue:
        cur = queue.pop()
        for src_op, xid, _, _ in cur.src:
            if src_op not in op_count:
                queue.append(src_op)
            op_count[src_op] += 1
            input_count[key(src_op, xid)] += 1
    return op_count, input_count


def infer_dependency(op):
    """Counters of consumers per op and per input tensor id, over the graph behind ``op``."""
    return _consumers(op, lambda src_op, xid: xid)


def _slot_dependency(op):
    """Consumers per op and per output slot ``(id(creator), output index)``.

    Slots name tensors unambiguously: a Python id can be reused once an intermediate Tensor is
    garbage collected, but creators stay alive (``src`` holds them) while the graph exists.
    """
    return _consumers(op, lambda src_op, xid: (id(src_op), src_op.y_id2idx[xid]))


def _accumulate(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return _math.add(a, b)


def backward(y: Tensor, dy=None, retain_graph: bool = True):
    """Yield ``(param, grad)`` for every tensor with ``stores_grad`` behind ``y``.

    ``retain_graph=False`` frees each op's saved tensors as soon as its backward has run (as
    PyTorch does by default); a later backward through those ops raises :class:`SingaError`.
    The default keeps them, as SINGA does (its code may run backward twice on one graph); the
    optimizers' ``backward_and_update`` passes False, so a training loop does not hold the last
    step's activations while the next forward runs.

    ``y`` must hold one element unless ``dy`` (a Tensor of y's shape or a number) is given.
    Each pair is yielded as soon as that gradient is complete, every parameter once.
    An op runs its backward once all its consumers have passed their gradients; an op whose
    outputs received no gradient at all (e.g. behind a comparison or an int cast) passes None
    on, so the parameters behind it are still counted down and yielded.
    """
    if not isinstance(y, Tensor):
        raise TypeError(f"backward expects a Tensor, got {type(y).__name__}")
    if isinstance(dy, Tensor):
        dy = dy.data
    elif dy is None or not isinstance(dy, CTensor):
        if dy is None and y.size() != 1:
            raise SingaError(
                f"backward: y has shape {y.shape}; pass dy (a Tensor of that shape) or reduce "
                "y to one element (e.g. a loss)"
            )
        dy = _math.set_value(CTensor._new(y.shape, y.device, y.dtype), 1.0 if dy is None else dy)
    if dy.dims != y.shape:
        raise SingaError(f"backward: dy has shape {dy.dims} but y has shape {y.shape}")
    root = y.creator
    if y.stores_grad:
        yield (y, Tensor._wrap(dy, name=root.grad_name(root.y_id2idx.get(id(y), 0))))
    if isinstance(root, Dummy):
        return
    op_dep, slot_dep = _slot_dependency(root)
    root_grads = [None] * len(root.y_id2idx)
    root_grads[root.y_id2idx[id(y)]] = dy
    ready = deque([(root, root_grads)])
    not_ready: dict = {}
    while ready:
        op, dys = ready.pop()
        if op.requires_grad and any(g is not None for g in dys):
            op._in_engine = True
            try:
                dxs = op._do_backward(*dys)
            finally:
                op._in_engine = False
            if not retain_graph:
                _release_saved(op)
            if len(dxs) != len(op.src):
                raise SingaError(f"{type(op).__name__}.backward returned {len(dxs)} gradients "
                                 f"for {len(op.src)} inputs")
        else:
            dxs = (None,) * len(op.src)
        for (src_op, x_id, x, x_stores_grad), dx in zip(op.src, dxs):
            y_idx = src_op.y_id2idx[x_id]
            grads = not_ready.get(src_op)
            if grads is None:
                grads = not_ready[src_op] = [None] * len(src_op.y_id2idx)
            if x_stores_grad or not isinstance(src_op, Dummy):
                grads[y_idx] = _accumulate(grads[y_idx], dx)
            op_dep[src_op] -= 1
            slot = (id(src_op), y_idx)
            slot_dep[slot] -= 1
            if x_stores_grad and slot_dep[slot] == 0 and grads[y_idx] is not None:
                yield (x, Tensor._wrap(grads[y_idx], name=src_op.grad_name(y_idx)))
            if op_dep[src_op] == 0:
                del not_ready[src_op]
                if not isinstance(src_op, Dummy):
                    ready.append((src_op, grads))
        del op, dys, dxs


def gradients(y: Tensor, dy=None, retain_graph: bool = True) -> dict:
    """``{id(param): grad}`` for every parameter behind ``y``."""
    return {id(p): g for p, g in backward(y, dy, retain_graph)}


def axis_helper(y_shape, x_shape):
    """Axes along which x was broadcast to y (for reducing gradients)."""
    res = []
    j = len(x_shape) - 1
    for i in range(len(y_shape) - 1, -1, -1):
        if j < 0 or x_shape[j] != y_shape[i]:
            res.append(i)
        j -= 1
    return tuple(res[::-1])


def back_broadcast(y_shape, x_shape, dx: CTensor) -> CTensor:
    """Sum ``dx`` (shaped like the broadcast result) back to ``x_shape``."""
    y_shape, x_shape = tuple(y_shape), tuple(x_shape)
    if y_shape == x_shape:
        return dx
    nd = len(y_shape) - len(x_shape)
    axes = tuple(range(nd)) + tuple(nd + i for i, d in enumerate(x_shape)
                                    if d == 1 and y_shape[nd + i] != 1)
    if axes:
        dx = _math.sum(dx, axes)
    return _math.reshape(dx, x_shape) if dx.dims != x_shape else dx


def ctensor2numpy(x: CTensor):
    """Copy a CTensor's values to a numpy array of its shape and dtype."""
    return x.to_numpy()


def add_all(*xs):
    """Sum of tensors (SINGA's helper returned None; this returns the sum)."""
    out = xs[0]
    for x in xs[1:]:
        out = out + x
    return out
