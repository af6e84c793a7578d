"""SINGA's CPU backend: the ``CppCPU`` device with numpy buffers and numpy/numba kernels."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("singa-cpu")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0+unknown"

__all__ = ["__version__"]
