"""The autograd contract: Operator calls, the backward generator, gradients, dependencies."""

from __future__ import annotations

import numpy as np
import pytest
from singa import autograd, tensor
from singa import singa_wrap as singa
from singa.errors import SingaError
from singa.tensor import Tensor


def param(values):
    return Tensor(data=np.asarray(values, np.float64), dtype=tensor.float64,
                  requires_grad=True, stores_grad=True)


def const(values):
    return Tensor(data=np.asarray(values, np.float64), dtype=tensor.float64,
                  requires_grad=False)


class Scale(autograd.Operator):
    """A user-defined operator written against SINGA's CTensor API: y = 3 x."""

    calls = []

    def forward(self, x):
        assert isinstance(x, singa.Tensor)
        return singa.MultFloat(x, 3.0)

    def backward(self, dy):
        assert isinstance(dy, singa.Tensor)
        Scale.calls.append(self.name)
        return singa.MultFloat(dy, 3.0)


def test_operator_call_returns_tuple_and_records_sources():
    autograd.training = True
    x = param([1.0, 2.0])
    op = Scale()
    ys = op(x)
    assert isinstance(ys, tuple) and len(ys) == 1
    y = ys[0]
    assert isinstance(y, Tensor) and y.creator is op and y.requires_grad
    src_op, xid, kept, stores = op.src[0]
    assert src_op is x.creator and xid == id(x) and kept is x and stores
    assert op.y_id2idx == {id(y): 0}
    np.testing.assert_array_equal(y.to_numpy(), [3.0, 6.0])
    assert autograd.Operation is autograd.Operator


def test_functional_wrappers_return_one_tensor():
    x = const([[1.0, -1.0]])
    for y in (autograd.relu(x), autograd.add(x, x), autograd.softmax(x)):
        assert isinstance(y, Tensor)
    parts = autograd.split(const([[1.0, 2.0, 3.0, 4.0]]), 1, [1, 3])
    assert isinstance(parts, tuple) and [p.shape for p in parts] == [(1, 1), (1, 3)]


def test_operator_rejects_non_tensor_inputs():
    with pytest.raises(TypeError, match="Tensor"):
        autograd.ReLU()(np.ones(3))


def test_requires_grad_propagates():
    y = autograd.add(const([1.0]), const([2.0]))
    assert not y.requires_grad
    assert autograd.add(const([1.0]), param([2.0])).requires_grad


def test_backward_needs_training_flag_for_cached_inputs():
    autograd.training = False
    x = param([1.0, 2.0])
    y = autograd.reduce_sum(autograd.mul(x, x), None, 0)
    with pytest.raises(SingaError, match="autograd.training"):
        list(autograd.backward(y))


def test_backward_is_a_lazy_generator_yielding_each_param_when_complete():
    """Parameters come out in reverse-use order, before the rest of the graph is processed."""
    autograd.training = True
    Scale.calls.clear()
    w1, w2 = param([1.0, 2.0]), param([3.0, 4.0])
    h = Scale()(autograd.mul(w1, const([1.0, 1.0])))[0]  # w1 is used first
    y = autograd.reduce_sum(Scale()(autograd.mul(h, w2))[0], None, 0)
    gen = autograd.backward(y)
    p, g = next(gen)
    assert p is w2
    np.testing.assert_allclose(g.to_numpy(), 3 * h.to_numpy())
    assert len(Scale.calls) == 1  # the op before w2's use has not run its backward yet
    p, g = next(gen)
    assert p is w1
    np.testing.assert_allclose(g.to_numpy(), 9 * w2.to_numpy())
    assert list(gen) == []


def test_shared_parameter_accumulates_and_is_yielded_once():
    autograd.training = True
    w = param([1.0, -2.0])
    a = autograd.mul(w, const([2.0, 2.0]))
    b = autograd.mul(w, w)
    y = autograd.reduce_sum(autograd.add(a, autograd.add(b, w)), None, 0)
    out = list(autograd.backward(y))
    assert len(out) == 1 and out[0][0] is w
    np.testing.assert_allclose(out[0][1].to_numpy(), 2 + 2 * w.to_numpy() + 1)


