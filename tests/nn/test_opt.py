"""``singa.opt``: every optimizer against a numpy re-implementation of its update rule, the
schedules, device-resident hyper-parameters and get/set_states."""

from __future__ import annotations

import numpy as np
import pytest
from singa import autograd, opt, tensor
from singa.tensor import Tensor

STEPS = 5


def _loss_with_grad(p: Tensor, g: np.ndarray) -> Tensor:
    """A loss whose gradient with respect to p is exactly g: sum(p * g)."""
    return autograd.reduce_sum(autograd.mul(p, Tensor(data=g, requires_grad=False)), None, 0)


def run_singa(optimizer, p0, grads):
    autograd.training = True
    p = Tensor(data=p0, requires_grad=True, stores_grad=True)
    p.name = "w"
    for g in grads:
        optimizer(_loss_with_grad(p, g))
    return p.to_numpy()


class NumpySGD:
    def __init__(self, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        self.lr, self.mom, self.damp, self.wd, self.nesterov = (lr, momentum, dampening,
                                                                weight_decay, nesterov)
        self.buf = None
        self.t = 0

    def step(self, p, g):
        lr = self.lr(self.t) if callable(self.lr) else self.lr
        g = g + self.wd * p
        if self.mom:
            self.buf = (self.mom * self.buf if self.buf is not None else 0) + (1 - self.damp) * g
            g = g + self.mom * self.buf if self.nesterov else self.buf
        self.t += 1
        return p - lr * g


def numpy_rmsprop(p, grads, lr, rho, eps, wd):
    r = np.zeros_like(p)
    for g in grads:
        g = g + wd * p
        r = rho * r + (1 - rho) * g * g
        p = p - lr * g / np.sqrt(r + eps)
    return p


def numpy_adagrad(p, grads, lr, eps, wd):
    h = np.zeros_like(p)
    for g in grads:
        g = g + wd * p
        h = h + g * g
        p = p - lr * g / np.sqrt(h + eps)
    return p


def numpy_adam(p, grads, lr, b1, b2, eps, wd, decoupled):
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        if decoupled:
            p = p - lr * wd * p
        else:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return p


@pytest.fixture
def problem(rng):
    p0 = rng.standard_normal((3, 4)).astype(np.float32)
    grads = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(STEPS)]
    return p0, grads


@pytest.mark.parametrize("kw", [
    {}, {"momentum": 0.9}, {"momentum": 0.9, "dampening": 0.3},
    {"momentum": 0.8, "nesterov": True}, {"weight_decay": 0.01},
    {"momentum": 0.9, "weight_decay": 1e-3, "nesterov": True}])
def test_sgd(kw, problem):
    p0, grads = problem
    got = run_singa(opt.SGD(0.05, **kw), p0, grads)
    ref = NumpySGD(0.05, **kw)
    p = p0.astype(np.float64)
    for g in grads:
        p = ref.step(p, g)
    np.testing.assert_allclose(got, p, rtol=1e-5, atol=1e-6)


def test_sgd_positional_order_is_lr_momentum_dampening(problem):
    """SINGA's examples write SGD(0.1, 0.9, 1e-5): the third argument is dampening."""
    sgd = opt.SGD(0.1, 0.9, 1e-5)
    assert sgd.wd_value == 0 and sgd.mom_value == 0.9
    np.testing.assert_allclose(sgd.hyper("dampening").to_numpy(), [1e-5])


def test_sgd_nesterov_needs_momentum_and_no_dampening():
    with pytest.raises(ValueError):
        opt.SGD(0.1, nesterov=True)
    with pytest.raises(ValueError):
        opt.SGD(0.1, momentum=0.9, dampening=0.1, nesterov=True)


@pytest.mark.parametrize("wd", [0.0, 0.01])
def test_rmsprop(wd, problem):
    p0, grads = problem
    got = run_singa(opt.RMSProp(0.01, rho=0.8, epsilon=1e-6, weight_decay=wd), p0, grads)
    want = numpy_rmsprop(p0.astype(np.float64), grads, 0.01, 0.8, 1e-6, wd)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("wd", [0.0, 0.01])
def test_adagrad(wd, problem):
    p0, grads = problem
    got = run_singa(opt.AdaGrad(0.1, epsilon=1e-6, weight_decay=wd), p0, grads)
    want = numpy_adagrad(p0.astype(np.float64), grads, 0.1, 1e-6, wd)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls,wd", [(opt.Adam, 0.0), (opt.Adam, 0.01), (opt.AdamW, 0.05)])
