"""The OpenCL kernel table: one dict per module, merged per device."""

from __future__ import annotations

from . import conv, elementwise, linalg, movement, random_fill, reduce


def kernel_table(device) -> dict:
    """``{op_name: kernel}`` for an OpenCL device (kernels bind to the device's queue)."""
    table: dict = {}
    for mod in (elementwise, reduce, linalg, movement, random_fill, conv):
        table.update(mod.kernels(device))
    return table
