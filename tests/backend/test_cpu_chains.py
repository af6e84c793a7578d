"""The CPU backend's compiled elementwise chains (graph mode) against its own kernels.

Oracle: the device's Add/Sub/Mul/Axpy kernels run one after the other on copies of the same
arrays; a chain must give bitwise the same values (in-place updates, broadcast scalars and an
operand read by several steps included), on one thread and split across the cores.
"""

from __future__ import annotations

import numpy as np
import pytest
from singa import _dtype
from singa.ops import ChainStep, ElementwiseChain

ARITY = {"Add": 2, "Sub": 2, "Mul": 2, "Axpy": 3, "ReLU": 1, "ReLUBackward": 2}


@pytest.fixture
def cpu(singa_device):
    if singa_device.backend != "cpu":
        pytest.skip("CPU backend internals")
    return singa_device


def random_chain(rng, n_steps, dtype):
    """Steps over 3-5 full operands and 1-2 scalars; every output is a full operand."""
    n_full, n_scalar = int(rng.integers(3, 6)), int(rng.integers(1, 3))
    scalar = (False,) * n_full + (True,) * n_scalar
    steps = []
    for _ in range(n_steps):
        op = str(rng.choice(list(ARITY)))
        ins = [int(rng.integers(0, len(scalar))) for _ in range(ARITY[op])]
        if op == "Axpy":  # alpha is a scalar, x and y full (y is usually the output too)
            ins[0] = int(rng.integers(n_full, len(scalar)))
            ins[1] = int(rng.integers(0, n_full))
            ins[2] = int(rng.integers(0, n_full))
        elif all(scalar[k] for k in ins):
            ins[0] = int(rng.integers(0, n_full))
        out = ins[2] if op == "Axpy" and rng.random() < 0.7 else int(rng.integers(0, n_full))
        steps.append(ChainStep(op, tuple(ins), out))
    return ElementwiseChain(tuple(steps), scalar, _dtype.code_of(dtype))


def operands(rng, chain, n, dtype):
    """Normal values, with some -0.0, +-inf and NaN among the arrays' elements."""
    out = [rng.standard_normal(1 if s else n).astype(dtype) for s in chain.scalar]
    for a in out:
        if a.size > 8:
            a[rng.integers(0, a.size, 4)] = np.array([-0.0, np.inf, -np.inf, np.nan], dtype)
    return out


def run_ops(cpu, chain, arrays):
    """The chain's ops one after the other with the device's own kernels."""
    with np.errstate(all="ignore"):  # inf * 0 and the like: NaN, as intended
        for st in chain.steps:
            kernel = cpu.kernels[st.op][0]
            kernel([arrays[k] for k in st.ins], [arrays[st.out]], {})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", range(20))
def test_chain_equals_the_ops_in_sequence(cpu, dtype, seed):
    rng = np.random.default_rng(seed)
    chain = random_chain(rng, int(rng.integers(2, 7)), dtype)
    n = int(rng.integers(1, 300))
    want = operands(rng, chain, n, dtype)
    got = [a.copy() for a in want]
    run_ops(cpu, chain, want)
    cpu.chain_compiler().compile(chain)(got, [], {})
    for k, (g, w) in enumerate(zip(got, want)):
        # bitwise, NaN payloads aside (numpy and numba may propagate different NaNs)
        same = (g.view(np.uint8) == w.view(np.uint8)).reshape(g.size, -1).all(axis=1)
        assert (same | (np.isnan(g) & np.isnan(w))).all(), f"operand {k} of {chain.name}"


def test_sgd_update_split_across_threads(cpu, monkeypatch):
    """Momentum SGD on a parameter large enough to be split into ranges on the cores."""
    from singa_cpu.kernels import _threads, chains

    if _threads.num_threads() < 2:
        pytest.skip("needs two kernel threads")
    monkeypatch.setattr(chains, "PARALLEL_MIN_ITEMS", 1000)
    f32 = _dtype.kFloat32
    # operands: buf, mom, g, one, wd, p, neg_lr
    chain = ElementwiseChain((ChainStep("Mul", (0, 1), 0), ChainStep("Axpy", (3, 2, 0), 0),
                              ChainStep("Axpy", (4, 5, 0), 0), ChainStep("Axpy", (6, 0, 5), 5)),
                             (False, True, False, True, True, False, True), f32)
    rng = np.random.default_rng(1)
    want = operands(rng, chain, 100_003, np.float32)
    got = [a.copy() for a in want]
    run_ops(cpu, chain, want)
    calls = []
    real = _threads.run_ranges
    monkeypatch.setattr(chains, "run_ranges", lambda *a, **k: (calls.append(1), real(*a, **k)))
    cpu.chain_compiler().compile(chain)([a.reshape(-1) for a in got], [], {})
    assert calls, "the chain did not take the threaded path"
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()


def test_equal_chains_compile_once(cpu):
    f64 = _dtype.kDouble
    make = lambda: ElementwiseChain((ChainStep("Add", (0, 1), 2),), (False, False, False), f64)  # noqa: E731
    comp = cpu.chain_compiler()
    assert comp.compile(make()) is comp.compile(make())
    assert "o2[i] = o0[i] + o1[i]" in comp.compile(make()).source
