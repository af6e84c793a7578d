"""``singa.opt``: optimizers and learning-rate schedules.

Every hyper-parameter and the step counter live in device tensors that are updated by device
ops, so a replayed graph (``Model.compile(..., use_graph=True)``) sees schedules advance.
"""

from __future__ import annotations

import math
import numbers

from . import _math, autograd
from . import tensor as tensor_mod
from ._optstate import ParamStates, SlotView
from .errors import HyperparameterError, ShapeError
from .ops._fusion import run_chain as _run_chain
from .tensor import Tensor

__all__ = ["DecayScheduler", "Constant", "ExponentialDecay", "Optimizer", "SGD", "RMSProp",
           "AdaGrad", "Adam", "AdamW", "DistOpt"]


class DecayScheduler:
    """A value as a function of the step counter (a one-element float32 Tensor)."""

    def __init__(self, init_value):
        self.init_value = _number(init_value, "init_value", type(self).__name__)

    def __call__(self, step: Tensor) -> Tensor:
        raise NotImplementedError


class Constant(DecayScheduler):
    """Always ``init_value``."""

    def __call__(self, step: Tensor) -> Tensor:
        return Tensor((1,), step.device, tensor_mod.float32).set_value(self.init_value)


class ExponentialDecay(DecayScheduler):
    """init_value * decay_rate ** (step / decay_steps) (floor of the exponent if staircase)."""

    def __init__(self, init_value, decay_steps, decay_rate, staircase=False):
        super().__init__(init_value)
        self.decay_steps = _number(decay_steps, "decay_steps", "ExponentialDecay",
                                   (0.0, math.inf, False, False))
        self.decay_rate = _number(decay_rate, "decay_rate", "ExponentialDecay")
        self.staircase = bool(staircase)

    def __call__(self, step: Tensor) -> Tensor:
        e = _math.mul(step.data, 1.0 / self.decay_steps)
        if self.staircase:
            e = _math.floor(e)
        return Tensor._wrap(_math.mul(_math.rpow(e, self.decay_rate), self.init_value))


#: The valid range of each hyper-parameter, by name: (low, high, low included, high included).
#: PyTorch's checks (learning rate, momentum, weight decay and epsilon at least 0; Adam's betas
#: in [0, 1)) and the bounds past which the update rule stops being one: a dampening above 1
#: turns the gradient around, a rho outside [0, 1] makes RMSProp's running average negative.
#: Any value must be finite.
_RANGES = {
    "lr": (0.0, math.inf, True, False),
    "momentum": (0.0, math.inf, True, False),
    "dampening": (0.0, 1.0, True, True),
    "weight_decay": (0.0, math.inf, True, False),
    "beta_1": (0.0, 1.0, True, False),
    "beta_2": (0.0, 1.0, True, False),
    "rho": (0.0, 1.0, True, True),
    "epsilon": (0.0, math.inf, True, False),
}
_ANY = (-math.inf, math.inf, False, False)


def _range_text(lo, hi, lo_in, hi_in) -> str:
    def num(v):
        return "inf" if v == math.inf else "-inf" if v == -math.inf else f"{v:g}"

    return f"{'[' if lo_in else '('}{num(lo)}, {num(hi)}{']' if hi_in else ')'}"


def _number(value, name: str, owner: str, bounds=None) -> float:
    """``value`` as a float: a finite real number within ``bounds`` (default: ``_RANGES[name]``,
    else any finite number), else a HyperparameterError naming ``owner.name``, the value and
    the valid range."""
    lo, hi, lo_in, hi_in = bounds or _RANGES.get(name, _ANY)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise HyperparameterError(
            f"{owner}: {name} must be a number or a DecayScheduler, got "
            f"{type(value).__name__} {value!r}")
    v = float(value)
    inside = (v > lo or lo_in and v == lo) and (v < hi or hi_in and v == hi)
    if not math.isfinite(v) or not inside:
        valid = _range_text(lo, hi, lo_in, hi_in)
        raise HyperparameterError(
            f"{owner}: {name}={value!r} is outside its valid range {valid} (finite numbers "
            f"only); pass a value in {valid}")
    return v


