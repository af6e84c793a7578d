"""The shared kernel table: every array-module kernel, bound to one array module."""

from __future__ import annotations

from . import (
    conv,
    elementwise,
    index,
    linalg,
    loss,
    movement,
    norm,
    random,
    recurrent,
    reduce,
)
from ._module import ArrayModule

#: The modules whose kernels need nothing but the array module.
MODULES = (elementwise, reduce, movement, index, linalg, norm, loss, conv, recurrent)


def shared_kernels(am: ArrayModule, rng_state_of) -> dict:
    """``{op_name: kernel}`` of every shared kernel on ``am``; ``rng_state_of()`` gives the
    device's :class:`~singa_cuda.xp.random.PhiloxState` for the random ops."""
    table: dict = {}
    for mod in MODULES:
        table.update(mod.kernels(am))
    table.update(random.kernels(am, rng_state_of))
    return table
