"""Mixed-dtype arithmetic on the device under test, against numpy.

An elementwise op on tensors of two dtypes computes in their common dtype: numpy's
``promote_types``, except that an integer meeting a float gives the float's dtype (PyTorch's
rule: numpy widens int32 with float32 to float64). Python and numpy scalars do not widen a
tensor, except that a float scalar makes an int tensor float32. Checked through the Tensor
operators, the ``tensor`` module functions and the autograd functions (gradients flow to the
float operands in their own dtypes, none to an int operand), and in a SINGA-style attention
model with an int32 mask (``examples/trans``) trained eagerly and in graph mode.
"""

from __future__ import annotations

import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from singa import autograd, layer, model, opt, tensor
from singa.errors import DtypeMismatchError
from singa.ops import OPS
from singa.tensor import Tensor

CODES = {np.dtype(np.float16): tensor.float16, np.dtype(np.float32): tensor.float32,
         np.dtype(np.float64): tensor.float64, np.dtype(np.int32): tensor.int32}
NP_OF = {c: d for d, c in CODES.items()}
TOL = {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12,
       np.dtype(np.int32): 0}


def expected_dtype(a: np.dtype, b: np.dtype) -> np.dtype:
    """The rule, written independently of singa._dtype.PROMOTE."""
    if (a.kind == "f") != (b.kind == "f"):
        return a if a.kind == "f" else b
    return np.promote_types(a, b)


def supports(dev, op: str, dt: np.dtype) -> bool:
    fn = dev.kernels.get(op)
    if fn is None:
        return bool(dev.host_fallback)
    return CODES[dt] in (fn[2] if fn[2] is not None else OPS[op].dtypes)


@pytest.fixture(scope="module")
def dev(singa_device):
    return singa_device


@pytest.fixture(autouse=True)
def _training_off():
    prev = autograd.training
    yield
    autograd.training = prev


def T(a, dev, **kw):
    a = np.asarray(a)
    return Tensor(data=a, device=dev, dtype=CODES[a.dtype], **kw)


# name: (Tensor operator, tensor module function or None, autograd function or None, numpy,
#        singa op name)
BINARY = {
    "add": (operator.add, tensor.add, autograd.add, np.add, "Add"),
    "sub": (operator.sub, tensor.sub, autograd.sub, np.subtract, "Sub"),
    "mul": (operator.mul, tensor.eltwise_mult, autograd.mul, np.multiply, "Mul"),
    "div": (operator.truediv, tensor.div, autograd.div, np.true_divide, "Div"),
    "pow": (operator.pow, None, autograd.pow, np.power, "Pow"),
    "lt": (operator.lt, tensor.lt, autograd.less, np.less, "LT"),
    "le": (operator.le, tensor.le, None, np.less_equal, "LE"),
    "gt": (operator.gt, tensor.gt, autograd.greater, np.greater, "GT"),
    "ge": (operator.ge, tensor.ge, None, np.greater_equal, "GE"),
    "eq": (operator.eq, tensor.eq, autograd.equal, np.equal, "EQ"),
    "ne": (operator.ne, None, None, np.not_equal, "NE"),
}
COMPARISONS = {"lt", "le", "gt", "ge", "eq", "ne"}
DTYPES = st.sampled_from(sorted(CODES, key=str))


@st.composite
def operands(draw, name):
    """Two arrays of broadcastable shapes and different dtypes, values on small integers
    (exact in float16, ties for the comparisons); pow gets a positive base."""
    da, db = draw(st.tuples(DTYPES, DTYPES).filter(lambda p: p[0] != p[1]))
    sa, sb = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                    max_side=4)).input_shapes
    lo = 1 if name == "pow" else -4
    a = draw(hnp.arrays(da, sa, elements=st.integers(lo, 4)))
    b = draw(hnp.arrays(db, sb, elements=st.integers(-2 if name == "pow" else -4, 4)))
    if name == "div":
        b = np.where(b == 0, 3, b).astype(db)
    return a, b


