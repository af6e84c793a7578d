"""Inference of real architectures imported through singa-onnx, against onnxruntime, same run.

Three families (``--family``, default ``cnn``): CNNs, transformers, recurrent networks.

torchvision CNNs built with random weights (``weights=None``; BatchNorm statistics
randomised so that no output is near zero), exported by ``torch.onnx.export`` (the TorchScript
exporter, ``dynamo=False``, BatchNorm folded into the convolutions as a user's export has it),
imported with ``singa_onnx.prepare(model, use_graph=True)`` (and, unless ``--no-eager``,
``singa_onnx.prepare(model)``: eager) and timed against an onnxruntime session in the same
process. Both run on ``--threads`` threads (OpenBLAS and numba through
their environment variables, set before numpy is imported; onnxruntime's intra-op pool). Each
median is over rounds that alternate between the two (see onnx_inference.interleaved_medians).
Prints, per model and batch, the medians, the ratios singa / onnxruntime (graph, eager) and
the largest error of either mode relative to the largest onnxruntime output; ``--json`` writes
the same rows.

``--profile`` prints, per model and batch, the graph's per-op time report (the device's
profiler, ``SetVerbosity(2)``) summed by op, largest first; ``--profile-shapes`` sums by op
and operand shapes instead (``Matmul (8, 128, 256),(256, 256) -> (8, 128, 256)``, ``*`` a
strided operand; see _profile.py), the 20 largest rows.

    python benchmarks/real_models.py [--models mobilenet_v3_small ...] [--batches 1 8]
        [--threads 1] [--reps 20] [--json out.json] [--profile]
    python benchmarks/real_models.py --family transformer recurrent [--exporters torchscript]

Needs torchvision (``pip install --no-deps torchvision==0.28.0`` next to torch 2.13.0+cpu).
Its wheel for torch 2.13 is built for CUDA; with the CPU torch its import fails on its compiled
operators, so the two schemas it registers are declared first (the model definitions are
plain Python).

Transformers (``nn.TransformerEncoder``, a causal decoder-only ``nn.TransformerEncoder``, a
small torchvision ``VisionTransformer``; Hugging Face BERT, GPT-2 and DistilBERT from small
configs with random weights, where ``transformers`` is installed) and recurrent networks (a
2-layer LSTM language model, a bidirectional GRU tagger) are exported once per batch with
static shapes by each exporter in ``--exporters`` (``torchscript``: ``dynamo=False``;
``dynamo``: ``dynamo=True``); a model or exporter that cannot run is printed as skipped with
the reason. Each is timed in graph mode (``use_graph=True``) and eager mode, alternating with
onnxruntime in the same rounds (``--no-eager``: graph only); its rows carry both ratios.

``--without-fusions Add+ReLU ...`` also times (transformer and recurrent rows) a graph
recorded with those fused kernels left out of the device's table, in the same alternating
rounds: a fusion's gain measured against the graph without it.

``--clock cpu`` times each call by the calling thread's CPU time instead of the wall clock
(1 thread only: singa, numba, OpenBLAS and onnxruntime then all run on the calling thread), so
that the time other processes hold the core on a shared host is left out of both sides.

``--compare-gemm`` also times each graph with the CPU's direct grouped-convolution kernels
switched off (im2col + one GEMM per group), in the same alternating rounds;
``--compare-depthwise`` with the depthwise kernel switched off (the wide rows of
``singa_cpu.kernels.grouped``, a loop per tap, on every map).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
import warnings


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


#: ``--clock``: how each call is timed (see onnx_inference.interleaved_medians)
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}


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


# Transformer and recurrent models: small configurations (the Intel table's), random weights.
SEQ = 128  # tokens per sequence (transformers)
RNN_SEQ = 64  # steps per sequence (recurrent)
VOCAB = 1000


class _FirstOutput(torch.nn.Module):
    """The first tensor a Hugging Face model returns (its last hidden state or logits)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids):
        return self.m(input_ids=ids, use_cache=False, return_dict=False)[0] \
            if self.m.config.model_type == "gpt2" else \
            self.m(input_ids=ids, return_dict=False)[0]


def _hf(kind: str):
    _torchvision()  # transformers imports torchvision when it is installed
    import transformers  # noqa: PLC0415

    small = dict(vocab_size=VOCAB)
    if kind == "bert":
        cfg = transformers.BertConfig(hidden_size=256, num_hidden_layers=4,
                                      num_attention_heads=4, intermediate_size=1024,
                                      max_position_embeddings=SEQ, **small)
        m = transformers.BertModel(cfg)
    elif kind == "gpt2":
        cfg = transformers.GPT2Config(n_embd=256, n_layer=4, n_head=4, n_positions=SEQ,
                                      bos_token_id=0, eos_token_id=0, **small)
        m = transformers.GPT2Model(cfg)
    else:
        cfg = transformers.DistilBertConfig(dim=256, n_layers=4, n_heads=4, hidden_dim=1024,
                                            max_position_embeddings=SEQ, **small)
        m = transformers.DistilBertModel(cfg)
    cfg._attn_implementation = "eager"  # the MatMul-Softmax-MatMul graph, not SDPA
    return _FirstOutput(m)