def _schedule(value, what, owner="Optimizer"):
    """``value`` as a schedule: a DecayScheduler (its ``init_value``, the value at step 0,
    checked against ``what``'s range) or a number in range, as a :class:`Constant`."""
    if isinstance(value, DecayScheduler):
        init = getattr(value, "init_value", None)
        if isinstance(init, numbers.Real):
            _number(init, what, f"{owner} ({type(value).__name__} init_value)")
        return value
    return Constant(_number(value, what, owner))


class Optimizer:
    """Base optimizer: ``opt(loss)`` runs backward, applies every gradient, then ``step()``."""

    def __init__(self, lr, dtype=tensor_mod.float32):
        self._hyper = {}
        self.lr = lr
        self.dtype = dtype
        self.step_counter = Tensor((1,), dtype=tensor_mod.float32, requires_grad=False)
        self.step_counter.set_value(0.0)
        self._values = {}
        self._params = ParamStates(type(self).__name__)
        for slot in self._slots:
            setattr(self, slot, SlotView(self._params, slot))
        self._refresh()

    @property
    def lr(self) -> DecayScheduler:
        """The learning-rate schedule. Assigning a number or a DecayScheduler
        (``sgd.lr = opt.Constant(0.01)``) takes effect at the next update, in eager and graph
        mode alike: as in SINGA, which evaluates ``self.lr(step)`` every step."""
        return self._hyper["lr"]

    @lr.setter
    def lr(self, value) -> None:
        self.__dict__.setdefault("_hyper", {})["lr"] = _schedule(value, "lr",
                                                                 type(self).__name__)
        if "lr" in self.__dict__.get("_values", {}):
            self._refresh(only="lr")

    @property
    def lr_value(self) -> Tensor:
        return self._values["lr"]

    def _register(self, name, value):
        self._hyper[name] = _schedule(value, name, type(self).__name__)

    def _refresh(self, only: str | None = None):
        """(Re)compute every hyper-parameter tensor (or just ``only``, whose schedule was
        replaced) in place from the step counter: a recorded graph keeps reading them."""
        for name, sched in self._hyper.items():
            if only is not None and name != only:
                continue
            if only is None and type(sched) is Constant and name in self._values:
                continue  # constants never change; skip the per-step device work
            v = sched(self.step_counter)
            cur = self._values.get(name)
            if cur is None or cur.device is not v.device:
                self._values[name] = v
            else:
                cur.copy_data(v)

    def hyper(self, name) -> Tensor:
        """The device tensor holding hyper-parameter ``name`` for the current step."""
        return self._values[name]

    def device_check(self, *tensors):
        """Move the step counter and hyper-parameter tensors to the parameters' device."""
        dev = tensors[0].device
        if self.step_counter.device is dev:
            return
        with dev.record(None):
            self.step_counter.to_device(dev)
            for v in self._values.values():
                v.to_device(dev)

    def __call__(self, loss):
        self.call(loss)
        self.step()

    def call(self, loss):
        """Backpropagate ``loss`` and apply each gradient; the step is not advanced.

        Frees the autograd graph once the gradients are out; a parameter without a name is named
        after its ``id``. ``opt(loss)`` is ``opt.call(loss)`` followed by
        [`step`][singa.opt.Optimizer.step].

        Parameters
        ----------
        loss : Tensor
            The scalar loss of a forward pass run with ``autograd.training = True``.
        """
        self._derived = {}
        # the step's graph is done with once its gradients are out: free what it saved
        for p, g in autograd.backward(loss, retain_graph=False):
            if p.name is None:
                p.name = str(id(p))
            self.apply(p.name, p, g)

    def step(self):
        """Advance the step counter and the schedules (device ops: graph-replay safe)."""
        _math.iadd(self.step_counter.data, 1.0)
        self._refresh()

    def apply(self, param_name, param_value, param_grad):
        """Update one parameter in place from its gradient (each optimizer defines the rule).

        Parameters
        ----------
        param_name : str
            The parameter's name, the key of its optimizer state.
        param_value : Tensor
            The parameter, updated in place.
        param_grad : Tensor
            Its gradient, of the parameter's shape.
        """
        raise NotImplementedError

    def _derived_value(self, key, p, make):
        """A one-element tensor derived from the hyper-parameters (e.g. ``-lr``), computed once
        per step and dtype rather than once per parameter.

        ``key`` names the value in the cache; ``make(hyper)`` computes it, where
        ``hyper(name)`` is :meth:`_hyper_value` for ``p``. :meth:`call` (and DistOpt, per
        step) empties the cache."""
        cache = self.__dict__.setdefault("_derived", {})
        k = (key, p.dtype_code)
        v = cache.get(k)
        if v is None:
            v = cache[k] = make(lambda name: self._hyper_value(name, p))
        return v

    def update(self, param, grad):
        """Deprecated alias of ``apply(param.name, param, grad)``."""
        return self.apply(param.name, param, grad)

    def backward_and_update(self, loss):
        """Deprecated alias of ``__call__``."""
        return self(loss)

    def _state(self, slot: str, name, param: Tensor) -> Tensor:
        """``param``'s state in ``slot``, created as zeros with the graph disabled. The state
        belongs to the tensor: two parameters that carry the same ``name`` get two states."""
        t = self._params.get(param, name, slot)
        if t is None:
            dev = param.device
            with dev.record(None):
                t = Tensor(param.shape, dev, param.dtype, requires_grad=False).set_value(0.0)
            self._params.set(param, name, slot, t)
        return t

    def state_of(self, param: Tensor) -> dict:
        """``{slot: Tensor}``: the optimizer's state of the parameter tensor ``param`` (e.g.
        ``{"moments": buf}`` for momentum SGD), empty before its first update. Unlike the
        by-name slots (``sgd.moments[name]``) this never confuses two parameters that carry
        the same name."""
        return self._params.of(param)

    def _prepare(self, p: Tensor, g: Tensor):
        if p.dtype != self.dtype:
            raise TypeError(f"{type(self).__name__}: parameter {p.name} is "
                            f"{tensor_mod._dtype.name_of(p.dtype)} but the optimizer was "
                            f"built with dtype {tensor_mod._dtype.name_of(self.dtype)}")
        self.device_check(p)
        gd = g.data
        if gd.dtype_code != p.dtype:
            gd = _math.as_type(gd, p.dtype)
        return p.data, gd

    def _register_weight_decay(self, weight_decay) -> float:
        """Register the ``weight_decay`` schedule; returns ``wd_value``, its number (1.0 for a
        DecayScheduler), which the updates test for 0 to skip the decay."""
        self._register("weight_decay", weight_decay)
        return float(weight_decay) if not isinstance(weight_decay, DecayScheduler) else 1.0

    def _with_weight_decay(self, p, g):
        """``g + wd p``: the gradient with (coupled) weight decay; ``g`` itself without it."""
        if self.wd_value == 0:
            return g
        return _math.add(g, _math.mul(p, self._hyper_value("weight_decay", p)))

    def _scaled_step(self, p, g, acc, epsilon) -> None:
        """``p -= lr g / sqrt(acc + epsilon)`` in place: RMSProp's and AdaGrad's step, with
        ``acc`` their running sum of squared gradients."""
        step = _math.div(g, _math.sqrt(_math.add(acc, epsilon)))
        _math.axpy(_math.neg(self._hyper_value("lr", p)), step, p)

    def _hyper_value(self, name, p):
        """The current value of hyper-parameter ``name`` (``lr``, ``momentum``, ...) as a
        one-element CTensor of ``p``'s dtype."""
        v = self._values[name].data
        return v if v.dtype_code == p.dtype_code else _math.as_type(v, p.dtype_code)

    #: names of the per-parameter state slots; each is also an attribute, a read-only
    #: mapping from parameter name to state (``sgd.moments``), see :mod:`singa._optstate`
    _slots: tuple = ()

    def get_states(self) -> dict:
        """``{"step_counter": float, <slot>: {key: Tensor}}`` (SINGA's layout).

        A key is the parameter's name, or ``name#i`` where several parameters carry the name
        (``i`` in the order the optimizer first updated them). The slot dicts hold the
        optimizer's own tensors (not copies).
        """
        # the return type stays a plain dict (values typed Any): a union of value types would
        # make every caller narrow before indexing a slot
        states: dict[str, float | dict[str, Tensor]] = {
            "step_counter": float(tensor_mod.to_numpy(self.step_counter)[0])}
        for slot in self._slots:
            states[slot] = dict(self._params.items(slot))
        return states

    def set_states(self, states: dict) -> None:
        """Restore what :meth:`get_states` returned (values are copied into the existing state
        tensors, so a recorded graph keeps using them; a state of a parameter the optimizer
        has not updated yet is kept until its first update).

        Keys are parameter names (as every version wrote them) or ``name#i``; a plain name
        that several parameters carry raises :class:`~singa.errors.OptimizerStateError`.
        """
        if "step_counter" in states:
            v = states["step_counter"]
            v = float(tensor_mod.to_numpy(v).reshape(-1)[0]) if isinstance(v, Tensor) \
                else float(v)
            self.step_counter.set_value(v)
            self._refresh()
        for slot in self._slots:
            if slot not in states:
                continue
            for name, value in states[slot].items():
                if not isinstance(value, Tensor):
                    value = tensor_mod.from_numpy(value)
                self._params.load(slot, name, value, self._copy_state(slot, name))

    def _copy_state(self, slot, name):
        def copy_into(cur, value):
            if cur.shape != value.shape:
                raise ShapeError(f"{type(self).__name__}.set_states: {slot}[{name!r}] has "
                                 f"shape {value.shape}, the optimizer holds {cur.shape}")
            cur.copy_data(value)

        return copy_into


