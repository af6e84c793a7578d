"""Whole-sequence LSTM and GRU as differentiable operations (ops ``LSTMSeq``, ``GRUSeq``).

The caller projects the inputs of every step at once (``xw = x W^T + b``, one GEMM, and its
gradient is the ordinary matmul's); these run the recurrence and backpropagate through time
with one backward op each.
"""

from __future__ import annotations

from .. import _math
from .._ctensor import CTensor
from ..ops import OPS, run
from ._engine import Operator, is_training


def has_seq_kernel(x, op: str) -> bool:
    """Whether ``op`` (``"LSTMSeq"``, ``"GRUSeq"``) runs on the device of Tensor ``x``: a kernel
    for it and its backward, or the backend's host fallback. Callers unroll the cell into
    primitive ops otherwise, which every backend runs."""
    dev = x.device
    return dev.host_fallback or (op in dev.kernels and f"{op}Backward" in dev.kernels)


def _zeros_like(x: CTensor) -> CTensor:
    return _math.set_value(CTensor._new(x.dims, x.dev, x.dtype_code), 0.0)


class LSTMSeq(Operator):
    """(y, c) = LSTM over the steps of ``xw`` (T, B, 4H) from states h0, c0 (ONNX gates iofc).

    Gradients (dxw, dr, dh0, dc0) = LSTMSeqBackward(dy, dc, gates, c, y, h0, c0, r), ``r``
    the recurrent weights (4H, H).
    """

    def __init__(self, reverse: bool = False):
        super().__init__()
        self.attrs = {"reverse": bool(reverse)}

    def forward(self, xw, r, h0, c0):
        """CTensors xw (T, B, 4H), r (4H, H), h0 and c0 (B, H) -> y and c, both (T, B, H)."""
        y, c, gates = run(OPS["LSTMSeq"], [xw, r, h0, c0], self.attrs)
        self.seq_len, self.hidden_size = y.dims[0], y.dims[2]  # for exporters (singa-onnx)
        if is_training():
            self.saved = (gates, c, y, h0, c0, r)
        return y, c

    def backward(self, dy, dc):
        """(dxw, dr, dh0, dc0) from dy and dc (either None: zeros), through time."""
        if not hasattr(self, "saved"):
            self._need_cache()
        gates, c, y, h0, c0, r = self.saved
        dy = _zeros_like(y) if dy is None else dy
        dc = _zeros_like(c) if dc is None else dc
        return tuple(run(OPS["LSTMSeqBackward"], [dy, dc, gates, c, y, h0, c0, r],
                         self.attrs))


class GRUSeq(Operator):
    """y = GRU over the steps of ``xw`` (T, B, 3H) from state h0 (ONNX gates zrh; ``rb`` the
    recurrent bias, ``linear_before_reset`` as in ONNX).

    Gradients (dxw, drw, drb, dh0) = GRUSeqBackward(dy, gates, q, y, h0, rw), ``rw`` the
    recurrent weights (3H, H).
    """

    def __init__(self, reverse: bool = False, linear_before_reset: bool = False):
        super().__init__()
        self.attrs = {"reverse": bool(reverse), "linear_before_reset": bool(linear_before_reset)}

    def forward(self, xw, rw, rb, h0):
        """CTensors xw (T, B, 3H), rw (3H, H), rb (3H,), h0 (B, H) -> y (T, B, H)."""
        y, gates, q = run(OPS["GRUSeq"], [xw, rw, rb, h0], self.attrs)
        self.seq_len, self.hidden_size = y.dims[0], y.dims[2]  # for exporters (singa-onnx)
        if is_training():
            self.saved = (gates, q, y, h0, rw)
        return y

    def backward(self, dy):
        """(dxw, drw, drb, dh0) from dy, through time."""
        if not hasattr(self, "saved"):
            self._need_cache()
        gates, q, y, h0, rw = self.saved
        return tuple(run(OPS["GRUSeqBackward"], [dy, gates, q, y, h0, rw], self.attrs))
