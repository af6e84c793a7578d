"""Recurrent layers built from autograd ops, so they run on every backend.

``RNN``, ``LSTM`` and ``GRU`` take a list of per-step tensors (batch, features), as in SINGA.
``num_layers`` stacks layers and ``bidirectional`` adds a reverse pass whose outputs are
concatenated with the forward ones. ``CudnnRNN`` keeps SINGA's cuDNN-style interface (one
(batch, seq, feature) tensor) on top of the same cells.

Where the device has the whole-sequence op (``LSTMSeq``, ``GRUSeq``; see
``autograd.has_seq_kernel``), LSTM and GRU run each (layer, direction) as one input
projection of every step (one GEMM by the gates' weights side by side), the recurrence as that
one op, and so the weight gradients as one GEMM over all steps. Elsewhere, and with masks,
they run the cell step by step in autograd ops. The parameters are the same per-gate tensors
either way.
"""

from __future__ import annotations

import math

import numpy as np

from .. import autograd
from ..errors import ShapeError
from ..tensor import Tensor
from ._base import Layer, ParamLayer, new_param

_GATES = {"rnn": ("",), "lstm": ("i", "f", "o", "g"), "gru": ("r", "z", "n")}
# the whole-sequence op of each kind and the gate order it takes (ONNX's: LSTM i, o, f, c;
# GRU z, r, h); SINGA's GRU is ONNX's with linear_before_reset
_SEQ = {"lstm": ("LSTMSeq", ("i", "o", "f", "g")), "gru": ("GRUSeq", ("z", "r", "n"))}


def _zeros(shape, like: Tensor) -> Tensor:
    return new_param(shape, like, stores_grad=False).set_value(0.0)