def _one_minus_lr_wd(hyper):
    """``1 - lr * weight_decay``, the factor of SGD's in-place weight decay."""
    return _math.rsub(_math.mul(hyper("lr"), hyper("weight_decay")), 1.0)


class SGD(Optimizer):
    """SGD with momentum, dampening, Nesterov and weight decay (PyTorch's rule).

    buf = momentum buf + (1 - dampening) g; g = g + momentum buf (Nesterov) or buf;
    p -= lr g. Weight decay adds wd p to g first. Note SINGA's positional order:
    ``SGD(lr, momentum, dampening, weight_decay, nesterov)``.
    """

    _slots = ("moments",)

    def __init__(self, lr=0.1, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 dtype=tensor_mod.float32):
        super().__init__(lr, dtype)
        self._register("momentum", momentum)
        self._register("dampening", dampening)
        self.wd_value = self._register_weight_decay(weight_decay)
        self.mom_value = float(momentum) if not isinstance(momentum, DecayScheduler) else 1.0
        if nesterov and (self.mom_value <= 0 or
                         not isinstance(dampening, DecayScheduler) and float(dampening) != 0):
            raise HyperparameterError(
                f"SGD: Nesterov momentum requires momentum > 0 and dampening = 0, got "
                f"momentum={momentum!r}, dampening={dampening!r}")
        self.nesterov = bool(nesterov)
        self._refresh()

    def apply(self, param_name, param_value, param_grad):
        """Update one parameter in place from its gradient.

        With ``g = grad + wd p``, ``buf = momentum buf + (1 - dampening) g``, then ``p -= lr buf``
        (or ``p -= lr (g + momentum buf)`` with Nesterov); without momentum ``p -= lr g``.

        Parameters
        ----------
        param_name : str
            The parameter's name, the key of its optimizer state (e.g. ``moments``).
        param_value : Tensor
            The parameter, updated in place.
        param_grad : Tensor
            Its gradient, of the parameter's shape.
        """
        # Weight decay and momentum are folded into in-place updates (buf += (1-damp) wd p,
        # p *= 1 - lr wd) so that no parameter-sized temporary is created; the updates of one
        # parameter run as one pass over its elements where the device compiles them
        # (ops.run_chain), bitwise the same.
        p, g = self._prepare(param_value, param_grad)
        wd = self.wd_value != 0
        neg_lr = self._derived_value("-lr", p, lambda h: _math.neg(h("lr")))
        if self.mom_value == 0:
            calls = [("Mul", (p, self._derived_value("1-lr*wd", p, _one_minus_lr_wd)), p)] \
                if wd else []
            calls.append(("Axpy", (neg_lr, g, p), p))
            _run_chain(calls)
            return
        buf = self._state("moments", param_name, param_value).data
        keep = self._derived_value("1-damp", p, lambda h: _math.rsub(h("dampening"), 1.0))
        calls = [("Mul", (buf, self._hyper_value("momentum", p)), buf),
                 ("Axpy", (keep, g, buf), buf)]
        if wd:
            keep_wd = self._derived_value(
                "(1-damp)*wd", p,
                lambda h: _math.mul(_math.rsub(h("dampening"), 1.0), h("weight_decay")))
            calls.append(("Axpy", (keep_wd, p, buf), buf))
        if not self.nesterov:
            calls.append(("Axpy", (neg_lr, buf, p), p))
            _run_chain(calls)
            return
        # p -= lr (g + wd p + momentum buf)
        if wd:
            calls.append(("Mul", (p, self._derived_value("1-lr*wd", p, _one_minus_lr_wd)), p))
        neg_lr_mom = self._derived_value(
            "-lr*mom", p, lambda h: _math.neg(_math.mul(h("lr"), h("momentum"))))
        calls += [("Axpy", (neg_lr, g, p), p), ("Axpy", (neg_lr_mom, buf, p), p)]
        _run_chain(calls)