def check(dev, name, got, a, b):
    rt = expected_dtype(a.dtype, b.dtype)
    want = BINARY[name][3](a.astype(np.float64), b.astype(np.float64))
    if name in COMPARISONS:  # singa's comparisons give 1/0 in the operands' (float) dtype
        assert got.dtype == CODES[rt if rt.kind == "f" else np.dtype(np.float32)]
    else:
        assert got.dtype == CODES[rt], (name, a.dtype, b.dtype)
    tol = TOL[rt]
    np.testing.assert_allclose(got.to_numpy().astype(np.float64), want, rtol=tol, atol=tol,
                               err_msg=f"{name} {a.dtype} {b.dtype}")


def usable(dev, name, a, b) -> bool:
    rt = expected_dtype(a.dtype, b.dtype)
    return supports(dev, BINARY[name][4], rt) and all(
        supports(dev, "AsType", d) for d in (a.dtype, b.dtype))


@pytest.mark.parametrize("name", list(BINARY))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_tensor_operators_promote_like_numpy(dev, name, data):
    a, b = data.draw(operands(name))
    if not usable(dev, name, a, b):
        return
    op = BINARY[name][0]
    check(dev, name, op(T(a, dev), T(b, dev)), a, b)
    fn = BINARY[name][1]
    if fn is not None:
        check(dev, name, fn(T(a, dev), T(b, dev)), a, b)


@pytest.mark.parametrize("name", [n for n in BINARY if BINARY[n][2] is not None])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_autograd_functions_promote_and_send_gradients_to_float_operands(dev, name, data):
    """Forward against numpy; each float operand's gradient against numpy's in the common
    dtype, cast back to the operand's own dtype; an int operand gets no gradient even when
    it asks for one (a mask)."""
    a, b = data.draw(operands(name))
    if not usable(dev, name, a, b) or not supports(dev, "Sum", expected_dtype(a.dtype,
                                                                              b.dtype)):
        return
    autograd.training = True
    ta, tb = T(a, dev, stores_grad=True), T(b, dev, stores_grad=True)
    y = BINARY[name][2](ta, tb)
    check(dev, name, y, a, b)
    if name in COMPARISONS:
        return
    grads = {id(p): g for p, g in autograd.backward(y, tensor.ones_like(y))}
    rt = expected_dtype(a.dtype, b.dtype)
    a64, b64 = np.broadcast_arrays(a.astype(np.float64), b.astype(np.float64))
    want = {"add": lambda: (1.0, 1.0), "sub": lambda: (1.0, -1.0), "mul": lambda: (b64, a64),
            "div": lambda: (1 / b64, -a64 / b64 ** 2),
            "pow": lambda: (b64 * a64 ** (b64 - 1), np.log(a64) * a64 ** b64)}[name]()
    for t, x, w in ((ta, a, want[0]), (tb, b, want[1])):
        if x.dtype.kind != "f":
            assert id(t) not in grads, f"{name}: an int operand got a gradient"
            continue
        g = grads[id(t)]
        assert g.dtype == CODES[x.dtype] and g.shape == x.shape
        w = np.broadcast_to(w, np.broadcast_shapes(a.shape, b.shape))
        axes = tuple(range(w.ndim - x.ndim))
        w = w.sum(axis=axes)
        w = w.sum(axis=tuple(i for i, d in enumerate(x.shape) if d == 1), keepdims=True)
        tol = max(TOL[rt], TOL[x.dtype]) * 10
        np.testing.assert_allclose(g.to_numpy().astype(np.float64), w, rtol=tol, atol=tol,
                                   err_msg=f"d{name}/d({x.dtype}) with {a.dtype}, {b.dtype}")