def test_gradients_returns_dict_by_param_id():
    autograd.training = True
    w, b = param([[1.0, 2.0]]), param([0.5])
    y = autograd.reduce_sum(autograd.add(w, b), None, 0)
    grads = autograd.gradients(y)
    assert set(grads) == {id(w), id(b)}
    np.testing.assert_array_equal(grads[id(w)].to_numpy(), [[1.0, 1.0]])
    np.testing.assert_array_equal(grads[id(b)].to_numpy(), [2.0])


def test_backward_with_explicit_dy_and_non_scalar_root():
    autograd.training = True
    w = param([1.0, 2.0, 3.0])
    y = autograd.mul(w, w)
    with pytest.raises(SingaError, match="dy"):
        list(autograd.backward(y))
    (_, g), = list(autograd.backward(y, const([1.0, 0.5, 0.0])))
    np.testing.assert_allclose(g.to_numpy(), [2.0, 2.0, 0.0])
    (_, g), = list(autograd.backward(y, 2.0))
    np.testing.assert_allclose(g.to_numpy(), [4.0, 8.0, 12.0])


def test_backward_from_a_secondary_output():
    """The root's cotangent goes to the output slot it came from (here split's second)."""
    autograd.training = True
    x = param([[1.0, 2.0, 3.0]])
    _, second = autograd.split(x, 1, [1, 2])
    (_, g), = list(autograd.backward(second, const([[5.0, 7.0]])))
    np.testing.assert_array_equal(g.to_numpy(), [[0.0, 5.0, 7.0]])


def test_param_behind_a_path_without_gradient_is_still_yielded():
    """An int cast stops the gradient on one path; the param must still come out once."""
    autograd.training = True
    w = param([1.5, -2.5])
    dead = autograd.cast(autograd.mul(w, const([2.0, 2.0])), tensor.int32)
    live = autograd.mul(w, w)
    y = autograd.reduce_sum(autograd.add(live, autograd.cast(dead, tensor.float64)), None, 0)
    out = list(autograd.backward(y))
    assert [p for p, _ in out] == [w]
    np.testing.assert_allclose(out[0][1].to_numpy(), 2 * w.to_numpy())


def test_root_that_stores_grad_is_yielded_first():
    autograd.training = True
    w = param([2.0])
    y = autograd.mul(w, w)
    y.stores_grad = True
    out = list(autograd.backward(y))
    assert out[0][0] is y and out[1][0] is w
    np.testing.assert_array_equal(out[0][1].to_numpy(), [1.0])
    np.testing.assert_array_equal(out[1][1].to_numpy(), [4.0])


def test_infer_dependency_counts_consumers():
    autograd.training = True
    w = param([1.0])
    a = autograd.mul(w, w)          # w consumed twice by one op
    b = autograd.add(a, a)          # a consumed twice
    y = autograd.add(b, w)
    op_count, tensor_count = autograd.infer_dependency(y.creator)
    assert op_count[w.creator] == 3
    assert op_count[a.creator] == 2 and op_count[b.creator] == 1
    assert tensor_count[id(w)] == 3 and tensor_count[id(a)] == 2


def test_operator_names_and_grad_names():
    autograd.training = True
    w = param([1.0])
    w.name = "w"
    op = autograd.ReLU()
    y = op(w)[0]
    assert op.name.startswith("ReLU#")
    assert op.output_name(0) == op.name + ":0"
    (p, g), = list(autograd.backward(y))
    assert g.name == "w_g"


def test_dummy_forwards_attributes_to_its_tensor():
    x = const([1.0, 2.0])
    d = x.creator
    assert isinstance(d, autograd.Dummy)
    assert d.shape == (2,) and d.src == [] and not d.requires_grad


def test_add_all_sums_tensors():
    s = autograd.add_all(const([1.0]), const([2.0]), const([3.0]))
    np.testing.assert_array_equal(s.to_numpy(), [6.0])


def test_back_broadcast_and_axis_helper():
    dx = singa.Tensor([2, 3, 4])
    singa.Gaussian(0.0, 1.0, dx)
    r = autograd.back_broadcast((2, 3, 4), (3, 1), dx)
    x = dx.to_numpy().astype(np.float64)
    want = x.sum(axis=(0, 2)).reshape(3, 1)
    # float32 sums of 8 random terms: bound the error by the terms' size, not the sum's (a sum
    # near zero has no relative accuracy; rtol alone failed about 1 run in 20)
    bound = 8 * np.finfo(np.float32).eps * np.abs(x).sum(axis=(0, 2)).reshape(3, 1)
    np.testing.assert_array_less(np.abs(r.to_numpy() - want), bound + 1e-30)
    assert autograd.axis_helper((2, 3, 4), (3, 1)) == (0, 2)