class RMSProp(Optimizer):
    """r = rho r + (1 - rho) g^2; p -= lr g / sqrt(r + eps)."""

    _slots = ("running_average",)

    def __init__(self, lr=0.1, rho=0.9, epsilon=1e-8, weight_decay=0,
                 dtype=tensor_mod.float32):
        super().__init__(lr, dtype)
        self._register("rho", rho)
        self.wd_value = self._register_weight_decay(weight_decay)
        self.epsilon = _number(epsilon, "epsilon", type(self).__name__)
        self._refresh()

    def apply(self, param_name, param_value, param_grad):
        """Update one parameter in place from its gradient.

        With ``g = grad + wd p``, ``r = rho r + (1 - rho) g^2``, ``p -= lr g / sqrt(r + eps)``.

        Parameters
        ----------
        param_name : str
            The parameter's name, the key of its optimizer state (e.g. ``running_average``).
        param_value : Tensor
            The parameter, updated in place.
        param_grad : Tensor
            Its gradient, of the parameter's shape.
        """
        p, g = self._prepare(param_value, param_grad)
        g = self._with_weight_decay(p, g)
        r = self._state("running_average", param_name, param_value).data
        rho = self._hyper_value("rho", p)
        _math.imul(r, rho)
        _math.axpy(_math.rsub(rho, 1.0), _math.square(g), r)
        self._scaled_step(p, g, r, self.epsilon)



