"""Entry point of the CPU backend: registers ``cpu`` through the same hook as any plugin."""

from singa.backend import BACKEND_API_VERSION, BackendSpec, hookimpl


def _create(index: int):
    from .device import CppCPU

    return CppCPU()


def _kernels(device):
    from .kernels import kernel_table

    return kernel_table(device)


def _describe() -> list[str]:
    import os
    import platform

    from .kernels import _threads, _transpose

    blas = _threads._find_blas()
    if blas:
        threads = (f"kernel threads: {_threads.num_threads()} (follows numpy's OpenBLAS thread "
                   "count; OPENBLAS_NUM_THREADS or threadpoolctl limit it)")
    else:
        threads = ("kernel threads: 1 (numpy's BLAS is not an OpenBLAS whose thread count can "
                   "be controlled, so convolution chunks run serially)")
    cblas = _threads._find_cblas()
    if cblas:
        team = (f"GEMM team: big float32/float64 products split on helper threads through "
                f"{cblas[3]} ({'ILP64' if cblas[2] else 'LP64'})")
    else:
        team = ("GEMM team: off (no OpenBLAS CBLAS symbols in numpy's BLAS; big products "
                "split on the kernel threads' pool)")
    omat = _transpose.symbol()
    copies = (f"transposing copies: through {omat} (OpenBLAS omatcopy)" if omat else
              "transposing copies: numpy's (numpy's BLAS has no OpenBLAS omatcopy, or it "
              "failed its bit-for-bit probe)")
    return [f"cpu: {platform.processor() or platform.machine()}, {os.cpu_count()} cores",
            threads, team, copies]


@hookimpl
def singa_backends():
    return [
        BackendSpec(
            name="cpu",
            api_version=BACKEND_API_VERSION,
            create_device=_create,
            kernels=_kernels,
            device_count=lambda: 1,
            aliases=("host", "cppcpu"),
            install_hint="pip install . in the singa checkout (singa-core and singa-cpu)",
            describe=_describe,
        )
    ]
