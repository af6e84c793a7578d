"""Issue 15 items 1 and 6: out-of-range indices and class ids raise IndexOutOfRangeError on
every backend (run with SINGA_DEVICE=opencl for OpenCL), never a segfault, a raw IndexError
from numpy, a silent read of leftover memory, or a wrapped -1."""

from __future__ import annotations

import numpy as np
import pytest
from singa import autograd, layer, model, tensor
from singa.errors import DtypeMismatchError, IndexOutOfRangeError


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
    with pytest.raises(IndexOutOfRangeError, match="Gather|Take"):
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


@pytest.mark.parametrize("label", [2, 10**9, -1])
def test_cross_entropy_class_ids(cpu, label):
    # a one-hot of a bad id is a row of zeros: the loss would silently skip the sample
    p = tensor.from_numpy(np.full((2, 2), 0.5, np.float32), cpu)
    with pytest.raises(IndexOutOfRangeError, match=f"class id {label} is out of range"):
        autograd.cross_entropy(p, _ids(cpu, label, 0))


def test_cross_entropy_ids_match_numpy_and_its_gradient(cpu):
    autograd.training = True
    ps = np.array([[0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], np.float32)
    ids = np.array([1, 0, 0], np.int32)
    p = tensor.from_numpy(ps, cpu)
    p.requires_grad = p.stores_grad = True
    loss = autograd.cross_entropy(p, tensor.from_numpy(ids, cpu))
    want = -np.log(ps[np.arange(3), ids]).mean()
    np.testing.assert_allclose(tensor.to_numpy(loss), [want], rtol=1e-6)
    (_, dp), = [(q, g) for q, g in autograd.backward(loss) if q is p]
    dense = np.eye(2, dtype=np.float32)[ids]
    np.testing.assert_allclose(tensor.to_numpy(dp), -dense / ps / 3, rtol=1e-6)


@pytest.mark.parametrize("fn", [autograd.softmax_cross_entropy, autograd.cross_entropy,
                                autograd.mse_loss])
def test_losses_refuse_an_empty_batch(cpu, fn):
    from singa.errors import ShapeError

    x = tensor.from_numpy(np.zeros((0, 3), np.float32), cpu)
    t = tensor.from_numpy(np.zeros((0, 3), np.float32), cpu)
    with pytest.raises(ShapeError, match="empty"):
        fn(x, t)


# ---------------------------------------------------------------- float ids (issue 29)
class _Lookup(model.Model):
    """y = W[ids] through autograd.embedding (the path singa-onnx's Gather takes)."""

    def __init__(self, w):
        super().__init__()
        self.w = w

    def forward(self, ids):
        return autograd.embedding(ids, self.w)


_W = np.arange(8, dtype=np.float32).reshape(4, 2)


@pytest.mark.parametrize("ids", [[[1.9, 0.0]], [[1.0, 0.0]], [[np.nan, 2.0]]])
def test_embedding_refuses_float_ids(cpu, ids):
    """As PyTorch: float ids are refused by dtype, whole or not (1.9 used to become 1)."""
    w = tensor.from_numpy(_W, cpu)
    x = tensor.from_numpy(np.array(ids, np.float32), cpu)
    with pytest.raises(DtypeMismatchError, match="Embedding: ids must be an integer tensor, "
                                                 "got float32.*int32"):
        autograd.embedding(x, w)


@pytest.mark.parametrize("use_graph", [False, True])
def test_embedding_float_ids_refused_in_graph_mode_too(cpu, use_graph):
    m = _Lookup(tensor.from_numpy(_W, cpu))
    with pytest.raises(DtypeMismatchError, match="Embedding: ids must be an integer tensor"):
        m.compile([tensor.from_numpy(np.array([[1.5, 0.0]], np.float32), cpu)],
                  is_train=False, use_graph=use_graph)


@pytest.mark.parametrize("use_graph", [False, True])
def test_embedding_int_ids_match_numpy_in_both_modes(cpu, use_graph):
    ids = np.array([[3, 0], [1, 1]], np.int32)
    m = _Lookup(tensor.from_numpy(_W, cpu))
    x = tensor.from_numpy(ids, cpu)
    m.compile([x], is_train=False, use_graph=use_graph)
    for _ in range(2):  # the recorded graph replays
        np.testing.assert_array_equal(tensor.to_numpy(m(x)), _W[ids])


@pytest.mark.parametrize("bad", [4, -5, 2**31 - 1])
def test_embedding_function_out_of_range_ids(cpu, bad):
    w = tensor.from_numpy(_W, cpu)
    with pytest.raises(IndexOutOfRangeError, match=f"index {bad} is out of range"):
        autograd.embedding(_ids(cpu, [bad, 1]), w)
