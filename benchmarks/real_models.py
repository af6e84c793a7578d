"""Inference of real architectures imported through singa-onnx, against onnxruntime, same run.

torchvision models built with random weights (``weights=None``; BatchNorm statistics
randomised so that no output is near zero), exported by ``torch.onnx.export`` (the TorchScript
exporter, ``dynamo=False``, BatchNorm folded into the convolutions as a user's export has it),
imported with ``singa_onnx.prepare(model, use_graph=True)`` and timed against an onnxruntime
session in the same process. Both run on ``--threads`` threads (OpenBLAS and numba through
their environment variables, set before numpy is imported; onnxruntime's intra-op pool). Each
median is over rounds that alternate between the two (see onnx_inference.interleaved_medians).
Prints, per model and batch, both medians, the ratio singa / onnxruntime and the largest error
relative to the largest onnxruntime output; ``--json`` writes the same rows.

``--profile`` prints, per model and batch, the graph's per-op time report (the device's
profiler, ``SetVerbosity(2)``) summed by op, largest first.

    python benchmarks/real_models.py [--models mobilenet_v3_small ...] [--batches 1 8]
        [--threads 1] [--reps 20] [--json out.json] [--profile]

Needs torchvision (``pip install --no-deps torchvision==0.28.0`` next to torch 2.13.0+cpu).
Its wheel for torch 2.13 is built for CUDA; with the CPU torch its import fails on its compiled
operators, so the two schemas it registers are declared first (the model definitions are
plain Python).

``--compare-gemm`` also times each graph with the CPU's direct grouped-convolution kernels
switched off (im2col + one GEMM per group), in the same alternating rounds;
``--compare-depthwise`` with the channels-last depthwise kernel switched off (the wide rows of
``singa_cpu.kernels.grouped`` on every map).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time


def _threads_from_argv() -> int:
    """``--threads`` read before numpy is imported (BLAS reads its thread count at load)."""
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return int(sys.argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return 1


_THREADS = _threads_from_argv()
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, str(_THREADS))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import singa_onnx  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_inference import interleaved_medians  # noqa: E402

#: name -> (torchvision constructor name, input shape without the batch)
MODELS = {
    "mobilenet_v3_small": ("mobilenet_v3_small", (3, 224, 224)),
    "efficientnet_b0": ("efficientnet_b0", (3, 224, 224)),
    "shufflenet_v2_x1_0": ("shufflenet_v2_x1_0", (3, 224, 224)),
    "convnext_tiny": ("convnext_tiny", (3, 224, 224)),
    "resnet50": ("resnet50", (3, 224, 224)),
}


def _torchvision():
    lib = torch.library.Library("torchvision", "FRAGMENT")
    for op in ("nms", "qnms"):
        try:
            lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        except RuntimeError:  # a torchvision build that registers them itself
            pass
    _torchvision.lib = lib  # the fragment lives as long as the schemas are needed
    import torchvision

    return torchvision


def build(name: str):
    """The model with random weights and randomised BatchNorm statistics, in eval mode."""
    tv = _torchvision()
    torch.manual_seed(0)
    m = getattr(tv.models, MODELS[name][0])(weights=None).eval()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.1, 0.1)
    return m


def export(name: str) -> onnx.ModelProto:
    m = build(name)
    shape = MODELS[name][1]
    buf = io.BytesIO()
    torch.onnx.export(m, (torch.zeros(1, *shape),), buf, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, dynamo=False)
    return onnx.load_from_string(buf.getvalue())


def _label(node) -> str:
    """The node's op name; grouped convolutions marked with their kernel size (the profile
    separates them from the dense ones)."""
    attrs = getattr(node.fn, "attrs", None) or {}
    if node.name.startswith("Conv2d") and attrs.get("group", 1) > 1:
        w = node.fn.ins[1].shape
        w = w() if callable(w) else w
        kind = "depthwise" if w[1] == 1 else "grouped"
        return f"{node.name} {kind} {w[2]}x{w[3]}"
    return node.name


def op_profile(rep, x, runs: int = 5) -> list[tuple[str, float, int]]:
    """(op, ms per run, calls per run) of graph-mode replays, largest first, from the device's
    per-node profile (``SetVerbosity(2)``)."""
    dev = rep.dev
    dev.SetVerbosity(2)
    dev.SetSkipIteration(0)
    try:
        for _ in range(runs):
            rep.run([x])
        graph = dev._last_run_graph
        totals: dict[str, list] = {}
        for node in graph.steps or graph.nodes:
            if node.time_count:
                t = totals.setdefault(_label(node), [0.0, 0])
                t[0] += node.time_total / node.time_count * 1e3
                t[1] += 1
        return sorted(((k, ms, n) for k, (ms, n) in totals.items()), key=lambda r: -r[1])
    finally:
        dev.SetVerbosity(0)


def _with_gemm_groups(rep, x):
    """``rep.run([x])`` with the CPU's direct grouped kernels switched off (the Conv2d kernel
    checks per call, so a recorded graph takes im2col + GEMM per group instead)."""
    from singa_cpu.kernels import grouped  # noqa: PLC0415

    width, grouped.MAX_GROUP_WIDTH = grouped.MAX_GROUP_WIDTH, 0
    try:
        return rep.run([x])
    finally:
        grouped.MAX_GROUP_WIDTH = width


def _with_wide_depthwise(rep, x):
    """``rep.run([x])`` with the channels-last depthwise kernel switched off (every depthwise
    layer on the wide rows of ``singa_cpu.kernels.grouped``)."""
    from singa_cpu.kernels import depthwise  # noqa: PLC0415

    limit, depthwise.MAX_HW = depthwise.MAX_HW, 0
    try:
        return rep.run([x])
    finally:
        depthwise.MAX_HW = limit


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", nargs="+", default=list(MODELS))
    p.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json", default=None)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--compare-gemm", action="store_true",
                   help="also time the graph with grouped layers on im2col + one GEMM per "
                        "group (the path before the direct kernels), alternating in the run")
    p.add_argument("--compare-depthwise", action="store_true",
                   help="also time the graph with every depthwise layer on the wide rows "
                        "(no channels-last kernel), alternating in the run")
    args = p.parse_args()
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    rows = []
    gemm_cols = f" {'gemm ms':>9s} {'ratio':>6s}" if args.compare_gemm else ""
    if args.compare_depthwise:
        gemm_cols += f" {'wide ms':>9s} {'ratio':>6s}"
    print(f"{'model':20s} {'batch':>5s} {'ort ms':>9s} {'graph ms':>9s} {'ratio':>6s}"
          f"{gemm_cols} {'max rel err':>11s}", flush=True)
    for name in args.models:
        onx = export(name)
        sess = ort.InferenceSession(onx.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        graph = singa_onnx.prepare(onx, use_graph=True)
        for b in args.batches:
            x = np.random.default_rng(0).standard_normal((b, *MODELS[name][1])).astype(
                np.float32)
            want = sess.run(None, {"x": x})[0]
            got = graph.run([x])[0]
            got = graph.run([x])[0]  # the replay
            err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
            fns = [lambda s=sess, x=x: s.run(None, {"x": x}), lambda r=graph, x=x: r.run([x])]
            if args.compare_gemm:
                fns.append(lambda r=graph, x=x: _with_gemm_groups(r, x))
            if args.compare_depthwise:
                fns.append(lambda r=graph, x=x: _with_wide_depthwise(r, x))
            t_ort, t_graph, *t_more = interleaved_medians(fns, args.reps)
            t_gemm = t_more[:1] if args.compare_gemm else []
            t_wide = t_more[-1:] if args.compare_depthwise else []
            row = dict(model=name, batch=b, threads=args.threads, ort_ms=t_ort * 1e3,
                       graph_ms=t_graph * 1e3, ratio=t_graph / t_ort, max_rel_err=err)
            line = (f"{name:20s} {b:5d} {t_ort * 1e3:9.2f} {t_graph * 1e3:9.2f} "
                    f"{t_graph / t_ort:6.2f}")
            if t_gemm:
                row.update(gemm_ms=t_gemm[0] * 1e3, gemm_ratio=t_gemm[0] / t_ort)
                line += f" {t_gemm[0] * 1e3:9.2f} {t_gemm[0] / t_ort:6.2f}"
            if t_wide:
                row.update(wide_ms=t_wide[0] * 1e3, wide_ratio=t_wide[0] / t_ort)
                line += f" {t_wide[0] * 1e3:9.2f} {t_wide[0] / t_ort:6.2f}"
            rows.append(row)
            print(f"{line} {err:11.1e}", flush=True)
            if args.profile:
                _print_profile(graph, x)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), rows=rows),
                      f, indent=1)


def _print_profile(rep, x):
    prof = op_profile(rep, x)
    total = sum(ms for _, ms, _ in prof)
    for op, ms, calls in prof[:8]:
        print(f"    {op:32s} {ms:8.2f} ms {100 * ms / max(total, 1e-9):5.1f}%  {calls:4d} calls")


if __name__ == "__main__":
    main()
