"""Pure-Python parts of the CUDA backend: cache keys, caches, event bookkeeping, launch sizes,
dtype dispatch, kernel-argument structs, error translation and the Philox generator."""

from __future__ import annotations

import numpy as np
import pytest
from singa.errors import DeviceUnavailableError, KernelError, ShapeError

from singa_cuda import cu_kernels
from singa_cuda._errors import translate
from singa_cuda._events import MAX_BLOCKS, EventPool, launch_config
from singa_cuda.cudnn_conv import LruCache, contiguous_strides, conv_key
from singa_cuda.xp.random import PhiloxState, philox4x32, words

X, W = (2, 4, 9, 9), (6, 2, 3, 3)


def test_conv_key_normalises_attribute_spellings():
    a = conv_key("fprop", X, W, "float32", {"stride": 2, "pads": 1, "group": 2})
    b = conv_key("fprop", X, W, "float32",
                 {"stride": (2, 2), "pads": (1, 1, 1, 1), "dilation": (1, 1), "group": 2})
    assert a == b and hash(a) == hash(b)
    assert a.y_shape == (2, 6, 5, 5)


@pytest.mark.parametrize("change", [
    dict(kind="dgrad"), dict(dtype="float16"), dict(attrs={"pads": (1, 0, 1, 1), "group": 2}),
    dict(attrs={"stride": 2, "group": 2}), dict(attrs={"dilation": 2, "group": 2}),
    dict(bias=True)])
def test_conv_key_differs_when_the_graph_would(change):
    base = dict(kind="fprop", dtype="float32", attrs={"group": 2}, bias=False)
    k0 = conv_key(base["kind"], X, W, base["dtype"], base["attrs"], base["bias"])
    args = {**base, **change}
    k1 = conv_key(args["kind"], X, W, args["dtype"], args["attrs"], args["bias"])
    assert k0 != k1


def test_conv_key_carries_the_float32_precision():
    # TF32 is a float32 matter: float16 keys are the same under either precision
    hi = conv_key("fprop", X, W, "float32", {"group": 2}, precision="high")
    full = conv_key("fprop", X, W, "float32", {"group": 2}, precision="highest")
    assert hi.tf32 and not full.tf32 and hi != full
    assert conv_key("fprop", X, W, "float32", {"group": 2}) == full  # default: full float32
    h16 = conv_key("fprop", X, W, "float16", {"group": 2}, precision="high")
    assert h16 == conv_key("fprop", X, W, "float16", {"group": 2}, precision="highest")


def test_nchw_batch_norm_key_and_missing_library_functions():
    from singa_cuda.cudnn_legacy import CudnnLibraryError, Library, legacy_key

    assert legacy_key((8, 16, 4, 4), "float32").shape == (8, 16, 4, 4)
    assert legacy_key((8, 16, 4, 4), "float16") is not None
    for shape, dtype in [((8, 16, 4, 4), "float64"), ((8, 16), "float32"),
                         ((1, 16, 1, 1), "float32")]:
        assert legacy_key(shape, dtype) is None, (shape, dtype)

    class NoFunctions:  # a libcudnn build without the classic batch-norm API
        def __getattr__(self, name):
            raise AttributeError(name)

    with pytest.raises(CudnnLibraryError, match="cudnnCreate"):
        Library(lib=NoFunctions())


def test_conv_key_rejects_bad_geometry():
    with pytest.raises(ShapeError, match="channels"):
        conv_key("fprop", X, (6, 3, 3, 3), "float32", {})


def test_contiguous_strides():
    assert contiguous_strides((2, 3, 4, 5)) == [60, 20, 5, 1]
    assert contiguous_strides((1, 6, 1, 1)) == [6, 1, 1, 1]


def test_lru_cache_builds_once_and_evicts_the_oldest():
    built = []
    cache = LruCache(2)
    for k in ["a", "b", "a", "c", "b"]:
        cache.get(k, lambda key: built.append(key) or key.upper())
    assert built == ["a", "b", "c", "b"]  # "b" was evicted by "c" ("a" was used more recently)
    assert cache.hits == 1 and cache.builds == 4 and len(cache) == 2


def test_event_pool_reuses_pairs():
    made = []
    pool = EventPool(lambda: made.append(object()) or made[-1], lambda s, e: 2.5)
    p1 = pool.acquire()
    pool.release(p1)
    p2 = pool.acquire()
    p3 = pool.acquire()
    assert p2 is p1 and p3 != p1 and pool.created == 4
    assert pool.seconds(p3) == pytest.approx(2.5e-3)


@pytest.mark.parametrize("n, blocks", [(0, 1), (1, 1), (256, 1), (257, 2), (10**9, MAX_BLOCKS)])
def test_launch_config(n, blocks):
    assert launch_config(n) == ((blocks,), (256,))


def test_dtype_dispatch_names_an_instantiation_per_dtype():
    assert [cu_kernels._suffix(np.empty(1, dt)) for dt in
            (np.float32, np.float16, np.float64, np.int32)] == ["f32", "f16", "f64", "i32"]


def test_pool_geom_struct_matches_pool_cu():
    (g,) = cu_kernels.pool_geom((2, 3, 7, 8), {"kernel": (3, 2), "stride": (2, 1),
                                             "pads": (1, 0, 1, 1), "mode": "avg",
                                             "count_include_pad": False, "ceil_mode": True})
    assert cu_kernels.POOL_GEOM.itemsize == 16 * 4  # sixteen ints, no padding
    assert (g["n"], g["c"], g["h"], g["w"], g["kh"], g["kw"], g["sh"], g["sw"]) == \
        (2, 3, 7, 8, 3, 2, 2, 1)
    assert (g["pt"], g["pb"], g["pl"], g["pr"], g["is_max"], g["count_include_pad"]) == \
        (1, 0, 1, 1, 0, 0)
    assert (g["ho"], g["wo"]) == (4, 9)


