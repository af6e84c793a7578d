"""The CPU kernel table: one dict per module, merged per device."""

from __future__ import annotations

from . import conv, elementwise, index, linalg, loss, movement, norm, pool, random_fill, reduce


def kernel_table(device) -> dict:
    """``{op_name: kernel}`` for a CppCPU device (kernels that need the device bind to it)."""
    table: dict = {}
    for mod in (elementwise, reduce, linalg, movement, pool, norm, loss, index):
        table.update(mod.KERNELS)
    table.update(random_fill.kernels(device))
    table.update(conv.kernels(device))
    return table