class _Encoder(torch.nn.Module):
    """nn.TransformerEncoder (4 layers, d 256, 4 heads, GELU feed-forward 1024), optionally
    with a causal mask (a decoder-only language model's blocks)."""

    def __init__(self, causal: bool):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0,
                                                 activation="gelu", batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
        self.causal = causal

    def forward(self, x):
        if not self.causal:
            return self.enc(x)
        mask = torch.nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.enc(x, mask=mask, is_causal=True)


class _LSTMLM(torch.nn.Module):
    """Embedding 256, 2-layer LSTM 256, projection to the vocabulary."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, 256)
        self.rnn = torch.nn.LSTM(256, 256, num_layers=2, batch_first=True)
        self.out = torch.nn.Linear(256, VOCAB)

    def forward(self, ids):
        return self.out(self.rnn(self.emb(ids))[0])


class _BiGRU(torch.nn.Module):
    """A bidirectional GRU tagger: 128 features, hidden 256 per direction, 16 classes."""

    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(128, 256, batch_first=True, bidirectional=True)
        self.out = torch.nn.Linear(512, 16)

    def forward(self, x):
        return self.out(self.rnn(x)[0])


def _vit():
    _torchvision()
    from torchvision.models.vision_transformer import VisionTransformer  # noqa: PLC0415

    m = VisionTransformer(image_size=224, patch_size=16, num_layers=4, num_heads=4,
                          hidden_dim=256, mlp_dim=1024)
    torch.nn.init.normal_(m.heads.head.weight, std=0.02)  # zeros by default: a zero output
    return m


def _tokens(b, n):
    return np.random.default_rng(0).integers(0, VOCAB, (b, n)).astype(np.int64)


def _floats(*shape):
    return lambda b: np.random.default_rng(0).standard_normal((b, *shape)).astype(np.float32)


#: name -> (family, constructor, batch -> input array)
SEQ_MODELS = {
    "transformer_encoder": ("transformer", lambda: _Encoder(False), _floats(SEQ, 256)),
    "transformer_causal": ("transformer", lambda: _Encoder(True), _floats(SEQ, 256)),
    "vit_small": ("transformer", _vit, _floats(3, 224, 224)),
    "bert_small": ("transformer", lambda: _hf("bert"), lambda b: _tokens(b, SEQ)),
    "gpt2_small": ("transformer", lambda: _hf("gpt2"), lambda b: _tokens(b, SEQ)),
    "distilbert_small": ("transformer", lambda: _hf("distilbert"), lambda b: _tokens(b, SEQ)),
    "lstm_lm": ("recurrent", _LSTMLM, lambda b: _tokens(b, RNN_SEQ)),
    "bigru": ("recurrent", _BiGRU, _floats(RNN_SEQ, 128)),
}
FAMILIES = {"cnn": list(MODELS), "transformer": [], "recurrent": []}
for _name, (_family, _, _) in SEQ_MODELS.items():
    FAMILIES[_family].append(_name)


def export_seq(name: str, x: np.ndarray, exporter: str) -> onnx.ModelProto:
    """``name`` built with random weights (seed 0) and exported for input ``x``'s shape."""
    torch.manual_seed(0)
    m = SEQ_MODELS[name][1]().eval()
    buf = io.BytesIO()
    # PyTorch's fused encoder-layer and attention fast paths have no ONNX export
    torch.backends.mha.set_fastpath_enabled(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            prog = torch.onnx.export(m, (torch.from_numpy(x),), input_names=["x"],
                                     output_names=["y"], dynamo=True, verbose=False)
            return prog.model_proto
        torch.onnx.export(m, (torch.from_numpy(x),), buf, input_names=["x"],
                          output_names=["y"], dynamo=False)
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


def op_profile(rep, x, runs: int = 5, shapes: bool = False) -> list[tuple[str, float, int]]:
    """(op, ms per run, calls per run) of graph-mode replays, largest first, from the device's
    per-node profile (``SetVerbosity(2)``); by op and operand shapes when ``shapes`` (see
    _profile.node_times)."""
    import _profile

    dev = rep.dev
    dev.SetVerbosity(2)
    dev.SetSkipIteration(0)
    try:
        for _ in range(runs):
            rep.run([x])
        return [tuple(r) for r in _profile.node_times(dev._last_run_graph, _label, shapes)]
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


def _recorded_without(onx, x, fusions):
    """A graph-mode rep of ``onx`` recorded (on ``x``) while the device's table lacks the
    kernels of ``fusions`` (fusion reads the table once, when the graph is analysed)."""
    rep = singa_onnx.prepare(onx, use_graph=True)
    table = rep.dev.kernels
    saved = {f: table.pop(f) for f in fusions if f in table}
    try:
        rep.run([x])
        rep.run([x])
    finally:
        table.update(saved)
    return rep


def _rel_err(got, want) -> float:
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def _with_wide_depthwise(rep, x):
    """``rep.run([x])`` with the depthwise kernel switched off (every depthwise layer on the
    wide rows of ``singa_cpu.kernels.grouped``, a loop per tap)."""
    from singa_cpu.kernels import depthwise  # noqa: PLC0415

    depthwise.ENABLED = False
    try:
        return rep.run([x])
    finally:
        depthwise.ENABLED = True


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", nargs="+", default=None,
                   help="models by name (default: every model of --family)")
    p.add_argument("--family", nargs="+", default=["cnn"], choices=list(FAMILIES))
    p.add_argument("--exporters", nargs="+", default=["torchscript", "dynamo"],
                   choices=["torchscript", "dynamo"],
                   help="exporters of the transformer and recurrent models")
    p.add_argument("--no-eager", action="store_true",
                   help="time every model in graph mode only (no eager column)")
    p.add_argument("--without-fusions", nargs="+", default=None, metavar="FUSION",
                   help="also time a graph recorded without these fused kernels")
    p.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json", default=None)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--profile-shapes", action="store_true",
                   help="--profile with one row per op and operand shapes")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="time each call by the wall clock, or by the calling thread's CPU "
                        "time (cpu: leaves out the time other processes hold the core on a "
                        "loaded host; only with --threads 1)")
    p.add_argument("--compare-gemm", action="store_true",
                   help="also time the graph with grouped layers on im2col + one GEMM per "
                        "group (the path before the direct kernels), alternating in the run")
    p.add_argument("--compare-depthwise", action="store_true",
                   help="also time the graph with every depthwise layer on the wide rows "
                        "with a loop per tap (no depthwise kernel), alternating in the run")
    args = p.parse_args()
    args.profile = args.profile or args.profile_shapes
    if args.clock == "cpu" and args.threads != 1:
        p.error("--clock cpu times the calling thread only: use it with --threads 1")
    names = args.models or [m for f in args.family for m in FAMILIES[f]]
    unknown = [n for n in names if n not in MODELS and n not in SEQ_MODELS]
    if unknown:
        p.error(f"unknown models {unknown}; known: {list(MODELS) + list(SEQ_MODELS)}")
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    rows = []
    cnns = [n for n in names if n in MODELS]
    if cnns:
        rows += _run_cnns(cnns, args, so)
    seqs = [n for n in names if n in SEQ_MODELS]
    if seqs:
        rows += _run_seq(seqs, args, so)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), rows=rows),
                      f, indent=1)


