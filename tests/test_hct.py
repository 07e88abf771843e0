"""HCT (fedpne_jax.algorithms.trees.hct) against the NumPy reference (tests/support/reference_hct.py): the same pulled
points without noise, the same regret statistically with noise; a seed alone equals the seed in a
batch; invalid parameters are refused; regret grows sublinearly.

Four compiled programs: Garland with 100 seeds and Himmelblau (random split, PyXAB's re-expansion)
with three seeds, both returning the pulled points, Himmelblau through fp.run with one, and Garland
in float64 with one seed against PyXAB's own HCT.
Noise-free runs use 'gaussian:0' (rewards equal f exactly), so that they share each program with
the noisy runs (the noise scale is data).
"""

import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.trees import hct
from fedpne_jax.algorithms.trees.rounds import run_split_dims
from fedpne_jax.core import executor
from tests.support import reference_hct
from tests.support.helpers import assert_regret_per_round_falls, assert_same_distribution, pyxab_run, traced_tree_run
from tests.support.helpers import assert_same_tree_run as assert_same_run

T = 300
SEEDS = 100
GARLAND = hct.HCTConfig(horizon=T, noise="gaussian:0", checkpoints=10)
# PyXAB's re-expansion happens a few times in 300 rounds (its rule at the paper's rho = 0.75: more often).
HIMMELBLAU = hct.HCTConfig(horizon=T, noise="gaussian:0", checkpoints=10, expand="pyxab")


def run(config, objective, seeds, base_seed=0):
    """Outputs with the pulled points (a traced static), one compiled program per config and shape."""
    out, static = traced_tree_run(hct, config, objective, seeds, base_seed)
    return out, static


def reference(config, name, dim, split_dims=None, **kw):
    return reference_hct.hct(name, dim, config.horizon, nu=config.nu, rho=config.rho, c=config.c,
                             delta=config.delta, expand=config.expand, split=config.split,
                             split_dim_fn=None if split_dims is None else (lambda t: int(split_dims[t])),
                             checkpoints=config.checkpoints, **kw)


def split_dims(static, seed, base_seed=0):
    return run_split_dims(executor.seed_key(base_seed, seed), static.horizon, static.chunk, static.tree.dim)




@pytest.fixture(scope="module")
def garland_noisy(garland):
    return run(GARLAND.replace(noise="gaussian:0.1"), garland, np.arange(SEEDS))[0]


def test_noise_free_garland_pulls_the_reference_points(garland):
    out, _ = run(GARLAND, garland, np.arange(SEEDS))
    ref = reference(GARLAND, "garland", 1)
    for i in (0, SEEDS - 1):          # one dimension and no noise: every seed is the same run
        assert_same_run(out, i, ref)
    assert ref.depth >= 4


def test_garland_pulls_pyxabs_own_hct_points(garland):
    """PyXAB 0.3.0's own HCT (its defaults, 1-D: no random dimension) and expand='pyxab' in float64:
    the same points and recommendation."""
    HCT = pytest.importorskip("PyXAB.algos.HCT").HCT
    out, _ = run(GARLAND.replace(expand="pyxab", precision="float64"), garland, [0])
    points, last = pyxab_run(HCT(domain=[[0.0, 1.0]]), garland, T)
    np.testing.assert_array_equal(out.points[0], points)
    np.testing.assert_array_equal(out.recommendation[0], last)


def test_noise_free_himmelblau_with_reexpansion_pulls_the_reference_points(himmelblau):
    seeds = [0, 5, 9]
    out, static = run(HIMMELBLAU, himmelblau, seeds)
    regrown = 0
    for i, seed in enumerate(seeds):
        ref = reference(HIMMELBLAU, "himmelblau", 2, split_dims(static, seed))
        assert_same_run(out, i, ref)
        regrown += ref.reexpansions
    assert regrown > 0                                     # PyXAB's re-expansion was exercised
    assert len({tuple(p) for p in out.recommendation}) > 1   # the random partitions differ


def test_noisy_regret_equals_the_reference_statistically(garland_noisy):
    rng = np.random.default_rng(1)
    config = GARLAND.replace(noise="gaussian:0.1")
    ref = [reference(config, "garland", 1, noise="gaussian", sigma=0.1, rng=rng, full=False).final_regret
           for _ in range(SEEDS)]
    assert_same_distribution(garland_noisy.final_regret, ref, "final regret")
    assert garland_noisy.final_regret.std() > 0


def test_regret_grows_sublinearly(garland_noisy):
    mean = assert_regret_per_round_falls(garland_noisy.curve, GARLAND.checkpoint_rounds)
    rounds = np.asarray(GARLAND.checkpoint_rounds)
    assert mean[-1] / rounds[-1] < mean[0] / rounds[0]


def test_result_records_the_table(himmelblau):
    """(A seed alone equals the same seed in a batch: tests/test_contract.py, for every algorithm.)"""
    res = fp.run(HIMMELBLAU.replace(noise="gaussian:0.1"), himmelblau, seeds=[0, 5])
    assert res.final_regret[0] != res.final_regret[1]
    assert res.config["capacity"] >= res.nodes.max() and res.config["expand"] == "pyxab"


@pytest.mark.parametrize("field,value", [
    ("nu", 0.0), ("nu", float("nan")), ("rho", 1.0), ("rho", 0.0), ("c", -1.0), ("c", "0.1"), ("delta", 0.0),
    ("delta", 1.5), ("split", "middle"), ("expand", "always"), ("precision", "float16"), ("horizon", 0),
    ("noise", "poisson"), ("checkpoints", 0)])
def test_invalid_parameters_name_themselves(field, value):
    with pytest.raises(ValueError, match=field):
        hct.HCTConfig(**{field: value})


def test_capacity_bounds_every_reference_tree():
    """The host bound on rows and depth holds for trees the reference grows (leaf and PyXAB rules)."""
    for config in (hct.HCTConfig(horizon=500, rho=0.75, c=0.05, noise="none"),
                   hct.HCTConfig(horizon=500, rho=0.75, c=0.05, noise="none", expand="pyxab")):
        capacity, height = hct.bounds(config)
        ref = reference(config, "garland", 1)
        assert ref.nodes <= capacity and ref.depth <= height
        assert capacity <= 2 * config.horizon + 3
