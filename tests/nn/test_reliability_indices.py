"""Issue 15 items 1 and 6: out-of-range indices and class ids raise IndexOutOfRangeError on
every backend (run with SINGA_DEVICE=opencl for OpenCL), never a segfault, a raw IndexError
from numpy, a silent read of leftover memory, or a wrapped -1."""

from __future__ import annotations

import numpy as np
import pytest
from singa import autograd, layer, tensor
from singa.errors import IndexOutOfRangeError


def _ids(dev, *rows):
    return tensor.from_numpy(np.array(rows, np.int32), dev)


@pytest.mark.parametrize("bad", [100_000_000, 4, -5])
def test_embedding_out_of_range_ids(cpu, bad):
    emb = layer.Embedding(4, 2)
    with pytest.raises(IndexOutOfRangeError, match=f"Take: index {bad} is out of range"):
        emb(_ids(cpu, [bad, 1]))


def test_embedding_in_range_still_works(cpu):
    emb = layer.Embedding(4, 2)
    y = emb(_ids(cpu, [3, 1]))
    w = tensor.to_numpy(emb.W)
    np.testing.assert_array_equal(tensor.to_numpy(y), w[[[3, 1]]])


@pytest.mark.parametrize("bad", [100_000_000, 4])
def test_gather_out_of_range(cpu, bad):
    x = tensor.from_numpy(np.ones((4, 2), np.float32), cpu)
    with pytest.raises(IndexOutOfRangeError, match="Take"):
        autograd.gather(x, 0, _ids(cpu, [bad, 1]))


@pytest.mark.parametrize("label", [5, 2, 10**9, -1])
def test_softmax_cross_entropy_class_ids(cpu, label):
    x = tensor.from_numpy(np.ones((3, 2), np.float32), cpu)
    t = tensor.from_numpy(np.array([0, 1, label], np.int32), cpu)
    with pytest.raises(IndexOutOfRangeError, match=f"class id {label} "):
        autograd.softmax_cross_entropy(x, t)


def test_softmax_cross_entropy_valid_ids_match_numpy(cpu):
    xs = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 3.0]], np.float32)
    ts = np.array([1, 0, 1], np.int32)
    loss = autograd.softmax_cross_entropy(tensor.from_numpy(xs, cpu),
                                          tensor.from_numpy(ts, cpu))
    z = xs - xs.max(1, keepdims=True)
    want = -(z[np.arange(3), ts] - np.log(np.exp(z).sum(1))).mean()
    np.testing.assert_allclose(tensor.to_numpy(loss).ravel()[0], want, rtol=1e-5)