def test_philox_key_struct():
    (k,) = cu_kernels.philox_key((1, 2, 3, 4))
    assert cu_kernels.PHILOX_KEY.itemsize == 16 and tuple(k) == (1, 2, 3, 4)


@pytest.mark.parametrize("text, cls, fix", [
    ("cudaErrorMemoryAllocation: out of memory", KernelError, "smaller batch"),
    ("OutOfMemoryError: Out of memory allocating 1,024 bytes", KernelError, "empty_cache"),
    ("cudaErrorInsufficientDriver: CUDA driver version is insufficient", DeviceUnavailableError,
     "driver"),
    ("cudaErrorIllegalAddress: an illegal memory access", KernelError, "CUDA_LAUNCH_BLOCKING"),
    ("cudaErrorSomethingNew: ???", KernelError, "python -m singa info"),
])
def test_error_translation(text, cls, fix):
    err = translate(RuntimeError(text), "running Conv2d on cuda:0")
    assert type(err) is cls and fix in str(err) and "running Conv2d on cuda:0" in str(err)


def test_error_translation_of_a_real_cupy_error():
    import cupy

    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # what this machine really raises without a driver
        err = translate(exc, "counting GPUs")
        assert isinstance(err, DeviceUnavailableError), err
    else:
        pytest.skip("a CUDA driver is present: no error to translate")


@pytest.mark.parametrize("ctr, key, want", [  # Random123's known-answer vectors
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox_known_answers(ctr, key, want):
    got = philox4x32(np, *(np.array([c], np.uint32) for c in ctr), *key)
    assert tuple(int(w[0]) for w in got) == want


def test_philox_state_counts_calls_and_reseeds():
    s = PhiloxState(0x1_0000_0002)
    assert s.next_call() == (2, 1, 0, 0) and s.next_call() == (2, 1, 1, 0)
    first = words(np, 8, (2, 1, 0, 0))
    assert not np.array_equal(first[0], words(np, 8, (2, 1, 1, 0))[0])
    s.reseed(0x1_0000_0002)
    assert s.next_call() == (2, 1, 0, 0)
    np.testing.assert_array_equal(first[0], words(np, 8, (2, 1, 0, 0))[0])


def test_on_device_keeps_the_record_and_its_diagnosis_attributes():
    """CudaGPU.on_device wraps a kernel so it runs with the GPU current and the device's
    stream as cupy's: the result is a Kernel record with the same fields, and the attributes
    a kernel carries for diagnosis (the cuDNN kernels' ``engine``) stay reachable from the
    device's table (gpu_check's cudnn step reads them)."""
    from types import SimpleNamespace

    from singa.backend import Kernel, kernel_attrs

    from singa_cuda.device import CudaGPU

    entered = []

    class _Ctx:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            entered.append(self.name)

        def __exit__(self, *exc):
            entered.append("/" + self.name)

    calls = []

    @kernel_attrs(contiguous_inputs=True, dtypes=("float32",))
    def conv(ins, outs, attrs):
        calls.append(list(entered))

    conv.engine = "the engine"

    def plain(ins, outs, attrs):
        calls.append(list(entered))

    plain.checks_layout = True
    fake = SimpleNamespace(cuda_device=_Ctx("gpu"), stream=_Ctx("stream"))
    for fn in (conv, plain):
        wrapped = CudaGPU.on_device(fake, fn)
        assert isinstance(wrapped, Kernel)
        entered.clear()
        wrapped([], [], {})
        assert calls[-1] == ["gpu", "stream"] and entered[-2:] == ["/stream", "/gpu"]
    rec = CudaGPU.on_device(fake, conv)
    assert rec.engine == "the engine" and rec.contiguous_inputs and rec.dtypes == conv.dtypes
    assert CudaGPU.on_device(fake, plain).checks_layout is True


def test_alias_outputs_replaces_exact_views_of_an_output_only():
    """The shared elementwise kernels hand cupy the output object itself for an input that
    views exactly its elements (cupy copies an overlapping input that is another object);
    partial overlaps and other layouts stay as they are."""
    from singa_cuda.xp import numpy_module

    am = numpy_module()
    block = np.arange(24, dtype=np.float32)
    out = block[:12].reshape(3, 4)
    same = block[:12].reshape(3, 4)  # another object over the same elements
    shifted = block[1:13].reshape(3, 4)
    transposed = block[:12].reshape(4, 3).T
    other_dtype = block[:12].view(np.int32).reshape(3, 4)
    got = am.alias_outputs([same, shifted, transposed, other_dtype, 2.0], [out])
    assert got[0] is out
    assert got[1] is shifted and got[2] is transposed and got[3] is other_dtype
    assert got[4] == 2.0


def test_shared_in_place_kernels_give_what_out_of_place_ones_give():
    from singa_cuda.xp import numpy_module
    from singa_cuda.xp.elementwise import kernels as shared_elementwise

    table = shared_elementwise(numpy_module())
    rng = np.random.default_rng(3)
    for op, n_in in (("ReLU", 1), ("Sigmoid", 1), ("Round", 1), ("AddScalar", 1), ("Add", 2),
                     ("Mul", 2), ("ReLUBackward", 2)):
        a, b = rng.standard_normal((2, 5, 7)).astype(np.float32)
        want = np.empty_like(a)
        table[op]([a, b][:n_in], [want], {"value": 1.5})
        block = a.copy()
        x_in = block.reshape(-1).reshape(a.shape)  # the same elements, another array object
        table[op]([x_in, b][:n_in], [block[...]], {"value": 1.5})
        np.testing.assert_array_equal(block, want, err_msg=op)
