"""benchmarks/train_step.py's driver: its overrides, device mapping, JSON and failure report.

Only the parts that need neither PyTorch nor a backend: the timed steps themselves are checked
by running the benchmark (``--models cnn --reps 1 --steps 3 --json out.json``).
"""

from __future__ import annotations

import argparse
import json

import _bench_scripts
import pytest


@pytest.fixture(scope="module")
def bench():
    return _bench_scripts.load("train_step")


def test_batch_takes_one_number_for_all_or_model_pairs(bench):
    ap = argparse.ArgumentParser()
    assert bench.per_model(None, bench.BATCH, "--batch", ap) == bench.BATCH
    assert bench.per_model(["8"], bench.BATCH, "--batch", ap) == dict.fromkeys(bench.BATCH, 8)
    assert bench.per_model(["resnet18=128", "cnn=16"], bench.BATCH, "--batch", ap) == {
        **bench.BATCH, "resnet18": 128, "cnn": 16}
    # later words win: every model at 8, then ResNet-18 at 128
    assert bench.per_model(["8", "resnet18=128"], bench.BATCH, "--batch", ap) == {
        **dict.fromkeys(bench.BATCH, 8), "resnet18": 128}


@pytest.mark.parametrize("words", [["resnet=128"], ["0"], ["cnn=-1"], ["x"], ["cnn="]])
def test_bad_overrides_are_usage_errors(bench, words, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--batch", *words])
    assert e.value.code == 2
    assert "--batch" in capsys.readouterr().err


def test_cuda_has_its_own_default_steps(bench):
    ap = argparse.ArgumentParser()
    for device, table in (("cpu", bench.STEPS), ("cuda:1", bench.STEPS_BY_BACKEND["cuda"])):
        steps = bench.STEPS_BY_BACKEND.get(bench.backend_of(device), bench.STEPS)
        assert bench.per_model(None, steps, "--steps", ap) == table
    assert bench.STEPS_BY_BACKEND["cpu"] is bench.STEPS


@pytest.mark.parametrize("singa, torch", [("cpu", "cpu"), ("cuda", "cuda:0"),
                                          ("CUDA:1", "cuda:1"), ("opencl:0", "cpu")])
def test_torch_runs_on_the_same_cuda_device(bench, singa, torch):
    assert bench.torch_device_name(singa) == torch


def test_model_record_compares_like_with_like(bench):
    runs = {
        "eager": [{"times": [0.4, 0.2], "rss": 5, "pool": 30},
                  {"times": [0.3], "rss": 7, "pool": 20}],
        "graph": [{"times": [0.1], "rss": 4, "pool": 10}],
        "torch": [{"times": [0.2], "rss": 9, "pool": None}],
    }
    ns = argparse.Namespace(batch={"cnn": 16}, steps={"cnn": 2})
    rec = bench.model_record("cnn", ns, {c: [t for r in v for t in r["times"]]
                                         for c, v in runs.items()}, runs)
    assert rec["batch"] == 16 and rec["steps"] == 2
    assert rec["median_s"] == {"eager": 0.3, "graph": 0.1, "torch": 0.2}
    assert rec["ratios"] == pytest.approx({"eager/graph": 3.0, "eager/torch": 1.5,
                                           "graph/torch": 0.5})
    assert rec["peak_pool_bytes"] == {"eager": 30, "graph": 10, "torch": None}
    assert rec["peak_rss_bytes"] == {"eager": 7, "graph": 4, "torch": 9}


def test_json_is_replaced_whole(bench, tmp_path):
    path = tmp_path / "out.json"
    path.write_text("old")
    bench.write_json(str(path), {"models": {}})
    assert json.loads(path.read_text()) == {"models": {}}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_failing_worker_stops_the_run_and_shows_its_stderr(bench, tmp_path, capsys, clean_env):
    out = tmp_path / "out.json"
    with pytest.raises(SystemExit) as e:
        bench.main(["--models", "cnn", "--reps", "1", "--device", "nosuch:0", "--no-torch",
                    "--json", str(out)])
    assert "eager worker for cnn (batch 64) on nosuch:0 exited with status 1" in str(e.value.code)
    assert "DeviceUnavailableError" in capsys.readouterr().err  # the worker's traceback
    report = json.loads(out.read_text())
    assert report["complete"] is False and report["models"] == {}
    assert "nosuch" in report["error"]


def test_target_column_names_both_modes(bench):
    assert bench.target_label("mlp") == "e1.5 g1.0"
    assert bench.target_label("resnet18") == "e1.5 g1.0"
    assert bench.target_label("transformer") == "g1.2"
