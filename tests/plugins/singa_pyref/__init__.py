"""pyref: a pure-Python SINGA backend used to test that core makes no numpy/CPU assumptions.

Buffers are ``bytearray`` objects, the native array type is :class:`singa_pyref.view.PyView`
(not a numpy array), kernels compute element by element in Python, and every op without a
kernel runs through core's host fallback. Registered through the entry point
``pyref = singa_pyref.plugin`` (written at test time into a ``*.dist-info`` directory).
"""
