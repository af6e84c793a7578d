"""singa-template: a complete out-of-tree SINGA backend to copy and rename.

Device ``template`` keeps tensors in buffers of its own type (:class:`~.buffer.Buffer`, viewed
through :class:`~.buffer.View`), registers five native kernels (Add, Mul, ReLU, GEMM, Copy) and
runs every other op through core's host fallback. It imports only ``singa.backend``.
"""
