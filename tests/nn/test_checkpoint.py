"""Model checkpoints: round trip, crash safety (SIGKILL mid-save) and hostile files."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile

import numpy as np
import pytest
from singa import autograd, layer, model, opt, tensor
from singa.device import get_default_device
from singa.errors import CheckpointError


class DoubleLinear(layer.Layer):
    def __init__(self, a, b, c):
        super().__init__()
        self.l1 = layer.Linear(a, b)
        self.l2 = layer.Linear(b, c)

    def forward(self, x):
        return self.l2(self.l1(x))


class MyModel(model.Model):
    """SINGA's test_model fixture: conv, batch norm and a nested layer."""

    def __init__(self):
        super().__init__()
        self.conv1 = layer.Conv2d(2, 2)
        self.bn1 = layer.BatchNorm2d(2)
        self.doublelinear1 = DoubleLinear(2, 4, 2)
        self.optimizer = opt.SGD()

    def forward(self, x):
        y = self.bn1(self.conv1(x))
        y = autograd.reshape(y, (y.shape[0], -1))
        return self.doublelinear1(y)

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = autograd.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss


STATES = {"conv1.W": ((2, 2, 2, 2), 0.1), "conv1.b": ((2,), 0.2), "bn1.scale": ((2,), 0.3),
          "bn1.bias": ((2,), 0.4), "bn1.running_mean": ((2,), 0.5),
          "bn1.running_var": ((2,), 0.6), "doublelinear1.l1.W": ((2, 4), 0.7),
          "doublelinear1.l1.b": ((4,), 0.8), "doublelinear1.l2.W": ((4, 2), 0.9),
          "doublelinear1.l2.b": ((2,), 1.0)}


def _compiled(use_graph=False):
    dev = get_default_device()
    dev.ResetGraph()
    m = MyModel()
    m.compile([tensor.PlaceHolder((2, 2, 2, 2), device=dev)], is_train=True,
              use_graph=use_graph)
    return m


@pytest.mark.parametrize("use_graph", [False, True])
def test_save_train_load_round_trip(use_graph, tmp_path):
    m = _compiled(use_graph)
    states = {k: tensor.Tensor(shape).set_value(v) for k, (shape, v) in STATES.items()}
    m.set_states(states)
    assert set(m.get_states()) == set(STATES)
    aux = {"opt1": tensor.Tensor((2, 10)).gaussian(1, 0.1),
           "opt2": tensor.Tensor((20, 2)).gaussian(0.1, 1)}
    path = tmp_path / "snapshot.zip"
    m.save_states(str(path), aux)
    cx = tensor.Tensor((2, 2, 2, 2)).gaussian(1, 1)
    cy = tensor.Tensor((2, 2)).gaussian(1, 1)  # a dense (soft) target
    for _ in range(3):
        m.train_one_batch(cx, cy)
    # training moved the weights (the last layer: batch norm over two values per channel gives
    # conv1.W a near-zero gradient from these constant weights)
    assert not np.allclose(m.get_states()["doublelinear1.l2.W"].to_numpy(), 0.9)
    aux2 = m.load_states(str(path))
    for k in aux:
        np.testing.assert_array_equal(aux2[k].to_numpy(), aux[k].to_numpy())
    for k, v in m.get_states().items():
        np.testing.assert_allclose(v.to_numpy(), STATES[k][1], err_msg=k)
    if use_graph:  # the recorded graph keeps training the loaded parameters in place
        m.train_one_batch(cx, cy)
        assert not np.allclose(m.get_states()["doublelinear1.l2.W"].to_numpy(), 0.9)