class RNN_Base(ParamLayer):  # noqa: N801  (SINGA's name)
    """Shared machinery: parameters per (layer, direction, gate), the time loop, stacking."""

    kind = "rnn"

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False):
        super().__init__()
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.num_layers, self.nonlinearity = int(num_layers), nonlinearity
        if min(self.input_size, self.hidden_size, self.num_layers) < 1:
            raise ShapeError(f"{type(self).__name__}: input_size={input_size}, hidden_size="
                             f"{hidden_size} and num_layers={num_layers} must be at least 1")
        self.bias, self.batch_first = bool(bias), bool(batch_first)
        self.dropout, self.bidirectional = float(dropout), bool(bidirectional)
        self.dirs = 2 if bidirectional else 1

    # parameter names: SINGA's for layer 0 forward, suffixed for the others
    def _suffix(self, layer, direction):
        return (f"_l{layer}" if layer else "") + ("_reverse" if direction else "")

    def _pname(self, stem, gate, layer, direction):
        g = f"_{gate}" if gate else ""
        return f"{stem}{g}{self._suffix(layer, direction)}"

    def initialize(self, xs, *state):
        """Create every (layer, direction, gate) weight and bias, uniform in ``[-1/sqrt(hidden),
        1/sqrt(hidden)]``.

        Parameters
        ----------
        xs : list of Tensor
            The time steps, each (batch, input_size), floating point.
        *state : Tensor
            Initial states (unused here).
        """
        x0 = xs[0]
        self.float_check(x0)
        if len(x0.shape) != 2:
            raise ShapeError(f"{type(self).__name__}: each time step must be a 2-D (batch, "
                             f"features) tensor, got {x0.shape}")
        if x0.shape[-1] != self.input_size:
            raise ShapeError(f"{type(self).__name__}: inputs have {x0.shape[-1]} features, "
                             f"input_size is {self.input_size}")
        h = self.hidden_size
        bound = 1.0 / math.sqrt(h)
        self._pnames = []
        for layer in range(self.num_layers):
            n_in = self.input_size if layer == 0 else h * self.dirs
            for d in range(self.dirs):
                for gate in _GATES[self.kind]:
                    for stem, shape in (("Wx", (n_in, h)), ("Wh", (h, h))):
                        self._new_param(self._pname(stem, gate, layer, d), shape, x0, bound)
                    if self.bias:
                        stems = ("Bx", "Bh") if self.kind != "rnn" else ("b",)
                        for stem in stems:
                            self._new_param(self._pname(stem, gate, layer, d), (h,), x0,
                                            bound)

    def _new_param(self, attr, shape, like, bound):
        setattr(self, attr, new_param(shape, like).uniform(-bound, bound))
        self._pnames.append(attr)

    def _param_names(self):
        return self._pnames

    # ---------------------------------------------------------------- computation
    def _lin(self, x, h, gate, layer, d):
        """x Wx + h Wh (+ biases) for one gate."""
        p = self._pname
        y = autograd.add(autograd.matmul(x, getattr(self, p("Wx", gate, layer, d))),
                         autograd.matmul(h, getattr(self, p("Wh", gate, layer, d))))
        if self.bias:
            if self.kind == "rnn":
                y = autograd.add_bias(y, getattr(self, p("b", gate, layer, d)))
            else:
                y = autograd.add_bias(y, getattr(self, p("Bx", gate, layer, d)))
                y = autograd.add_bias(y, getattr(self, p("Bh", gate, layer, d)))
        return y

    def step_forward(self, x, h, c=None, layer=0, d=0):
        """One time step; returns (h, c) (c is None except for LSTM)."""
        raise NotImplementedError

    def _run(self, xs, h0s, c0s, masks=None):
        """The full stack. h0s/c0s: one initial state per (layer, direction)."""
        seq = list(xs)
        want = (seq[0].shape[0], self.input_size) if seq and len(seq[0].shape) == 2 else None
        for t, x in enumerate(seq):
            if not isinstance(x, Tensor) or x.shape != want or 0 in x.shape:
                raise ShapeError(
                    f"{type(self).__name__}: time step {t} is "
                    f"{getattr(x, 'shape', type(x).__name__)}; every step must be a non-empty "
                    f"(batch, input_size={self.input_size}) tensor of one batch size")
        if (masks is None and self.kind in _SEQ
                and autograd.has_seq_kernel(seq[0], _SEQ[self.kind][0])):
            return self._run_seq(seq, h0s, c0s)
        h_last, c_last = [], []
        for layer in range(self.num_layers):
            outs_dir = []
            for d in range(self.dirs):
                k = layer * self.dirs + d
                h, c = h0s[k], (c0s[k] if c0s is not None else None)
                order = range(len(seq)) if d == 0 else range(len(seq) - 1, -1, -1)
                outs = [None] * len(seq)
                for t in order:
                    h_new, c_new = self.step_forward(seq[t], h, c, layer, d)
                    if masks is not None:
                        m = masks[t]
                        keep = autograd.sub(h_new, h)
                        h_new = autograd.add(h, autograd.mul(keep, m))
                        if c_new is not None:
                            c_new = autograd.add(c, autograd.mul(autograd.sub(c_new, c), m))
                    h, c = h_new, c_new
                    outs[t] = h
                outs_dir.append(outs)
                h_last.append(h)
                c_last.append(c)
            if self.dirs == 2:
                seq = [autograd.cat([a, b], 1) for a, b in zip(*outs_dir)]
            else:
                seq = outs_dir[0]
            if self.dropout and layer < self.num_layers - 1:
                seq = [autograd.dropout(s, 0, self.dropout) for s in seq]
        return seq, h_last, c_last

    def _stacked(self, stem, layer, d):
        """The gates' ``stem`` parameters side by side in the whole-sequence op's gate order:
        (rows, G*H) for Wx and Wh, (G*H,) for the biases."""
        gates = _SEQ[self.kind][1]
        return autograd.cat([getattr(self, self._pname(stem, g, layer, d)) for g in gates],
                            len(getattr(self, self._pname(stem, gates[0], layer, d)).shape) - 1)

    def _run_seq(self, seq, h0s, c0s):
        """The full stack with one whole-sequence op per (layer, direction). The steps travel
        as one (T*B, features) tensor between layers and are split only for the output."""
        steps, batch, h = len(seq), seq[0].shape[0], self.hidden_size
        x = autograd.cat(seq, 0) if steps > 1 else seq[0]
        h_last, c_last = [], []
        for layer in range(self.num_layers):
            ys = []
            for d in range(self.dirs):
                k = layer * self.dirs + d
                xw = autograd.matmul(x, self._stacked("Wx", layer, d))
                if self.bias:
                    # the LSTM op has no recurrent bias input: both biases go into xw
                    bias = self._stacked("Bx", layer, d)
                    if self.kind == "lstm":
                        bias = autograd.add(bias, self._stacked("Bh", layer, d))
                    xw = autograd.add_bias(xw, bias)
                xw = autograd.reshape(xw, (steps, batch, xw.shape[1]))
                # the op takes the recurrent weights as (G*H, H), ONNX's R
                r = autograd.transpose(self._stacked("Wh", layer, d), (1, 0))
                if self.kind == "lstm":
                    y, c = autograd.LSTMSeq(reverse=d == 1)(xw, r, h0s[k], c0s[k])
                else:
                    rb = (self._stacked("Bh", layer, d) if self.bias
                          else _zeros((3 * h,), x))
                    y, c = autograd.GRUSeq(d == 1, True)(xw, r, rb, h0s[k])[0], None
                last = [0] if d == 1 else [steps - 1]
                h_last.append(self._step_of(y, last, batch))
                c_last.append(None if c is None else self._step_of(c, last, batch))
                ys.append(y)
            y = autograd.cat(ys, 2) if self.dirs == 2 else ys[0]
            x = autograd.reshape(y, (steps * batch, self.dirs * h))
            if self.dropout and layer < self.num_layers - 1:
                x = autograd.dropout(x, 0, self.dropout)
        outs = list(autograd.split(x, 0, [batch] * steps)) if steps > 1 else [x]
        return outs, h_last, c_last

    @staticmethod
    def _step_of(y, at, batch):
        """Step ``at`` ([t]) of a (T, B, H) sequence as (B, H)."""
        s = autograd.slice(y, at, [at[0] + 1], [0])
        return autograd.reshape(s, (batch, y.shape[2]))

    def _split_state(self, state, like):
        """Per-(layer, direction) states from (batch, h) or (layers*dirs, batch, h)."""
        n = self.num_layers * self.dirs
        batch = like.shape[0]
        if state is None:
            return [_zeros((batch, self.hidden_size), like) for _ in range(n)]
        if n == 1 and len(state.shape) == 2:
            return [state]
        if state.shape != (n, batch, self.hidden_size):
            raise ShapeError(f"{type(self).__name__}: initial state must be (batch, hidden) for "
                             f"one layer/direction or ({n}, {batch}, {self.hidden_size}); got "
                             f"{state.shape}")
        parts = autograd.split(state, 0, [1] * n)
        return [autograd.reshape(p, (batch, self.hidden_size)) for p in parts]

    def _join_state(self, states):
        if len(states) == 1:
            return states[0]
        return autograd.cat([autograd.unsqueeze(s, 0) for s in states], 0)


