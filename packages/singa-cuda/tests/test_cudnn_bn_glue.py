"""The conversions around cuDNN's batch-norm graphs (singa_cuda.cudnn_bn), on numpy: NCHW ->
NHWC and back, statistics to float32 (1, C, 1, 1) and back to the input's dtype, SINGA's
momentum to cuDNN's, aliasing of the running statistics. The graph itself is replaced by
``cudnn_model``: the formulas cuDNN's frontend documents for ``batchnorm`` (PyTorch's momentum:
the weight of the batch statistic; unbiased running variance; ``saved_inv_var = 1/sqrt(var +
eps)``) and ``batchnorm_backward``, written here from that documentation and independently of
SINGA's op table, on channels-last float32 data. The glue's results are checked against the op
table's references. What cuDNN's engines do on a GPU is not tested here (docs/cuda.md)."""

from __future__ import annotations

import numpy as np
import pytest
from singa.backend import OPS

from singa_cuda import cudnn_bn


def cudnn_model(key, inputs, outputs, scalars):
    """What the cuDNN graph of ``key`` writes, from the frontend's documented semantics, on
    channels-last arrays (axis 3 is C) and float32 (1, C, 1, 1) vectors."""
    vec = {r: a.reshape(-1).astype(np.float64) for r, a in inputs.items() if r != "x" and
           r != "dy"}
    x = inputs["x"].astype(np.float64)
    axes = (0, 1, 2)
    if key.kind == "train":
        eps, mom = scalars["epsilon"], scalars["momentum"]
        m = x.size // x.shape[3]
        mean, var = x.mean(axis=axes), x.var(axis=axes)
        inv = 1 / np.sqrt(var + eps)
        outputs["y"][...] = (x - mean) * inv * vec["scale"] + vec["bias"]
        outputs["saved_mean"][...] = mean.reshape(1, -1, 1, 1)
        outputs["saved_inv_var"][...] = inv.reshape(1, -1, 1, 1)
        outputs["out_mean"][...] = ((1 - mom) * vec["in_mean"] + mom * mean).reshape(1, -1, 1, 1)
        outputs["out_var"][...] = ((1 - mom) * vec["in_var"] + mom * var * m / (m - 1)
                                   ).reshape(1, -1, 1, 1)
    else:
        dy = inputs["dy"].astype(np.float64)
        m = x.size // x.shape[3]
        xhat = (x - vec["mean"]) * vec["inv_var"]
        db, ds = dy.sum(axis=axes), (dy * xhat).sum(axis=axes)
        outputs["dx"][...] = vec["scale"] * vec["inv_var"] / m * (m * dy - db - xhat * ds)
        outputs["dscale"][...] = ds.reshape(1, -1, 1, 1)
        outputs["dbias"][...] = db.reshape(1, -1, 1, 1)


def draw(rng, op, dtype, shape=(3, 4, 5, 2)):
    c = shape[1]
    x = rng.uniform(-2, 3, shape).astype(dtype)
    params = [rng.uniform(0.5, 2, c), rng.uniform(-1, 1, c), rng.uniform(-1, 1, c),
              rng.uniform(0.5, 2, c)]
    if op == "BatchNormBackward":
        x64 = x.astype(np.float64)
        mean = x64.mean(axis=(0, 2, 3))
        inv = 1 / np.sqrt(x64.var(axis=(0, 2, 3)) + 1e-5)
        return [rng.uniform(-2, 2, shape).astype(dtype), x, params[0].astype(dtype),
                mean.astype(dtype), inv.astype(dtype)]
    return [x, *(p.astype(dtype) for p in params)]


TOL = {np.float32: 2e-5, np.float16: 3e-3}


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("op", sorted(cudnn_bn.GLUE))
def test_glue_gives_the_op_tables_results(op, dtype):
    rng = np.random.default_rng(3)
    ins = draw(rng, op, dtype)
    attrs = {"momentum": 0.8, "eps": 1e-3} if op == "BatchNormTrain" else {}
    kind, glue = cudnn_bn.GLUE[op]
    x = ins[1] if kind == "backward" else ins[0]
    key = cudnn_bn.bn_key(kind, x.shape, x.dtype.name)
    want = OPS[op].reference(*[a.astype(np.float64) for a in ins], **attrs)
    want = want if isinstance(want, tuple) else (want,)
    outs = [np.full(np.shape(w), np.nan, dtype) for w in want]
    glue(np, cudnn_model, key, ins, outs, attrs)
    for k, (got, ref) in enumerate(zip(outs, want)):
        np.testing.assert_allclose(got.astype(np.float64), ref, rtol=TOL[dtype],
                                   atol=TOL[dtype] * 10, err_msg=f"{op} output {k}")


def test_train_updates_running_statistics_in_place():
    rng = np.random.default_rng(4)
    ins = draw(rng, "BatchNormTrain", np.float32)
    rmean0, rvar0 = ins[3].copy(), ins[4].copy()
    y = np.empty_like(ins[0])
    outs = [y, np.empty(4, np.float32), np.empty(4, np.float32), ins[3], ins[4]]  # aliased
    key = cudnn_bn.bn_key("train", ins[0].shape, "float32")
    cudnn_bn.train(np, cudnn_model, key, ins, outs, {"momentum": 0.9, "eps": 1e-5})
    want = OPS["BatchNormTrain"].reference(
        ins[0].astype(np.float64), ins[1], ins[2], rmean0, rvar0, momentum=0.9, eps=1e-5)
    np.testing.assert_allclose(ins[3], want[3], rtol=1e-5)
    np.testing.assert_allclose(ins[4], want[4], rtol=1e-5)


def test_momentum_and_layout_conventions():
    assert cudnn_bn.cudnn_momentum(0.9) == pytest.approx(0.1)
    assert cudnn_bn.cudnn_momentum(0.0) == 1.0
    # channels-last strides of an NCHW-indexed (2, 3, 4, 5) tensor
    assert cudnn_bn.nhwc_strides((2, 3, 4, 5)) == [60, 1, 15, 3]
    a = np.arange(120).reshape(2, 4, 5, 3)  # stored NHWC
    view = np.lib.stride_tricks.as_strided(
        a, (2, 3, 4, 5), [s * a.itemsize for s in cudnn_bn.nhwc_strides((2, 3, 4, 5))])
    np.testing.assert_array_equal(view, a.transpose(0, 3, 1, 2))


def test_calls_cudnn_is_not_used_for():
    assert cudnn_bn.bn_key("train", (2, 3, 4, 4), "float64") is None
    assert cudnn_bn.bn_key("train", (8, 3), "float32") is None  # 2-D: shared code
    assert cudnn_bn.bn_key("train", (1, 3, 1, 1), "float32") is None  # m == 1
    assert cudnn_bn.bn_key("backward", (1, 3, 1, 1), "float32") is not None
    assert "BatchNormInfer" not in cudnn_bn.GLUE  # the shared code's one pass
    assert cudnn_bn.bn_key("backward", (2, 3, 4, 4), "float16") == cudnn_bn.BnKey(
        "backward", (2, 3, 4, 4), "float16")
