"""DOO (fedpne_jax.algorithms.trees.doo) against the NumPy reference (tests/support/reference_doo.py)
and PyXAB's own DOO: the same evaluated points without noise, in 1-D and 2-D, for both deltas and
both splits; the same regret statistically with noise; invalid parameters are refused.

Noise-free runs use 'gaussian:0' (rewards equal f exactly) so that they share a program with the noisy
ones.  Exact comparisons run in float64 (PyXAB's arithmetic): DOO halves the cells around the maximum
every few rounds, and past depth ~24 float32 cells stop halving (Garland reaches depth 149 in 300
rounds), so float32 is compared exactly only while its cells are exact.
"""

import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.trees import doo
from fedpne_jax.algorithms.trees.rounds import run_split_dims
from fedpne_jax.core import executor
from tests.support import reference_doo
from tests.support.helpers import assert_same_distribution, assert_same_tree_run, pyxab_run, traced_tree_run

T = 300
SEEDS = 40


def run(config, objective, seeds):
    return traced_tree_run(doo, config, objective, seeds)


def reference(config, name, dim, split_dims=None, **kw):
    return reference_doo.doo(name, dim, config.horizon, delta=config.delta, c=config.c, gamma=config.gamma,
                             split=config.split, checkpoints=config.checkpoints,
                             split_dim_fn=None if split_dims is None else (lambda t: int(split_dims[t])), **kw)




@pytest.mark.parametrize("delta", ["pyxab", "geometric"])
def test_noise_free_garland_evaluates_the_reference_points(garland, delta):
    config = doo.DOOConfig(horizon=T, noise="gaussian:0", checkpoints=10, delta=delta, precision="float64")
    out, _ = run(config, garland, [0, 7])
    ref = reference(config, "garland", 1)
    for i in range(2):                # one dimension and no noise: every seed is the same run
        assert_same_tree_run(out, i, ref)
    assert ref.depth > 100 and ref.nodes == T + 1


@pytest.mark.parametrize("split,delta", [("random", "pyxab"), ("longest", "geometric"), ("random", "geometric")])
def test_noise_free_himmelblau_evaluates_the_reference_points(himmelblau, split, delta):
    # c = 4 keeps the cells above float64 resolution (c = 1/4 reaches depth 147 in 300 rounds).
    config = doo.DOOConfig(horizon=T, noise="gaussian:0", checkpoints=10, split=split, delta=delta, c=4.0,
                           precision="float64")
    seeds = [0, 5]
    out, static = run(config, himmelblau, seeds)
    for i, seed in enumerate(seeds):
        dims = run_split_dims(executor.seed_key(0, seed), T, static.chunk, 2, "float64")
        assert_same_tree_run(out, i, reference(config, "himmelblau", 2, dims))
    assert len(set(out.points[0, :, 0])) > 1 and len(set(out.points[0, :, 1])) > 1
    assert (split == "longest") == np.array_equal(out.points[0], out.points[1])    # random partitions differ


def test_float32_equals_the_reference_while_its_cells_are_exact(garland, himmelblau):
    out, _ = run(doo.DOOConfig(horizon=40, noise="gaussian:0", checkpoints=4), garland, [0])
    ref = reference(doo.DOOConfig(horizon=40, checkpoints=4), "garland", 1)
    assert_same_tree_run(out, 0, ref)
    assert ref.depth == 19                               # 19 halvings of [0, 1]: exact in float32


def test_garland_evaluates_pyxabs_own_doo_points(garland):
    """PyXAB 0.3.0's DOO with its BinaryPartition (1-D: no random dimension) on the same values."""
    DOO = pytest.importorskip("PyXAB.algos.DOO").DOO
    config = doo.DOOConfig(horizon=T, noise="gaussian:0", checkpoints=10, precision="float64")
    out, _ = run(config, garland, [0])
    points, last = pyxab_run(DOO(n=T, domain=[[0.0, 1.0]]), garland, T)
    np.testing.assert_array_equal(out.points[0], points)
    np.testing.assert_array_equal(out.recommendation[0], last)


def test_noisy_regret_equals_the_reference_statistically(garland):
    config = doo.DOOConfig(horizon=T, noise="gaussian:0.1", checkpoints=10)
    res = fp.run(config, garland, seeds=SEEDS)
    rng = np.random.default_rng(3)
    ref = [reference(config, "garland", 1, noise="gaussian", sigma=0.1, rng=rng).final_regret for _ in range(SEEDS)]
    assert_same_distribution(res.final_regret, ref, "final regret")
    assert res.final_regret.std() > 0
    assert res.config["capacity"] == T + 2 and np.all(res.nodes <= T + 2)


@pytest.mark.parametrize("field,value", [
    ("delta", "cubic"), ("delta", None), ("c", 0.0), ("c", float("nan")), ("gamma", 1.0), ("gamma", 0.0),
    ("split", "middle"), ("precision", "float16"), ("horizon", 0), ("noise", "poisson")])
def test_invalid_parameters_name_themselves(field, value):
    with pytest.raises(ValueError, match=field):
        doo.DOOConfig(**{field: value})
