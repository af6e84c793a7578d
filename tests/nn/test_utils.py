"""``singa.utils``: ONNX SAME padding rules, odd-padding helpers, handles, graph walks."""

from __future__ import annotations

import numpy as np
import pytest
from singa import autograd, tensor, utils
from singa import singa_wrap as singa
from singa.tensor import Tensor


def _onnx_same(size, k, s, mode):
    """ONNX's reference rule for auto_pad SAME_*: total pad and its split."""
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    small = total // 2
    return (total - small, small) if mode == "SAME_LOWER" else (small, total - small)


@pytest.mark.parametrize("mode", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("size,k,s", [(5, 3, 1), (6, 3, 2), (7, 4, 2), (5, 2, 1), (4, 1, 3)])
def test_get_padding_shape_follows_onnx(mode, size, k, s):
    pads, odd = utils.get_padding_shape(mode, [size, size + 1], [k, k], [s, s])
    for axis, n in enumerate((size, size + 1)):
        begin, end = _onnx_same(n, k, s, mode)
        assert pads[2 * axis] == pads[2 * axis + 1] == min(begin, end)
        assert pads[2 * axis] + odd[2 * axis] == begin
        assert pads[2 * axis + 1] + odd[2 * axis + 1] == end
    assert utils.get_output_shape(mode, [size], [k], [s]) == (-(-size // s),)


def test_get_output_shape_valid_and_bad_mode():
    assert utils.get_output_shape("VALID", [7, 8], [3, 2], [2, 3]) == (3, 3)
    with pytest.raises(ValueError):
        utils.get_padding_shape("VALID", [5], [3], [1])


def test_odd_padding_helpers():
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
    ct = Tensor(data=x).data
    conv = utils.handle_odd_pad_fwd(ct, (1, 0, 0, 2))
    np.testing.assert_array_equal(conv.to_numpy(), np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 2))))
    pool = utils.handle_odd_pad_fwd(ct, (0, 1, 1, 0), is_pool=True)  # SINGA replicates edges
    np.testing.assert_array_equal(pool.to_numpy(),
                                  np.pad(x, ((0, 0), (0, 0), (0, 1), (1, 0)), mode="edge"))
    back = utils.handle_odd_pad_bwd(conv, (1, 0, 0, 2))
    np.testing.assert_array_equal(back.to_numpy(), x)


def test_re_new_handle_and_same_pad_check():
    x = Tensor((2, 3, 6, 6))
    h = singa.ConvHandle(x.data, (3, 3), (2, 2), (1, 1), 3, 4, True)
    h2 = utils.re_new_handle(h, Tensor((5, 3, 8, 8)).data)
    assert (h2.batchsize, h2.conv_height, h2.kernel, h2.num_filters) == (5, 4, (3, 3), 4)
    p = singa.PoolingHandle(x.data, (2, 2), (2, 2), (0, 0), False)
    p2 = utils.re_new_handle(p, Tensor((1, 3, 4, 4)).data, is_pool=True)
    assert (p2.pooled_height, p2.is_max_pooling) == (2, False)
    utils.same_pad_shape_check(h, "SAME_UPPER", x)  # 6 / 2 -> 3 with padding 1
    bad = singa.ConvHandle(x.data, (3, 3), (1, 1), (0, 0), 3, 4, True)
    with pytest.raises(ValueError):
        utils.same_pad_shape_check(bad, "SAME_UPPER", x)


def test_post_order_recursive():
    autograd.training = True
    x = Tensor(data=np.ones((2, 3), np.float32), requires_grad=False)
    x.name = "x"
    w = Tensor(data=np.ones((3, 2), np.float32), stores_grad=True)
    w.name = "w"
    y = autograd.relu(autograd.matmul(x, w))
    nodes, weights, inputs = utils.post_order_recursive(y.creator, y)
    names = list(nodes)
    assert [type(nodes[n]).__name__ for n in names] == ["Matmul", "ReLU"]
    assert list(weights) == ["w"] and weights["w"] is w
    assert list(inputs) == ["x"]


def test_small_helpers(capsys):
    assert utils.force_unicode(b"abc") == "abc" and utils.force_unicode("abc") == "abc"
    utils.update_progress(0.5, "half")
    utils.update_progress(1.0, "done")
    out = capsys.readouterr().out
    assert "50.0%" in out and "100.0%" in out and out.endswith("\n")
    assert tensor.to_numpy(Tensor((1,))).shape == (1,)
