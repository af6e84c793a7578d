"""SINGA's CUDA backend package.

This release registers the ``cuda`` backend name so that requests for it are answered with an
exact reason, but it ships no CUDA device or kernels yet: the work is not scheduled in this
repository's issues. ``create_cuda_gpu()`` raises DeviceUnavailableError saying so.
"""