# RNN's and GRU's forward: one state, h (LSTM's has two, h and c)
def _forward_one_state(self, xs, h0=None):
    """Run the stack over the sequence.

    Parameters
    ----------
    xs : list of Tensor
        The time steps, each (batch, input_size).
    h0 : Tensor, optional
        Initial state, (batch, hidden) or (num_layers * dirs, batch, hidden); zeros if None.

    Returns
    -------
    tuple
        (outputs, one (batch, dirs * hidden) per step; last states, like ``h0``).
    """
    seq, hs, _ = self._run(xs, self._split_state(h0, xs[0]), None)
    return seq, self._join_state(hs)


class RNN(RNN_Base):
    """Elman RNN: h = act(x Wx + h Wh + b). ``forward(xs, h0)`` -> (list of h, last h)."""

    kind = "rnn"

    def step_forward(self, x, h, c=None, layer=0, d=0):
        """One time step: ``h' = act(x Wx + h Wh + b)``; returns ``(h', None)``."""
        y = self._lin(x, h, "", layer, d)
        return (autograd.tanh(y) if self.nonlinearity == "tanh" else autograd.relu(y)), None

    forward = _forward_one_state


class LSTM(RNN_Base):
    """LSTM: i, f, o = sigmoid(.), g = tanh(.), c = f c + i g, h = o tanh(c).

    ``forward(xs, (h0, c0))`` -> (list of h, last h, last c).
    """

    kind = "lstm"

    def __init__(self, input_size, hidden_size, nonlinearity="tanh", num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False):
        super().__init__(input_size, hidden_size, num_layers, nonlinearity, bias, batch_first,
                         dropout, bidirectional)

    def step_forward(self, x, h, c=None, layer=0, d=0):
        """One time step: ``c' = f c + i g``, ``h' = o tanh(c')``; returns ``(h', c')``."""
        i = autograd.sigmoid(self._lin(x, h, "i", layer, d))
        f = autograd.sigmoid(self._lin(x, h, "f", layer, d))
        o = autograd.sigmoid(self._lin(x, h, "o", layer, d))
        g = autograd.tanh(self._lin(x, h, "g", layer, d))
        c = autograd.add(autograd.mul(f, c), autograd.mul(i, g))
        return autograd.mul(o, autograd.tanh(c)), c

    def forward(self, xs, hc=None):
        """Run the stack over the sequence.

        Parameters
        ----------
        xs : list of Tensor
            The time steps, each (batch, input_size).
        hc : tuple of Tensor, optional
            Initial ``(h0, c0)``, each (batch, hidden) or (num_layers * dirs, batch, hidden);
            zeros if None.

        Returns
        -------
        tuple
            (outputs, one (batch, dirs * hidden) per step; last h; last c).
        """
        h0, c0 = hc if hc is not None else (None, None)
        seq, hs, cs = self._run(xs, self._split_state(h0, xs[0]),
                                self._split_state(c0, xs[0]))
        return seq, self._join_state(hs), self._join_state(cs)


