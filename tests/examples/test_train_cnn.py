"""examples/cnn/train_cnn.py: short runs that check the metrics, the checkpoint (a fresh model
loaded from it predicts identically) and the PNG; the zoo models; the full digits run (slow)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest
from examples_support import EXAMPLES, REPO, load_example
from singa import device, tensor

pytest.importorskip("sklearn")
SCRIPT = EXAMPLES / "cnn" / "train_cnn.py"


@pytest.fixture(scope="module")
def train_cnn():
    return load_example("cnn/train_cnn.py", "singa_example_train_cnn")


@pytest.fixture(scope="module")
def short_run(train_cnn, tmp_path_factory):
    out = tmp_path_factory.mktemp("cnn_digits")
    result = train_cnn.main(["cnn", "digits", "-m", "2", "--subset", "320", "-b", "32",
                             "-o", str(out), "--no-progress"])
    return result, out


def _assert_png(path):
    """Signature, IHDR and every chunk CRC of a PNG file, then Pillow's own check."""
    raw = open(path, "rb").read()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(raw):
        (length,) = struct.unpack(">I", raw[pos:pos + 4])
        kind, body = raw[pos + 4:pos + 8], raw[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", raw[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in chunk {kind}"
        chunks.append((kind, body))
        pos += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    width, height = struct.unpack(">II", chunks[0][1][:8])
    assert width >= 400 and height >= 200
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as img:
        img.verify()


def test_short_run_metrics_and_files(short_run):
    result, out = short_run
    h = result.history
    assert h["epoch"] == [1, 2]
    assert h["train_loss"][1] < h["train_loss"][0]
    assert all(0.0 <= a <= 1.0 for a in h["train_acc"] + h["val_acc"])
    assert h["val_acc"][-1] > 0.5  # 20 steps on 320 digits: far above chance (0.1)
    assert np.isfinite(h["val_loss"]).all()
    assert result.checkpoint == str(out / "cnn_digits_checkpoint.zip")
    assert os.path.isfile(result.checkpoint)
    saved = json.loads((out / "cnn_digits_history.json").read_text())
    assert saved["val_acc"] == h["val_acc"] and saved["model"] == "cnn"
    _assert_png(result.plot)


def test_checkpoint_loads_into_a_fresh_model_with_identical_predictions(short_run, train_cnn):
    result, _ = short_run
    trained = result.model
    dev = device.get_default_device()
    fresh = train_cnn.create_model("cnn", 1, 10)
    tx = tensor.Tensor((32, 1, 28, 28), dev)
    fresh.compile([tx], is_train=False, use_graph=False)
    aux = fresh.load_states(result.checkpoint)
    assert int(tensor.to_numpy(aux["epoch"])[0]) == 2
    from singa import data

    _, _, vx, _ = data.load_digits(size=28)
    trained.eval()
    fresh.eval()
    for start in (0, 32):
        tx.copy_from_numpy(vx[start:start + 32])
        a = tensor.to_numpy(trained(tx))
        b = tensor.to_numpy(fresh(tx))
        np.testing.assert_array_equal(a, b)
    states = trained.get_states()
    loaded = fresh.get_states()
    assert set(states) == set(loaded)
    for k in states:
        np.testing.assert_array_equal(tensor.to_numpy(states[k]), tensor.to_numpy(loaded[k]))


def test_mlp_on_digits_eager(train_cnn, tmp_path):
    result = train_cnn.main(["mlp", "digits", "-m", "2", "-g", "-b", "64", "-l", "0.05",
                             "-o", str(tmp_path), "--no-progress"])
    assert result.history["val_acc"][-1] > 0.8
    assert result.model.dimension == 2


def test_progress_bar_is_tqdm_and_keeps_the_epoch_lines(train_cnn, tmp_path, capsys):
    """--progress draws tqdm's bar over the batches (cleared after each epoch); the per-epoch
    metrics line and the PNG curves are unchanged."""
    result = train_cnn.main(["mlp", "digits", "-m", "1", "-g", "--subset", "128", "-b", "32",
                             "-o", str(tmp_path), "--progress"])
    out = capsys.readouterr().out
    # tqdm's first frame (later ones are rate-limited to one per 0.1 s)
    assert "epoch 1/1:   0%" in out and "0/4 [00:00<?, ?batch/s]" in out, out
    assert "epoch   1/1  train loss" in out
    _assert_png(result.plot)
    quiet = train_cnn.main(["mlp", "digits", "-m", "1", "-g", "--subset", "128", "-b", "32",
                            "-o", str(tmp_path), "--no-progress"])
    quiet_out = capsys.readouterr().out
    assert "\r" not in quiet_out and "epoch   1/1  train loss" in quiet_out  # no bar
    assert quiet.history["epoch"] == [1]


def test_cli_missing_mnist_explains_where_to_put_it(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "cnn", "mnist", "--data-dir",
                           str(tmp_path), "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode != 0
    assert "MNIST files not found" in proc.stderr and str(tmp_path) in proc.stderr
    assert "train-images-idx3-ubyte" in proc.stderr and "--data-dir" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_device_flags(train_cnn):
    assert train_cnn.resolve_device(None, None) is device.get_default_device()
    with pytest.raises(SystemExit, match="contradicts"):
        train_cnn.resolve_device("cuda:1", 0)
    from singa.errors import DeviceUnavailableError

    if "cuda:0" not in device.list_devices():
        with pytest.raises(DeviceUnavailableError):
            train_cnn.resolve_device(None, 0)  # -i 0 means cuda:0, never a silent CPU


@pytest.mark.parametrize("name,channels,size,params", [
    ("alexnet", 1, 224, None),
    ("resnet", 3, 224, 23_528_522),  # ResNet-50 with 10 classes (torchvision's count)
    ("xceptionnet", 3, 299, 20_827_442),  # Keras Xception's trainable count, 10 classes
])
def test_zoo_models_forward(train_cnn, name, channels, size, params):
    m = train_cnn.create_model(name, channels, 10)
    assert m.dimension == 4 and m.input_size == size
    tx = tensor.Tensor((1, channels, size, size), device.get_default_device())
    tx.gaussian(0.0, 1.0)
    m.compile([tx], is_train=False, use_graph=False)
    m.eval()
    out = tensor.to_numpy(m(tx))
    assert out.shape == (1, 10) and np.isfinite(out).all()
    if params is not None:
        assert sum(p.size() for p in m.get_params().values()) == params


@pytest.mark.slow
def test_readme_command_reaches_95_percent(tmp_path):
    """The README's main command, as a user runs it (default flags)."""
    proc = subprocess.run([sys.executable, str(SCRIPT), "cnn", "digits", "-o", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    h = json.loads((tmp_path / "cnn_digits_history.json").read_text())
    print(proc.stdout)
    assert h["val_acc"][-1] >= 0.95
