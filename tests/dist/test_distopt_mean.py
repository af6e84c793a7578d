"""DistOpt applies the mean over ranks of the gradients: an oracle independent of the model,
data and single-process reference of test_distopt.

Rank r's loss is ``Σ_i p_i · c_{r,i}``, whose gradient is ``c_r`` exactly, so after one SGD
step every rank must hold ``p0 - lr · (Σ_r c_r) / n`` (the half modes: ``c_r`` rounded to
float16, summed in float32 in rank order, then divided). SINGA's manual pattern
(``all_reduce`` then ``update``) must divide the summed gradient the same way. With one rank
the division is by 1: these tests tell a missing division apart only under ``mpiexec -n 2``
and more, which the dist session runs.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import rank_data
from singa import autograd, opt, tensor

SHAPES = [(7,), (40, 3), (1001,)]  # threshold 20: a bucket of its own for the larger two
LR = 0.5


def _params(dev, seed=31):
    rng = np.random.default_rng(seed)  # the same on every rank
    ps = []
    for shape in SHAPES:
        p = tensor.Tensor(shape, dev, requires_grad=True, stores_grad=True)
        p.copy_from_numpy(rng.standard_normal(shape).astype(np.float32))
        ps.append(p)
    return ps


def _coefficients(seed, rank):
    return [rank_data(seed + i, rank, s, np.float32) for i, s in enumerate(SHAPES)]


def _loss(ps, cs, dev):
    terms = []
    for p, c in zip(ps, cs):
        ct = tensor.from_numpy(c)
        ct.to_device(dev)
        terms.append(autograd.reduce_sum(autograd.mul(p, ct), None, 0))
    loss = terms[0]
    for t in terms[1:]:
        loss = autograd.add(loss, t)
    return loss


def _mean(comm, seed, half):
    per_rank = [_coefficients(seed, r) for r in range(comm.world_size)]
    means = []
    for i in range(len(SHAPES)):
        if half:  # float16 on the wire, float32 sum in rank order, then the division
            acc = per_rank[0][i].astype(np.float16).astype(np.float32)
            for cs in per_rank[1:]:
                acc = acc + cs[i].astype(np.float16).astype(np.float32)
            means.append(acc / np.float32(comm.world_size))
        else:
            means.append(np.sum([cs[i].astype(np.float64) for cs in per_rank], 0)
                         / comm.world_size)
    return means


@pytest.mark.parametrize("overlap", [False, True], ids=["sync", "overlap"])
@pytest.mark.parametrize("mode", ["backward_and_update", "backward_and_update_half"])
def test_a_step_applies_the_mean_of_the_ranks_gradients(comm, dev, mode, overlap):
    seed = 61
    dist = opt.DistOpt(opt.SGD(lr=LR), communicator=comm, overlap=overlap)
    ps = _params(dev)
    p0 = [tensor.to_numpy(p) for p in ps]
    prev, autograd.training = autograd.training, True
    try:
        getattr(dist, mode)(_loss(ps, _coefficients(seed, comm.rank), dev), threshold=20)
    finally:
        autograd.training = prev
    for p, start, mean in zip(ps, p0, _mean(comm, seed, mode.endswith("half"))):
        np.testing.assert_allclose(tensor.to_numpy(p), start - LR * mean, rtol=1e-6,
                                   atol=1e-6)


def test_update_divides_the_all_reduced_gradient_by_world_size(comm, dev):
    """SINGA's manual step: ``all_reduce(g)`` sums, ``update(p, g)`` divides and applies."""
    seed = 71
    dist = opt.DistOpt(opt.SGD(lr=LR), communicator=comm)
    ps = _params(dev)
    p0 = [tensor.to_numpy(p) for p in ps]
    for p, c in zip(ps, _coefficients(seed, comm.rank)):
        g = tensor.from_numpy(c)
        g.to_device(dev)
        dist.all_reduce(g)
        dist.update(p, g)
    for p, start, mean in zip(ps, p0, _mean(comm, seed, half=False)):
        np.testing.assert_allclose(tensor.to_numpy(p), start - LR * mean, rtol=1e-6,
                                   atol=1e-6)