def test_adam_and_adamw(cls, wd, problem):
    p0, grads = problem
    got = run_singa(cls(0.01, beta_1=0.8, beta_2=0.95, epsilon=1e-7, weight_decay=wd), p0,
                    grads)
    want = numpy_adam(p0.astype(np.float64), grads, 0.01, 0.8, 0.95, 1e-7, wd,
                      cls is opt.AdamW)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_adam_matches_torch(problem):
    torch = pytest.importorskip("torch")
    p0, grads = problem
    got = run_singa(opt.AdamW(0.01, weight_decay=0.1), p0, grads)
    tp = torch.tensor(p0, dtype=torch.float64, requires_grad=True)
    topt = torch.optim.AdamW([tp], lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    for g in grads:
        tp.grad = torch.tensor(g, dtype=torch.float64)
        topt.step()
    np.testing.assert_allclose(got, tp.detach().numpy(), rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------- schedules
def test_constant_and_exponential_decay():
    step = Tensor(data=np.array([7.0], np.float32), requires_grad=False)
    np.testing.assert_allclose(opt.Constant(0.3)(step).to_numpy(), [0.3])
    np.testing.assert_allclose(opt.ExponentialDecay(0.5, 3, 0.9)(step).to_numpy(),
                               [0.5 * 0.9 ** (7 / 3)], rtol=1e-6)
    np.testing.assert_allclose(opt.ExponentialDecay(0.5, 3, 0.9, staircase=True)(step)
                               .to_numpy(), [0.5 * 0.9 ** 2], rtol=1e-6)


def test_sgd_with_decaying_learning_rate(problem):
    p0, grads = problem
    sched = opt.ExponentialDecay(0.1, 2, 0.5, staircase=True)
    got = run_singa(opt.SGD(sched, momentum=0.5), p0, grads)
    ref = NumpySGD(lambda t: 0.1 * 0.5 ** (t // 2), momentum=0.5)
    p = p0.astype(np.float64)
    for g in grads:
        p = ref.step(p, g)
    np.testing.assert_allclose(got, p, rtol=1e-5, atol=1e-6)


def test_learning_rate_type_is_checked():
    with pytest.raises(TypeError):
        opt.SGD(lr="0.1")


def test_hyper_parameters_are_device_tensors_updated_in_place():
    sgd = opt.SGD(opt.ExponentialDecay(1.0, 1, 0.5), momentum=0.9)
    lr = sgd.lr_value
    assert isinstance(lr, Tensor) and lr.shape == (1,)
    np.testing.assert_allclose(lr.to_numpy(), [1.0])
    sgd.step()
    sgd.step()
    assert sgd.lr_value is lr  # same tensor (a recorded graph keeps reading it)
    np.testing.assert_allclose(lr.to_numpy(), [0.25])
    np.testing.assert_allclose(sgd.step_counter.to_numpy(), [2.0])


# ---------------------------------------------------------------- states
@pytest.mark.parametrize("make", [
    lambda: opt.SGD(0.05, momentum=0.9), lambda: opt.RMSProp(0.01),
    lambda: opt.AdaGrad(0.05), lambda: opt.Adam(0.01)])
def test_get_states_set_states_resume_exactly(make, problem):
    p0, grads = problem
    autograd.training = True
    a = make()
    pa = Tensor(data=p0, requires_grad=True, stores_grad=True)
    pa.name = "w"
    for g in grads[:3]:
        a(_loss_with_grad(pa, g))
    states = a.get_states()
    assert states["step_counter"] == 3.0
    saved = {k: ({n: t.to_numpy() for n, t in v.items()} if isinstance(v, dict) else v)
             for k, v in states.items()}
    for g in grads[3:]:
        a(_loss_with_grad(pa, g))

    b = make()
    pb = Tensor(data=p0, requires_grad=True, stores_grad=True)
    pb.name = "w"
    b(_loss_with_grad(pb, grads[0]))  # creates b's state tensors; then overwrite them
    pb.copy_from_numpy(_replay_params(make, p0, grads[:3]))
    b.set_states({k: ({n: Tensor(data=a_) for n, a_ in v.items()} if isinstance(v, dict) else v)
                  for k, v in saved.items()})
    for g in grads[3:]:
        b(_loss_with_grad(pb, g))
    np.testing.assert_allclose(pb.to_numpy(), pa.to_numpy(), rtol=1e-6, atol=1e-7)


def _replay_params(make, p0, grads):
    return run_singa(make(), p0, grads)


def test_set_states_into_a_fresh_optimizer_creates_state():
    sgd = opt.SGD(0.1, momentum=0.9)
    sgd.set_states({"step_counter": 4.0, "moments": {"w": Tensor(data=np.ones(3, np.float32))}})
    assert sgd.get_states()["step_counter"] == 4.0
    np.testing.assert_array_equal(sgd.moments["w"].to_numpy(), 1.0)


def test_optimizer_checks_parameter_dtype():
    autograd.training = True
    p = Tensor(data=np.ones(2), dtype=tensor.float64, requires_grad=True, stores_grad=True)
    loss = autograd.reduce_sum(autograd.mul(p, p), None, 0)
    with pytest.raises(TypeError, match="float64"):
        opt.SGD(0.1)(loss)
    loss = autograd.reduce_sum(autograd.mul(p, p), None, 0)
    opt.SGD(0.1, dtype=tensor.float64)(loss)
    np.testing.assert_allclose(p.to_numpy(), [0.8, 0.8])


def test_deprecated_aliases_update_and_backward_and_update(problem):
    p0, grads = problem
    autograd.training = True
    sgd = opt.SGD(0.1)
    p = Tensor(data=p0, requires_grad=True, stores_grad=True)
    for q, g in autograd.backward(_loss_with_grad(p, grads[0])):
        sgd.update(q, g)
    np.testing.assert_allclose(p.to_numpy(), p0 - 0.1 * grads[0], rtol=1e-6)
    sgd.backward_and_update(_loss_with_grad(p, grads[1]))
    np.testing.assert_allclose(p.to_numpy(), p0 - 0.1 * (grads[0] + grads[1]), rtol=1e-5)