def test_checkpoint_layout_is_a_zip_of_npz_and_json(tmp_path):
    m = _compiled()
    path = tmp_path / "ck.zip"
    m.save_states(str(path), {"extra": tensor.Tensor((3,)).set_value(2.0)})
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["states_attr.json", "tensor_dict.npz"]
        attrs = json.loads(zf.read("states_attr.json"))
        with np.load(io.BytesIO(zf.read("tensor_dict.npz")), allow_pickle=False) as npz:
            # MyModel's optimizer (plain SGD, no step yet) contributes its step counter
            assert set(npz.files) == set(STATES) | {"extra", "optimizer/step_counter"}
            np.testing.assert_array_equal(npz["extra"], [2.0, 2.0, 2.0])
            np.testing.assert_array_equal(npz["optimizer/step_counter"], [0.0])
    assert attrs["extra"] == {"state_type": model.AUX_STATE_TYPE, "shape": [3],
                              "dtype": "float32"}
    assert attrs["optimizer/step_counter"]["state_type"] == model.OPTIMIZER_STATE_TYPE
    assert attrs["conv1.W"]["state_type"] == model.MODEL_STATE_TYPE
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)


def test_save_overwrites_atomically_and_leaves_no_temp_files(tmp_path):
    m = _compiled()
    path = tmp_path / "ck.zip"
    m.save_states(str(path))
    m.get_states()["conv1.b"].set_value(7.0)
    m.save_states(str(path))
    assert [p.name for p in tmp_path.iterdir()] == ["ck.zip"]
    m.get_states()["conv1.b"].set_value(0.0)
    m.load_states(str(path))
    np.testing.assert_array_equal(m.get_states()["conv1.b"].to_numpy(), 7.0)


def test_state_names_that_collide_with_numpy_keywords(tmp_path):
    """np.savez(file, **states) breaks on states named 'file' or 'allow_pickle'."""
    class Odd(model.Model):
        def __init__(self):
            super().__init__()
            self.file = layer.Linear(2)
            self.allow_pickle = layer.Linear(2)

        def forward(self, x):
            return self.allow_pickle(self.file(x))

    m = Odd()
    m.compile([tensor.PlaceHolder((1, 3))])
    path = tmp_path / "odd.zip"
    m.save_states(str(path))
    before = {k: v.to_numpy() for k, v in m.get_states().items()}
    for v in m.get_states().values():
        v.set_value(0.0)
    m.load_states(str(path))
    for k, v in m.get_states().items():
        np.testing.assert_array_equal(v.to_numpy(), before[k])


# ---------------------------------------------------------------- crash safety
_WRITER = textwrap.dedent("""
    import os
    import sys
    import time

    import numpy as np
    from singa import layer, model, tensor

    class SlowDisk:
        \"\"\"A file that writes at ~50 MB/s, so the kill lands while bytes are written.\"\"\"

        def __init__(self, f):
            self.f = f

        def write(self, b):
            time.sleep(len(b) / 50e6)
            return self.f.write(b)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self.f.__exit__(*exc)

    class Big(model.Model):
        def __init__(self):
            super().__init__()
            self.fc = layer.Linear(4096)

        def forward(self, x):
            return self.fc(x)

    path = sys.argv[1]
    m = Big()
    m.compile([tensor.PlaceHolder((1, 3072))])
    rng = np.random.default_rng(0)
    m.set_params({"fc.W": rng.standard_normal((3072, 4096)).astype(np.float32),
                  "fc.b": np.full(4096, 1.0, np.float32)})
    m.save_states(path)
    print("first-saved", flush=True)
    # incompressible values, so the second file grows steadily while it is written
    m.set_params({"fc.W": rng.standard_normal((3072, 4096)).astype(np.float32),
                  "fc.b": np.full(4096, 2.0, np.float32)})
    print("second-saving", flush=True)
    real_fdopen = os.fdopen
    os.fdopen = lambda *a, **k: SlowDisk(real_fdopen(*a, **k))
    m.save_states(path)
    print("second-saved", flush=True)
""")


