"""VHCT (fedpne_jax.algorithms.trees.vhct) against the NumPy reference (tests/support/reference_vhct.py)
and PyXAB's own VHCT: the same pulled points without noise, for the paper's rules and PyXAB's, on
Garland and on Himmelblau under both splits; the same points under noise when the reference (and
PyXAB) are given the run's own rewards, which is where the variances differ from node to node; the
same regret statistically with noise drawn apart; PyXAB's defaults; the capacity bound; invalid
parameters refused by name.

Every run here has T = 300 and 10 checkpoints, in float64 (PyXAB's arithmetic), under 'gaussian:s'
noise (s = 0 for the exact comparisons; the noise scale is data), so that four programs are compiled:
Garland under each rule, Himmelblau under the paper's rule with random splits and under PyXAB's
(re-expansions included) with the longest side split.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedpne_jax.algorithms.trees import vhct
from fedpne_jax.algorithms.trees.rounds import chunk_uniforms, run_split_dims
from fedpne_jax.core import executor, noise
from tests.support import reference_vhct
from tests.support.helpers import (
    assert_regret_per_round_falls,
    assert_same_distribution,
    assert_same_tree_run,
    pyxab_run,
    traced_tree_run,
)

T = 300
SEEDS = 64
SIGMA = 0.1
_RUNS: dict = {}


def config(sigma=0.0, **fields):
    return vhct.VHCTConfig(horizon=T, noise=f"gaussian:{sigma}", checkpoints=10, precision="float64", **fields)


def run(cfg, objective, seeds=SEEDS):
    """(traced outputs of seeds 0 .. seeds - 1, static), once per config and objective in this file."""
    key = (cfg, objective.name, seeds)
    if key not in _RUNS:
        _RUNS[key] = traced_tree_run(vhct, cfg, objective, np.arange(seeds))
    return _RUNS[key]


def reference(cfg, name, dim, static=None, seed=0, **kw):
    dims = None
    if cfg.split == "random" and dim > 1:
        dims = run_split_dims(executor.seed_key(0, seed), static.horizon, static.chunk, dim, cfg.precision)
    return reference_vhct.vhct(name, dim, cfg.horizon, nu=cfg.nu, rho=cfg.rho, c=cfg.c, delta=cfg.delta,
                               bound=cfg.bound, pyxab=cfg.pyxab, split=cfg.split,
                               split_dim_fn=None if dims is None else (lambda t: int(dims[t])),
                               checkpoints=cfg.checkpoints, **kw)


def run_noise(static, seed, sigma):
    """(T,) the Gaussian noise of run ``seed``'s rounds, as the tree skeleton adds it to f(x_t):
    noise.reward of the round's uniforms (float64)."""
    with jax.enable_x64(True):
        key = executor.seed_key(0, seed)
        u = jnp.concatenate([chunk_uniforms(key, c, static.chunk, jnp.float64)
                             for c in range(-(-static.horizon // static.chunk))])[:static.horizon]
        scale = jnp.asarray(sigma, jnp.float64)
        return np.asarray(noise.reward("gaussian", scale, scale ** 2, jnp.zeros(static.horizon, jnp.float64),
                                       u[:, 0], u[:, 1]))


def pyxab_vhct(objective, noise_values=None):
    """(points, get_last_point()) of PyXAB's VHCT with its defaults on ``objective``'s values plus
    ``noise_values`` (T,) (none: noise-free)."""
    VHCT = pytest.importorskip("PyXAB.algos.VHCT").VHCT
    algo = VHCT(domain=[[0.0, 1.0]])
    if noise_values is None:
        return pyxab_run(algo, objective, T)
    points = []
    with jax.enable_x64(True):
        for t in range(1, T + 1):
            x = algo.pull(t)
            points.append(x)
            algo.receive_reward(t, float(objective.value(np.asarray(x, np.float64))) + noise_values[t - 1])
    return np.asarray(points), algo.get_last_point()


def test_defaults_are_pyxabs():
    VHCT = pytest.importorskip("PyXAB.algos.VHCT").VHCT
    ours, theirs = vhct.VHCTConfig(), VHCT(domain=[[0.0, 1.0]])
    assert (ours.nu, ours.rho, ours.c, ours.delta, ours.bound) == (theirs.nu, theirs.rho, theirs.c, theirs.delta,
                                                                   theirs.bound)
    assert ours.c1 == theirs.c1 and not ours.pyxab
    assert vhct.MIN_VARIANCE == reference_vhct.MIN_VARIANCE == theirs.partition.get_root().minvariance


@pytest.mark.parametrize("pyxab", [False, True])
def test_noise_free_garland_pulls_the_reference_points(garland, pyxab):
    out, _ = run(config(pyxab=pyxab), garland)
    ref = reference(config(pyxab=pyxab), "garland", 1)
    for i in (0, SEEDS - 1):          # one dimension and no noise: every seed is the same run
        assert_same_tree_run(out, i, ref)
    assert ref.depth >= 6 and (ref.reexpansions > 0) == pyxab


def test_noise_free_garland_pulls_pyxabs_own_vhct_points(garland):
    """PyXAB 0.3.0's VHCT with its defaults and BinaryPartition (1-D: no random dimension); the paper's
    rules pull other points (no variance floor)."""
    out, _ = run(config(pyxab=True), garland)
    points, last = pyxab_vhct(garland)
    np.testing.assert_array_equal(out.points[0], points)
    np.testing.assert_array_equal(out.recommendation[0], last)
    paper, _ = run(config(), garland)
    assert not np.array_equal(paper.points[0], points)


@pytest.mark.parametrize("pyxab,split,seeds", [(False, "random", (0, 5, 9)), (True, "longest", (0,))])
def test_noise_free_himmelblau_pulls_the_reference_points(himmelblau, pyxab, split, seeds):
    cfg = config(pyxab=pyxab, split=split)
    out, static = run(cfg, himmelblau, 10)
    regrown = 0
    for seed in seeds:
        ref = reference(cfg, "himmelblau", 2, static, seed)
        assert_same_tree_run(out, seed, ref)
        regrown += ref.reexpansions
    assert (regrown > 0) == pyxab          # PyXAB's re-expansion was exercised (in 2-D too)
    # Random partitions differ between seeds; the longest sides are the same in every run.
    assert np.array_equal(out.points[0], out.points[1]) == (split == "longest")


@pytest.mark.parametrize("pyxab", [False, True])
def test_noisy_garland_pulls_the_reference_points_given_its_rewards(garland, pyxab):
    """Under noise the nodes' variances differ, and so do their widths and thresholds: given the run's
    own rewards the reference pulls the same points (and, under PyXAB's rule, so does PyXAB)."""
    cfg = config(SIGMA, pyxab=pyxab)
    out, static = run(cfg, garland)
    regrown = 0
    for seed in (0, 1, 2):
        z = run_noise(static, seed, SIGMA)
        ref = reference(cfg, "garland", 1, noise_fn=lambda t, z=z: z[t - 1])
        assert_same_tree_run(out, seed, ref)
        regrown += ref.reexpansions
    assert (regrown > 0) == pyxab
    if pyxab:
        points, last = pyxab_vhct(garland, run_noise(static, 0, SIGMA))
        np.testing.assert_array_equal(out.points[0], points)
        np.testing.assert_array_equal(out.recommendation[0], last)


@pytest.mark.parametrize("pyxab", [False, True])
def test_noisy_regret_equals_the_reference_statistically(garland, pyxab):
    cfg = config(SIGMA, pyxab=pyxab)
    out, _ = run(cfg, garland)
    rng = np.random.default_rng(3 + pyxab)
    refs = [reference(cfg, "garland", 1, noise="gaussian", sigma=SIGMA, rng=rng, full=False) for _ in range(SEEDS)]
    assert_same_distribution(out.final_regret, [r.final_regret for r in refs], "final regret")
    assert_same_distribution(out.nodes, [r.nodes for r in refs], "nodes")
    assert out.final_regret.std() > 0 and np.all(out.flags == 0) and np.all(out.nodes <= cfg.capacity)
    assert_regret_per_round_falls(out.curve, cfg.checkpoint_rounds)


@pytest.mark.parametrize("pyxab", [False, True])
def test_capacity_bounds_every_reference_tree(pyxab):
    """The host bound on rows and depth holds for trees the reference grows with small thresholds
    (PyXAB's re-expansions refill depths in old rows), with and without noise."""
    cfg = vhct.VHCTConfig(horizon=500, rho=0.75, c=0.05, bound=0.5, pyxab=pyxab, noise="none", checkpoints=10)
    capacity, height = vhct.bounds(cfg)
    rng = np.random.default_rng(5)
    for sigma in (0.0, 0.5):
        for _ in range(3):
            ref = reference(cfg, "garland", 1, noise="gaussian", sigma=sigma, rng=rng, full=False)
            assert ref.nodes <= capacity and ref.depth <= height
    assert capacity <= 2 * cfg.horizon + 5


def test_a_horizon_the_table_cannot_hold_is_refused():
    with pytest.raises(ValueError, match=r"horizon: VHCT's node table would need 26666673 rows"):
        vhct.VHCTConfig(horizon=2 * 10 ** 7, pyxab=True, checkpoints=1)
    assert vhct.VHCTConfig(horizon=2 * 10 ** 7, checkpoints=1).capacity < 40_000   # the paper's: no re-expansion
    with pytest.raises(ValueError, match=r"c, nu, rho, bound and delta must keep VHCT's widths and thresholds "
                                         r"within float32 range"):
        vhct.VHCTConfig(c=1e-20, rho=0.01)


@pytest.mark.parametrize("field,value", [
    ("nu", 0.0), ("nu", float("nan")), ("rho", 1.0), ("rho", 0.0), ("c", -1.0), ("c", "0.1"), ("delta", 0.0),
    ("delta", 1.5), ("bound", 0.0), ("bound", -1.0), ("bound", float("inf")), ("bound", True), ("pyxab", "yes"),
    ("pyxab", 1), ("split", "middle"), ("precision", "float16"), ("horizon", 0), ("noise", "poisson"),
    ("checkpoints", 0)])
def test_invalid_parameters_name_themselves(field, value):
    with pytest.raises(ValueError, match=field):
        vhct.VHCTConfig(**{field: value})