def test_backward_skips_gradients_no_one_receives(monkeypatch):
    """The input batch (a leaf that stores no gradient) gets no dx from Matmul inside
    backward(); a direct op.backward() call still returns every gradient (SINGA's tests)."""
    from singa import _math

    autograd.training = True
    calls = []
    real = _math.matmul
    monkeypatch.setattr(_math, "matmul", lambda *a, **k: calls.append(1) or real(*a, **k))
    rng = np.random.default_rng(0)
    xv, wv, dyv = rng.normal(size=(2, 3)), rng.normal(size=(3, 1)), rng.normal(size=(2, 1))
    x = Tensor(data=xv, dtype=tensor.float64)  # requires_grad, stores_grad=False
    w = param(wv)
    y = autograd.reduce_sum(autograd.matmul(x, w), None, 0)
    calls.clear()
    out = list(autograd.backward(y))
    assert [p for p, _ in out] == [w] and len(calls) == 1
    np.testing.assert_allclose(out[0][1].to_numpy(), xv.T @ np.ones((2, 1)), rtol=1e-12)
    h = autograd.matmul(x, w)
    dx, dw = h.creator.backward(const(dyv).data)
    np.testing.assert_allclose(dx.to_numpy(), dyv @ wv.T, rtol=1e-12)  # dx = dy . W^T
    np.testing.assert_allclose(dw.to_numpy(), xv.T @ dyv, rtol=1e-12)  # dW = x^T . dy
    x.stores_grad = True
    y = autograd.reduce_sum(autograd.matmul(x, w), None, 0)
    calls.clear()
    assert {id(p) for p, _ in autograd.backward(y)} == {id(x), id(w)} and len(calls) == 2


def test_fused_cudnn_rnn_operator_points_to_cudnnrnn():
    with pytest.raises(SingaError, match="CudnnRNN"):
        autograd._RNN(None)


def test_backward_refuses_an_input_overwritten_after_forward():
    """An input an op kept for its gradient, changed in place before backward, would give a
    silently wrong gradient (here dW = x_new instead of x); backward raises instead."""
    prev = autograd.training
    autograd.training = True
    try:
        x = Tensor(data=np.ones((1, 2), np.float32), requires_grad=False)
        w = Tensor(data=np.ones((2, 1), np.float32), requires_grad=True, stores_grad=True)
        y = autograd.matmul(x, w)
        x.copy_from_numpy(np.full((1, 2), 5, np.float32))
        with pytest.raises(SingaError, match="modified in place after the forward"):
            list(autograd.backward(autograd.reshape(y, (1,))))
    finally:
        autograd.training = prev


def test_backward_allows_overwriting_an_input_the_op_does_not_keep():
    prev = autograd.training
    autograd.training = True
    try:
        a = Tensor(data=np.ones(3, np.float32), requires_grad=True, stores_grad=True)
        b = Tensor(data=np.ones(3, np.float32), requires_grad=True, stores_grad=True)
        z = autograd.add(a, b)  # the gradient of a sum does not depend on its inputs
        a.copy_from_numpy(np.zeros(3, np.float32))
        grads = {id(p): tensor.to_numpy(g) for p, g in
                 autograd.backward(autograd.reduce_sum(z, None, 0))}
        np.testing.assert_array_equal(grads[id(a)], np.ones(3))
        np.testing.assert_array_equal(grads[id(b)], np.ones(3))
    finally:
        autograd.training = prev


class ScaleBy(autograd.Operator):
    """A user op that keeps a constant CTensor from __init__ and saves x in forward."""

    def __init__(self, k):
        super().__init__()
        self.k = const([k, k]).data

    def forward(self, x):
        self.x = x
        return singa.__mul__(x, self.k)

    def backward(self, dy):
        return singa.__mul__(dy, self.k)


