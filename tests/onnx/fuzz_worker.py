"""Runs one chunk of the ONNX fuzz corpus in a child process (see test_fuzz.py).

argv: seed start count workdir. Prints one line per case: ``index outcome`` where outcome is
``ok`` (prepared and ran), ``error`` (SingaONNXError) or ``BAD <type>: <message>`` (any other
exception: a failure). The parent applies the memory limit and the timeout.
"""

from __future__ import annotations

import os
import signal
import sys

import numpy as np
import singa_onnx  # noqa: E402  (after sys.path is set by the parent's cwd)
from fuzz_corpus import make_case
from singa.errors import SingaONNXError


def _feeds(rep, model, rng):
    feeds = []
    for vi in model.graph.input:
        if vi.name not in rep.input_names:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else 2
                for d in vi.type.tensor_type.shape.dim]
        if int(np.prod(dims or [1])) > 1 << 20:
            return None  # the declared shape is huge: preparing was the test
        et = vi.type.tensor_type.elem_type
        dt = np.float32 if et in (1, 0) else np.int64
        feeds.append(rng.standard_normal(dims).astype(dt) if dt is np.float32
                     else rng.integers(0, 2, dims).astype(dt))
    return feeds


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang("case took more than 10 s")


def main():
    signal.signal(signal.SIGALRM, _alarm)
    seed, start, count, workdir = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), \
        sys.argv[4]
    for i in range(start, start + count):
        rng = np.random.default_rng(seed * 100003 + i)
        path = make_case(i, seed, workdir)
        signal.alarm(10)
        try:
            rep = singa_onnx.prepare(path, max_elements=1 << 22)
            model = rep.model
            feeds = _feeds(rep, model, rng)
            if feeds is not None:
                rep.run(feeds)
            outcome = "ok"
        except SingaONNXError:
            outcome = "error"
        except Exception as exc:  # noqa: BLE001  (the point: anything else is a failure)
            outcome = f"BAD {type(exc).__name__}: {str(exc)[:200]}"
        signal.alarm(0)
        print(i, outcome, flush=True)
        os.remove(path)


if __name__ == "__main__":
    main()
