"""A character-level LSTM language model (SINGA's char-rnn example).

    python examples/rnn/char_rnn.py examples/rnn/shakespeare.txt -b 32 -l 64 -d 128 -m 50

Those are SINGA's flags and values. The defaults here are smaller (-b 16 -l 32 -d 128 -m 12,
Adam with --lr 0.01) so that a run on the 7 KB sample takes well under a minute on a 2-core
CPU; longer runs on so little text mostly memorise it (the validation loss turns up).

The text is cut into sequences of ``-l`` + 1 characters (input and next-character target),
shuffled and split 80/20 into training and validation. Each training step feeds ``-l``
one-hot steps through ``layer.LSTM``, concatenates the outputs and predicts every next
character with a ``layer.Linear`` and softmax cross-entropy. After training (and every
``--sample-every`` epochs) it prints text sampled from the model, one character at a time
through ``tensor.softmax``. Losses are mean nats per character (ln(vocabulary) at the start).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from singa import device, layer, model, opt, tensor
from singa.tensor import Tensor
from tqdm import tqdm

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TEXT = os.path.join(HERE, "shakespeare.txt")


class CharRNN(model.Model):
    """LSTM over one-hot characters, then a linear layer over the vocabulary.

    ``hx``/``cx`` hold the LSTM state between calls (created on the first call for its batch
    size; other batch sizes, e.g. 1 for sampling, get their own state). ``reset_states``
    zeroes them all. They are part of ``get_states``, hence of checkpoints.
    """

    def __init__(self, vocab_size, hidden_size=32):
        super().__init__()
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.rnn = layer.LSTM(vocab_size, hidden_size)
        self.cat = layer.Cat()
        self.reshape1 = layer.Reshape()
        self.dense = layer.Linear(hidden_size, vocab_size)
        self.reshape2 = layer.Reshape()
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()
        self._other_states = {}

    def _zeros(self, batch, dev):
        return Tensor((batch, self.hidden_size), dev, requires_grad=False).set_value(0.0)

    def initialize(self, inputs):
        dev = inputs[0].device
        self.hx = self._zeros(inputs[0].shape[0], dev)
        self.cx = self._zeros(inputs[0].shape[0], dev)

    def reset_states(self, dev=None):
        """Zero every LSTM state (moving it to ``dev`` first when given)."""
        for hx, cx in [(self.hx, self.cx), *self._other_states.values()]:
            for t in (hx, cx):
                if dev is not None and t.device is not dev:
                    t.to_device(dev)
                t.set_value(0.0)

    def _state(self, x):
        batch = x.shape[0]
        if batch == self.hx.shape[0]:
            return self.hx, self.cx
        if batch not in self._other_states:
            self._other_states[batch] = (self._zeros(batch, x.device),
                                         self._zeros(batch, x.device))
        return self._other_states[batch]

    def _logits(self, inputs):
        if not self._initialized:  # train_one_batch does not go through forward's wrapper
            self.initialize(inputs)
        hx, cx = self._state(inputs[0])
        ys, h, c = self.rnn(inputs, (hx, cx))
        y = self.cat(ys)  # (steps * batch, hidden), step-major
        y = self.reshape1(y, (-1, self.hidden_size))
        return self.dense(y), (hx, h), (cx, c)

    def forward(self, inputs):
        """Logits (steps * batch, vocab) for a list of one-hot steps; advances the state."""
        out, (hx, h), (cx, c) = self._logits(inputs)
        hx.copy_data(h)
        cx.copy_data(c)
        return out

    def train_one_batch(self, x, y):
        out, (hx, h), (cx, c) = self._logits(x)
        y = self.reshape2(y, (-1, 1))
        loss = self.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        # the backward pass of the first step reads hx/cx, so overwrite them only after it
        hx.copy_data(h)
        cx.copy_data(c)
        return out, loss

    def set_optimizer(self, optimizer):
        self.optimizer = optimizer

    def get_states(self):
        states = super().get_states()
        states[self.hx.name] = self.hx
        states[self.cx.name] = self.cx
        return states

    def set_states(self, states):
        self.hx.copy_from(states[self.hx.name])
        self.cx.copy_from(states[self.cx.name])
        super().set_states(states)


class Data:
    """A plain-text file as shuffled (sequences, seq_length + 1) arrays of character ids."""

    def __init__(self, fpath, batch_size=16, seq_length=32, train_ratio=0.8, seed=0):
        with open(fpath, "rb") as fh:
            raw = fh.read()
        try:
            self.raw_data = raw.decode("utf-8")
        except UnicodeDecodeError:
            self.raw_data = raw.decode("latin-1")
        chars = sorted(set(self.raw_data))
        self.vocab_size = len(chars)
        self.char_to_idx = {ch: i for i, ch in enumerate(chars)}
        self.idx_to_char = dict(enumerate(chars))
        ids = np.fromiter((self.char_to_idx[c] for c in self.raw_data), np.int32,
                          len(self.raw_data))
        n = len(ids) // (seq_length + 1)
        if n < 2:
            raise ValueError(f"{fpath} has {len(ids)} characters: too short for sequences "
                             f"of {seq_length + 1}; use a smaller -l")
        seqs = ids[:n * (seq_length + 1)].reshape(n, seq_length + 1)
        np.random.default_rng(seed).shuffle(seqs)
        n_train = max(1, int(n * train_ratio))
        self.train_dat, self.val_dat = seqs[:n_train], seqs[n_train:]
        self.batch_size = min(batch_size, n_train)
        self.num_train_batch = n_train // self.batch_size


def one_hot_steps(batch, vocab_size):
    """(batch, steps) ids -> (steps, batch, vocab) float32 one-hot."""
    return np.eye(vocab_size, dtype=np.float32)[batch.T]


def make_placeholders(batch_size, seq_length, vocab_size, dev):
    inputs = [Tensor((batch_size, vocab_size), dev, requires_grad=False)
              for _ in range(seq_length)]
    labels = Tensor((seq_length * batch_size,), dev, tensor.int32, requires_grad=False)
    return inputs, labels


def fill(batch, inputs, labels, vocab_size):
    """Copy a (batch, seq_length + 1) array of ids into the step inputs and the labels."""
    x = one_hot_steps(batch[:, :-1], vocab_size)
    for t, xt in enumerate(x):
        inputs[t].copy_from_numpy(xt)
    labels.copy_from_numpy(np.ascontiguousarray(batch[:, 1:].T).reshape(-1))


def evaluate(m, data, dev):
    """Mean validation loss per character (all validation sequences in one batch)."""
    if len(data.val_dat) == 0:
        return float("nan")
    m.eval()
    batch = data.val_dat
    steps = batch.shape[1] - 1
    inputs, labels = make_placeholders(len(batch), steps, data.vocab_size, dev)
    fill(batch, inputs, labels, data.vocab_size)
    m.reset_states(dev)
    logits = tensor.to_numpy(m(inputs)).astype(np.float64)
    y = tensor.to_numpy(labels)
    logits -= logits.max(1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].mean())


def sample(m, data, dev, seed_text="Shall I", nsamples=200, use_max=False, rng=None):
    """Text generated after ``seed_text``: each next character is drawn from (or, with
    ``use_max``, the argmax of) ``tensor.softmax`` of the model's last logits."""
    rng = rng or np.random.default_rng(0)
    m.eval()
    known = [c for c in seed_text if c in data.char_to_idx] or [data.idx_to_char[0]]
    inputs = []
    for c in known:
        x = np.zeros((1, data.vocab_size), np.float32)
        x[0, data.char_to_idx[c]] = 1
        inputs.append(tensor.from_numpy(x, dev))
    m.reset_states(dev)
    logits = m(inputs)
    out = list(known)
    for _ in range(nsamples):
        prob = tensor.to_numpy(tensor.softmax(logits[-1]))[0].astype(np.float64)
        cur = int(np.argmax(prob)) if use_max else int(rng.choice(len(prob), p=prob / prob.sum()))
        out.append(data.idx_to_char[cur])
        x = np.zeros((1, data.vocab_size), np.float32)
        x[0, cur] = 1
        logits = m([tensor.from_numpy(x, dev)])
    return "".join(out)


