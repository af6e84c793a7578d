"""CPU time of the eager MLP's training step, and of its optimizer update alone.

    python benchmarks/eager_step.py [--blocks 7] [--steps 200]

The MLP of ``benchmarks/_models.py`` (784-512-512-10, batch 64, SGD lr 0.05 momentum 0.9
weight decay 1e-5) in eager mode, on the default device, in this process: after a warm-up,
``--blocks`` blocks of ``--steps`` steps each are timed by process CPU time (which a shared
machine inflates less than the wall clock; run with ``OPENBLAS_NUM_THREADS=1`` to compare
single-thread work). ``update`` times ``SGD.apply`` over the MLP's six parameters with fixed
gradients plus ``step()``: the optimizer's part of a step. Prints the minimum and median
milliseconds per step of each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def blocks_ms(fn, blocks, steps):
    """Milliseconds of process CPU time per call of ``fn``, one value per block."""
    out = []
    for _ in range(blocks):
        t = time.process_time()
        for _ in range(steps):
            fn()
        out.append((time.process_time() - t) / steps * 1e3)
    return out


def training_step():
    import _models
    from singa import device, tensor

    dev = device.get_default_device()
    x, y = _models.batch("mlp", 64)
    m = _models.singa_model("mlp")
    tx = tensor.Tensor(x.shape, dev, tensor.float32)
    ty = tensor.Tensor(y.shape, dev, tensor.int32)
    m.compile([tx], is_train=True, use_graph=False, sequential=False)

    def step():
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        m(tx, ty)

    return step


def optimizer_update():
    import _models
    from singa import opt
    from singa.tensor import Tensor

    rng = np.random.default_rng(0)
    shapes = [(784, 512), (512,), (512, 512), (512,), (512, 10), (10,)]
    params, grads = [], []
    for i, shape in enumerate(shapes):
        p = Tensor(data=rng.standard_normal(shape).astype(np.float32), requires_grad=True,
                   stores_grad=True)
        p.name = f"p{i}"
        params.append(p)
        grads.append(Tensor(data=rng.standard_normal(shape).astype(np.float32)))
    sgd = opt.SGD(_models.LR, momentum=_models.MOMENTUM, weight_decay=_models.WD)

    def step():
        sgd._derived = {}  # as Optimizer.call does once per step
        for p, g in zip(params, grads):
            sgd.apply(p.name, p, g)
        sgd.step()

    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=7)
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    for name, make in (("step", training_step), ("update", optimizer_update)):
        fn = make()
        for _ in range(10):
            fn()
        ms = blocks_ms(fn, args.blocks, args.steps)
        print(f"{name:7s} ms/step (process CPU): min {min(ms):.3f} median "
              f"{statistics.median(ms):.3f}")


if __name__ == "__main__":
    main()