class AdaGrad(Optimizer):
    """h += g^2; p -= lr g / sqrt(h + eps)."""

    _slots = ("history",)

    def __init__(self, lr=0.1, epsilon=1e-8, weight_decay=0, dtype=tensor_mod.float32):
        super().__init__(lr, dtype)
        self.wd_value = self._register_weight_decay(weight_decay)
        self.epsilon = _number(epsilon, "epsilon", type(self).__name__)
        self._refresh()

    def apply(self, param_name, param_value, param_grad):
        """Update one parameter in place from its gradient.

        With ``g = grad + wd p``, ``h += g^2``, ``p -= lr g / sqrt(h + eps)``.

        Parameters
        ----------
        param_name : str
            The parameter's name, the key of its optimizer state (e.g. ``history``).
        param_value : Tensor
            The parameter, updated in place.
        param_grad : Tensor
            Its gradient, of the parameter's shape.
        """
        p, g = self._prepare(param_value, param_grad)
        g = self._with_weight_decay(p, g)
        h = self._state("history", param_name, param_value).data
        _math.iadd(h, _math.square(g))
        self._scaled_step(p, g, h, self.epsilon)



class Adam(Optimizer):
    """m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; t = step + 1;
    p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)."""

    decoupled = False
    _slots = ("m", "v")

    def __init__(self, lr=0.1, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0,
                 dtype=tensor_mod.float32):
        super().__init__(lr, dtype)
        self._register("beta_1", beta_1)
        self._register("beta_2", beta_2)
        self.wd_value = self._register_weight_decay(weight_decay)
        self.epsilon = _number(epsilon, "epsilon", type(self).__name__)
        self._refresh()

    def apply(self, param_name, param_value, param_grad):
        """Update one parameter in place from its gradient.

        With ``g = grad + wd p`` (AdamW: ``p -= lr wd p`` instead), ``m = b1 m + (1 - b1) g``, ``v =
        b2 v + (1 - b2) g^2``, ``t = step + 1``, ``p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t))
        + eps)``.

        Parameters
        ----------
        param_name : str
            The parameter's name, the key of its optimizer state (e.g. ``m``).
        param_value : Tensor
            The parameter, updated in place.
        param_grad : Tensor
            Its gradient, of the parameter's shape.
        """
        p, g = self._prepare(param_value, param_grad)
        lr = self._hyper_value("lr", p)
        if self.decoupled and self.wd_value != 0:
            wd = self._hyper_value("weight_decay", p)
            _math.axpy(_math.neg(_math.mul(lr, wd)), p, p)
        else:
            g = self._with_weight_decay(p, g)
        b1, b2 = self._hyper_value("beta_1", p), self._hyper_value("beta_2", p)
        m = self._state("m", param_name, param_value).data
        v = self._state("v", param_name, param_value).data
        _math.imul(m, b1)
        _math.axpy(_math.rsub(b1, 1.0), g, m)
        _math.imul(v, b2)
        _math.axpy(_math.rsub(b2, 1.0), _math.square(g), v)
        t = _math.add(self.step_counter.data if self.step_counter.dtype == p.dtype_code else
                  _math.as_type(self.step_counter.data, p.dtype_code), 1.0)
        bc1 = _math.rsub(_math.pow(b1, t), 1.0)
        bc2 = _math.rsub(_math.pow(b2, t), 1.0)
        mhat = _math.div(m, bc1)
        denom = _math.add(_math.sqrt(_math.div(v, bc2)), self.epsilon)
        _math.axpy(_math.neg(lr), _math.div(mhat, denom), p)