def _run_cnns(names, args, so) -> list[dict]:
    rows = []
    gemm_cols = f" {'gemm ms':>9s} {'ratio':>6s}" if args.compare_gemm else ""
    if args.compare_depthwise:
        gemm_cols += f" {'wide ms':>9s} {'ratio':>6s}"
    eager_cols = "" if args.no_eager else f" {'eager ms':>9s} {'ratio':>6s}"
    print(f"{'model':20s} {'batch':>5s} {'ort ms':>9s} {'graph ms':>9s} {'ratio':>6s}"
          f"{gemm_cols}{eager_cols} {'max rel err':>11s}", flush=True)
    for name in names:
        onx = export(name)
        sess = ort.InferenceSession(onx.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        graph = singa_onnx.prepare(onx, use_graph=True)
        eager = None if args.no_eager else singa_onnx.prepare(onx)
        for b in args.batches:
            x = np.random.default_rng(0).standard_normal((b, *MODELS[name][1])).astype(
                np.float32)
            want = sess.run(None, {"x": x})[0]
            got = graph.run([x])[0]
            got = graph.run([x])[0]  # the replay
            err = _rel_err(got, want)
            if eager is not None:
                err = max(err, _rel_err(eager.run([x])[0], want))
            fns = [lambda s=sess, x=x: s.run(None, {"x": x}), lambda r=graph, x=x: r.run([x])]
            if args.compare_gemm:
                fns.append(lambda r=graph, x=x: _with_gemm_groups(r, x))
            if args.compare_depthwise:
                fns.append(lambda r=graph, x=x: _with_wide_depthwise(r, x))
            if eager is not None:
                fns.append(lambda r=eager, x=x: r.run([x]))
            t_ort, t_graph, *t_more = interleaved_medians(fns, args.reps, CLOCKS[args.clock])
            t_eager = [t_more.pop()] if eager is not None else []
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
            if t_eager:
                row.update(eager_ms=t_eager[0] * 1e3, eager_ratio=t_eager[0] / t_ort)
                line += f" {t_eager[0] * 1e3:9.2f} {t_eager[0] / t_ort:6.2f}"
            rows.append(row)
            print(f"{line} {err:11.1e}", flush=True)
            if args.profile:
                _print_profile(graph, x, args.profile_shapes)
    return rows


def _run_seq(names, args, so) -> list[dict]:
    """The transformer and recurrent rows: per model, exporter and batch, onnxruntime, graph
    and (unless --no-eager) eager in the same alternating rounds."""
    rows = []
    unfused = f" {'unfused':7s} {'ms':>9s} {'ratio':>6s} |" if args.without_fusions else ""
    print(f"{'model':20s} {'exporter':11s} {'batch':>5s}{unfused} {'ort ms':>9s} "
          f"{'graph ms':>9s} {'ratio':>6s} {'eager ms':>9s} {'ratio':>6s} {'max rel err':>11s}",
          flush=True)
    for name in names:
        for exporter in args.exporters:
            for b in args.batches:
                x = SEQ_MODELS[name][2](b)
                label = f"{name:20s} {exporter:11s} {b:5d}"
                try:
                    onx = export_seq(name, x, exporter)
                except ImportError as e:
                    print(f"{label} skipped: {e}", flush=True)
                    break
                except Exception as e:  # an exporter that cannot take the model
                    print(f"{label} skipped: export failed: {type(e).__name__}: "
                          f"{str(e).splitlines()[0][:100] if str(e) else ''}", flush=True)
                    break
                sess = ort.InferenceSession(onx.SerializeToString(), so,
                                            providers=["CPUExecutionProvider"])
                feed = {sess.get_inputs()[0].name: x}
                want = sess.run(None, feed)[0]
                try:
                    graph = singa_onnx.prepare(onx, use_graph=True)
                    eager = singa_onnx.prepare(onx)
                    graph.run([x])
                    err = _rel_err(graph.run([x])[0], want)  # the replay
                    err = max(err, _rel_err(eager.run([x])[0], want))
                except Exception as e:  # noqa: BLE001 - reported, the other rows still run
                    print(f"{label} skipped: singa-onnx: {type(e).__name__}: "
                          f"{str(e).splitlines()[0][:100] if str(e) else ''}", flush=True)
                    continue
                fns = [lambda s=sess, f=feed: s.run(None, f), lambda r=graph, x=x: r.run([x])]
                if args.without_fusions:
                    unfused = _recorded_without(onx, x, args.without_fusions)
                    fns.append(lambda r=unfused, x=x: r.run([x]))
                if not args.no_eager:
                    fns.append(lambda r=eager, x=x: r.run([x]))
                t_ort, t_graph, *t_more = interleaved_medians(fns, args.reps, CLOCKS[args.clock])
                if args.without_fusions:
                    t_unfused, *t_eager = t_more
                    row_unfused = dict(unfused_ms=t_unfused * 1e3,
                                       unfused_ratio=t_unfused / t_ort)
                    label = (f"{label} {'unfused':7s} {t_unfused * 1e3:9.2f} "
                             f"{t_unfused / t_ort:6.2f} |")
                else:
                    t_eager, row_unfused = t_more, {}
                row = dict(model=name, family=SEQ_MODELS[name][0], exporter=exporter, batch=b,
                           threads=args.threads, ort_ms=t_ort * 1e3, graph_ms=t_graph * 1e3,
                           ratio=t_graph / t_ort, max_rel_err=err, **row_unfused)
                line = f"{label} {t_ort * 1e3:9.2f} {t_graph * 1e3:9.2f} {t_graph / t_ort:6.2f}"
                if t_eager:
                    row.update(eager_ms=t_eager[0] * 1e3, eager_ratio=t_eager[0] / t_ort)
                    line += f" {t_eager[0] * 1e3:9.2f} {t_eager[0] / t_ort:6.2f}"
                else:
                    line += f" {'':9s} {'':6s}"
                rows.append(row)
                print(f"{line} {err:11.1e}", flush=True)
                if args.profile:
                    _print_profile(graph, x, args.profile_shapes)
    return rows


def _print_profile(rep, x, shapes=False):
    prof = op_profile(rep, x, shapes=shapes)
    total = sum(ms for _, ms, _ in prof)
    for op, ms, calls in prof[:20 if shapes else 8]:
        print(f"    {op:32s} {ms:8.2f} ms {100 * ms / max(total, 1e-9):5.1f}%  {calls:4d} calls")


if __name__ == "__main__":
    main()
