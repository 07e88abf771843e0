"""T-HOO (fedpne_jax.algorithms.trees.hoo) against the NumPy reference (tests/support/reference_hoo.py): the same
pulled points without noise, the same regret statistically with noise; a seed alone equals the seed
in a batch; invalid parameters are refused; regret grows sublinearly.

Three compiled programs: Garland with 100 seeds and Himmelblau (longest-side split) with three seeds,
both returning the pulled points, and Himmelblau through fp.run with one.  Noise-free runs use
'gaussian:0' (rewards equal f exactly), so that they share each program with the noisy runs (the
noise scale is data).
"""

import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.trees import hoo
from tests.support import reference_hoo
from tests.support.helpers import assert_regret_per_round_falls, assert_same_distribution, pyxab_run, traced_tree_run
from tests.support.helpers import assert_same_tree_run as assert_same_run

T = 300
SEEDS = 100
GARLAND = hoo.HOOConfig(horizon=T, noise="gaussian:0", checkpoints=10)
HIMMELBLAU = hoo.HOOConfig(horizon=T, noise="gaussian:0", checkpoints=10, split="longest", nu=0.5, rho=0.6)


def run(config, objective, seeds, base_seed=0):
    """Outputs with the pulled points (a traced static), one compiled program per config and shape."""
    out, static = traced_tree_run(hoo, config, objective, seeds, base_seed)
    return out


def reference(config, name, dim, **kw):
    return reference_hoo.hoo(name, dim, config.horizon, nu=config.nu, rho=config.rho,
                             depth_limit=config.depth_limit, split=config.split, checkpoints=config.checkpoints, **kw)




@pytest.fixture(scope="module")
def garland_noisy(garland):
    return run(GARLAND.replace(noise="gaussian:0.1"), garland, np.arange(SEEDS))


def test_noise_free_garland_pulls_the_reference_points(garland):
    out = run(GARLAND, garland, np.arange(SEEDS))
    ref = reference(GARLAND, "garland", 1)
    for i in (0, SEEDS - 1):          # one dimension and no noise: every seed is the same run
        assert_same_run(out, i, ref)
    assert ref.depth == GARLAND.limit + 1 and ref.nodes == GARLAND.capacity   # the truncated tree is full


def test_garland_pulls_pyxabs_own_t_hoo_points(garland):
    """PyXAB 0.3.0's own T_HOO (its defaults, n = T, 1-D) in float64: the same points and
    recommendation."""
    T_HOO = pytest.importorskip("PyXAB.algos.HOO").T_HOO
    out = run(GARLAND.replace(precision="float64"), garland, [0])
    points, last = pyxab_run(T_HOO(rounds=T, domain=[[0.0, 1.0]]), garland, T)
    np.testing.assert_array_equal(out.points[0], points)
    np.testing.assert_array_equal(out.recommendation[0], last)


def test_noise_free_himmelblau_pulls_the_reference_points(himmelblau):
    out = run(HIMMELBLAU, himmelblau, [0, 5, 9])
    ref = reference(HIMMELBLAU, "himmelblau", 2)
    for i in range(3):                # the longest-side split is deterministic: every seed is this run
        assert_same_run(out, i, ref)
    assert len(set(ref.points[:, 0])) > 1 and len(set(ref.points[:, 1])) > 1     # both dimensions were split


def test_noisy_regret_equals_the_reference_statistically(garland_noisy):
    rng = np.random.default_rng(2)
    ref = [reference(GARLAND, "garland", 1, noise="gaussian", sigma=0.1, rng=rng, full=False).final_regret
           for _ in range(SEEDS)]
    assert_same_distribution(garland_noisy.final_regret, ref, "final regret")
    assert garland_noisy.final_regret.std() > 0


def test_regret_grows_sublinearly(garland_noisy):
    mean = assert_regret_per_round_falls(garland_noisy.curve, GARLAND.checkpoint_rounds)
    assert np.all(np.diff(mean / np.asarray(GARLAND.checkpoint_rounds)) < 0)


def test_result_records_the_tree_bounds(himmelblau):
    """(A seed alone equals the same seed in a batch: tests/test_contract.py, for every algorithm.)"""
    res = fp.run(HIMMELBLAU.replace(noise="gaussian:0.1"), himmelblau, seeds=[0, 5])
    assert res.final_regret[0] != res.final_regret[1]
    assert res.config["depth_limit"] == HIMMELBLAU.limit and res.config["capacity"] == HIMMELBLAU.capacity


def test_default_depth_limit_is_pyxabs():
    config = hoo.HOOConfig(horizon=10_000)
    assert config.limit == 7 == int(np.ceil((np.log(10_000) / 2 - np.log(1 / 1.0)) / np.log(2)))
    assert (config.height, config.capacity) == (8, 511)
    assert hoo.HOOConfig(horizon=10, depth_limit=50, checkpoints=10).capacity == 23          # 3 + 2T: one expansion per round
    assert hoo.HOOConfig(horizon=100, nu=1e-3).limit == 0


@pytest.mark.parametrize("field,value", [
    ("nu", 0.0), ("nu", float("inf")), ("rho", 1.0), ("rho", -0.5), ("depth_limit", -1), ("depth_limit", 2.5),
    ("depth_limit", True), ("split", "middle"), ("precision", "float16"), ("horizon", 0), ("noise", "gaussian:x"),
    ("checkpoints", 0)])
def test_invalid_parameters_name_themselves(field, value):
    with pytest.raises(ValueError, match=field if field != "noise" else "noise scale"):
        hoo.HOOConfig(**{field: value})