def train(data, max_epoch, hidden_size=128, seq_length=32, lr=0.01, dev=None, graph=True,
          sample_every=0, sample_len=200, verbose=True):
    """Train a :class:`CharRNN`; returns ``(model, per-epoch train losses, val losses)``."""
    dev = dev or device.get_default_device()
    dev.SetRandSeed(0)
    m = CharRNN(data.vocab_size, hidden_size)
    m.set_optimizer(opt.Adam(lr=lr))
    m.graph(graph, False)
    inputs, labels = make_placeholders(data.batch_size, seq_length, data.vocab_size, dev)
    bs = data.batch_size
    train_losses, val_losses = [], []
    for epoch in range(max_epoch):
        t0 = time.perf_counter()
        m.train()
        total = 0.0
        # a progress bar over the batches (SINGA's example uses tqdm too), on terminals only
        batches = tqdm(range(data.num_train_batch), desc=f"epoch {epoch + 1}/{max_epoch}",
                       unit="batch", leave=False, file=sys.stdout,
                       disable=not (verbose and sys.stdout.isatty()))
        for b in batches:
            fill(data.train_dat[b * bs:(b + 1) * bs], inputs, labels, data.vocab_size)
            if b or epoch:
                m.reset_states(dev)  # every batch holds unrelated sequences
            _, loss = m(inputs, labels)
            total += float(tensor.to_numpy(loss)[0])
        train_losses.append(total / data.num_train_batch)
        val_losses.append(evaluate(m, data, dev))
        if verbose:
            print(f"epoch {epoch + 1:3d}/{max_epoch}  train loss {train_losses[-1]:.4f}  "
                  f"val loss {val_losses[-1]:.4f}  ({time.perf_counter() - t0:.1f} s)",
                  flush=True)
        if verbose and sample_every and (epoch + 1) % sample_every == 0 \
                and epoch + 1 < max_epoch:  # main() prints the final sample
            print("  sample: " + sample(m, data, dev, nsamples=sample_len).replace("\n", " | "))
    return m, train_losses, val_losses


