"""Whole-sequence LSTM and GRU ops (``LSTMSeq``/``GRUSeq`` and their BPTT backward ops).

Oracles: PyTorch's ``nn.LSTM``/``nn.GRU`` for the numpy references (gate order converted from
torch's ``i f g o``/``r z n`` to ONNX's ``i o f c``/``z r h``; torch's GRU is ONNX's
``linear_before_reset=1``), the references for the CPU kernels' forward values, and finite
differences for every gradient.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gradcheck import check_op, to_tensor
from singa import autograd
from singa.errors import DtypeMismatchError, ShapeError
from singa.ops import OPS, run

LSTM_REF = OPS["LSTMSeq"].reference
GRU_REF = OPS["GRUSeq"].reference


@pytest.fixture
def seq_kernels():
    """The session's device runs the ops: a backend without their kernels (OpenCL, CUDA: the
    ONNX handlers unroll the cells there, see tests/onnx/test_recurrent_unrolled.py) skips."""
    from singa.device import get_default_device

    dev = get_default_device()
    missing = [op for op in ("LSTMSeq", "LSTMSeqBackward", "GRUSeq", "GRUSeqBackward")
               if op not in dev.kernels]
    if missing and not dev.host_fallback:
        pytest.skip(f"{dev.name} has no kernel for {', '.join(missing)}")


def _torch_rows(w, order, h):
    return np.concatenate([w[k * h:(k + 1) * h] for k in order])


@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_reference_matches_torch(reverse, rng):
    t, b, n_in, h = 5, 3, 4, 6
    cell = torch.nn.LSTM(n_in, h).double()
    x = rng.standard_normal((t, b, n_in))
    h0, c0 = rng.standard_normal((b, h)), rng.standard_normal((b, h))
    w_ih, w_hh = cell.weight_ih_l0.detach().numpy(), cell.weight_hh_l0.detach().numpy()
    bias = (cell.bias_ih_l0 + cell.bias_hh_l0).detach().numpy()
    order = [0, 3, 1, 2]  # torch i f g o -> ONNX i o f c
    w, r, bb = (_torch_rows(a, order, h) for a in (w_ih, w_hh, bias))
    xs = x[::-1] if reverse else x
    with torch.no_grad():
        want, (hn, cn) = cell(torch.from_numpy(xs.copy()),
                              (torch.from_numpy(h0[None]), torch.from_numpy(c0[None])))
    want = want.numpy()[::-1] if reverse else want.numpy()
    y, c, _ = LSTM_REF(x @ w.T + bb, r, h0, c0, reverse=reverse)
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    last = 0 if reverse else t - 1
    np.testing.assert_allclose(c[last], cn.numpy()[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reverse", [False, True])
def test_gru_reference_matches_torch(reverse, rng):
    t, b, n_in, h = 5, 3, 4, 6
    cell = torch.nn.GRU(n_in, h).double()
    x = rng.standard_normal((t, b, n_in))
    h0 = rng.standard_normal((b, h))
    order = [1, 0, 2]  # torch r z n -> ONNX z r h
    w, r, wb, rb = (_torch_rows(a.detach().numpy(), order, h) for a in (
        cell.weight_ih_l0, cell.weight_hh_l0, cell.bias_ih_l0, cell.bias_hh_l0))
    xs = x[::-1] if reverse else x
    with torch.no_grad():
        want = cell(torch.from_numpy(xs.copy()), torch.from_numpy(h0[None]))[0].numpy()
    want = want[::-1] if reverse else want
    y, _, _ = GRU_REF(x @ w.T + wb, r, rb, h0, reverse=reverse,
                      linear_before_reset=True)
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)


def _lstm_inputs(rng, t, b, h):
    return [rng.standard_normal((t, b, 4 * h)), 0.5 * rng.standard_normal((4 * h, h)),
            rng.standard_normal((b, h)), rng.standard_normal((b, h))]


@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_seq_forward_and_gradients(reverse, rng, seq_kernels):
    check_op(lambda *a: autograd.LSTMSeq(reverse)(*a), _lstm_inputs(rng, 4, 2, 3),
             lambda *a: LSTM_REF(*a, reverse=reverse)[:2])


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("lbr", [False, True])
def test_gru_seq_forward_and_gradients(reverse, lbr, rng, seq_kernels):
    t, b, h = 4, 2, 3
    inputs = [rng.standard_normal((t, b, 3 * h)), 0.5 * rng.standard_normal((3 * h, h)),
              rng.standard_normal(3 * h), rng.standard_normal((b, h))]
    check_op(lambda *a: autograd.GRUSeq(reverse, lbr)(*a), inputs,
             lambda *a: GRU_REF(*a, reverse=reverse, linear_before_reset=lbr)[0])


def test_lstm_seq_gradient_of_the_cell_output_alone(rng, seq_kernels):
    """Only c is used: backward receives no gradient for y and treats it as zero."""
    check_op(lambda *a: autograd.LSTMSeq()(*a)[1], _lstm_inputs(rng, 3, 2, 2),
             lambda *a: LSTM_REF(*a)[1])


def test_float32_kernels_match_the_float64_reference(rng, seq_kernels):
    xw, rt, h0, c0 = (a.astype(np.float32) for a in _lstm_inputs(rng, 16, 4, 32))
    y, c = autograd.LSTMSeq()(*(to_tensor(a, grad=False) for a in (xw, rt, h0, c0)))
    want = LSTM_REF(*(a.astype(np.float64) for a in (xw, rt, h0, c0)))
    np.testing.assert_allclose(y.to_numpy(), want[0], rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(c.to_numpy(), want[1], rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("reverse", [False, True])
def test_float32_backward_kernel_matches_the_float64_reference(reverse, rng, seq_kernels):
    """The float32 BPTT (its own tanh, the weight gradient as one product over all steps) at
    a hidden size that is no multiple of a vector width."""
    t, b, h = 9, 5, 37
    xw, r, h0, c0 = _lstm_inputs(rng, t, b, h)
    y, c, gates = LSTM_REF(xw, r, h0, c0, reverse=reverse)
    dy, dc = rng.standard_normal(y.shape), rng.standard_normal(y.shape)
    ins = [dy, dc, gates, c, y, h0, c0, r]
    want = OPS["LSTMSeqBackward"].reference(*ins, reverse=reverse)
    ts = [to_tensor(a.astype(np.float32), grad=False).data for a in ins]
    outs = run(OPS["LSTMSeqBackward"], ts, {"reverse": reverse})
    for name, g, w in zip(("dxw", "dr", "dh0", "dc0"), outs, want):
        np.testing.assert_allclose(g.to_numpy(), w, rtol=2e-4, atol=2e-5, err_msg=name)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("lbr", [False, True])
def test_float32_gru_backward_kernel_matches_the_float64_reference(reverse, lbr, rng,
                                                                   seq_kernels):
    """The float32 GRU BPTT (the weight and bias gradients summed over all steps at once)."""
    t, b, h = 9, 5, 37
    xw, rw = rng.standard_normal((t, b, 3 * h)), 0.5 * rng.standard_normal((3 * h, h))
    rb, h0 = rng.standard_normal(3 * h), rng.standard_normal((b, h))
    y, gates, q = GRU_REF(xw, rw, rb, h0, reverse=reverse, linear_before_reset=lbr)
    ins = [rng.standard_normal(y.shape), gates, q, y, h0, rw]
    attrs = {"reverse": reverse, "linear_before_reset": lbr}
    want = OPS["GRUSeqBackward"].reference(*ins, **attrs)
    ts = [to_tensor(a.astype(np.float32), grad=False).data for a in ins]
    outs = run(OPS["GRUSeqBackward"], ts, attrs)
    for name, g, w in zip(("dxw", "drw", "drb", "dh0"), outs, want):
        np.testing.assert_allclose(g.to_numpy(), w, rtol=2e-4, atol=2e-5, err_msg=name)


def test_bad_inputs_are_refused_with_the_expected_shapes(rng):
    xw, rt, h0, c0 = _lstm_inputs(rng, 3, 2, 4)
    with pytest.raises(ShapeError, match=r"input 1 has shape \(12, 4\), expected \(16, 4\)"):
        autograd.LSTMSeq()(*(to_tensor(a) for a in (xw, rt[:12], h0, c0)))
    with pytest.raises(ShapeError, match=r"xw must be \(T, B, 4\*H\)"):
        autograd.LSTMSeq()(*(to_tensor(a) for a in (xw[..., :15], rt, h0, c0)))
    with pytest.raises(DtypeMismatchError, match="input 2 is float32"):
        autograd.LSTMSeq()(*(to_tensor(a) for a in (xw, rt, h0.astype(np.float32), c0)))



@pytest.fixture
def two_threads(monkeypatch):
    """The CPU kernels split every batch of 4 or more rows across two threads (the size
    threshold off): ``singa_cpu.kernels.recurrent._batch_spans``."""
    threads = pytest.importorskip("singa_cpu.kernels._threads")
    recurrent = pytest.importorskip("singa_cpu.kernels.recurrent")
    monkeypatch.setattr(threads, "num_threads", lambda: 2)
    monkeypatch.setattr(recurrent, "PARALLEL_MIN_MACS", 0)
    monkeypatch.setattr(recurrent, "STEP_MIN_MACS", 0)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("b", [4, 5])
def test_lstm_seq_split_across_threads_forward_and_gradients(reverse, b, rng, seq_kernels,
                                                             two_threads):
    """float64 (the per-step path), the batch split: forward against the reference, every
    gradient against finite differences."""
    check_op(lambda *a: autograd.LSTMSeq(reverse)(*a), _lstm_inputs(rng, 3, b, 3),
             lambda *a: LSTM_REF(*a, reverse=reverse)[:2])


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("lbr", [False, True])
def test_gru_seq_split_across_threads_forward_and_gradients(reverse, lbr, rng, seq_kernels,
                                                            two_threads):
    t, b, h = 3, 5, 3
    inputs = [rng.standard_normal((t, b, 3 * h)), 0.5 * rng.standard_normal((3 * h, h)),
              rng.standard_normal(3 * h), rng.standard_normal((b, h))]
    check_op(lambda *a: autograd.GRUSeq(reverse, lbr)(*a), inputs,
             lambda *a: GRU_REF(*a, reverse=reverse, linear_before_reset=lbr)[0])
