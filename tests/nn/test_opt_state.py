"""Optimizer state belongs to the parameter tensor (issue 30): two parameters that carry one
name (layers that are no Layer's attributes are named ``W``, ``b`` ...) each get their own
state; by-name access and checkpoints keep SINGA's layout, old checkpoints still load, and a
name two parameters carry is refused with :class:`singa.errors.OptimizerStateError`.

Oracle: the numpy update rules of ``test_opt``, run per parameter.
"""

from __future__ import annotations

import numpy as np
import pytest
from _shared_models import MLP
from singa import autograd, layer, opt, tensor
from singa.errors import OptimizerStateError
from singa.tensor import Tensor
from test_opt import NumpySGD, numpy_adagrad, numpy_adam, numpy_rmsprop

STEPS = 4
SHAPES = [(3, 4), (5,), (3, 4)]  # the first and last: equal shapes, silently shared before


@pytest.fixture(autouse=True)
def _training():
    autograd.training = True


def _params(rng, name="w"):
    ps = []
    for shape in SHAPES:
        p = Tensor(data=rng.standard_normal(shape).astype(np.float32), requires_grad=True,
                   stores_grad=True)
        p.name = name
        ps.append(p)
    return ps


def _loss(ps, gs):
    """sum_i sum(p_i * g_i): the gradient of p_i is exactly g_i."""
    terms = [autograd.reduce_sum(autograd.mul(p, Tensor(data=g, requires_grad=False)), None, 0)
             for p, g in zip(ps, gs)]
    total = terms[0]
    for t in terms[1:]:
        total = autograd.add(total, t)
    return total


def _sgd_ref(p, grads):
    ref = NumpySGD(0.05, momentum=0.9, weight_decay=0.01)
    for g in grads:
        p = ref.step(p, g)
    return p


OPTIMIZERS = {
    "sgd": (lambda: opt.SGD(0.05, momentum=0.9, weight_decay=0.01), _sgd_ref),
    "rmsprop": (lambda: opt.RMSProp(0.01, rho=0.8, epsilon=1e-6),
                lambda p, gs: numpy_rmsprop(p, gs, 0.01, 0.8, 1e-6, 0.0)),
    "adagrad": (lambda: opt.AdaGrad(0.05, epsilon=1e-6),
                lambda p, gs: numpy_adagrad(p, gs, 0.05, 1e-6, 0.0)),
    "adam": (lambda: opt.Adam(0.01), lambda p, gs: numpy_adam(p, gs, 0.01, 0.9, 0.999, 1e-8,
                                                             0.0, False)),
    "adamw": (lambda: opt.AdamW(0.01), lambda p, gs: numpy_adam(p, gs, 0.01, 0.9, 0.999, 1e-8,
                                                               0.01, True)),
}


def _grads(rng, steps=STEPS):
    return [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(steps)]


@pytest.mark.parametrize("which", list(OPTIMIZERS))
def test_parameters_sharing_a_name_each_get_their_own_state(which, rng):
    make, ref = OPTIMIZERS[which]
    ps = _params(rng)
    p0 = [p.to_numpy().astype(np.float64) for p in ps]
    grads = _grads(rng)
    o = make()
    for gs in grads:
        o(_loss(ps, gs))
    for i, p in enumerate(ps):
        want = ref(p0[i], [gs[i] for gs in grads])
        np.testing.assert_allclose(p.to_numpy(), want, rtol=1e-5, atol=1e-6,
                                   err_msg=f"parameter {i} {SHAPES[i]}")
    states = [o.state_of(p) for p in ps]
    assert all(states) and len({id(t) for s in states for t in s.values()}) == \
        sum(len(s) for s in states)


def test_a_name_several_parameters_carry_is_ambiguous_by_name(rng):
    ps = _params(rng)
    sgd = opt.SGD(0.05, momentum=0.9)
    sgd(_loss(ps, _grads(rng, 1)[0]))
    with pytest.raises(OptimizerStateError, match=r"3 parameters carry that name.*\(3, 4\), "
                                                  r"\(5,\), \(3, 4\).*state_of.*w#0, w#1, w#2"):
        sgd.moments["w"]
    keys = sgd.get_states()["moments"]
    assert sorted(keys) == ["w#0", "w#1", "w#2"]
    # w#i: the i-th of them the optimizer updated first (backward order)
    assert all(sgd.moments[k] is keys[k] for k in keys) and len(sgd.moments) == 3
    assert {id(t) for t in keys.values()} == {id(sgd.state_of(p)["moments"]) for p in ps}


def _model_and_data(rng):
    m = MLP(hidden=5)
    m.compile([tensor.from_numpy(np.ones((4, 6), np.float32))], is_train=True)
    m.train()
    x = tensor.from_numpy(rng.standard_normal((4, 6)).astype(np.float32))
    y = tensor.from_numpy(rng.integers(0, 3, 4).astype(np.int32))
    return m, x, y


