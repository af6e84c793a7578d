"""SONNXModel: fine-tuning an imported CNN equals the same fine-tuning of the native model;
hostile-input errors; singa.sonnx re-exports the API."""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
import pytest
import singa_onnx
from singa import autograd, layer, model, opt, tensor
from singa_onnx import SingaONNXError, SONNXModel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Native(model.Model):
    def __init__(self):
        super().__init__()
        self.conv = layer.Conv2d(4, 3, padding=1)
        self.pool = layer.MaxPool2d(2, 2)
        self.flat = layer.Flatten()
        self.fc = layer.Linear(10)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.fc(self.flat(self.pool(autograd.relu(self.conv(x)))))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


class Imported(SONNXModel):
    def __init__(self, onx):
        super().__init__(onx)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, *x):
        return super().forward(*x)[0]

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


def _digits(n=32):
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images[:n] / 16.0).astype(np.float32).reshape(n, 1, 8, 8)
    return x, d.target[:n].astype(np.int32)


@pytest.mark.parametrize("graph", [False, True])
def test_fine_tuning_equals_native(graph):
    x, y = _digits()
    native = Native()
    tx, ty = tensor.from_numpy(x), tensor.from_numpy(y)
    native.eval()
    out = native(tx)
    onx = singa_onnx.to_onnx([tx], [out])

    imported = Imported(onx)
    for m in (native, imported):
        m.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
        m.compile([tx], is_train=True, use_graph=graph, sequential=True)
    losses = {}
    for name, m in (("native", native), ("imported", imported)):
        m.train()
        hist = []
        for _ in range(5):
            _, loss = m(tx, ty)
            hist.append(float(tensor.to_numpy(loss).reshape(-1)[0]))
        losses[name] = hist
    assert losses["native"][-1] < losses["native"][0]
    np.testing.assert_allclose(losses["imported"], losses["native"], rtol=1e-4, atol=1e-5)
    # the trained weights agree too
    w_native = tensor.to_numpy(native.conv.W)
    conv_w = [n.input[1] for n in onx.graph.node if n.op_type == "Conv"][0]
    np.testing.assert_allclose(tensor.to_numpy(imported.get_params()[conv_w]), w_native,
                               rtol=1e-4, atol=1e-5)


def test_last_layers_and_aux_output():
    x, _ = _digits(4)
    native = Native()
    tx = tensor.from_numpy(x)
    native.eval()
    native(tx)
    native.fc.b.copy_from_numpy(np.linspace(1, 2, 10, dtype=np.float32))  # last_layers=-1
    out = native(tx)  # differs from the whole model's output by this bias
    onx = singa_onnx.to_onnx([tx], [out])
    rep = singa_onnx.prepare(onx)
    relu_out = [n.output[0] for n in onx.graph.node if n.op_type == "Relu"][0]
    full, aux = rep.run([x], aux_output=(relu_out,))
    np.testing.assert_allclose(full, tensor.to_numpy(out), atol=1e-5)
    assert aux.shape == (4, 4, 8, 8) and aux.min() >= 0
    # everything but the last node (the final bias Add): the matmul result before its bias
    before_bias = rep.run([x], last_layers=-1)[0]
    b = tensor.to_numpy(native.fc.b)
    np.testing.assert_allclose(before_bias + b, tensor.to_numpy(out), atol=1e-5)
    # the run keeps its plan for the last arguments only: switching back and forth between
    # them gives each call its own values (an intermediate asked for is never dropped early)
    for _ in range(2):
        (plain,) = rep.run([x])
        np.testing.assert_allclose(plain, full, atol=0)
        full2, aux2 = rep.run([x], aux_output=(relu_out,))
        np.testing.assert_array_equal(aux2, aux)
        np.testing.assert_array_equal(rep.run([x], last_layers=-1)[0], before_bias)


def _tiny():
    from onnx import TensorProto, helper

    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]),
         helper.make_node("MaxPool", ["a"], ["c"], kernel_shape=[2, 2], dilations=[2, 2]),
         helper.make_node("Det", ["c"], ["d"]),
         helper.make_node("Frobnicate", ["d"], ["y"], domain="my.domain")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                               helper.make_opsetid("my.domain", 1)])


def test_every_unsupported_feature_in_one_error():
    m = _tiny()
    with pytest.raises(SingaONNXError) as e:
        singa_onnx.prepare(m)
    msg = str(e.value)
    for what in ("op Det", "dilations", "Frobnicate"):
        assert what in msg


def test_external_data_outside_the_folder_is_refused(tmp_path):
    from onnx import numpy_helper

    x = np.ones((2, 2), np.float32)
    w = numpy_helper.from_array(x, "w")
    w.ClearField("raw_data")
    w.ClearField("float_data")
    w.data_location = onnx.TensorProto.EXTERNAL
    for k, v in (("location", "../secret.bin"), ("length", "16")):
        e = w.external_data.add()
        e.key, e.value = k, v
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    (tmp_path / "secret.bin").write_bytes(x.tobytes())
    inner = tmp_path / "model"
    inner.mkdir()
    path = inner / "m.onnx"
    path.write_bytes(m.SerializeToString())
    with pytest.raises(SingaONNXError, match="not a plain relative path"):
        singa_onnx.prepare(str(path))


def test_truncated_file(tmp_path):
    x, _ = _digits(2)
    native = Native()
    tx = tensor.from_numpy(x)
    native.eval()
    data = singa_onnx.to_onnx([tx], [native(tx)]).SerializeToString()
    p = tmp_path / "t.onnx"
    p.write_bytes(data[: len(data) // 3])
    with pytest.raises(SingaONNXError):
        singa_onnx.prepare(str(p))


def test_singa_sonnx_reexports():
    from singa import sonnx

    assert sonnx.prepare is singa_onnx.prepare
    assert sonnx.SONNXModel is SONNXModel
    assert sonnx.to_onnx is singa_onnx.to_onnx


def test_singa_sonnx_without_the_package(monkeypatch):
    from singa import sonnx
    from singa.errors import ExtensionUnavailableError

    monkeypatch.setitem(sys.modules, "singa_onnx", None)
    with pytest.raises(ExtensionUnavailableError,
                       match=r'pip install "\.\[onnx\]" in the singa checkout'):
        sonnx.prepare  # noqa: B018
