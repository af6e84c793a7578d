"""Issue 15 item 5: threads that train their own models on one device (eager and graph mode
mixed) give exactly the results of training the same models one after the other.

Before graph recording was made per thread, thread B's eager ops landed in thread A's graph
(wrong losses, or a GraphError). Oracle: the same models trained sequentially, bitwise.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
from _shared_models import MLP
from singa import device, opt, tensor

STEPS = 12
N_THREADS = 4


def _data(seed):
    g = np.random.default_rng(seed)
    xs = g.standard_normal((STEPS, 8, 5)).astype(np.float32)
    ys = g.integers(0, 3, (STEPS, 8)).astype(np.int32)
    return xs, ys


def _train(seed: int, use_graph: bool, barrier=None) -> list:
    dev = device.get_default_device()
    xs, ys = _data(seed)
    m = MLP()
    m.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    tx = tensor.from_numpy(xs[0], dev)
    ty = tensor.from_numpy(ys[0], dev)
    m.compile([tx], is_train=True, use_graph=use_graph, sequential=False)
    g = np.random.default_rng(seed + 100)
    m.set_states({k: g.standard_normal(v.shape).astype(np.float32) * 0.3
                  for k, v in sorted(m.get_states().items())})
    m.train()
    losses = []
    for i in range(STEPS):
        if barrier is not None and i == seed % 3:
            # start together, then drift: one thread's recording overlaps others' replays
            barrier.wait()
        tx.copy_from_numpy(xs[i])
        ty.copy_from_numpy(ys[i])
        _, loss = m(tx, ty)
        losses.append(tensor.to_numpy(loss).copy())
    params = {k: tensor.to_numpy(v).copy() for k, v in m.get_states().items()}
    return losses, params


def test_threads_training_their_own_models_match_sequential():
    plan = [(s, s % 2 == 0) for s in range(N_THREADS)]  # graph mode in half the threads
    want = [_train(seed, g) for seed, g in plan]
    got: list = [None] * N_THREADS
    errors: list = []
    barrier = threading.Barrier(N_THREADS)

    def run(i, seed, use_graph):
        try:
            got[i] = _train(seed, use_graph, barrier)
        except BaseException as exc:  # reported below with the thread's index
            errors.append((i, exc))
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i, s, g)) for i, (s, g) in enumerate(plan)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads inside every op, not once per step
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
    finally:
        sys.setswitchinterval(interval)
    assert not any(t.is_alive() for t in threads), "a training thread hangs"
    assert not errors, errors
    for i, ((wl, wp), (gl, gp)) in enumerate(zip(want, got)):
        for k, (a, b) in enumerate(zip(wl, gl)):
            np.testing.assert_array_equal(b, a, err_msg=f"thread {i} loss at step {k}")
        for name in wp:
            np.testing.assert_array_equal(gp[name], wp[name], err_msg=f"thread {i} {name}")


def test_recording_flag_is_per_thread():
    dev = device.get_default_device()
    seen = {}
    dev.EnableGraph(True)
    try:
        t = threading.Thread(target=lambda: seen.update(other=dev.graph_enabled()))
        t.start()
        t.join()
        assert dev.graph_enabled() and seen["other"] is False
    finally:
        dev.EnableGraph(False)
