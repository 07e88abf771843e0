"""Noise-free runs equal the independent NumPy reference exactly (up to float32 rounding of values)."""
import numpy as np
import pytest

import fedpne_jax as fp
from tests.support.helpers import make, random_split_fn, reference_run

RTOL = 1e-5

CASES = [
    # objective, D, M, T, k, rho
    ("garland", 1, 1, 3000, 2, 0.5),
    ("garland", 1, 3, 10_000, 3, 0.5),
    ("garland", 1, 10, 10_000, 2, 0.7),
    ("doublesine", 1, 10, 20_000, 2, 0.5),
    ("doublesine", 1, 1, 5_000, 3, 0.7),
    ("himmelblau", 2, 3, 20_000, 2, 0.5),
    ("himmelblau", 2, 10, 20_000, 3, 0.6),
    ("ackley", 2, 10, 20_000, 2, 0.7),
    ("rastrigin", 2, 1, 20_000, 3, 0.5),
    ("rastrigin", 3, 4, 20_000, 3, 0.6),
    ("ackley", 3, 3, 20_000, 2, 0.5),
]

# The node tables that the runs outgrowing their first one grow to, given up front: one program each
# instead of one per table (tests/test_capacity.py checks that a grown run is the larger table's run).
CAPACITY = {("garland", 10): 128, ("doublesine", 1): 1024, ("himmelblau", 3): 64, ("himmelblau", 4): 64,
            ("himmelblau", 10): 2048}


def _compare(res, i, ref):
    assert res.phases[i] == ref.phases
    assert res.uploads[i] == ref.uploads
    assert res.depth[i] == ref.depth
    np.testing.assert_allclose(res.recommendation[i], ref.recommendation, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(res.simple_curve[i], ref.simple, rtol=RTOL, atol=1e-6)
    np.testing.assert_allclose(res.final_regret[i], ref.final_regret, rtol=RTOL)
    np.testing.assert_allclose(res.curves[i], ref.curve, rtol=RTOL, atol=1e-6)
    assert res.curves[i, -1] == pytest.approx(res.final_regret[i], rel=1e-6)
    # best-so-far regret over the pulled centres, and the rounds it reaches COCO's targets
    np.testing.assert_allclose(res.target_scale[i], ref.target_scale, rtol=1e-6)
    np.testing.assert_allclose(res.best_curve[i], ref.best_curve, rtol=RTOL, atol=1e-6)
    goals = ref.target_scale * 10.0 ** np.linspace(2.0, -8.0, 51)
    near = np.isclose(goals[:, None], ref.gaps[None, :], rtol=1e-5, atol=1e-9).any(axis=1)
    np.testing.assert_array_equal(res.hits[i][~near], ref.hits[~near])


@pytest.mark.parametrize("name,dim,M,T,k,rho", CASES)
def test_longest_split_matches_reference(name, dim, M, T, k, rho):
    config = fp.FedPNEConfig(num_clients=M, horizon=T, k=k, rho=rho, split="longest", noise="none",
                             checkpoints=37, capacity=CAPACITY.get((name, M)))
    objective = make(name, M, dim=dim if dim > 1 else None)
    res = fp.run(config, objective, seeds=2)
    ref = reference_run(config, objective)
    for i in range(2):        # noise-free, deterministic partition: every seed is the same run
        _compare(res, i, ref)
    assert res.phases[0] >= 3


@pytest.mark.parametrize("name,dim,k", [("himmelblau", 2, 2), ("ackley", 2, 3), ("rastrigin", 3, 3)])
def test_random_split_matches_reference_per_seed(name, dim, k):
    config = fp.FedPNEConfig(num_clients=4, horizon=20_000, k=k, split="random", noise="none", checkpoints=20,
                             capacity=CAPACITY.get((name, 4)))
    objective = make(name, 4, dim=dim)
    res = fp.run(config, objective, seeds=[0, 5, 9], base_seed=3)
    for i, seed in enumerate([0, 5, 9]):
        ref = reference_run(config, objective, split_dim_fn=random_split_fn(3, seed, dim))
        _compare(res, i, ref)
    assert len(set(res.final_regret.tolist())) > 1     # the partitions really differ between seeds
    assert res.phases.min() >= 3 and res.depth.min() >= dim     # deep enough to split every dimension


@pytest.mark.parametrize("sampling,T", [("client", 10_000), ("explicit", 3_001)])
def test_every_sampler_is_exact_without_noise(sampling, T):
    """Per-client means and the per-pull simulation (with its own placement of checkpoints inside a
    node's pulls) give the reference's numbers when there is no noise."""
    config = fp.FedPNEConfig(num_clients=3, horizon=T, split="longest", noise="none", sampling=sampling,
                             checkpoints=29, capacity=32)
    objective = make("doublesine", 3)
    res = fp.run(config, objective, seeds=2)
    ref = reference_run(config, objective)
    for i in range(2):
        _compare(res, i, ref)


@pytest.mark.parametrize("T", [1, 7, 1001])
def test_short_and_cut_horizons(T):
    config = fp.FedPNEConfig(num_clients=2, horizon=T, split="longest", noise="none", checkpoints=min(5, T))
    objective = make("garland", 2)
    res = fp.run(config, objective)
    _compare(res, 0, reference_run(config, objective))


def test_delta_c1_nu_are_used():
    config = fp.FedPNEConfig(num_clients=5, horizon=30_000, split="longest", noise="none",
                             c=0.3, c1=2.0, delta=0.05, nu=0.5, rho=0.6)
    objective = make("doublesine", 5)
    _compare(fp.run(config, objective), 0, reference_run(config, objective))


@pytest.mark.parametrize("name,c,M", [("garland", 0.001, 64), ("doublesine", 0.0003, 16)])
def test_deep_run_is_exact(name, c, M):
    """T = 10^9 with a small c drives nodes past depth 23, where float32 endpoints on [0, 1] would
    merge.  The integer cells keep the tree exact: in float64 the whole run equals the reference; in
    float32 the tree (phases, uploads, depth, recommendation) is still exact and only the objective's
    float32 values differ (Garland's cusp amplifies the rounding of x)."""
    base = fp.FedPNEConfig(num_clients=M, horizon=10**9, split="longest", noise="none", c=c, checkpoints=10)
    objective = make(name, M)
    ref = reference_run(base, objective)
    assert ref.depth >= 23
    exact = fp.run(base.replace(precision="float64"), objective)
    _compare(exact, 0, ref)
    np.testing.assert_allclose(exact.final_regret[0], ref.final_regret, rtol=1e-12)
    single = fp.run(base, objective)
    assert (single.phases[0], single.uploads[0], single.depth[0]) == (ref.phases, ref.uploads, ref.depth)
    np.testing.assert_allclose(single.recommendation[0], ref.recommendation, rtol=1e-7)