class GRU(RNN_Base):
    """GRU: r, z = sigmoid(.), n = tanh(x Wx_n + Bx_n + r (h Wh_n + Bh_n)), h = (1-z) n + z h.

    ``forward(xs, h0)`` -> (list of h, last h).
    """

    kind = "gru"

    def step_forward(self, x, h, c=None, layer=0, d=0):
        """One time step: ``h' = (1 - z) n + z h``; returns ``(h', None)``."""
        p = self._pname
        r = autograd.sigmoid(self._lin(x, h, "r", layer, d))
        z = autograd.sigmoid(self._lin(x, h, "z", layer, d))
        xn = autograd.matmul(x, getattr(self, p("Wx", "n", layer, d)))
        hn = autograd.matmul(h, getattr(self, p("Wh", "n", layer, d)))
        if self.bias:
            xn = autograd.add_bias(xn, getattr(self, p("Bx", "n", layer, d)))
            hn = autograd.add_bias(hn, getattr(self, p("Bh", "n", layer, d)))
        n = autograd.tanh(autograd.add(xn, autograd.mul(r, hn)))
        # h' = n + z (h - n)
        return autograd.add(n, autograd.mul(z, autograd.sub(h, n))), None

    forward = _forward_one_state


class CudnnRNN(Layer):
    """SINGA's cuDNN-style RNN on one (batch, seq, feature) tensor, on every backend.

    ``rnn_mode``: 'lstm', 'gru', 'tanh' / 'vanilla', 'relu'. ``forward(x, hx=None, cx=None,
    seq_lengths=None)`` returns (batch, seq, dirs*hidden) when ``return_sequences`` else the
    output at each sequence's last valid step, (batch, dirs*hidden). Parameters are per gate
    (not cuDNN's flat vector).
    """

    def __init__(self, hidden_size, activation="tanh", num_layers=1, bias=True,
                 batch_first=True, dropout=0.0, bidirectional=False, rnn_mode="lstm",
                 use_mask=False, return_sequences=True):
        super().__init__()
        modes = ("lstm", "gru", "tanh", "vanilla", "relu")
        if rnn_mode not in modes:
            raise ValueError(f"rnn_mode must be one of {modes}, got {rnn_mode!r}")
        self.hidden_size, self.activation = int(hidden_size), activation
        self.num_layers, self.bias, self.batch_first = int(num_layers), bias, batch_first
        self.dropout, self.bidirectional = float(dropout), bool(bidirectional)
        self.rnn_mode, self.use_mask = rnn_mode, use_mask
        self.return_sequences = return_sequences

    def initialize(self, x, *args, **kwargs):
        """Create the inner LSTM, GRU or RNN for ``rnn_mode``, its input size from ``x``'s last
        axis.
        """
        feat = x.shape[-1]
        kw = dict(num_layers=self.num_layers, bias=self.bias, dropout=self.dropout,
                  bidirectional=self.bidirectional)
        if self.rnn_mode == "lstm":
            self.rnn = LSTM(feat, self.hidden_size, **kw)
        elif self.rnn_mode == "gru":
            self.rnn = GRU(feat, self.hidden_size, **kw)
        else:
            act = "relu" if self.rnn_mode == "relu" else "tanh"
            self.rnn = RNN(feat, self.hidden_size, nonlinearity=act, **kw)

    def forward(self, x, hx=None, cx=None, seq_lengths=None):
        """Run the recurrent stack over a (batch, seq, feature) tensor.

        Parameters
        ----------
        x : Tensor
            (batch, seq, feature), or (seq, batch, feature) when not ``batch_first``.
        hx, cx : Tensor, optional
            Initial hidden and (LSTM) cell states, (num_layers * dirs, batch, hidden); zeros if
            None.
        seq_lengths : Tensor or array-like, optional
            Valid length of each sequence; later steps keep the state and output zeros.

        Returns
        -------
        Tensor
            (batch, seq, dirs * hidden) when ``return_sequences``, else (batch, dirs * hidden).
        """
        if len(x.shape) != 3:
            raise ShapeError(f"CudnnRNN expects a 3-D input, got {x.shape}")
        if not self.batch_first:
            x = autograd.transpose(x, (1, 0, 2))
        batch, steps, feat = x.shape
        if steps == 0 or batch == 0 or feat == 0:
            raise ShapeError(f"CudnnRNN: the input {x.shape} is empty (batch {batch}, "
                             f"{steps} time steps, {feat} features); skip empty batches and "
                             "sequences")
        xs = [autograd.reshape(autograd.slice(x, [t], [t + 1], [1]), (batch, feat))
              for t in range(steps)]
        masks = None
        if seq_lengths is not None:
            lens = np.asarray(seq_lengths.to_numpy() if isinstance(seq_lengths, Tensor)
                              else seq_lengths).reshape(-1)
            masks = []
            for t in range(steps):
                m = (t < lens).astype(np.float32).reshape(batch, 1)
                masks.append(Tensor(data=m, device=x.device, dtype=x.dtype,
                                    requires_grad=False))
        rnn = self.rnn
        if not rnn._initialized:
            rnn.initialize(xs)
        if isinstance(rnn, LSTM):
            seq, hs, cs = rnn._run(xs, rnn._split_state(hx, xs[0]),
                                   rnn._split_state(cx, xs[0]), masks)
        else:
            seq, hs, _ = rnn._run(xs, rnn._split_state(hx, xs[0]), None, masks)
        if masks is not None:
            seq = [autograd.mul(s, m) for s, m in zip(seq, masks)]
        if self.return_sequences:
            y = autograd.cat([autograd.unsqueeze(s, 1) for s in seq], 1)
            return y if self.batch_first else autograd.transpose(y, (1, 0, 2))
        if self.bidirectional:
            # last forward state and the reverse state at t = 0
            last = self.num_layers * 2 - 2
            return autograd.cat([hs[last], hs[last + 1]], 1)
        return hs[-1]
