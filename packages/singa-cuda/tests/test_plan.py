"""The CUDA kernel table covers the whole op table, checked without creating a device: the
plan names every op; shared kernels exist on the array module; every op the plan sends to
NVRTC has an instantiation per dtype in its ``.cu`` source; the cuDNN and NVRTC tables the
device would register hold exactly the planned names."""

from __future__ import annotations

from singa.backend import FUSIONS, OPS, dtype_name

from singa_cuda import cu_kernels, cudnn_bn, cudnn_conv
from singa_cuda._nvrtc import kernel_names, sources
from singa_cuda.kernels import CU, CUDNN, NONE, PLAN, XP, shared_table
from singa_cuda.xp import numpy_module
from singa_cuda.xp.random import PhiloxState


def test_plan_covers_every_op():
    missing = sorted(set(OPS) - set(PLAN))
    assert not missing, f"ops with no CUDA kernel: {missing}"
    unknown = sorted(n for n in PLAN if n not in OPS and n not in FUSIONS)
    assert not unknown, f"plan entries that are neither ops nor fusions: {unknown}"


def test_plan_has_every_fused_kernel_of_graph_mode():
    # graph mode fuses only where the device registers the fusion (singa.ops.FUSIONS): the
    # CUDA table has every one, as the CPU's does
    missing = sorted(set(FUSIONS) - set(PLAN))
    assert not missing, f"fusions with no CUDA kernel: {missing}"


def test_plan_dtypes_are_the_ops_dtypes():
    for name, (_src, dts) in PLAN.items():
        op = OPS.get(name) or OPS[FUSIONS[name].base]
        assert dts is None or set(dts) <= set(op.dtypes), name


def test_ops_without_a_cuda_kernel_are_these():
    # each op the plan leaves without a kernel is a decision: its callers must check
    # ``op in device.kernels``; today every op of the table has one (the whole-sequence
    # recurrent ops run the shared code, singa_cuda.xp.recurrent)
    none = {n for n, (src, _) in PLAN.items() if src == NONE}
    assert none == set(), sorted(none)


def test_shared_kernels_cover_the_xp_ops():
    table = shared_table(numpy_module(), PhiloxState)
    planned = {n for n, (src, _) in PLAN.items() if src == XP}
    assert planned <= set(table), sorted(planned - set(table))


def test_cu_ops_have_an_instantiation_per_dtype():
    srcs = sources()
    for name, (src, dts) in PLAN.items():
        if src != CU:
            continue
        file, prefix = cu_kernels.SOURCES[name]
        op = OPS.get(name) or OPS[FUSIONS[name].base]
        names = kernel_names(srcs[file])
        for dt in dts or op.dtypes:
            want = f"{prefix}_{cu_kernels.SUFFIX[dtype_name(dt)]}"
            assert want in names, f"{name}: {file} has no kernel {want}"


class _NoDevice:
    """Just what building the tables reads: nothing GPU-side happens before a kernel runs."""

    am = numpy_module()


def test_gpu_tables_register_exactly_the_planned_names():
    # building the dicts needs no GPU: cuDNN handles and modules are created on first call
    cu = set(cu_kernels.kernels(_NoDevice()))
    dnn = set(cudnn_conv.kernels(object(), fallback={})) | set(
        cudnn_bn.kernels(object(), fallback={}))
    assert cu == {n for n, (s, _) in PLAN.items() if s == CU}
    assert dnn == {n for n, (s, _) in PLAN.items() if s == CUDNN}
    for fn in [*cudnn_conv.kernels(object(), fallback={}).values(),
               *cudnn_bn.kernels(object(), fallback={}).values()]:
        assert fn.contiguous_inputs
    for name, fn in cu_kernels.kernels(_NoDevice()).items():
        # the one-launch elementwise kernels take any layout (the shared code serves the
        # strided and broadcast ones): copies to contiguous would cost more than they save
        assert getattr(fn, "contiguous_inputs", False) != getattr(fn, "checks_layout", False), name
