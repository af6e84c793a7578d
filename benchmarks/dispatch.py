"""Per-op dispatch overhead and import time, SINGA vs numpy vs PyTorch in one run.

    python benchmarks/dispatch.py

Reports microseconds per eager elementwise add on 1x1 tensors (Tensor API and the CTensor
layer), the same on bare numpy (allocating and with out=) and PyTorch; then the layers of one
eager autograd op on 64x128 float32 tensors (the kernel on arrays, ``ops.run``, ``_math``,
``autograd.add`` / ``relu`` / ``matmul`` with ``autograd.training`` off and on, against numpy
and ``torch`` with and without autograd); and the wall time of ``import singa`` /
``import singa.tensor`` in fresh interpreters. The machine is shared and
noisy: compare the ratios, each taken as the best of several repeats.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import timeit

import numpy as np


def per_call_us(stmt, setup_globals, number=20000, repeat=7) -> float:
    t = timeit.Timer(stmt, globals=setup_globals)
    return min(t.repeat(repeat=repeat, number=number)) / number * 1e6


def wall_import_ms(code: str, runs: int = 9) -> float:
    prog = ("import time; t=time.perf_counter(); " + code +
            "; print((time.perf_counter()-t)*1e3)")
    vals = [float(subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                                 check=True).stdout) for _ in range(runs)]
    return statistics.median(vals)


def main() -> None:
    from singa import _math, device, tensor

    dev = device.get_default_device()
    a = tensor.from_numpy(np.ones((1, 1), np.float32), dev)
    b = tensor.from_numpy(np.ones((1, 1), np.float32), dev)
    ca, cb = a.data, b.data
    x = np.ones((1, 1), np.float32)
    y = np.ones((1, 1), np.float32)
    z = np.empty((1, 1), np.float32)
    rows = [
        ("singa Tensor a + b", per_call_us("a + b", {"a": a, "b": b})),
        ("singa CTensor _math.add", per_call_us("add(ca, cb)", {"add": _math.add, "ca": ca,
                                                                "cb": cb})),
        ("numpy np.add(x, y)", per_call_us("add(x, y)", {"add": np.add, "x": x, "y": y})),
        ("numpy np.add(x, y, out=z)", per_call_us("add(x, y, out=z)",
                                                  {"add": np.add, "x": x, "y": y, "z": z})),
    ]
    try:
        import torch

        torch.set_num_threads(2)
        ta, tb = torch.ones((1, 1)), torch.ones((1, 1))
        rows.append(("torch a + b", per_call_us("a + b", {"a": ta, "b": tb})))
        torch_us = rows[-1][1]
    except ImportError:
        torch_us = None
    print("Eager elementwise add on 1x1 float32 tensors (best of 7 x 20000 calls)")
    print(f"{'case':<30} {'us/op':>8}")
    for name, us in rows:
        print(f"{name:<30} {us:8.2f}")
    singa_us = rows[0][1]
    if torch_us is not None:
        print(f"singa - torch overhead: {singa_us - torch_us:+.2f} us (target: <= +10 us)")
    print(f"singa - numpy overhead: {singa_us - rows[2][1]:+.2f} us")
    print()
    layers()
    print()
    print("Import time (median of 9 fresh interpreters, wall clock)")
    bare = wall_import_ms("import singa")
    full = wall_import_ms("import singa.tensor")
    np_ms = wall_import_ms("import numpy")
    check = subprocess.run([sys.executable, "-c",
                            "import sys, singa; print(any(m.startswith(('singa_', 'pluggy')) "
                            "for m in sys.modules))"], capture_output=True, text=True).stdout
    print(f"import singa          {bare:7.1f} ms (target < 150 ms; plugin loaded: "
          f"{check.strip()})")
    print(f"import singa.tensor   {full:7.1f} ms (includes numpy: {np_ms:.1f} ms)")


def layers() -> None:
    """What each layer of an eager autograd op adds, 64x128 float32 (best of 7 x 5000)."""
    from singa import _math, autograd, device, tensor
    from singa.ops import _registry

    dev = device.get_default_device()
    rng = np.random.default_rng(0)
    x = rng.random((64, 128), np.float32)
    y = rng.random((64, 128), np.float32)
    w = rng.random((128, 64), np.float32)
    z = np.empty_like(x)
    a, b, m = (tensor.from_numpy(v, dev) for v in (x, y, w))
    a.requires_grad = a.stores_grad = True  # a parameter: recorded while training
    add = _registry.OPS["Add"]
    g = {"np": np, "x": x, "y": y, "w": w, "z": z, "a": a, "b": b, "m": m, "ag": autograd,
         "ca": a.data, "cb": b.data, "run": _registry.run, "add": add, "madd": _math.add,
         "kern": dev.kernel(add)[0]}
    rows = [("numpy np.add(x, y, out=z)", "np.add(x, y, out=z)", False),
            ("numpy np.add(x, y)", "np.add(x, y)", False),
            ("the Add kernel on arrays", "kern([x, y], [z], {})", False),
            ("ops.run(Add)", "run(add, [ca, cb])", False),
            ("_math.add", "madd(ca, cb)", False),
            ("Tensor a + b", "a + b", False)]
    for training in (False, True):
        rows += [(f"autograd.{f} training={training}", f"ag.{f}({args})", training)
                 for f, args in (("add", "a, b"), ("relu", "a"), ("matmul", "a, m"))]
    print("Layers of one eager op, 64x128 float32 (best of 7 x 5000 calls)")
    print(f"{'case':<36} {'us/op':>8}")
    for name, stmt, training in rows:
        autograd.training = training
        print(f"{name:<36} {per_call_us(stmt, g, number=5000):8.2f}")
    autograd.training = False
    try:
        import torch
    except ImportError:
        return
    ta = torch.from_numpy(x).requires_grad_()
    tb, tm = torch.from_numpy(y), torch.from_numpy(w)
    tg = {"torch": torch, "a": ta, "b": tb, "m": tm}
    for stmt in ("a + b", "torch.relu(a)", "a @ m"):
        with torch.no_grad():
            off = per_call_us(stmt, tg, number=5000)
        on = per_call_us(stmt, tg, number=5000)
        print(f"{'torch ' + stmt + ' no_grad / grad':<36} {off:8.2f} {on:8.2f}")


if __name__ == "__main__":
    main()
