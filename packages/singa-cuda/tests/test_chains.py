"""Graph-mode elementwise chains: the generated CUDA C compiles with NVRTC for every checked
architecture, and, built for the CPU, gives bitwise what the shared kernels give one op after
the other."""

from __future__ import annotations

import numpy as np
import pytest
from hostcu import chain_builder, compiler
from singa.backend import ChainStep, ElementwiseChain, kDouble, kFloat32

from singa_cuda._nvrtc import checked_archs, compile_source
from singa_cuda.chains import OPTIONS, ChainCompiler, source
from singa_cuda.kernels import shared_table
from singa_cuda.xp import numpy_module
from singa_cuda.xp.random import PhiloxState

# operands: 0 buf, 1 grad, 2 param, 3 momentum (scalar), 4 -lr (scalar), 5 x
SGD_MOMENTUM = (ChainStep("Mul", (0, 3), 0), ChainStep("Add", (0, 1), 0),
                ChainStep("Axpy", (4, 0, 2), 2))
RELU_PATH = (ChainStep("ReLU", (5,), 1), ChainStep("ReLUBackward", (0, 5), 0),
             ChainStep("Sub", (2, 1), 2))
SCALAR = (False, False, False, True, True, False)


def chains():
    return [ElementwiseChain(steps, SCALAR, dt) for steps in (SGD_MOMENTUM, RELU_PATH)
            for dt in (kFloat32, kDouble)]


@pytest.mark.parametrize("arch", checked_archs(), ids=lambda a: f"sm_{a}")
def test_generated_chains_compile(arch):
    for chain in chains():
        ptx = compile_source(source(chain), "chain.cu", arch, sass=False, extra=OPTIONS).decode()
        assert ".entry singa_chain" in ptx
        assert "fma.rn" not in ptx, "a chain step was contracted into an FMA"


def _operands(rng, dt, n):
    npdt = np.float32 if dt == kFloat32 else np.float64
    arrs = [rng.standard_normal(n).astype(npdt) for _ in range(6)]
    arrs[5][: n // 4] = 0.0
    arrs[5][n // 4: n // 4 + 3] = [-0.0, np.nan, -np.inf][: max(0, min(3, n - n // 4))]
    arrs[3] = np.array([0.9], npdt)
    arrs[4] = np.array([-0.05], npdt)
    return arrs


@pytest.mark.skipif(compiler() is None, reason="no C++ compiler (g++) to build chains for the CPU")
@pytest.mark.parametrize("chain", chains(), ids=lambda c: f"{c.name}-{c.dtype}")
def test_chain_is_bitwise_the_ops_in_turn(chain):
    table = shared_table(numpy_module(), PhiloxState)
    kernel = ChainCompiler(chain_builder).compile(chain)
    rng = np.random.default_rng(7)
    for n in (1, 5, 1000):
        fused = _operands(rng, chain.dtype, n)
        stepwise = [a.copy() for a in fused]
        kernel(fused, [], {})
        for step in chain.steps:
            ins = [stepwise[k] for k in step.ins]
            if step.op == "Axpy":
                ins[0] = ins[0].reshape(1)
            table[step.op](ins, [stepwise[step.out]], {})
        for k, (a, b) in enumerate(zip(fused, stepwise)):
            np.testing.assert_array_equal(a, b, err_msg=f"operand {k}, n={n}\n{source(chain)}")


def test_compiler_caches_equal_chains():
    built = []
    comp = ChainCompiler(lambda src, name: built.append(src) or (lambda args, n: None))
    a, b = chains()[0], ElementwiseChain(SGD_MOMENTUM, SCALAR, kFloat32)
    assert comp.compile(a) is comp.compile(b) and len(built) == 1
    assert comp.ops >= {"Add", "Sub", "Mul", "Axpy", "ReLU", "ReLUBackward"}
