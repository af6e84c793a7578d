"""Per-parameter optimizer state: owned by the parameter tensor, looked up by name.

An optimizer's state (SGD's ``moments``, Adam's ``m`` and ``v`` ...) belongs to one parameter
*tensor*: it is keyed by the tensor's identity, so two parameters never share a buffer even
when they carry the same name. Names are not unique: a layer that is not an attribute of a
Model names its tensors by attribute only (every ``Linear`` owns a ``W``), e.g. the layers of
SINGA's autograd examples or a residual branch built in a closure.

SINGA's API reads the state by name (``sgd.moments["conv1.W"]``, ``get_states()``), so each
slot is also a read-only mapping from a *key* to the state tensor. A parameter's key is its
name when no other parameter of the optimizer carries that name, else ``name#i``, ``i``
counting the same-named parameters in the order the optimizer first updated them (backward
order, the same on every run of the same model). A checkpoint written before states were
per tensor (plain names) still loads; a plain name that two parameters carry is ambiguous and
raises :class:`~singa.errors.OptimizerStateError`.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from .errors import OptimizerStateError, ShapeError

if TYPE_CHECKING:
    from .tensor import Tensor

__all__ = ["ParamStates", "SlotView"]


class _Record:
    """One parameter the optimizer updated: a weak reference to the tensor, the name it was
    last applied under, and its state tensor per slot."""

    __slots__ = ("ref", "name", "states", "by_plain_name")

    def __init__(self, param, name):
        self.ref = weakref.ref(param)
        self.name = name
        self.states: dict = {}
        # a state loaded under the plain name: a second parameter of that name makes it
        # ambiguous which of the two it was meant for
        self.by_plain_name = False


class ParamStates:
    """The parameters an optimizer holds state for, in the order it first saw them, plus the
    states loaded by key before their parameter was seen (adopted at its first update)."""

    def __init__(self, owner: str):
        self.owner = owner
        self._records: dict[int, _Record] = {}  # id(tensor) -> record, first-seen order
        self._pending: dict[str, dict] = {}  # slot -> {key: Tensor} not yet matched

    # ------------------------------------------------------------------ records
    def _live(self) -> list[_Record]:
        dead = [k for k, r in self._records.items() if r.ref() is None]
        for k in dead:
            del self._records[k]
        return list(self._records.values())

    def _same_name(self, name) -> list[_Record]:
        return [r for r in self._live() if r.name == name]

    def _keyed(self) -> list:
        """``(key, record)`` of every live parameter: its name, or ``name#i`` when several
        parameters carry the name (``i`` in first-seen order)."""
        live = self._live()
        count: dict = {}
        for r in live:
            count[r.name] = count.get(r.name, 0) + 1
        seen: dict = {}
        out = []
        for r in live:
            if count[r.name] == 1:
                out.append((r.name, r))
            else:
                i = seen[r.name] = seen.get(r.name, -1) + 1
                out.append((f"{r.name}#{i}", r))
        return out

    def record(self, param, name) -> _Record:
        """The record of ``param`` (created, and its pending states adopted, on first sight)."""
        rec = self._records.get(id(param))
        if rec is not None and rec.ref() is param:
            rec.name = name
            return rec
        rec = _Record(param, name)
        same = self._same_name(name)
        # (_same_name pruned the records of collected tensors, whose ids may be reused)
        self._records[id(param)] = rec
        if same:
            first = same[0]
            if first.by_plain_name:
                del self._records[id(param)]
                raise OptimizerStateError(self._ambiguous(name, [r.ref() for r in same]
                                                          + [param], loading=True))
            self._adopt(rec, f"{name}#{len(same)}")
        else:
            key = f"{name}#0" if any(f"{name}#0" in p for p in self._pending.values()) \
                else name
            self._adopt(rec, key)
        return rec

    def _adopt(self, rec: _Record, key: str) -> None:
        param = rec.ref()
        for slot, pending in self._pending.items():
            value = pending.pop(key, None)
            if value is None:
                continue
            if value.shape != param.shape:
                raise ShapeError(
                    f"{self.owner}: the loaded state {slot}[{key!r}] has shape {value.shape} "
                    f"but parameter {rec.name} has shape {param.shape}; the states were saved "
                    "for another model (or the parameters were updated in another order)")
            if value.device is not param.device:
                value.to_device(param.device)
            rec.states[slot] = value
            rec.by_plain_name = rec.by_plain_name or key == rec.name

    def _ambiguous(self, name, params, loading: bool) -> str:
        shapes = ", ".join(str(tuple(p.shape)) for p in params if p is not None)
        keys = ", ".join(f"{name}#{i}" for i in range(len(params)))
        what = (f"a state loaded under the plain name {name!r}" if loading
                else f"the name {name!r}")
        why = (" (a state saved under the plain name, as SINGA saved it, was one buffer "
               "shared by all of them and cannot be split)" if loading else "")
        return (f"{self.owner}: {what} is ambiguous: {len(params)} parameters carry that name "
                f"(shapes {shapes}), and each has its own state{why}. Give the parameters "
                "unique names (make their layers attributes of a Model or of a Layer, or set "
                "each tensor's name, e.g. conv.W.name = 'conv2.W'), look the "
                f"state up by tensor with opt.state_of(param), or use the keys {keys} that "
                "get_states() writes for them")

    # ------------------------------------------------------------------ per parameter
    def get(self, param, name, slot):
        """``param``'s state tensor in ``slot`` (None if it has none yet)."""
        return self.record(param, name).states.get(slot)

    def set(self, param: Tensor, name: str, slot: str, value: Tensor) -> None:
        """Make ``value`` ``param``'s state tensor in ``slot``.

        Parameters
        ----------
        param : Tensor
            The parameter (its record is created on first sight, see :meth:`record`).
        name : str
            The name the optimizer applies ``param`` under.
        slot : str
            The state's slot (SGD's ``"moments"``, Adam's ``"m"``, ...).
        value : Tensor
            The state tensor, kept as it is (not copied).
        """
        self.record(param, name).states[slot] = value

    def of(self, param) -> dict:
        """``{slot: Tensor}`` of ``param`` (empty if the optimizer has not updated it)."""
        rec = self._records.get(id(param))
        return dict(rec.states) if rec is not None and rec.ref() is param else {}

    # ------------------------------------------------------------------ by key
    def items(self, slot: str) -> list[tuple[str, Tensor]]:
        """``(key, state)`` of every state in ``slot``.

        Parameters
        ----------
        slot : str
            The slot.

        Returns
        -------
        list of (str, Tensor)
            The live parameters' states under their keys (see the module docstring), in the
            order the parameters were first seen, then the states loaded by key whose
            parameter has not been seen yet.
        """
        out = [(k, r.states[slot]) for k, r in self._keyed() if slot in r.states]
        out.extend(self._pending.get(slot, {}).items())
        return out

    def lookup(self, slot: str, key: str) -> Tensor:
        """The state in ``slot`` under ``key``.

        Parameters
        ----------
        slot : str
            The slot.
        key : str
            A parameter's key (its name, or ``name#i``), or the key of a loaded state whose
            parameter has not been seen yet.

        Returns
        -------
        Tensor
            The state tensor.

        Raises
        ------
        OptimizerStateError
            ``key`` is a plain name that several parameters carry.
        KeyError
            No state in ``slot`` has that key.
        """
        for k, r in self._keyed():
            if slot in r.states and k == key:
                return r.states[slot]
        same = self._same_name(key)
        if len(same) > 1:
            raise OptimizerStateError(self._ambiguous(key, [r.ref() for r in same],
                                                      loading=False))
        pending = self._pending.get(slot, {})
        if key in pending:
            return pending[key]
        raise KeyError(key)

    def load(self, slot, key, value, copy_into) -> None:
        """Load ``value`` as the state ``slot[key]``: into the matching parameter's state
        (``copy_into(current, value)``), or kept until a parameter with that key is seen."""
        for k, r in self._keyed():
            if k != key:
                continue
            cur = r.states.get(slot)
            if cur is None:
                param = r.ref()
                if value.shape != param.shape:
                    raise ShapeError(
                        f"{self.owner}.set_states: {slot}[{key!r}] has shape {value.shape} "
                        f"but parameter {r.name} has shape {param.shape}")
                r.states[slot] = value.clone()
                if value.device is not param.device:
                    r.states[slot].to_device(param.device)
            else:
                copy_into(cur, value)
            r.by_plain_name = r.by_plain_name or key == r.name
            return
        same = self._same_name(key)
        if len(same) > 1:
            raise OptimizerStateError(self._ambiguous(key, [r.ref() for r in same],
                                                      loading=True))
        self._pending.setdefault(slot, {})[key] = value.clone()


