"""The autograd ops added for the importer (autograd/_onnx_extra.py), forward and gradient,
against PyTorch (a CPU-wheel test dependency of the onnx session)."""

from __future__ import annotations

import numpy as np
import pytest
from singa import autograd, tensor

torch = pytest.importorskip("torch")


def _leaf(a):
    t = tensor.from_numpy(a)
    t.requires_grad = True
    t.stores_grad = True
    return t


@pytest.fixture(autouse=True)
def _training():
    autograd.training = True
    yield
    autograd.training = False


def _grads(y, dy, *leaves):
    g = autograd.gradients(y, tensor.from_numpy(dy))
    return [tensor.to_numpy(g[id(t)]) for t in leaves]


@pytest.mark.parametrize("stride,pads,dil,group", [((1, 1), (0, 0, 0, 0), (1, 1), 1),
                                                   ((2, 2), (1, 1, 1, 1), (1, 1), 1),
                                                   ((2, 1), (0, 1, 1, 2), (2, 1), 2)])
def test_conv_transpose2d(rng, stride, pads, dil, group):
    x = rng.standard_normal((2, 4, 5, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    b = rng.standard_normal(3 * group).astype(np.float32)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    # torch pads symmetrically: give it the begin pads and crop the end difference
    ref = torch.nn.functional.conv_transpose2d(tx, tw, tb, stride, (pads[0], pads[2]),
                                               groups=group, dilation=dil)
    ho = ref.shape[2] - (pads[1] - pads[0])
    wo = ref.shape[3] - (pads[3] - pads[2])
    ref = ref[:, :, :ho, :wo]
    sx, sw, sb = _leaf(x), _leaf(w), _leaf(b)
    y = autograd.conv_transpose2d(sx, sw, sb, (2, 3 * group, ho, wo), stride, pads, dil, group)
    np.testing.assert_allclose(tensor.to_numpy(y), ref.detach().numpy(), atol=1e-4)
    dy = rng.standard_normal(ref.shape).astype(np.float32)
    ref.backward(torch.tensor(dy))
    gx, gw, gb = _grads(y, dy, sx, sw, sb)
    np.testing.assert_allclose(gx, tx.grad.numpy(), atol=1e-4)
    np.testing.assert_allclose(gw, tw.grad.numpy(), atol=1e-4)
    np.testing.assert_allclose(gb, tb.grad.numpy(), atol=1e-4)


@pytest.mark.parametrize("fn,ref", [(autograd.reduce_max, torch.amax),
                                    (autograd.reduce_min, torch.amin)])
def test_reduce_extreme_with_ties(rng, fn, ref):
    x = rng.integers(0, 3, (3, 4, 5)).astype(np.float32)  # many ties
    tx = torch.tensor(x, requires_grad=True)
    r = ref(tx, dim=(1, 2), keepdim=False)
    sx = _leaf(x)
    y = fn(sx, [1, 2], 0)
    np.testing.assert_allclose(tensor.to_numpy(y), r.detach().numpy())
    dy = rng.standard_normal(r.shape).astype(np.float32)
    r.backward(torch.tensor(dy))
    np.testing.assert_allclose(_grads(y, dy, sx)[0], tx.grad.numpy(), atol=1e-6)


def test_argmax(rng):
    x = rng.standard_normal((3, 7)).astype(np.float32)
    y = autograd.argmax(tensor.from_numpy(x), 1, 0)
    np.testing.assert_array_equal(tensor.to_numpy(y), x.argmax(1))


@pytest.mark.parametrize("reps", [(1, 2, 1, 3, 1), (2, 1, 1, 1, 2), (1, 1, 1, 1, 1)])
def test_tile_rank5_handler(rng, reps):
    """The Tile handler tiles ranks over 3 one axis at a time (backends cap strided views);
    forward against numpy, gradient against PyTorch's repeat."""
    from singa import device
    from singa_onnx.handlers import HANDLERS, Context

    x = rng.standard_normal((2, 3, 1, 2, 2)).astype(np.float32)
    t = _leaf(x)
    ctx = Context(device.get_default_device(), 17, "tile", "Tile")
    y = HANDLERS["Tile"].fn(ctx, {}, t, np.array(reps, np.int64))
    np.testing.assert_array_equal(tensor.to_numpy(y), np.tile(x, reps))
    dy = rng.standard_normal(np.tile(x, reps).shape).astype(np.float32)
    tx = torch.from_numpy(x).requires_grad_()
    tx.repeat(*reps).backward(torch.from_numpy(dy))
    if y is t:  # all repeats 1: the input itself
        return
    np.testing.assert_allclose(_grads(y, dy, t)[0], tx.grad.numpy(), rtol=1e-5, atol=1e-5)
