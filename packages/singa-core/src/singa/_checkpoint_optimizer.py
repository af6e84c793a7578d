"""The attached optimizer's state inside a model checkpoint (``Model.save_states``).

Stored beside the model's states with state type :data:`OPTIMIZER_STATE_TYPE`: the step counter
as ``optimizer/step_counter`` and each per-parameter slot as ``optimizer/<slot>/<key>`` (keys as
``Optimizer.get_states`` gives them, see :mod:`singa._optstate`). Loading hands them to the
optimizer's ``set_states``, so a resumed run continues from the same step with the same
moments.
"""

from __future__ import annotations

import numpy as np

from . import tensor as tensor_mod
from .errors import CheckpointError

__all__ = ["OPTIMIZER_PREFIX", "OPTIMIZER_STATE_TYPE", "load_optimizer_states",
           "optimizer_states"]

#: the attached optimizer's state (SINGA's own loader skips types it does not know)
OPTIMIZER_STATE_TYPE = 2
OPTIMIZER_PREFIX = "optimizer/"


def _attached_optimizer(model):
    """The optimizer whose state a checkpoint holds: DistOpt's wrapped one (every rank holds
    the same state), or None."""
    optimizer = model.__dict__.get("optimizer")
    inner = getattr(optimizer, "opt", None)
    if inner is not None and hasattr(inner, "get_states") and hasattr(inner, "_slots"):
        optimizer = inner
    return optimizer if hasattr(optimizer, "get_states") else None


def optimizer_states(model) -> dict:
    """``{"optimizer/step_counter": Tensor, "optimizer/<slot>/<key>": Tensor}``."""
    optimizer = _attached_optimizer(model)
    if optimizer is None:
        return {}
    out = {}
    for slot, value in optimizer.get_states().items():
        if isinstance(value, dict):
            for key, t in value.items():
                out[f"{OPTIMIZER_PREFIX}{slot}/{key}"] = t
        else:  # the step counter: a float32 tensor keeps every count up to 2**24 exact
            out[OPTIMIZER_PREFIX + slot] = tensor_mod.from_numpy(
                np.array([value], np.float32))
    return out


def load_optimizer_states(model, fpath, arrays: dict):
    """Check the optimizer state ``arrays`` (name -> numpy array) of checkpoint ``fpath``
    against ``model``'s attached optimizer and return a function that restores them (through
    its ``set_states``); ``load_states`` checks everything before it changes anything."""
    optimizer = _attached_optimizer(model)
    if optimizer is None or not arrays:
        return lambda: None
    states: dict = {}
    for name, arr in arrays.items():
        if not name.startswith(OPTIMIZER_PREFIX):
            raise CheckpointError(f"{fpath}: optimizer state {name!r} does not start with "
                                  f"{OPTIMIZER_PREFIX!r}; the file was not written by "
                                  "save_states")
        slot, _, key = name[len(OPTIMIZER_PREFIX):].partition("/")
        if not key:
            states[slot] = float(arr.reshape(-1)[0]) if arr.size == 1 else arr
        else:
            states.setdefault(slot, {})[key] = arr
    unknown = sorted(set(states) - {"step_counter"} - set(optimizer._slots))
    if unknown:
        raise CheckpointError(
            f"{fpath} holds optimizer state {unknown} that {type(optimizer).__name__} does not "
            f"keep (it keeps {list(optimizer._slots) or 'none'}): the checkpoint was saved with "
            "another optimizer. Attach that optimizer before load_states, or load the weights "
            "only with load_states(path, load_optimizer=False)")
    return lambda: optimizer.set_states(states)
