"""benchmarks/real_models.py's transformer and recurrent rows: a model runs through both
singa-onnx modes against onnxruntime (the row's error is the oracle's), and a model that
cannot run is a printed skip with its reason, not a failed run.

The models themselves are timed by running the benchmark (``--family transformer
recurrent``); here a tiny GRU stands in so that one row takes seconds.
"""

from __future__ import annotations

import argparse

import _bench_scripts
import numpy as np
import onnxruntime as ort
import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def bench():
    return _bench_scripts.load("real_models")


class TinyGRU(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(4, 8, batch_first=True, bidirectional=True)

    def forward(self, x):
        return self.rnn(x)[0]


def _args(**kw):
    base = dict(exporters=["torchscript"], batches=[2], no_eager=False, without_fusions=None,
                reps=1, profile=False, threads=1, clock="wall")
    return argparse.Namespace(**{**base, **kw})


def _session():
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return so


def test_every_model_is_in_a_family(bench):
    listed = [m for f in bench.FAMILIES.values() for m in f]
    assert sorted(listed) == sorted([*bench.MODELS, *bench.SEQ_MODELS])


def test_a_row_has_both_modes_and_the_error_against_onnxruntime(bench, monkeypatch, capsys):
    rng = np.random.default_rng(0)
    monkeypatch.setitem(bench.SEQ_MODELS, "tiny_gru", (
        "recurrent", TinyGRU, lambda b: rng.standard_normal((b, 5, 4)).astype(np.float32)))
    monkeypatch.setattr(bench, "interleaved_medians", lambda fns, reps, clock: [
        (fn(), 1e-3 * (k + 1))[1] for k, fn in enumerate(fns)])
    rows = bench._run_seq(["tiny_gru"], _args(), _session())
    (row,) = rows
    assert row["model"] == "tiny_gru" and row["batch"] == 2 and row["exporter"] == "torchscript"
    assert row["max_rel_err"] < 1e-5
    assert row["ratio"] == pytest.approx(2.0) and row["eager_ratio"] == pytest.approx(3.0)
    assert "tiny_gru" in capsys.readouterr().out


def test_the_cpu_clock_times_the_calls_by_the_threads_cpu_time(bench, monkeypatch):
    """``--clock cpu`` hands interleaved_medians the calling thread's CPU-time clock."""
    import time

    rng = np.random.default_rng(0)
    monkeypatch.setitem(bench.SEQ_MODELS, "tiny_gru", (
        "recurrent", TinyGRU, lambda b: rng.standard_normal((b, 5, 4)).astype(np.float32)))
    clocks = []
    monkeypatch.setattr(bench, "interleaved_medians", lambda fns, reps, clock: (
        clocks.append(clock), [1e-3] * len(fns))[1])
    bench._run_seq(["tiny_gru"], _args(clock="cpu", no_eager=True), _session())
    assert clocks == [time.thread_time]


def test_missing_dependency_and_failed_export_are_skips_with_the_reason(bench, monkeypatch,
                                                                      capsys):
    def missing():
        raise ImportError("No module named 'transformers'")

    class NoExport(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.eigvals(x).real  # no ONNX export

    x = lambda b: np.ones((b, 3, 3), np.float32)  # noqa: E731
    monkeypatch.setitem(bench.SEQ_MODELS, "needs_hf", ("transformer", missing, x))
    monkeypatch.setitem(bench.SEQ_MODELS, "no_export", ("transformer", NoExport, x))
    rows = bench._run_seq(["needs_hf", "no_export"], _args(), _session())
    out = capsys.readouterr().out
    assert rows == []
    assert "needs_hf" in out and "skipped: No module named 'transformers'" in out
    assert "no_export" in out and "skipped: export failed:" in out


class TinyCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1, groups=1)
        self.dw = torch.nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.fc = torch.nn.Linear(4, 5)

    def forward(self, x):
        y = torch.nn.functional.relu(self.dw(torch.nn.functional.relu(self.conv(x))))
        return self.fc(y.mean((2, 3)))


def _tiny_cnn(bench, monkeypatch):
    import io

    import onnx

    def export(name):
        buf = io.BytesIO()
        torch.onnx.export(TinyCNN().eval(), (torch.zeros(1, 3, 8, 8),), buf, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                          dynamo=False)
        return onnx.load_from_string(buf.getvalue())

    monkeypatch.setitem(bench.MODELS, "tiny_cnn", ("tiny_cnn", (3, 8, 8)))
    monkeypatch.setattr(bench, "export", export)


def test_a_cnn_row_has_graph_and_eager_and_the_error_of_both(bench, monkeypatch, capsys):
    """The CNN rows time eager mode too (the issue's table has an eager column for every
    family), in the same alternating rounds; the row's error covers both modes."""
    _tiny_cnn(bench, monkeypatch)
    timed = []
    monkeypatch.setattr(bench, "interleaved_medians", lambda fns, reps, clock: (
        timed.append(len(fns)), [(fn(), 1e-3 * (k + 1))[1] for k, fn in enumerate(fns)])[1])
    rel_errs = []
    real_err = bench._rel_err
    monkeypatch.setattr(bench, "_rel_err", lambda got, want: (
        rel_errs.append(real_err(got, want)), rel_errs[-1])[1])
    (row,) = bench._run_cnns(["tiny_cnn"], _args(compare_gemm=False, compare_depthwise=False),
                             _session())
    assert timed == [3]  # onnxruntime, graph, eager
    assert len(rel_errs) == 2  # graph and eager, each against onnxruntime
    assert row["max_rel_err"] == max(rel_errs) < 1e-5
    assert row["ratio"] == pytest.approx(2.0) and row["eager_ratio"] == pytest.approx(3.0)
    out = capsys.readouterr().out
    assert "eager ms" in out and "tiny_cnn" in out


def test_no_eager_leaves_the_cnn_rows_graph_only(bench, monkeypatch):
    _tiny_cnn(bench, monkeypatch)
    timed = []
    monkeypatch.setattr(bench, "interleaved_medians", lambda fns, reps, clock: (
        timed.append(len(fns)), [1e-3] * len(fns))[1])
    (row,) = bench._run_cnns(["tiny_cnn"], _args(no_eager=True, compare_gemm=False,
                                                 compare_depthwise=False), _session())
    assert timed == [2] and "eager_ratio" not in row
