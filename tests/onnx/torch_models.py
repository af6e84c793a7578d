"""PyTorch models shared by the ONNX tests (PyTorch is a test-only dependency)."""

from __future__ import annotations

import io

import onnx
import torch

nn = torch.nn


class SeedCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 20, 5), nn.Conv2d(20, 50, 5)
        self.fc1, self.fc2 = nn.Linear(800, 500), nn.Linear(500, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc2(torch.relu(self.fc1(torch.flatten(x, 1))))


class ResNetish(nn.Module):
    """Stem conv-BN-ReLU-maxpool, a basic block with a strided 1x1 shortcut, GAP, linear."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, padding=1))
        self.a = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False),
                               nn.BatchNorm2d(16), nn.ReLU(),
                               nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16))
        self.short = nn.Sequential(nn.Conv2d(8, 16, 1, stride=2, bias=False),
                                   nn.BatchNorm2d(16))
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(self.a(x) + self.short(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 12, num_layers=2, batch_first=True)
        self.fc = nn.Linear(12, 3)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y[:, -1])


class GRUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(5, 7, bidirectional=True)

    def forward(self, x):
        return self.gru(x)[0]


def export(module, x, dynamic_batch=False, dynamo=False, **kw):
    """``module`` exported by torch.onnx.export (TorchScript exporter unless ``dynamo``) with
    input "x" and output "y" (batch dimension free when ``dynamic_batch``)."""
    module.eval()
    # BatchNorm stays a BatchNormalization node unless folded; randomise its statistics
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    buf = io.BytesIO()
    axes = {"x": {0: "batch"}, "y": {0: "batch"}} if dynamic_batch else None
    torch.onnx.export(module, (torch.from_numpy(x),), buf, input_names=["x"],
                      output_names=["y"], dynamic_axes=axes, dynamo=dynamo, **kw)
    return onnx.load_from_string(buf.getvalue())


class EncoderLayer(nn.Module):
    """A pre-LN transformer encoder layer written out (nn.TransformerEncoderLayer's TorchScript
    export fails inside torch 2.13's attention code): multi-head self-attention, GELU MLP."""

    def __init__(self, d=16, heads=4):
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 32), nn.GELU(), nn.Linear(32, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)

        def heads(z):
            return z.reshape(b, t, self.h, self.dk).transpose(1, 2)

        att = torch.softmax(heads(q) @ heads(k).transpose(-1, -2) / self.dk ** 0.5, dim=-1)
        y = (att @ heads(v)).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.ff(self.ln2(x))