def test_sigkill_during_save_keeps_the_previous_checkpoint(tmp_path):
    path = tmp_path / "big.zip"
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "first-saved"
        assert proc.stdout.readline().strip() == "second-saving"
        # wait until the second save is writing its temporary file, then kill the writer
        deadline = time.monotonic() + 120
        partial = None
        while time.monotonic() < deadline and partial is None:
            for p in tmp_path.glob(".singa-ckpt-*.tmp"):
                if p.stat().st_size > (1 << 20):
                    partial = p
            time.sleep(0.005)
        assert partial is not None, "the writer never started the second save"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert "second-saved" not in proc.stdout.read()
    # the previous checkpoint is intact and loads

    class Big(model.Model):
        def __init__(self):
            super().__init__()
            self.fc = layer.Linear(4096)

        def forward(self, x):
            return self.fc(x)

    m = Big()
    m.compile([tensor.PlaceHolder((1, 3072))])
    m.load_states(str(path))
    want = np.random.default_rng(0).standard_normal((3072, 4096)).astype(np.float32)
    np.testing.assert_array_equal(m.get_params()["fc.W"].to_numpy(), want)
    np.testing.assert_array_equal(m.get_params()["fc.b"].to_numpy(), 1.0)


# ---------------------------------------------------------------- hostile and mismatched files
class _Payload:
    """Unpickling this would create a marker file (the attack a pickle-loading reader runs)."""

    marker = None

    def __reduce__(self):
        return (open, (str(_Payload.marker), "w"))


def _forge(path, arrays: dict, attrs: dict, extra_members=(), pickled=False):
    buf = io.BytesIO()
    if pickled:
        np.savez(buf, **arrays)  # object arrays are pickled by np.savez
    else:
        np.savez(buf, **arrays)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("tensor_dict.npz", buf.getvalue())
        zf.writestr("states_attr.json", json.dumps(attrs))
        for name, data in extra_members:
            zf.writestr(name, data)


def _valid_arrays_attrs():
    arrays = {k: np.full(shape, v, np.float32) for k, (shape, v) in STATES.items()}
    attrs = {k: {"state_type": 0, "shape": list(a.shape), "dtype": "float32"}
             for k, a in arrays.items()}
    return arrays, attrs


def test_pickle_payload_is_refused_and_never_executed(tmp_path):
    m = _compiled()
    _Payload.marker = tmp_path / "pwned"
    arrays, attrs = _valid_arrays_attrs()
    arrays["conv1.b"] = np.array([_Payload(), _Payload()], dtype=object)
    path = tmp_path / "evil.zip"
    _forge(path, arrays, attrs, pickled=True)
    with pytest.raises(CheckpointError, match="pickle"):
        m.load_states(str(path))
    assert not _Payload.marker.exists()


def test_path_traversal_member_is_refused(tmp_path):
    m = _compiled()
    arrays, attrs = _valid_arrays_attrs()
    path = tmp_path / "sub" / "evil.zip"
    path.parent.mkdir()
    _forge(path, arrays, attrs, extra_members=[("../../escaped.txt", b"x")])
    with pytest.raises(CheckpointError, match="escaped.txt"):
        m.load_states(str(path))
    assert not (tmp_path / "escaped.txt").exists()
    assert not (tmp_path.parent / "escaped.txt").exists()


def test_missing_extra_and_misshaped_states_are_listed(tmp_path):
    m = _compiled()
    arrays, attrs = _valid_arrays_attrs()
    del arrays["bn1.running_var"], attrs["bn1.running_var"]
    arrays["ghost.W"] = np.zeros(3, np.float32)
    attrs["ghost.W"] = {"state_type": 0, "shape": [3], "dtype": "float32"}
    arrays["conv1.W"] = np.zeros((2, 2, 3, 3), np.float32)
    attrs["conv1.W"]["shape"] = [2, 2, 3, 3]
    path = tmp_path / "bad.zip"
    _forge(path, arrays, attrs)
    before = m.get_states()["conv1.b"].to_numpy()
    with pytest.raises(CheckpointError) as info:
        m.load_states(str(path))
    msg = str(info.value)
    assert "bn1.running_var" in msg and "ghost.W" in msg and "conv1.W" in msg
    assert "(2, 2, 3, 3)" in msg
    # nothing was loaded
    np.testing.assert_array_equal(m.get_states()["conv1.b"].to_numpy(), before)


