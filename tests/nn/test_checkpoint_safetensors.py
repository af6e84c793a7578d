"""``save_states``/``load_states`` with a ``.safetensors`` path: the files are the
safetensors package's format both ways (the package is the oracle), writes are atomic, and a
hostile header is refused before anything is allocated."""

from __future__ import annotations

import json
import os
import struct
import sys

import numpy as np
import pytest
from _shared_models import tiny
from singa import model as model_mod
from singa import opt, tensor
from singa.errors import CheckpointError, ExtensionUnavailableError

st = pytest.importorskip("safetensors.numpy")


def _trained(cpu):
    m = tiny()
    m.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    x = tensor.from_numpy(np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32))
    y = tensor.from_numpy(np.array([0, 2], np.int32))
    m.train()
    m(x, y)
    return m


def test_written_file_is_read_by_the_safetensors_package(cpu, tmp_path):
    m = _trained(cpu)
    path = tmp_path / "ck.safetensors"
    m.save_states(str(path), {"epoch": tensor.from_numpy(np.array([3], np.int32))})
    arrays = st.load_file(str(path))
    states = m.get_states()
    moments = m.optimizer.get_states()["moments"]
    assert set(arrays) == (set(states) | {"epoch", "optimizer/step_counter"}
                           | {f"optimizer/moments/{k}" for k in moments})
    for k, v in states.items():
        np.testing.assert_array_equal(arrays[k], v.to_numpy(), strict=True)
    for k, v in moments.items():
        np.testing.assert_array_equal(arrays[f"optimizer/moments/{k}"], v.to_numpy())
    np.testing.assert_array_equal(arrays["epoch"], np.array([3], np.int32), strict=True)
    np.testing.assert_array_equal(arrays["optimizer/step_counter"], [1.0])
    from safetensors import safe_open

    with safe_open(str(path), "numpy") as f:
        types = json.loads(f.metadata()["singa_state_types"])
    assert types["fc.W"] == model_mod.MODEL_STATE_TYPE
    assert types["epoch"] == model_mod.AUX_STATE_TYPE
    assert types["optimizer/step_counter"] == model_mod.OPTIMIZER_STATE_TYPE
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)


def test_a_file_written_by_the_package_loads(cpu, tmp_path):
    """A stranger's file (no SINGA metadata): every tensor is a model state."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    path = tmp_path / "hf.safetensors"
    st.save_file({"fc.W": w, "fc.b": b}, str(path))
    m = tiny()
    assert m.load_states(str(path)) == {}
    np.testing.assert_array_equal(m.get_states()["fc.W"].to_numpy(), w)
    np.testing.assert_array_equal(m.get_states()["fc.b"].to_numpy(), b)


def test_round_trip_restores_model_and_optimizer(cpu, tmp_path):
    m = _trained(cpu)
    path = tmp_path / "ck.SafeTensors"  # the extension decides, in any case
    m.save_states(str(path))
    fresh = tiny()
    fresh.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    fresh.load_states(str(path))
    for k, v in m.get_states().items():
        np.testing.assert_array_equal(fresh.get_states()[k].to_numpy(), v.to_numpy())
    assert fresh.optimizer.get_states()["step_counter"] == 1.0
    assert set(fresh.optimizer.get_states()["moments"]) == {"fc.W", "fc.b"}


def test_overwrite_is_atomic(cpu, tmp_path, monkeypatch):
    m = _trained(cpu)
    path = tmp_path / "ck.safetensors"
    m.save_states(str(path))
    before = path.read_bytes()

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(model_mod, "write_safetensors", boom)
    m.get_states()["fc.b"].set_value(7.0)
    with pytest.raises(OSError, match="disk full"):
        m.save_states(str(path))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.safetensors"]


def _file(tmp_path, header, data=b"", raw_len=None):
    blob = json.dumps(header).encode()
    path = tmp_path / "bad.safetensors"
    n = len(blob) if raw_len is None else raw_len
    path.write_bytes(struct.pack("<Q", n) + blob + data)
    return str(path)


W = {"dtype": "F32", "shape": [4, 3], "data_offsets": [0, 48]}
B = {"dtype": "F32", "shape": [3], "data_offsets": [48, 60]}


@pytest.mark.parametrize("header, data, raw_len, match", [
    ({"fc.W": W, "fc.b": B}, b"\0" * 60, 1 << 60, "header claims"),
    ({"fc.W": W, "fc.b": B}, b"\0" * 60, 10**6, "header claims"),
    ({"fc.W": {**W, "data_offsets": [0, 1 << 40]}, "fc.b": B}, b"\0" * 60, None,
     "data_offsets"),
    ({"fc.W": {**W, "shape": [4, 4]}, "fc.b": B}, b"\0" * 60, None, "needs 64 bytes"),
    ({"fc.W": {**W, "shape": [-4, -3]}, "fc.b": B}, b"\0" * 60, None, "shape"),
    ({"fc.W": {**W, "shape": 12}, "fc.b": B}, b"\0" * 60, None, "not a list"),
    ({"fc.W": {**W, "dtype": "BF16", "data_offsets": [0, 24]}, "fc.b": B}, b"\0" * 60, None,
     "BF16"),
    ({"fc.W": W, "fc.b": {**B, "data_offsets": [40, 52]}}, b"\0" * 60, None, "overlap"),
    ({"fc.W": {**W, "evil": 1}, "fc.b": B}, b"\0" * 60, None, "exactly dtype"),
    ({"fc.W": W, "fc.b": B, "__metadata__": {"singa_state_types": "{\"fc.W\": 7}"}},
     b"\0" * 60, None, "state_type"),
    ([1, 2], b"", None, "JSON object"),
])
def test_hostile_headers_are_refused(tmp_path, header, data, raw_len, match):
    m = tiny()
    with pytest.raises(CheckpointError, match=match):
        m.load_states(_file(tmp_path, header, data, raw_len))


def test_more_data_than_the_model_can_hold_is_refused(tmp_path):
    m = tiny()
    big = {"fc.W": {"dtype": "F32", "shape": [1 << 20], "data_offsets": [0, 4 << 20]}}
    path = _file(tmp_path, big, b"\0" * (4 << 20))
    with pytest.raises(CheckpointError, match="more than 1000 bytes"):
        m.load_states(path, max_bytes=1000)


def test_truncated_and_empty_files(tmp_path):
    m = tiny()
    path = tmp_path / "t.safetensors"
    path.write_bytes(b"\x05\0")
    with pytest.raises(CheckpointError, match="shorter than the 8-byte"):
        m.load_states(str(path))
    path.write_bytes(struct.pack("<Q", 3) + b"{x}")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        m.load_states(str(path))


def test_missing_package_names_the_install_command(cpu, tmp_path, monkeypatch):
    m = _trained(cpu)
    monkeypatch.setitem(sys.modules, "safetensors", None)
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    with pytest.raises(ExtensionUnavailableError, match=r"pip install safetensors"):
        m.save_states(str(tmp_path / "ck.safetensors"))
    assert os.listdir(tmp_path) == []