def test_backward_keeps_saved_tensors_by_default_as_singa_does():
    autograd.training = True
    w = param([1.0, 2.0, 3.0])
    y = autograd.mul(w, w)
    for _ in range(2):  # SINGA code may run backward twice on one graph
        (_, g), = list(autograd.backward(y, const([1.0, 1.0, 1.0])))
        np.testing.assert_array_equal(g.to_numpy(), [2.0, 4.0, 6.0])


def test_backward_without_retain_graph_frees_what_forward_saved():
    autograd.training = True
    w = param([1.0, 2.0])
    op = ScaleBy(3.0)
    h = autograd.relu(autograd.mul(w, w))
    y, = op(h)
    relu_op = h.creator
    (_, g), = list(autograd.backward(y, const([1.0, 1.0]), retain_graph=False))
    np.testing.assert_array_equal(g.to_numpy(), [6.0, 12.0])  # d(3 w^2)/dw
    assert op.x is None and relu_op.__dict__["x"] is None  # saved during forward: freed
    assert op.k is not None  # set in __init__, not by forward: kept for the next call
    with pytest.raises(SingaError, match="retain_graph=True"):
        list(autograd.backward(y, const([1.0, 1.0])))
    y2, = op(autograd.mul(w, w))  # the same op object runs again after a release
    (_, g2), = list(autograd.backward(y2, const([1.0, 1.0])))
    np.testing.assert_array_equal(g2.to_numpy(), [6.0, 12.0])


class SavesInContainers(autograd.Operator):
    """y = x * x, saving x inside a tuple and a list, with a container of plain numbers."""

    def forward(self, x):
        self.pair = (1.0, x)
        self.listed = [x]
        self.sizes = (2, 3)
        return singa.__mul__(x, x)

    def backward(self, dy):
        return singa.__mul__(singa.__mul__(dy, self.pair[1]), 2.0)


def test_backward_without_retain_graph_frees_tensors_saved_in_containers():
    autograd.training = True
    w = param([1.0, 2.0])
    op = SavesInContainers()
    y, = op(w)
    (_, g), = list(autograd.backward(y, const([1.0, 1.0]), retain_graph=False))
    np.testing.assert_array_equal(g.to_numpy(), [2.0, 4.0])  # d(w^2)/dw
    assert sorted(op._saved_names) == ["listed", "pair"]
    assert op.pair is None and op.listed is None and op.sizes == (2, 3)

def test_an_optimizer_step_frees_the_activations_of_its_graph():
    """Oracle: the pool's live bytes after a step, with and without the release (the saved
    activations of a 64x256 ReLU MLP are what differs)."""
    import gc

    from singa import device, layer, opt

    dev = device.get_default_device()
    rng = np.random.default_rng(0)
    x = tensor.from_numpy(rng.standard_normal((64, 256)).astype(np.float32))
    t = tensor.from_numpy(rng.integers(0, 4, 64).astype(np.int32))

    def net(l1, l2):
        return autograd.softmax_cross_entropy(l2(autograd.relu(l1(x))), t)

    live = {}
    for retain in (True, False):
        autograd.training = True
        l1, l2 = layer.Linear(256), layer.Linear(4)
        loss = net(l1, l2)  # builds the parameters
        sgd = opt.SGD(lr=0.1)
        if retain:
            sgd.call = lambda loss, s=sgd: [s.apply(str(id(p)), p, g)
                                            for p, g in autograd.backward(loss)]
        gc.collect()
        before = dev.memory_stats()["current_bytes"]
        loss = net(l1, l2)
        sgd(loss)
        live[retain] = dev.memory_stats()["current_bytes"] - before
        del loss, l1, l2, sgd
    # the ReLU's 64x256 float32 output (kept by the ReLU and by l2's product) was freed
    assert live[True] - live[False] >= 64 * 256 * 4


class NoGradOutput(autograd.Operator):
    """A user op whose forward turns requires_grad off for its outputs (SINGA's contract:
    the outputs take the op's requires_grad as it is after forward)."""

    def forward(self, x):
        self.requires_grad = False
        return singa.__mul__(x, x)

    def backward(self, dy):
        raise AssertionError("never called: the output does not require a gradient")


def test_outputs_take_the_ops_requires_grad_as_forward_left_it():
    autograd.training = True
    w = param([1.0, 2.0])
    y, = NoGradOutput()(w)
    assert w.requires_grad and not y.requires_grad
    np.testing.assert_array_equal(tensor.to_numpy(y), [1.0, 4.0])
