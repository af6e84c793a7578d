"""train_cnn.py's ``--trace``, ``--tensorboard`` and ``--resume``: a trace whose events are
the graph's ops, TensorBoard event files whose scalars are the run's metrics (read back with
tensorboardX's own record format and protobuf), and a resumed run that ends bit for bit where
the uninterrupted one does."""

from __future__ import annotations

import json
import struct
import sys

import numpy as np
import pytest
from examples_support import load_example

pytest.importorskip("sklearn")
# 160 digits, batch 32: 5 steps per epoch
SMALL = ["cnn", "digits", "--subset", "160", "-b", "32", "--no-progress"]


@pytest.fixture(scope="module")
def train_cnn():
    return load_example("cnn/train_cnn.py", "singa_example_train_cnn_tools")


def test_trace_of_a_short_run_names_the_ops(train_cnn, tmp_path):
    from singa.device import get_default_device

    dev = get_default_device()
    before = dev.verbosity(), dev.skip_iteration()
    dev.SetVerbosity(0)  # the defaults, whatever earlier tests of this process set
    dev.SetSkipIteration(5)
    path = tmp_path / "trace.json"
    try:
        result = train_cnn.main(SMALL + ["-m", "1", "-o", str(tmp_path), "--trace", str(path)])
        # the device's profiling settings are restored afterwards
        assert (dev.verbosity(), dev.skip_iteration()) == (0, 5)
    finally:
        dev.SetVerbosity(before[0])
        dev.SetSkipIteration(before[1])
    assert result.trace == str(path)
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    # 5 graph steps: the example lowers the warm-up skip to 4 so the trace is never empty
    assert doc["otherData"]["iterations"] == 1
    assert {e["args"]["iteration"] for e in events} == {4}
    names = {e["name"] for e in events}
    assert any(n.startswith("Conv2d") for n in names), names
    assert {"Matmul", "SoftmaxCrossEntropy", "SoftmaxCrossEntropyBackward",
            "Conv2dBackwardW"} <= names
    assert all(e["ph"] == "X" and e["dur"] >= 0 and e["tid"] == dev.name for e in events)


def test_trace_needs_graph_mode(train_cnn, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        train_cnn.main(SMALL + ["-m", "1", "-g", "--trace", str(tmp_path / "t.json")])
    assert info.value.code == 2
    assert "--trace records the graph-mode training steps; drop -g" in capsys.readouterr().err


def _read_events(folder):
    """Every (step, tag, value) in the TFRecord event files of ``folder``, each record's
    length and data CRCs checked (masked CRC-32C, tensorboardX's own implementation)."""
    from tensorboardX.proto import event_pb2
    from tensorboardX.record_writer import masked_crc32c

    files = list(folder.glob("events.out.tfevents.*"))
    assert len(files) == 1
    raw, pos, out = files[0].read_bytes(), 0, []
    while pos < len(raw):
        header = raw[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        assert struct.unpack("<I", raw[pos + 8:pos + 12])[0] == masked_crc32c(header)
        data = raw[pos + 12:pos + 12 + length]
        assert struct.unpack("<I", raw[pos + 12 + length:pos + 16 + length])[0] == \
            masked_crc32c(data)
        pos += 16 + length
        event = event_pb2.Event()
        event.ParseFromString(data)
        out += [(event.step, v.tag, v.simple_value) for v in event.summary.value]
    return out


def test_tensorboard_logs_loss_accuracy_and_learning_rate(train_cnn, tmp_path):
    pytest.importorskip("tensorboardX")
    tb = tmp_path / "tb"
    result = train_cnn.main(SMALL + ["-m", "2", "-l", "0.03", "-o", str(tmp_path),
                                     "--tensorboard", str(tb)])
    assert result.tensorboard == str(tb)
    events = _read_events(tb)
    by_tag = {}
    for step, tag, value in events:
        by_tag.setdefault(tag, []).append((step, value))
    h = result.history
    f32 = np.float32
    assert by_tag["epoch/train_loss"] == [(1, f32(h["train_loss"][0])),
                                          (2, f32(h["train_loss"][1]))]
    assert [v for _, v in by_tag["epoch/val_accuracy"]] == [f32(a) for a in h["val_acc"]]
    assert [v for _, v in by_tag["epoch/train_accuracy"]] == [f32(a) for a in h["train_acc"]]
    assert [v for _, v in by_tag["epoch/val_loss"]] == [f32(a) for a in h["val_loss"]]
    assert by_tag["epoch/learning_rate"] == [(1, f32(0.03)), (2, f32(0.03))]
    steps = by_tag["step/train_loss"]
    assert [s for s, _ in steps] == list(range(1, 11))
    # 5 steps of 32 images: their mean is the epoch's per-sample mean loss
    assert np.mean([v for _, v in steps[:5]]) == pytest.approx(h["train_loss"][0], rel=1e-6)
    assert {v for _, v in by_tag["step/learning_rate"]} == {f32(0.03)}


def test_tensorboard_without_tensorboardx_names_the_install(train_cnn, tmp_path,
                                                            monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    with pytest.raises(SystemExit) as info:
        train_cnn.main(SMALL + ["-m", "1", "-o", str(tmp_path), "--tensorboard",
                                str(tmp_path / "tb")])
    assert 'pip install ".[examples]"' in str(info.value.code)
    assert "tensorboardX" in str(info.value.code)


def _final_state(result):
    states = {k: v.to_numpy().copy() for k, v in result.model.get_states().items()}
    opt_states = result.model.optimizer.get_states()
    states["step_counter"] = np.array(opt_states["step_counter"])
    states.update({"moments/" + k: v.to_numpy().copy()
                   for k, v in opt_states["moments"].items()})
    return states


@pytest.mark.parametrize("mode", [["-g"], []], ids=["eager", "graph"])
def test_resume_continues_bit_for_bit(train_cnn, tmp_path, mode):
    # Two threads (the CPU backend follows numpy's BLAS thread count): the chunks of the
    # convolution's weight gradient run on both, and its partial sums must still add up the
    # same way in every run (they once were added in the order the threads finished).
    threadpoolctl = pytest.importorskip("threadpoolctl")
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        whole = train_cnn.main(SMALL + mode + ["-m", "2", "-o", str(tmp_path / "whole")])
        part = tmp_path / "part"
        train_cnn.main(SMALL + mode + ["-m", "1", "-o", str(part)])
        ckpt = part / "cnn_digits_checkpoint.zip"
        resumed = train_cnn.main(SMALL + mode + ["-m", "2", "-o", str(part), "--resume",
                                                 str(ckpt)])
    want, got = _final_state(whole), _final_state(resumed)
    assert set(got) == set(want) and want["step_counter"] == 10.0
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k, strict=True)
    for k in ("epoch", "train_loss", "train_acc", "val_loss", "val_acc"):
        assert resumed.history[k] == whole.history[k], k  # epoch 1 from the first part


def test_resume_of_a_foreign_checkpoint_is_refused(train_cnn, tmp_path):
    from _shared_models import tiny

    m = tiny()
    m.save_states(str(tmp_path / "other.zip"))
    with pytest.raises(SystemExit, match="does not match the model"):
        train_cnn.main(SMALL + ["-m", "1", "-o", str(tmp_path), "--resume",
                                str(tmp_path / "other.zip")])
