"""A backend kernel that raises or exits while it runs (eager, graph replay, profiled replay)
reaches the user as an error of singa.errors naming the op, the device and the backend's
package, with the original exception chained; singa errors pass unchanged; the process
survives a kernel's sys.exit. Oracle: the exception types, messages and causes, and that the
same device runs the op correctly again once the kernel is restored."""

from __future__ import annotations

import numpy as np
import pytest
from singa import tensor
from singa.device import get_device
from singa.errors import (
    IndexOutOfRangeError,
    KernelError,
    OutOfMemoryError,
    PluginError,
)


@pytest.fixture
def cpu():
    dev = get_device("cpu")
    before = dev.verbosity(), dev.skip_iteration()
    yield dev
    dev.EnableGraph(False)
    dev.ResetGraph()
    dev.SetVerbosity(before[0])
    dev.SetSkipIteration(before[1])


def _faulty(monkeypatch, dev, raise_):
    fn, contig, dtypes = dev.kernels["Abs"]

    def bad(ins, outs, attrs):
        raise_()

    monkeypatch.setitem(dev.kernels, "Abs", (bad, contig, dtypes))


def _x(dev):
    return tensor.from_numpy(np.array([-1.0, 2.0, -3.0], np.float32), dev)


def _boom():
    raise ValueError("operands could not be broadcast together with shapes (3,) (4,)")


def test_an_eager_kernel_error_names_the_op_device_and_package(cpu, monkeypatch):
    _faulty(monkeypatch, cpu, _boom)
    with pytest.raises(KernelError) as info:
        tensor.abs(_x(cpu))
    msg = str(info.value)
    assert "Abs on cpu" in msg and "singa_cpu" in msg and "ValueError" in msg
    assert "could not be broadcast" in msg
    assert isinstance(info.value.__cause__, ValueError)
    monkeypatch.undo()
    np.testing.assert_array_equal(tensor.to_numpy(tensor.abs(_x(cpu))), [1, 2, 3])


def test_a_kernel_calling_sys_exit_does_not_end_the_process(cpu, monkeypatch):
    def leave():
        raise SystemExit(3)

    _faulty(monkeypatch, cpu, leave)
    with pytest.raises(PluginError, match=r"sys\.exit\(3\)"):
        tensor.abs(_x(cpu))


def test_a_kernel_out_of_memory_is_singas_out_of_memory_error(cpu, monkeypatch):
    def oom():
        raise MemoryError("Unable to allocate 8.00 TiB")

    _faulty(monkeypatch, cpu, oom)
    with pytest.raises(OutOfMemoryError, match="Abs on cpu.*8.00 TiB"):
        tensor.abs(_x(cpu))


def test_singa_errors_from_a_kernel_pass_unchanged(cpu, monkeypatch):
    err = IndexOutOfRangeError("Abs: index 7 is out of range for an axis of size 3")

    def raise_err():
        raise err

    _faulty(monkeypatch, cpu, raise_err)
    with pytest.raises(IndexOutOfRangeError) as info:
        tensor.abs(_x(cpu))
    assert info.value is err


def test_other_exceptions_keep_propagating(cpu, monkeypatch):
    def interrupt():
        raise KeyboardInterrupt

    _faulty(monkeypatch, cpu, interrupt)
    with pytest.raises(KeyboardInterrupt):
        tensor.abs(_x(cpu))


@pytest.mark.parametrize("profiled", [False, True])
def test_a_graph_replay_names_the_failing_node(cpu, monkeypatch, profiled):
    x = _x(cpu)
    _faulty(monkeypatch, cpu, _boom)  # recorded into the graph, run at replay
    if profiled:
        cpu.SetVerbosity(2)
        cpu.SetSkipIteration(0)
    cpu.EnableGraph(True)
    y = tensor.abs(x * 2.0)
    cpu.EnableGraph(False)
    with pytest.raises(KernelError) as info:
        cpu.RunGraph()
    assert "Abs on cpu" in str(info.value) and "singa_cpu" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)
    del y
