"""Finite-difference oracle for autograd operators (reusable by every ``tests/nn`` module).

:func:`check_op` runs a function of singa Tensors on numpy inputs and checks

1. the forward values against a numpy reference (when one is given), and
2. the gradients that :func:`singa.autograd.backward` yields for every floating input against
   central differences ``(f(x + eps) - f(x - eps)) / 2 eps`` of ``sum(f(x) * dy)`` for a random
   cotangent ``dy``. The differences evaluate the singa forward itself (whose values step 1
   checked against numpy), in float64 so that ``eps = 1e-6`` gives ~1e-9 accuracy.

Inputs with an integer dtype (indices, class ids) are passed through and never differentiated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from singa import _dtype, autograd
from singa.tensor import Tensor

__all__ = ["check_op", "check_param_grads", "numeric_grad", "to_tensor", "run_forward"]


def to_tensor(a, dev=None, grad: bool = True) -> Tensor:
    """A Tensor holding ``a`` with its numpy dtype; floating inputs store gradients."""
    a = np.asarray(a)
    code = _dtype.code_of(a.dtype)
    floating = a.dtype.kind == "f"
    return Tensor(data=a, device=dev, dtype=code, requires_grad=grad and floating,
                  stores_grad=grad and floating)


def _outputs(y) -> list:
    if isinstance(y, Tensor):
        return [y]
    return list(y)


def run_forward(fn: Callable, arrays: Sequence[np.ndarray], dev=None) -> list[np.ndarray]:
    """Values of ``fn(*tensors)`` as numpy arrays (a list: one per output)."""
    ts = [to_tensor(a, dev, grad=False) for a in arrays]
    return [y.to_numpy() for y in _outputs(fn(*ts))]


def numeric_grad(f: Callable[[list], float], arrays: list, i: int, eps: float) -> np.ndarray:
    """Central differences of the scalar ``f(arrays)`` with respect to ``arrays[i]``."""
    x = arrays[i]
    g = np.zeros_like(x, dtype=np.float64)
    for idx in np.ndindex(x.shape):
        orig = x[idx]
        x[idx] = orig + eps
        fp = f(arrays)
        x[idx] = orig - eps
        fm = f(arrays)
        x[idx] = orig
        g[idx] = (fp - fm) / (2 * eps)
    return g


def check_op(fn: Callable, inputs: Sequence, ref: Callable | None = None, *, dev=None,
             wrt: Sequence[int] | None = None, eps: float = 1e-6, rtol: float = 1e-5,
             atol: float = 1e-7, fwd_rtol: float = 1e-7, fwd_atol: float = 1e-10,
             seed: int = 0) -> dict:
    """Check ``fn`` (Tensors -> Tensor or tuple of Tensors) on ``inputs`` (numpy arrays).

    ``ref(*arrays)`` is the numpy reference of the forward (an array or a tuple of arrays).
    ``wrt`` lists the input positions to differentiate (default: every floating input).
    Returns ``{"y": outputs, "grads": {i: analytic gradient}}``.
    """
    arrays = [np.array(a, copy=True) for a in inputs]
    if wrt is None:
        wrt = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    prev = autograd.training
    autograd.training = True
    try:
        ts = [to_tensor(a, dev, grad=i in wrt) for i, a in enumerate(arrays)]
        ys = _outputs(fn(*ts))
        y_np = [y.to_numpy() for y in ys]
        if ref is not None:
            want = ref(*[np.array(a, copy=True) for a in arrays])
            want = list(want) if isinstance(want, tuple) else [want]
            assert len(want) == len(y_np), f"{len(y_np)} outputs, reference has {len(want)}"
            for k, (got, exp) in enumerate(zip(y_np, want)):
                exp = np.asarray(exp)
                assert got.shape == exp.shape, f"output {k}: shape {got.shape} != {exp.shape}"
                np.testing.assert_allclose(got, exp, rtol=fwd_rtol, atol=fwd_atol,
                                           err_msg=f"forward output {k}")
        if not wrt:
            return {"y": y_np, "grads": {}}
        rng = np.random.default_rng(seed)
        dys = [rng.standard_normal(y.shape) for y in y_np]
        # one scalar objective: sum_k <y_k, dy_k>; backward runs on a single root, so join the
        # outputs with differentiable ops when there are several
        if len(ys) == 1:
            root, root_dy = ys[0], Tensor(data=dys[0].astype(y_np[0].dtype), device=dev,
                                          dtype=ys[0].dtype, requires_grad=False)
        else:
            parts = [autograd.reduce_sum(autograd.mul(y, Tensor(
                data=d.astype(yn.dtype), device=dev, dtype=y.dtype, requires_grad=False)),
                None, 0) for y, d, yn in zip(ys, dys, y_np)]
            root = autograd.sum(*[autograd.reshape(p, (1,)) for p in parts])
            root_dy = None
        seen: dict[int, int] = {}
        grads = {}
        pos = {id(t): i for i, t in enumerate(ts)}
        for p, g in autograd.backward(root, root_dy):
            if id(p) in pos:
                i = pos[id(p)]
                seen[i] = seen.get(i, 0) + 1
                grads[i] = g.to_numpy()
        for i in wrt:
            assert seen.get(i, 0) == 1, f"input {i}: yielded {seen.get(i, 0)} times, want once"

        def objective(arrs):
            outs = run_forward(fn, arrs, dev)
            return float(sum(np.sum(o.astype(np.float64) * d) for o, d in zip(outs, dys)))

        for i in wrt:
            num = numeric_grad(objective, arrays, i, eps)
            assert grads[i].shape == arrays[i].shape, (
                f"input {i}: gradient shape {grads[i].shape} != {arrays[i].shape}")
            np.testing.assert_allclose(grads[i], num, rtol=rtol, atol=atol,
                                       err_msg=f"gradient of input {i}")
        return {"y": y_np, "grads": grads}
    finally:
        autograd.training = prev


def check_param_grads(forward: Callable, params: dict, *, eps: float = 1e-6, rtol: float = 1e-5,
                      atol: float = 1e-7, seed: int = 0) -> dict:
    """Gradients of ``sum(forward() * dy)`` w.r.t. parameter Tensors, against finite differences.

    ``forward()`` builds the output from the (float64) Tensors in ``params`` (name -> Tensor,
    e.g. a layer's ``get_params()``); each parameter is perturbed in place. Every parameter
    must be yielded by ``backward`` exactly once. Returns the analytic gradients by name.
    """
    prev = autograd.training
    autograd.training = True
    try:
        y = forward()
        rng = np.random.default_rng(seed)
        dy_np = rng.standard_normal(y.shape)
        dy = Tensor(data=dy_np.astype(y.to_numpy().dtype), device=y.device, dtype=y.dtype,
                    requires_grad=False)
        by_id = {id(t): name for name, t in params.items()}
        grads: dict = {}
        for p, g in autograd.backward(y, dy):
            name = by_id.get(id(p))
            if name is not None:
                assert name not in grads, f"{name} yielded twice"
                grads[name] = g.to_numpy()
        missing = sorted(set(params) - set(grads))
        assert not missing, f"no gradient yielded for {missing}"

        def objective():
            return float(np.sum(forward().to_numpy().astype(np.float64) * dy_np))

        for name, t in params.items():
            values = t.to_numpy().astype(np.float64)
            num = np.zeros_like(values)
            for idx in np.ndindex(values.shape):
                orig = values[idx]
                values[idx] = orig + eps
                t.copy_from_numpy(values)
                fp = objective()
                values[idx] = orig - eps
                t.copy_from_numpy(values)
                fm = objective()
                values[idx] = orig
                t.copy_from_numpy(values)
                num[idx] = (fp - fm) / (2 * eps)
            np.testing.assert_allclose(grads[name], num, rtol=rtol, atol=atol,
                                       err_msg=f"gradient of {name}")
        return grads
    finally:
        autograd.training = prev
