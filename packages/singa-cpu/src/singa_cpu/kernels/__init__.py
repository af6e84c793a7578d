"""The CPU kernel table: one dict per module, merged per device."""

from __future__ import annotations

from singa.backend import GraphStage, register_stage

from . import (
    conv,
    elementwise,
    index,
    linalg,
    loss,
    movement,
    norm,
    pool,
    random_fill,
    recurrent,
    reduce,
)
from ._threads import single_threaded_blas


def kernel_table(device) -> dict:
    """``{op_name: kernel}`` for a CppCPU device (kernels that need the device bind to it)."""
    table: dict = {}
    for mod in (elementwise, reduce, linalg, movement, pool, norm, loss, index, recurrent):
        table.update(mod.KERNELS)
    table.update(random_fill.kernels(device))
    table.update(conv.kernels(device))
    return table


def _blas_once(plan, replay, profiled):
    """Around a CPU graph's replay: numpy's BLAS single-threaded once for the whole replay,
    so that the kernels inside (each of which enters it too) do not set and restore OpenBLAS's
    thread count each (2 ctypes calls and a lock per kernel: ~1.5 us of a batch-1 CNN's
    ~10 kernels)."""
    def run():
        with single_threaded_blas():
            replay()

    return run


def _register_stages() -> None:
    from ..device import CppCPU

    register_stage(GraphStage("cpu.single_threaded_blas", "around_replay", _blas_once,
                              devices=(CppCPU,),
                              doc="numpy's BLAS on one thread for the whole replay"),
                   replace=True)


_register_stages()
