"""SINGA's OpenCL backend: ``opencl:N`` devices over pyopencl.

Importing this package is cheap: pyopencl is imported only when a device is probed or created.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("singa-opencl")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0+unknown"

__all__ = ["__version__"]
