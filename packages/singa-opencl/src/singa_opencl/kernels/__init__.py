"""The OpenCL kernel table: one dict per module, merged per device."""

from __future__ import annotations

from . import (
    batchnorm,
    conv,
    elementwise,
    indexing,
    linalg,
    loss,
    movement,
    pool,
    random_fill,
    reduce,
)


def kernel_table(device) -> dict:
    """``{op_name: kernel}`` for an OpenCL device (kernels bind to the device's queue)."""
    table: dict = {}
    for mod in (elementwise, reduce, linalg, movement, random_fill, conv, pool, batchnorm,
                loss, indexing):
        table.update(mod.kernels(device))
    return table