def _step(m, o, x, y, record=None):
    """One SGD step; ``record`` collects each parameter's (value, gradient) before it."""
    loss = autograd.softmax_cross_entropy(m.forward(x), y)
    for p, g in autograd.backward(loss):
        if record is not None:
            record.setdefault(p.name, []).append((p.to_numpy().astype(np.float64),
                                                  g.to_numpy()))
        o.apply(p.name, p, g)
    o.step()


def _oracle(seen, steps):
    """Momentum SGD in numpy from the first recorded value, over the recorded gradients:
    ``(parameter, buffer)`` after ``steps`` steps."""
    ref = NumpySGD(0.05, momentum=0.9, weight_decay=0.01)
    p = seen[0][0]
    for _, g in seen[:steps]:
        p = ref.step(p, g)
    return p, ref.buf


@pytest.mark.parametrize("as_numpy", [True, False])
def test_a_checkpoint_in_the_format_written_before_still_loads(as_numpy, rng):
    """``{"step_counter": float, "moments": {param name: array or Tensor}}`` is what
    ``get_states()`` wrote while states were keyed by name; built here by hand from the numpy
    oracle after 2 of 4 steps and loaded into a fresh optimizer, the resumed run ends where
    the uninterrupted one did, and each state is that of its own parameter tensor."""
    m, x, y = _model_and_data(rng)
    params = m.get_params()
    sgd = opt.SGD(0.05, momentum=0.9, weight_decay=0.01)
    record = {}
    for _ in range(STEPS):
        _step(m, sgd, x, y, record)  # the uninterrupted run and its gradients
    final = {name: p.to_numpy() for name, p in params.items()}

    old = {"step_counter": 2.0, "moments": {}}
    for name, p in params.items():
        value, buf = _oracle(record[name], 2)
        p.copy_from_numpy(value.astype(np.float32))
        buf = buf.astype(np.float32)
        old["moments"][name] = buf if as_numpy else tensor.from_numpy(buf)
    resumed = opt.SGD(0.05, momentum=0.9, weight_decay=0.01)
    resumed.set_states(old)
    for _ in range(STEPS - 2):
        _step(m, resumed, x, y)
    for name, p in params.items():
        value, buf = _oracle(record[name], STEPS)
        np.testing.assert_allclose(p.to_numpy(), final[name], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(p.to_numpy(), value, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(resumed.state_of(p)["moments"].to_numpy(), buf, rtol=1e-5,
                                   atol=1e-6, err_msg=name)
    assert resumed.get_states()["step_counter"] == STEPS
    assert sorted(resumed.get_states()["moments"]) == sorted(params)


def test_an_old_checkpoint_with_a_name_two_parameters_carry_is_refused(rng):
    """Before, two parameters named ``W`` shared one buffer, so an old checkpoint holds one
    ``W`` state for both: loading it says so instead of guessing which it was."""
    ps = _params(rng, "W")
    old = {"step_counter": 1.0, "moments": {"W": np.ones((3, 4), np.float32)}}
    sgd = opt.SGD(0.05, momentum=0.9)
    sgd(_loss(ps, _grads(rng, 1)[0]))
    with pytest.raises(OptimizerStateError, match=r"plain name 'W' is ambiguous: 3 parameters"):
        sgd.set_states(old)
    fresh = opt.SGD(0.05, momentum=0.9)  # loaded before any update: refused at the first
    fresh.set_states(old)
    with pytest.raises(OptimizerStateError, match=r"plain name 'W' is ambiguous"):
        fresh(_loss(ps, _grads(rng, 1)[0]))


@pytest.mark.parametrize("which", ["sgd", "adam"])
def test_states_of_same_named_parameters_round_trip(which, rng):
    """Two unnamed Linear layers (SINGA's autograd scripts): get_states keys ``W#0``, ``W#1``
    ...; a fresh optimizer loads them and resumes exactly like the uninterrupted run."""
    make, _ = OPTIMIZERS[which]
    l1, l2 = layer.Linear(5), layer.Linear(3)
    x = tensor.from_numpy(rng.standard_normal((4, 6)).astype(np.float32))
    y = tensor.from_numpy(rng.integers(0, 3, 4).astype(np.int32))

    def loss():
        return autograd.softmax_cross_entropy(l2(autograd.relu(l1(x))), y)

    loss()
    params = [l1.W, l1.b, l2.W, l2.b]
    assert [p.name for p in params] == ["W", "b", "W", "b"]
    a = make()
    for _ in range(2):
        a(loss())
    saved = {k: ({n: t.to_numpy() for n, t in v.items()} if isinstance(v, dict) else v)
             for k, v in a.get_states().items()}
    assert sorted(saved[a._slots[0]]) == ["W#0", "W#1", "b#0", "b#1"]
    at_save = [p.to_numpy() for p in params]
    for _ in range(2):
        a(loss())
    want = [p.to_numpy() for p in params]

    for p, v in zip(params, at_save):
        p.copy_from_numpy(v)
    b = make()
    b.set_states(saved)
    for _ in range(2):
        b(loss())
    for p, w in zip(params, want):
        np.testing.assert_allclose(p.to_numpy(), w, rtol=1e-6, atol=1e-7, err_msg=p.name)