class SlotView(Mapping):
    """One optimizer slot (e.g. SGD's ``moments``) as a read-only mapping ``key -> Tensor``.

    Keys are parameter names (``name#i`` where several parameters share a name, see the module
    docstring); a plain name that several parameters carry raises
    :class:`~singa.errors.OptimizerStateError`. ``opt.state_of(param)`` looks a state up by
    tensor.
    """

    def __init__(self, states: ParamStates, slot: str):
        self._states = states
        self._slot = slot

    def __getitem__(self, key: str) -> Tensor:
        return self._states.lookup(self._slot, key)

    def __iter__(self) -> Iterator[str]:
        return iter([k for k, _ in self._states.items(self._slot)])

    def __len__(self) -> int:
        return len(self._states.items(self._slot))

    # values() and items() return lists, not Mapping's live views: they are snapshots built
    # from the records (code may index them), so the override's return type differs on purpose
    def values(self) -> list[Tensor]:  # type: ignore[override]
        """The slot's state tensors, in the order of :meth:`items`."""
        return [v for _, v in self._states.items(self._slot)]

    def items(self) -> list[tuple[str, Tensor]]:  # type: ignore[override]
        """``(key, state)`` of the slot's states (see :meth:`ParamStates.items`)."""
        return self._states.items(self._slot)

    def __repr__(self):
        return f"SlotView({self._slot!r}, {sorted(self)!r})"