class WithHead(MyModel):
    """MyModel with one more layer: a checkpoint of MyModel lacks the head's states."""

    def __init__(self):
        super().__init__()
        self.head = layer.Linear(3)

    def forward(self, x):
        return self.head(super().forward(x))


@pytest.mark.parametrize("use_graph", [False, True])
def test_a_checkpoint_of_a_smaller_model_is_refused_naming_what_it_lacks(use_graph, tmp_path):
    """A real save (not a forged file): loading it into a model that grew a layer must name
    the layer's states and load nothing, not leave the new layer at its initial values."""
    small = _compiled(use_graph)
    for k, (shape, v) in STATES.items():
        small.get_states()[k].copy_from_numpy(np.full(shape, v, np.float32))
    path = tmp_path / "small.zip"
    small.save_states(str(path))
    dev = get_default_device()
    dev.ResetGraph()
    big = WithHead()
    big.compile([tensor.PlaceHolder((2, 2, 2, 2), device=dev)], is_train=True,
                use_graph=use_graph)
    before = {k: v.to_numpy() for k, v in big.get_states().items()}
    assert {"head.W", "head.b"} <= set(before) and set(STATES) < set(before)
    with pytest.raises(CheckpointError, match="missing from the checkpoint") as info:
        big.load_states(str(path))
    assert "head.W" in str(info.value) and "head.b" in str(info.value)
    for k, v in big.get_states().items():
        np.testing.assert_array_equal(v.to_numpy(), before[k])


@pytest.mark.parametrize("content", [b"not a zip", b""])
def test_garbage_file_is_refused(content, tmp_path):
    m = _compiled()
    path = tmp_path / "garbage.zip"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match="not a SINGA checkpoint"):
        m.load_states(str(path))


def test_json_and_npz_disagreeing_is_refused(tmp_path):
    m = _compiled()
    arrays, attrs = _valid_arrays_attrs()
    del attrs["conv1.W"]
    path = tmp_path / "bad.zip"
    _forge(path, arrays, attrs)
    with pytest.raises(CheckpointError, match="different"):
        m.load_states(str(path))


def test_missing_file_and_uncompiled_model(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        _compiled().load_states(str(tmp_path / "nope.zip"))
    m = _compiled()
    path = tmp_path / "ck.zip"
    m.save_states(str(path))
    with pytest.raises(CheckpointError, match="compile"):
        MyModel().load_states(str(path))


def test_aux_states_must_be_tensors(tmp_path):
    m = _compiled()
    with pytest.raises(TypeError, match="Tensors"):
        m.save_states(str(tmp_path / "x.zip"), {"lr": 0.1})
    assert not os.listdir(tmp_path)


def test_inner_zip_bomb_is_refused(tmp_path, monkeypatch):
    """An npz whose members declare ~4 GiB (a zip bomb) is refused before anything inflates."""
    import struct

    m = _compiled()
    arrays, attrs = _valid_arrays_attrs()
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    raw = bytearray(buf.getvalue())
    at = raw.find(b"PK\x01\x02")  # first central-directory entry: uncompressed size at +24
    struct.pack_into("<I", raw, at + 24, 0xFFFFFFF0)
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("tensor_dict.npz", bytes(raw))
        zf.writestr("states_attr.json", json.dumps(attrs))
    monkeypatch.setattr(model, "_MAX_CHECKPOINT_BYTES", 1 << 31)
    with pytest.raises(CheckpointError, match="zip-bomb"):
        m.load_states(str(path))


def test_npz_member_that_is_not_a_zip_is_refused(tmp_path):
    m = _compiled()
    _, attrs = _valid_arrays_attrs()
    path = tmp_path / "bad.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("tensor_dict.npz", b"garbage")
        zf.writestr("states_attr.json", json.dumps(attrs))
    with pytest.raises(CheckpointError, match="not an npz"):
        m.load_states(str(path))
