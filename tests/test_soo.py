"""SOO (fedpne_jax.algorithms.trees.soo) against the plain Python reference
(tests/support/reference_soo.py) and PyXAB's own SOO: the same evaluated points without noise, in
1-D and 2-D, for the paper's rule and PyXAB's, both splits; the same regret and depth
statistically with noise; invalid parameters are refused.

Noise-free runs use 'gaussian:0' so that they share a program with the noisy ones, in float64
(PyXAB's arithmetic).  T = 700 spans a sort of the leaves (every 512 rounds), so the exact
comparisons cover candidates from the sorted leaves and from those evaluated since.
"""

import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.trees import soo, tree
from fedpne_jax.core import executor
from tests.support import reference_soo
from tests.support.helpers import assert_same_tree_run, pyxab_run, traced_tree_run, two_sample_z

T = 700
SEEDS = 200


def run(config, objective, seeds):
    return traced_tree_run(soo, config, objective, seeds)


def assert_same_run(out, i, ref, pyxab):
    """The reference's run; PyXAB's rule creates a level's children ahead of their evaluation, so its
    node count is compared with the evaluated points' (plus at most one expansion)."""
    if not pyxab:
        return assert_same_tree_run(out, i, ref)
    np.testing.assert_array_equal(out.points[i], ref.points)
    np.testing.assert_array_equal(out.recommendation[i], ref.recommendation)
    np.testing.assert_allclose(out.curve[i], ref.curve, rtol=2e-5)
    assert len(ref.points) + 1 <= out.nodes[i] <= len(ref.points) + 2 and out.flags[i] == 0


def reference(config, name, dim, split_dims=None, **kw):
    return reference_soo.soo(name, dim, config.horizon, h_max=config.h_max, pyxab=config.pyxab, split=config.split,
                             checkpoints=config.checkpoints,
                             split_dim_fn=None if split_dims is None else (lambda r: _dim(split_dims, r)), **kw)


def _dim(split_dims, r):
    """The run's split dimension for the children at rows r, r + 1.  PyXAB's rule creates children
    ahead of their evaluation, beyond row T too; those are never evaluated, and any dimension does."""
    return int(split_dims[r]) if r < len(split_dims) else 0


@pytest.mark.parametrize("pyxab", [False, True])
def test_noise_free_garland_evaluates_the_reference_points(garland, pyxab):
    config = soo.SOOConfig(horizon=T, noise="gaussian:0", checkpoints=10, pyxab=pyxab, precision="float64")
    out, _ = run(config, garland, [0, 7])
    ref = reference(config, "garland", 1)
    for i in range(2):                # one dimension and no noise: every seed is the same run
        assert_same_run(out, i, ref, pyxab)
    # PyXAB's rule fills the tree level by level: its first 511 points are the centres of depths
    # 0..8.  The paper's sweeps go deeper around the maxima.
    centres = {(2 * j + 1) / 2 ** (h + 1) for h in range(9) for j in range(2 ** h)}
    assert (set(out.points[0, :511, 0].tolist()) == centres) == pyxab
    assert (ref.depth > 20) == (not pyxab)


@pytest.mark.parametrize("pyxab,split,h_max", [(False, "random", 100), (False, "longest", 4), (True, "random", 100)])
def test_noise_free_himmelblau_evaluates_the_reference_points(himmelblau, pyxab, split, h_max):
    """h_max = 4 stops the paper's sweeps at depth 4 (so the run fills depths 0..5: 63 nodes)."""
    horizon = 63 if h_max == 4 else 400
    config = soo.SOOConfig(horizon=horizon, noise="gaussian:0", checkpoints=10, pyxab=pyxab, split=split, h_max=h_max,
                           precision="float64")
    seeds = [0, 5]
    out, static = run(config, himmelblau, seeds)
    for i, seed in enumerate(seeds):
        dims = tree.run_split_dims(executor.seed_key(0, seed), horizon, static.chunk, 2, "float64")
        assert_same_run(out, i, reference(config, "himmelblau", 2, dims), pyxab)
    assert (split == "longest") == np.array_equal(out.points[0], out.points[1])    # random partitions differ
    if h_max == 4:
        assert out.depth[0] == 5 and len({tuple(p) for p in out.points[0]}) == 63


def test_garland_evaluates_pyxabs_own_soo_points(garland):
    """PyXAB 0.3.0's SOO with its BinaryPartition (1-D: no random dimension) on the same values."""
    SOO = pytest.importorskip("PyXAB.algos.SOO").SOO
    config = soo.SOOConfig(horizon=T, noise="gaussian:0", checkpoints=10, pyxab=True, precision="float64")
    out, _ = run(config, garland, [0])
    points, last = pyxab_run(SOO(n=T, h_max=100, domain=[[0.0, 1.0]]), garland, T)
    np.testing.assert_array_equal(out.points[0], points)
    np.testing.assert_array_equal(out.recommendation[0], last)


@pytest.mark.parametrize("pyxab", [False, True])
def test_noisy_regret_and_depth_equal_the_reference_statistically(garland, pyxab):
    config = soo.SOOConfig(horizon=300, noise="gaussian:0.1", checkpoints=10, pyxab=pyxab)
    res = fp.run(config, garland, seeds=SEEDS)
    rng = np.random.default_rng(11)
    refs = [reference(config, "garland", 1, noise="gaussian", sigma=0.1, rng=rng) for _ in range(SEEDS)]
    assert abs(two_sample_z(res.final_regret, [r.final_regret for r in refs])) < 4
    assert res.final_regret.std() > 0
    depths = [r.depth for r in refs]
    if np.std(depths) > 0 or res.depth.std() > 0:
        assert abs(two_sample_z(res.depth, depths)) < 4
    else:                             # PyXAB's rule: the depth is the level count, whatever the noise
        assert set(res.depth.tolist()) == set(depths)
    assert res.config["capacity"] == 302 and np.all(res.nodes <= 302)


def test_h_max_bounds_the_horizon():
    assert soo.SOOConfig(horizon=63, h_max=4, checkpoints=9).most_evaluations == 63
    with pytest.raises(ValueError, match=r"horizon: SOO with h_max=4 evaluates at most 63 nodes, got horizon=64"):
        soo.SOOConfig(horizon=64, h_max=4, checkpoints=8)
    with pytest.raises(ValueError, match=r"horizon: PyXAB's SOO with h_max=4 evaluates at most 31 nodes"):
        soo.SOOConfig(horizon=32, h_max=4, pyxab=True, checkpoints=8)


@pytest.mark.parametrize("field,value", [
    ("h_max", -1), ("h_max", 2.5), ("h_max", True), ("pyxab", "yes"), ("pyxab", 1), ("split", "middle"),
    ("precision", "float16"), ("horizon", 0), ("noise", "poisson")])
def test_invalid_parameters_name_themselves(field, value):
    with pytest.raises(ValueError, match=field):
        soo.SOOConfig(**{field: value})
