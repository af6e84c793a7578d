"""SINGA's CUDA backend: CudaGPU devices on cupy (cuBLAS), cuDNN and NVRTC-compiled kernels.

Install with ``pip install ".[cuda13]"`` (``".[cuda12]"`` for a CUDA 12 driver) in the singa
checkout; devices come from ``singa.device``
(``create_cuda_gpu()``, ``create_cuda_gpu_on(i)``, ``get_device("cuda:1")``). What runs where
and what has been verified without a GPU is in ``docs/cuda.md``.
"""

from ._probe import CudaUnavailableError

__all__ = ["CudaUnavailableError"]