def test_nary_sum_and_mean_promote(dev):
    a = np.array([[1, 2], [3, 4]], np.int32)
    b = np.array([[0.5, 0.25], [2.0, -1.0]], np.float32)
    autograd.training = True
    ta, tb = T(a, dev), T(b, dev, stores_grad=True)
    s = autograd.sum(ta, tb)
    m = autograd.mean(ta, tb)
    assert s.dtype == m.dtype == tensor.float32
    np.testing.assert_allclose(s.to_numpy(), a + b)
    np.testing.assert_allclose(m.to_numpy(), (a + b) / 2)
    grads = {id(p): g.to_numpy() for p, g in autograd.backward(m, tensor.ones_like(m))}
    np.testing.assert_allclose(grads[id(tb)], np.full((2, 2), 0.5))


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.int32])
def test_python_and_numpy_scalars_do_not_widen(dev, dt):
    """numpy 2 (NEP 50) and PyTorch treat a Python scalar as weak: it takes the tensor's
    dtype. A numpy scalar is treated the same (``x * np.sqrt(d)`` stays float32); a float
    scalar makes an int tensor float32 (PyTorch's default float dtype; SINGA's rule)."""
    if not supports(dev, "AddScalar", np.dtype(dt)):
        pytest.skip(f"{dev.name} has no {np.dtype(dt)} kernels")
    x = np.array([[1, -2, 3]], dt)
    t = T(x, dev)
    for s in (2, np.int64(2), 2.5, np.float64(2.5)):
        want_dt = np.dtype(np.float32) if dt is np.int32 and isinstance(
            s, (float, np.floating)) else np.dtype(dt)
        cases = [(t + s, x.astype(np.float64) + float(s)),
                 (t * s, x.astype(np.float64) * float(s))]
        if not isinstance(s, np.generic):  # numpy's own operator runs for np.int64(2) - t
            cases.append((s - t, float(s) - x.astype(np.float64)))
        for got, want in cases:
            assert got.dtype == CODES[want_dt], (s, got.dtype)
            np.testing.assert_allclose(got.to_numpy(), want.astype(want_dt), rtol=TOL[want_dt])


def test_in_place_and_ret_take_the_destination_dtype(dev):
    """``f += i`` converts the int operand (numpy's same_kind rule); ``i += f`` is refused
    (numpy and PyTorch refuse it); ``tensor.add(i, f, ret)`` writes into ret's dtype."""
    f = np.array([[0.5, 1.5, -2.0]], np.float32)
    i = np.array([[1, 2, 3]], np.int32)
    tf, ti = T(f, dev), T(i, dev)
    tf += ti
    np.testing.assert_array_equal(tf.to_numpy(), f + i)
    tf -= T(np.array([1], np.int32), dev)
    np.testing.assert_array_equal(tf.to_numpy(), f + i - 1)
    with pytest.raises(DtypeMismatchError, match="int32"):
        ti *= T(f, dev)
    ret = Tensor((1, 3), dev)
    assert tensor.add(T(i, dev), T(f, dev), ret) is ret
    np.testing.assert_array_equal(ret.to_numpy(), i + f)


def test_the_transformer_examples_mask_sum(dev):
    """examples/trans: ``tensor.gt(pad_mask + subsequent_mask, 0)`` with an int32 pad mask
    (from_numpy of np.where(..., 1, 0)) and a float32 triangle (from_numpy of np.triu)."""
    seq = np.array([[3, 5, 0, 0], [2, 0, 0, 0]])
    pad = np.broadcast_to(np.where(seq == 0, 1, 0)[:, None, :], (2, 4, 4))
    tri = np.triu(np.ones((2, 4, 4)), k=1)
    tp, tt = tensor.from_numpy(pad), tensor.from_numpy(tri)
    assert (tp.dtype, tt.dtype) == (tensor.int32, tensor.float32)
    tp.to_device(dev)
    tt.to_device(dev)
    got = tensor.gt(tp + tt, 0)
    assert got.dtype == tensor.float32
    np.testing.assert_array_equal(got.to_numpy(), (pad + tri > 0).astype(np.float32))


# ---------------------------------------------------------------- a model with an int mask
B, S, D, C = 3, 4, 8, 3


