"""onnx's own backend node tests (1884 cases generated in memory) through SingaBackend.

Every case that does not pass is listed in ``node_test_exclusions.txt`` with its reason;
``python tests/onnx/node_coverage.py --write`` regenerates the list (so cases that started
passing leave it) and ``SINGA_ONNX_RUN_EXCLUDED=1`` runs the listed cases too. The cases run on
singa's default device: all of them on the CPU, a representative subset elsewhere.
"""

from __future__ import annotations

import os
import re

import onnx.backend.test
import singa_onnx
from singa import device

HERE = os.path.dirname(__file__)
EXCLUSIONS = os.path.join(HERE, "node_test_exclusions.txt")


def load_exclusions(path=EXCLUSIONS) -> dict:
    """{test name: reason} from lines ``name  # reason``."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition("#")
            out[name.strip()] = reason.strip()
    return out


class DeviceUnderTest(singa_onnx.SingaBackend):
    """SingaBackend on singa's default device (``SINGA_DEVICE``, else the CPU).

    onnx's runner names its cases ``*_cpu`` and passes device="CPU"; this runs the same cases
    on the device the session is testing (the CPU in the cpu run, OpenCL in the opencl run).
    """

    @classmethod
    def prepare(cls, model, device=None, **kwargs):
        return super().prepare(model, device=None, **kwargs)

    @classmethod
    def run_node(cls, node, inputs, device=None, **kwargs):
        return super().run_node(node, inputs, device=None, **kwargs)


_backend_test = onnx.backend.test.BackendTest(DeviceUnderTest, __name__)
_excluded = load_exclusions()
if _excluded and not os.environ.get("SINGA_ONNX_RUN_EXCLUDED"):
    _backend_test.exclude("^test_(" + "|".join(re.escape(n) for n in _excluded) + ")_cpu$")
# Off the CPU (the opencl run of the onnx session) only these cases run: one or two per op
# family an imported CNN, RNN or transformer uses. Every OpenCL kernel is compiled at its first
# use per dtype and shape, so the whole set would take hours there (a few seconds per case on
# Intel's runtime); the CPU run covers all of it.
DEVICE_SUBSET = """
conv_with_strides_padding conv_with_autopad_same convtranspose maxpool_2d_default
maxpool_2d_ceil averagepool_2d_pads globalaveragepool batchnorm_example gemm_default_no_bias
gemm_all_attributes matmul_3d einsum_batch_matmul relu sigmoid tanh leakyrelu elu erf
gelu_default_1 exp sqrt pow softmax_axis_1 logsoftmax_axis_0 add_bcast mul_bcast div sub clip
where_example reshape_negative_dim flatten_axis1 squeeze unsqueeze_axis_0
transpose_all_permutations_0
concat_2d_axis_1 split_equal_parts_1d_opset18 slice gather_0 gather_1 gathernd_example_float32
expand_dim_changed tile edge_pad resize_upsample_scales_nearest reduce_sum_keepdims_example
reduce_mean_default_axes_keepdims_example reduce_max_keepdims_example
layer_normalization_2d_axis0 lstm_defaults gru_defaults rnn_seq_length cumsum_1d
argmax_default_axis_example top_k cast_FLOAT_to_DOUBLE dropout_default shape
constantofshape_float_ones range_float_type_positive_delta
""".split()
ON_CPU = device.get_default_device().backend == "cpu"
if ON_CPU:
    _backend_test.include(r"^test_.*_cpu$")
else:
    _backend_test.include("^test_(" + "|".join(DEVICE_SUBSET) + ")_cpu$")
OnnxBackendNodeModelTest = _backend_test.test_cases["OnnxBackendNodeModelTest"]


def test_device_subset_is_not_excluded():
    """The subset run off the CPU holds cases that pass on the CPU (no stale names)."""
    generated = {n[len("test_"):-len("_cpu")] for n in dir(OnnxBackendNodeModelTest)
                 if n.startswith("test_") and n.endswith("_cpu")}
    assert not [n for n in DEVICE_SUBSET if n in _excluded or n not in generated]


def test_exclusion_reasons_are_given():
    assert _excluded, "the exclusion file is missing"
    assert all(_excluded.values()), [n for n, r in _excluded.items() if not r]