class AdamW(Adam):
    """Adam with decoupled weight decay: p -= lr wd p before the Adam step."""

    decoupled = True

    def __init__(self, lr=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0.01,
                 dtype=tensor_mod.float32):
        super().__init__(lr, beta_1, beta_2, epsilon, weight_decay, dtype)


# DistOpt is written in core against the singa.dist.Communicator interface; the MPI and NCCL
# communicators come from the singa-dist plugin (pip install ".[dist]" in the singa checkout).
from . import _distopt  # noqa: E402


class DistOpt(_distopt.DistOpt):
    """Synchronous data-parallel training with optimizer ``opt`` (SINGA's ``DistOpt``).

    Gradients are summed over all ranks in buckets through a
    [`Communicator`][singa.dist.Communicator] and divided by the world size before ``opt`` applies
    them.

    Parameters
    ----------
    opt : Optimizer, optional
        The local optimizer; ``SGD()`` if None.
    *args : Any
        The keyword arguments below, positionally in this order (SINGA's).
    **kwargs : Any
        ``nccl_id``, ``local_rank``, ``world_size``, ``buffSize``, ``communicator``,
        ``overlap``. ``nccl_id=None`` (MPI mode): the communicator named by ``communicator`` or
        ``SINGA_COMMUNICATOR`` (default ``"mpi"``), ranks from the launcher. Otherwise (one
        process per GPU): the ``"nccl"`` communicator with this NCCL id holder, GPU
        ``local_rank`` and ``world_size`` ranks. ``buffSize`` (default 4194304): elements of
        the fused all-reduce buffer. ``communicator``: a communicator or a communicator name
        (overrides the above). ``overlap`` (default True): start each bucket's all-reduce while
        backward is still running (eager mode).
    """
    __doc__ = _distopt.DistOpt.__doc__

    def __init__(self, opt=None, *args, **kwargs):
        super().__init__(SGD() if opt is None else opt, *args, **kwargs)