class MaskedAttention(model.Model):
    """One attention head over S tokens, written as SINGA's transformer example writes it:
    an int32 padding mask and a float32 causal triangle, combined with Tensor operators and
    added to the scores through autograd."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = layer.Linear(D), layer.Linear(D), layer.Linear(D)
        self.fc = layer.Linear(C)
        self.ce = layer.SoftMaxCrossEntropy()

    def forward(self, x, pad, causal):
        flat = autograd.reshape(x, [B * S, D])
        q, k, v = (autograd.reshape(f(flat), [B, S, D]) for f in (self.q, self.k, self.v))
        scores = autograd.matmul(q, autograd.transpose(k, (0, 2, 1)))
        scale = Tensor(shape=(1,), device=x.device, requires_grad=False, stores_grad=False)
        scale.set_value(1 / np.sqrt(D))
        neg = Tensor(shape=(1,), device=x.device, requires_grad=False, stores_grad=False)
        neg.set_value(-1e4)
        scores = autograd.mul(scores, scale)
        scores = autograd.add(scores, autograd.mul(pad, neg))  # int32 mask * float32
        blocked = tensor.gt(pad + causal, 0)  # int32 + float32, as examples/trans
        scores = autograd.add(scores, autograd.mul(blocked, neg))
        attn = autograd.softmax(scores, axis=-1)
        ctx = autograd.reduce_mean(autograd.matmul(attn, v), axes=[1], keepdims=0)
        return self.fc(ctx)

    def train_one_batch(self, x, pad, causal, y):
        out = self.forward(x, pad, causal)
        loss = self.ce(out, y)
        self.optimizer(loss)
        return out, loss


def _numpy_loss(params, x, pad, causal, y):
    def lin(name, h):
        return h @ params[f"{name}.W"] + params[f"{name}.b"]

    flat = x.reshape(B * S, D)
    q, k, v = (lin(n, flat).reshape(B, S, D) for n in "qkv")
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(D)
    scores = scores + pad * -1e4 + ((pad + causal) > 0) * -1e4
    e = np.exp(scores - scores.max(-1, keepdims=True))
    attn = e / e.sum(-1, keepdims=True)
    logits = lin("fc", (attn @ v).mean(1))
    logp = logits - logits.max(-1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
    return -logp[np.arange(B), y].mean()


def _train(dev, use_graph, start=None, steps=4):
    rng = np.random.default_rng(3)
    m = MaskedAttention()
    m.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    tx = Tensor((B, S, D), dev)
    tpad = Tensor((B, S, S), dev, tensor.int32)
    tcausal = Tensor((B, S, S), dev)
    ty = Tensor((B,), dev, tensor.int32)
    m.compile([tx, tpad, tcausal], is_train=True, use_graph=use_graph)
    if start is not None:
        m.set_states(start)
    init = {k: v.to_numpy().astype(np.float64) for k, v in m.get_states().items()}
    causal = np.triu(np.ones((B, S, S), np.float32), k=1)
    tcausal.copy_from_numpy(causal)
    losses, batches = [], []
    for _ in range(steps):
        lengths = rng.integers(1, S + 1, B)
        pad = np.broadcast_to((np.arange(S)[None, :] >= lengths[:, None])[:, None, :],
                              (B, S, S)).astype(np.int32)
        x = rng.standard_normal((B, S, D)).astype(np.float32)
        y = rng.integers(0, C, B).astype(np.int32)
        tx.copy_from_numpy(x)
        tpad.copy_from_numpy(pad)
        ty.copy_from_numpy(y)
        _, loss = m(tx, tpad, tcausal, ty)
        losses.append(float(loss.to_numpy().reshape(-1)[0]))
        batches.append((x, pad, causal, y))
    return init, losses, batches


def test_attention_with_an_int32_mask_trains_eagerly_and_in_graph_mode(dev):
    if not supports(dev, "Matmul", np.dtype(np.float32)):
        pytest.skip(f"{dev.name} has no float32 Matmul")
    start, eager, batches = _train(dev, use_graph=False)
    np.testing.assert_allclose(eager[0], _numpy_loss(start, *batches[0]), rtol=1e-4)
    assert eager[-1] != eager[0]
    _, graph, _ = _train(dev, use_graph=True, start=start)
    np.testing.assert_allclose(graph, eager, rtol=1e-5, atol=1e-6)
