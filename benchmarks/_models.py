"""The benchmark models, defined identically for SINGA and PyTorch.

MLP 784-512-512-10; the seed CNN (Conv 20x5x5 -> pool -> Conv 50x5x5 -> pool -> 500 -> 10);
CIFAR ResNet-18 (3x3 stem, four stages of two BasicBlocks, 64..512 channels, global average
pool); a post-norm transformer encoder classifier (token + learned position embeddings, 2
layers, d_model 128, 4 heads, ffn 512, ReLU, mean pool, linear head; seq 64); an LSTM language
model (embedding 256, 2-layer LSTM hidden 256, linear head over the vocabulary at every step;
seq 35). All train with SGD(lr=0.05, momentum=0.9, weight_decay=1e-5) and softmax cross
entropy.

The transformer and the LSTM start from the same weights in both frameworks
(:func:`init_arrays`, in PyTorch's layout, loaded by :func:`torch_model` and
:func:`load_singa`), so their first losses agree and serve as the oracle of the SINGA model.
SINGA has no LayerNorm or multi-head attention layer, so they are written here from autograd
ops, as a SINGA user would.
"""

from __future__ import annotations

import math

import numpy as np
from singa import autograd, layer, model, opt, tensor

LR, MOMENTUM, WD = 0.05, 0.9, 1e-5

SHAPES = {  # name -> (input shape without batch, classes)
    "mlp": ((784,), 10),
    "cnn": ((1, 28, 28), 10),
    "resnet18": ((3, 32, 32), 10),
}


class _Trainable(model.Model):
    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = autograd.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss


class MLP(_Trainable):
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = layer.Linear(512), layer.Linear(512), layer.Linear(10)

    def forward(self, x):
        x = autograd.relu(self.l1(x))
        x = autograd.relu(self.l2(x))
        return self.l3(x)


class CNN(_Trainable):
    def __init__(self):
        super().__init__()
        self.conv1 = layer.Conv2d(1, 20, 5, padding=0, activation="RELU")
        self.conv2 = layer.Conv2d(20, 50, 5, padding=0, activation="RELU")
        self.pool1, self.pool2 = layer.MaxPool2d(2, 2), layer.MaxPool2d(2, 2)
        self.flatten = layer.Flatten()
        self.linear1, self.linear2 = layer.Linear(500), layer.Linear(10)

    def forward(self, x):
        y = self.pool1(self.conv1(x))
        y = self.pool2(self.conv2(y))
        y = autograd.relu(self.linear1(self.flatten(y)))
        return self.linear2(y)


class BasicBlock(layer.Layer):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = layer.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = layer.BatchNorm2d(cout)
        self.conv2 = layer.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = layer.BatchNorm2d(cout)
        self.down = stride != 1 or cin != cout
        if self.down:
            self.conv_d = layer.Conv2d(cin, cout, 1, stride=stride, bias=False)
            self.bn_d = layer.BatchNorm2d(cout)

    def forward(self, x):
        y = autograd.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        s = self.bn_d(self.conv_d(x)) if self.down else x
        return autograd.relu(autograd.add(y, s))


class ResNet18(_Trainable):
    def __init__(self):
        super().__init__()
        self.conv = layer.Conv2d(3, 64, 3, padding=1, bias=False)
        self.bn = layer.BatchNorm2d(64)
        blocks, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.register_layers(*blocks)
        self.blocks = blocks
        self.fc = layer.Linear(10)

    def forward(self, x):
        y = autograd.relu(self.bn(self.conv(x)))
        for b in self.blocks:
            y = b(y)
        y = autograd.flatten(autograd.globalaveragepool(y))
        return self.fc(y)


# Sizes of the sequence models; the tests build the same models at tiny sizes.
CONFIGS = {
    "transformer": {"vocab": 1000, "seq": 64, "d": 128, "heads": 4, "ffn": 512, "layers": 2,
                    "classes": 10},
    "lstm": {"vocab": 1000, "seq": 35, "emb": 256, "hidden": 256, "layers": 2},
}


def _const(value, like):
    t = tensor.Tensor((1,), like.device, like.dtype, requires_grad=False, stores_grad=False)
    return t.set_value(float(value))


def _param(shape, like, value):
    t = tensor.Tensor(shape, like.device, like.dtype, requires_grad=True, stores_grad=True)
    return t.set_value(value)