def main(argv=None):
    p = argparse.ArgumentParser(description="Train a character-level LSTM on a text file")
    p.add_argument("data", nargs="?", default=DEFAULT_TEXT,
                   help="plain-text training file (default: the Shakespeare sample here)")
    p.add_argument("-b", type=int, default=16, dest="batch_size", help="batch size")
    p.add_argument("-l", type=int, default=32, dest="seq_length", help="sequence length")
    p.add_argument("-d", type=int, default=128, dest="hidden_size", help="hidden size")
    p.add_argument("-m", type=int, default=12, dest="max_epoch", help="number of epochs")
    p.add_argument("--lr", type=float, default=0.01, help="Adam learning rate")
    p.add_argument("-g", "--disable-graph", action="store_false", dest="graph")
    p.add_argument("--device", default="cpu", help="cpu, opencl, cuda:0, ...")
    p.add_argument("--seed-text", default="Shall I", help="text that starts each sample")
    p.add_argument("-n", "--sample-len", type=int, default=300, dest="sample_len")
    p.add_argument("--sample-every", type=int, default=4,
                   help="print a sample every N epochs (0: only at the end)")
    args = p.parse_args(argv)
    data = Data(args.data, batch_size=args.batch_size, seq_length=args.seq_length)
    print(f"{args.data}: {len(data.raw_data)} characters, vocabulary {data.vocab_size}, "
          f"{len(data.train_dat)} training / {len(data.val_dat)} validation sequences of "
          f"{args.seq_length}; initial loss ~ ln({data.vocab_size}) = "
          f"{np.log(data.vocab_size):.2f}")
    dev = device.get_device(args.device)
    m, _, _ = train(data, args.max_epoch, args.hidden_size, args.seq_length, args.lr, dev,
                    args.graph, args.sample_every, args.sample_len)
    print("final sample:\n" + sample(m, data, dev, args.seed_text, args.sample_len))
    return m


if __name__ == "__main__":
    sys.exit(0 if main() is not None else 1)
