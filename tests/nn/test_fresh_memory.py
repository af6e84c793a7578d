"""Never-written tensors read as zeros (SINGA's CPU zero-fills new memory), also when an op
reads and writes them (in place) or writes only part of them.

The pool hands out freed buffers (LIFO per size class), so each test first frees a buffer full
of 7s of the same size: a missing zero-fill then shows up as 7s.
"""

from __future__ import annotations

import numpy as np
import pytest
from singa import tensor
from singa._ctensor import CTensor
from singa.device import get_default_device
from singa.ops import OPS, run
from singa.tensor import Tensor


def _dirty_pool(shape, n=1):
    junk = [Tensor(shape).set_value(7.0) for _ in range(n)]
    for t in junk:
        t.to_numpy()
    del junk, t


@pytest.mark.parametrize("op", ["iadd", "isub", "imul", "idiv"])
def test_inplace_ops_on_a_fresh_tensor_start_from_zeros(op):
    _dirty_pool((3,))
    t = Tensor((3,))
    {"iadd": t.__iadd__, "isub": t.__isub__, "imul": t.__imul__, "idiv": t.__itruediv__}[op](
        2.0)
    want = {"iadd": 2.0, "isub": -2.0, "imul": 0.0, "idiv": 0.0}[op]
    np.testing.assert_array_equal(t.to_numpy(), want)


def test_axpy_and_mult_into_a_fresh_tensor():
    _dirty_pool((2, 2))
    y = Tensor((2, 2))
    tensor.axpy(3.0, tensor.ones((2, 2)), y)
    np.testing.assert_array_equal(y.to_numpy(), 3.0)
    _dirty_pool((2, 2))
    c = Tensor((2, 2))
    tensor.mult(tensor.ones((2, 3)), tensor.ones((3, 2)), c, 1.0, 1.0)
    np.testing.assert_array_equal(c.to_numpy(), 3.0)


def test_partial_writes_into_a_fresh_tensor():
    _dirty_pool((12,))
    d = Tensor((12,))
    d.copy_from_numpy(np.array([1.0, 2.0], np.float32), offset=4)
    np.testing.assert_array_equal(d.to_numpy(), [0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0])
    _dirty_pool((3, 4))
    d = Tensor((3, 4))
    tensor.copy_data_to_from(d, tensor.from_numpy(np.arange(10, dtype=np.float32)), 5, 6, 2)
    np.testing.assert_array_equal(d.to_numpy().reshape(-1), [0] * 6 + [2, 3, 4, 5, 6, 0])


def test_device_exec_zero_fills_a_fresh_block_that_an_op_reads_and_writes():
    _dirty_pool((3,))
    ct = CTensor((3,))
    run(OPS["AddScalar"], [ct], {"value": 1.0}, [ct])
    np.testing.assert_array_equal(ct.to_numpy(), 1.0)


def test_graph_replay_of_a_partial_write_into_a_fresh_tensor():
    dev = get_default_device()
    src = tensor.from_numpy(np.arange(1, 9, dtype=np.float32))
    _dirty_pool((8,), n=16)  # stale values for the graph's arena to pick up
    dev.EnableGraph(True)
    try:
        dst = Tensor((8,))
        tensor.copy_data_to_from(dst, src, 2, dst_offset=3)
        out = dst * 1.0
    finally:
        dev.EnableGraph(False)
    for _ in range(2):
        dev.RunGraph()
        np.testing.assert_array_equal(out.to_numpy(), [0, 0, 0, 1, 2, 0, 0, 0])