class LayerNorm(layer.Layer):
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` over the last axis (biased variance,
    as torch.nn.LayerNorm)."""

    def __init__(self, eps=1e-5):
        super().__init__()
        self.eps_value = eps

    def initialize(self, x):
        d = x.shape[-1]
        self.gamma, self.beta = _param((d,), x, 1.0), _param((d,), x, 0.0)
        self.eps = _const(self.eps_value, x)

    def forward(self, x):
        xc = autograd.sub(x, autograd.reduce_mean(x, [-1], 1))
        var = autograd.reduce_mean(autograd.mul(xc, xc), [-1], 1)
        y = autograd.div(xc, autograd.sqrt(autograd.add(var, self.eps)))
        return autograd.add(autograd.mul(y, self.gamma), self.beta)

    def get_params(self):
        return {self.gamma.name: self.gamma, self.beta.name: self.beta}

    def set_params(self, parameters):
        self._set_tensors(parameters, ["gamma", "beta"])


class MultiHeadAttention(layer.Layer):
    """Softmax self-attention over (batch * seq, d) rows: one fused q/k/v projection (as
    PyTorch's ``in_proj``), ``heads`` heads of d / heads, an output projection."""

    def __init__(self, d, heads, seq):
        super().__init__()
        self.d, self.heads, self.seq = d, heads, seq
        self.qkv, self.out = layer.Linear(3 * d), layer.Linear(d)

    def initialize(self, x):
        self.scale = _const(1.0 / math.sqrt(self.d // self.heads), x)

    def forward(self, x):
        s, h = self.seq, self.heads
        b, dh = x.shape[0] // s, self.d // h

        def heads(t):  # (b * s, d) -> (b, h, s, dh)
            return autograd.transpose(autograd.reshape(t, (b, s, h, dh)), (0, 2, 1, 3))

        q, k, v = autograd.split(self.qkv(x), 1, [self.d] * 3)
        q = autograd.mul(heads(q), self.scale)  # scaling q is cheaper than the (s, s) scores
        kt = autograd.transpose(autograd.reshape(k, (b, s, h, dh)), (0, 2, 3, 1))
        att = autograd.softmax(autograd.matmul(q, kt), -1)
        ctx = autograd.transpose(autograd.matmul(att, heads(v)), (0, 2, 1, 3))
        return self.out(autograd.reshape(ctx, (b * s, self.d)))


class EncoderLayer(layer.Layer):
    """Post-norm encoder layer (torch.nn.TransformerEncoderLayer's default order, no dropout):
    ``h = LN1(x + MHA(x))``, ``y = LN2(h + W2 relu(W1 h))``."""

    def __init__(self, d, heads, ffn, seq):
        super().__init__()
        self.attn = MultiHeadAttention(d, heads, seq)
        self.ln1, self.ln2 = LayerNorm(), LayerNorm()
        self.ff1, self.ff2 = layer.Linear(ffn), layer.Linear(d)

    def forward(self, x):
        h = self.ln1(autograd.add(x, self.attn(x)))
        return self.ln2(autograd.add(h, self.ff2(autograd.relu(self.ff1(h)))))


class PositionEmbedding(layer.Layer):
    """Adds a learned (seq, d) table to every sequence of a (batch, seq, d) input."""

    def initialize(self, x):
        self.P = _param(tuple(x.shape[1:]), x, 0.0)

    def forward(self, x):
        return autograd.add(x, self.P)

    def get_params(self):
        return {self.P.name: self.P}

    def set_params(self, parameters):
        self._set_tensors(parameters, ["P"])


class Transformer(_Trainable):
    """Token ids (batch, seq) -> class scores (batch, classes)."""

    def __init__(self, vocab, seq, d, heads, ffn, layers, classes):
        super().__init__()
        self.seq, self.d = seq, d
        self.emb, self.pos = layer.Embedding(vocab, d), PositionEmbedding()
        self.encoders = [EncoderLayer(d, heads, ffn, seq) for _ in range(layers)]
        self.register_layers(*self.encoders)
        self.head = layer.Linear(classes)

    def forward(self, ids):
        b = ids.shape[0]
        x = autograd.reshape(self.pos(self.emb(ids)), (b * self.seq, self.d))
        for enc in self.encoders:
            x = enc(x)
        pooled = autograd.reduce_mean(autograd.reshape(x, (b, self.seq, self.d)), [1], 0)
        return self.head(pooled)


class LSTMModel(_Trainable):
    """Token ids (batch, seq) -> next-token scores (seq * batch, vocab), time-major rows."""

    def __init__(self, vocab, seq, emb, hidden, layers):
        super().__init__()
        self.seq, self.e = seq, emb
        self.emb = layer.Embedding(vocab, emb)
        self.rnn = layer.LSTM(emb, hidden, num_layers=layers)
        self.head = layer.Linear(vocab)

    def forward(self, ids):
        b = ids.shape[0]
        steps = autograd.split(autograd.transpose(self.emb(ids), (1, 0, 2)), 0, [1] * self.seq)
        outs, _h, _c = self.rnn([autograd.reshape(t, (b, self.e)) for t in steps])
        return self.head(autograd.cat(outs, 0))


SINGA_MODELS = {"mlp": MLP, "cnn": CNN, "resnet18": ResNet18, "transformer": Transformer,
                "lstm": LSTMModel}


def singa_model(name, cfg=None):
    m = SINGA_MODELS[name](**(cfg or CONFIGS[name])) if name in CONFIGS else SINGA_MODELS[name]()
    m.set_optimizer(opt.SGD(lr=LR, momentum=MOMENTUM, weight_decay=WD))
    return m


def init_arrays(name, cfg=None, seed=0):
    """The initial weights of the transformer or the LSTM model, by PyTorch state_dict name
    and in PyTorch's layout (Linear weights (out, in), LSTM gates stacked i, f, g, o).
    Biases and LayerNorm's gamma and beta are random too, so that a weight landing in the
    wrong place changes the first loss."""
    c = cfg or CONFIGS[name]
    rng = np.random.default_rng(seed)

    def uni(shape, fan_in):
        b = 1.0 / math.sqrt(fan_in)
        return rng.uniform(-b, b, shape).astype(np.float32)

    out = {}
    if name == "transformer":
        d, f = c["d"], c["ffn"]
        out["emb.weight"] = rng.standard_normal((c["vocab"], d)).astype(np.float32)
        out["pos"] = (0.1 * rng.standard_normal((c["seq"], d))).astype(np.float32)
        for i in range(c["layers"]):
            p = f"layers.{i}."
            out[p + "self_attn.in_proj_weight"] = uni((3 * d, d), d)
            out[p + "self_attn.in_proj_bias"] = uni((3 * d,), d)
            out[p + "self_attn.out_proj.weight"] = uni((d, d), d)
            out[p + "self_attn.out_proj.bias"] = uni((d,), d)
            out[p + "linear1.weight"], out[p + "linear1.bias"] = uni((f, d), d), uni((f,), d)
            out[p + "linear2.weight"], out[p + "linear2.bias"] = uni((d, f), f), uni((d,), f)
            for n in ("norm1", "norm2"):
                out[p + n + ".weight"] = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
                out[p + n + ".bias"] = (0.1 * rng.standard_normal(d)).astype(np.float32)
        out["head.weight"] = uni((c["classes"], d), d)
        out["head.bias"] = uni((c["classes"],), d)
    elif name == "lstm":
        e, h = c["emb"], c["hidden"]
        out["emb.weight"] = rng.standard_normal((c["vocab"], e)).astype(np.float32)
        for k in range(c["layers"]):
            n_in = e if k == 0 else h
            out[f"rnn.weight_ih_l{k}"] = uni((4 * h, n_in), h)
            out[f"rnn.weight_hh_l{k}"] = uni((4 * h, h), h)
            out[f"rnn.bias_ih_l{k}"] = uni((4 * h,), h)
            out[f"rnn.bias_hh_l{k}"] = uni((4 * h,), h)
        out["head.weight"] = uni((c["vocab"], h), h)
        out["head.bias"] = uni((c["vocab"],), h)
    else:
        raise KeyError(f"{name} has no shared initial weights (only {', '.join(CONFIGS)})")
    return out


def _set(t, value):
    if tuple(t.shape) != value.shape:
        raise ValueError(f"initial weight for {t.name}: shape {value.shape}, tensor {t.shape}")
    t.copy_from_numpy(np.ascontiguousarray(value, np.float32))


def load_singa(name, m, cfg=None, seed=0):
    """Copy :func:`init_arrays` into the compiled SINGA model ``m``; every parameter of ``m``
    must be set exactly once."""
    w = init_arrays(name, cfg, seed)
    done = []

    def put(t, value):
        _set(t, value)
        done.append(id(t))

    put(m.emb.W, w["emb.weight"])
    put(m.head.W, w["head.weight"].T)
    put(m.head.b, w["head.bias"])
    if name == "transformer":
        put(m.pos.P, w["pos"])
        for i, enc in enumerate(m.encoders):
            p = f"layers.{i}."
            put(enc.attn.qkv.W, w[p + "self_attn.in_proj_weight"].T)
            put(enc.attn.qkv.b, w[p + "self_attn.in_proj_bias"])
            put(enc.attn.out.W, w[p + "self_attn.out_proj.weight"].T)
            put(enc.attn.out.b, w[p + "self_attn.out_proj.bias"])
            for lin in ("linear1", "linear2"):
                ours = enc.ff1 if lin == "linear1" else enc.ff2
                put(ours.W, w[p + lin + ".weight"].T)
                put(ours.b, w[p + lin + ".bias"])
            for n, ln in (("norm1", enc.ln1), ("norm2", enc.ln2)):
                put(ln.gamma, w[p + n + ".weight"])
                put(ln.beta, w[p + n + ".bias"])
    else:
        rnn, h = m.rnn, m.rnn.hidden_size
        for k in range(rnn.num_layers):
            sfx = f"_l{k}" if k else ""
            for j, gate in enumerate("ifgo"):  # PyTorch's gate order
                rows = slice(j * h, (j + 1) * h)
                put(getattr(rnn, f"Wx_{gate}{sfx}"), w[f"rnn.weight_ih_l{k}"][rows].T)
                put(getattr(rnn, f"Wh_{gate}{sfx}"), w[f"rnn.weight_hh_l{k}"][rows].T)
                put(getattr(rnn, f"Bx_{gate}{sfx}"), w[f"rnn.bias_ih_l{k}"][rows])
                put(getattr(rnn, f"Bh_{gate}{sfx}"), w[f"rnn.bias_hh_l{k}"][rows])
    params = m.get_params()
    missed = [n for n, t in params.items() if id(t) not in done]
    if missed or len(done) != len(params):
        raise ValueError(f"load_singa({name}): parameters not set exactly once: {missed}")


def _torch_sequence_model(name, cfg):
    import torch
    from torch import nn

    c = cfg or CONFIGS[name]

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(c["vocab"], c["d"])
            self.pos = nn.Parameter(torch.zeros(c["seq"], c["d"]))
            self.layers = nn.ModuleList(
                nn.TransformerEncoderLayer(c["d"], c["heads"], c["ffn"], dropout=0.0,
                                           activation="relu", batch_first=True)
                for _ in range(c["layers"]))
            self.head = nn.Linear(c["d"], c["classes"])

        def forward(self, ids):
            x = self.emb(ids) + self.pos
            for enc in self.layers:
                x = enc(x)
            return self.head(x.mean(1))

    class LSTMModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(c["vocab"], c["emb"])
            self.rnn = nn.LSTM(c["emb"], c["hidden"], c["layers"])
            self.head = nn.Linear(c["hidden"], c["vocab"])

        def forward(self, ids):
            out, _ = self.rnn(self.emb(ids).transpose(0, 1))
            return self.head(out.reshape(-1, out.shape[-1]))

    net = Transformer() if name == "transformer" else LSTMModel()
    net.load_state_dict({k: torch.from_numpy(v) for k, v in init_arrays(name, cfg).items()})
    return net


def torch_model(name, device=None, cfg=None):
    """The PyTorch net of ``name`` with its parameters on ``device`` (default: the CPU), and
    its SGD."""
    import torch
    from torch import nn

    if name in CONFIGS:
        net = _torch_sequence_model(name, cfg)
    elif name == "mlp":
        net = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                            nn.Linear(512, 10))
    elif name == "cnn":
        net = nn.Sequential(nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
                            nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(),
                            nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))
    else:
        class Block(nn.Module):
            def __init__(self, cin, cout, stride):
                super().__init__()
                self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
                self.b1 = nn.BatchNorm2d(cout)
                self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
                self.b2 = nn.BatchNorm2d(cout)
                self.down = None
                if stride != 1 or cin != cout:
                    self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                              nn.BatchNorm2d(cout))

            def forward(self, x):
                y = torch.relu(self.b1(self.c1(x)))
                y = self.b2(self.c2(y))
                return torch.relu(y + (self.down(x) if self.down is not None else x))

        layers, cin = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
            cin = cout
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10)]
        net = nn.Sequential(*layers)
    if device is not None:
        net.to(device)  # before building its optimizer, as torch.optim asks
    sgd = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
    return net, sgd


def batch(name, n, seed=0, cfg=None):
    """A batch of ``n``: (x float32, y int32 classes), or for the sequence models (ids int32
    (n, seq), y int32: a class per sequence for the transformer, the next token per
    (step, sequence) in time-major order for the LSTM)."""
    rng = np.random.default_rng(seed)
    if name in CONFIGS:
        c = cfg or CONFIGS[name]
        ids = rng.integers(0, c["vocab"], (n, c["seq"])).astype(np.int32)
        if name == "transformer":
            return ids, rng.integers(0, c["classes"], n).astype(np.int32)
        nxt = np.concatenate([ids[:, 1:], rng.integers(0, c["vocab"], (n, 1))], axis=1)
        return ids, np.ascontiguousarray(nxt.T).reshape(-1).astype(np.int32)
    shape, classes = SHAPES[name]
    x = rng.standard_normal((n, *shape)).astype(np.float32)
    y = rng.integers(0, classes, n).astype(np.int32)
    return x, y
