"""StroquOOL (fedpne_jax.algorithms.trees.stroquool) against the plain Python reference
(tests/support/reference_stroquool.py) and PyXAB's own StroquOOL: the same evaluated points,
recommendation, nodes and depth without noise, in 1-D and 2-D, both splits; the same regret
statistically with noise; the host's schedule (its steps, and which of them repeat the previous
step's children because no node qualifies: PyXAB's stale max_node) equals the reference's; the
means are numpy's pairwise sums bit for bit.

Noise-free runs use 'gaussian:0' in float64 (PyXAB's arithmetic) with SEEDS seeds, so that the noisy
test runs the same program.  T = 1,000: h_max = 6, 10 steps of which one repeats, and the
cross-validation ends in round 62; the other 938 rounds evaluate the recommendation.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.trees import stroquool
from fedpne_jax.core import executor
from tests.support import reference_stroquool
from tests.support.helpers import (
    assert_runs_equal_reference,
    assert_same_distribution,
    assert_same_tree_run,
    pyxab_run,
    traced_tree_run,
)

T = 1000
SEEDS = 100


def _config(horizon=T, **kw):
    return stroquool.StroquOOLConfig(horizon=horizon, checkpoints=10,
                                     **{"precision": "float64", "noise": "gaussian:0", **kw})


def reference(config, name, dim, split_dims=None, **kw):
    """The run's split dimension for the children made by an opening is the one drawn in the round
    before the opening's first (the update that makes them; entry 0: the root's)."""
    plan = stroquool.schedule(config.horizon)
    rounds = [first for first, offset in zip(plan.first, plan.offset) if offset == 0]
    dim_of = None if split_dims is None else (
        lambda r: int(split_dims[0] if r == 1 else split_dims[rounds[(r - 3) // 2] - 1]))
    return reference_stroquool.stroquool(name, dim, config.horizon, split=config.split, split_dim_fn=dim_of,
                                         checkpoints=config.checkpoints, **kw)


@pytest.fixture(scope="module")
def garland_runs(garland):
    return traced_tree_run(stroquool, _config(), garland, np.arange(SEEDS))[0]


def test_noise_free_garland_evaluates_the_reference_points(garland_runs):
    ref = reference(_config(), "garland", 1)
    for i in (0, SEEDS - 1):          # one dimension and no noise: every seed is the same run
        assert_same_tree_run(garland_runs, i, ref)
    assert ref.stale == 1 and ref.nodes == 3 + 2 * stroquool.schedule(T).openings
    end = stroquool.schedule(T).end
    np.testing.assert_array_equal(garland_runs.points[0, end - 1:], np.broadcast_to(ref.recommendation, (T - end + 1, 1)))


def test_garland_evaluates_pyxabs_own_stroquool_points(garland, garland_runs):
    """PyXAB 0.3.0's StroquOOL with its BinaryPartition (1-D: no random dimension) on the same values."""
    StroquOOL = pytest.importorskip("PyXAB.algos.StroquOOL").StroquOOL
    points, last = pyxab_run(StroquOOL(n=T, domain=[[0.0, 1.0]]), garland, T)
    np.testing.assert_array_equal(garland_runs.points[5], points)
    np.testing.assert_array_equal(garland_runs.recommendation[5], last)


@pytest.mark.parametrize("split", ["random", "longest"])
def test_noise_free_himmelblau_evaluates_the_reference_points(himmelblau, split):
    config = _config(split=split)
    out = assert_runs_equal_reference(stroquool, config, himmelblau, [0, 3],
                                      lambda dims: reference(config, "himmelblau", 2, dims))
    assert (split == "longest") == np.array_equal(out.points[0], out.points[1])    # random partitions differ


def test_noisy_regret_equals_the_reference_statistically(garland, garland_runs):
    """The noise scale is data: the noisy runs share the noise-free runs' program."""
    traces = executor.trace_count()
    out, _ = traced_tree_run(stroquool, _config(noise="gaussian:0.1"), garland, np.arange(SEEDS))
    assert executor.trace_count() == traces
    rng = np.random.default_rng(3)
    refs = [reference(_config(), "garland", 1, noise="gaussian", sigma=0.1, rng=rng) for _ in range(SEEDS)]
    assert_same_distribution(out.final_regret, [r.final_regret for r in refs], "final regret")
    assert out.final_regret.std() > 0 and len({tuple(p) for p in out.recommendation}) > 1
    assert np.all(out.nodes == garland_runs.nodes[0])            # the schedule ignores the values


@pytest.mark.parametrize("horizon", [68, 100, 600, 1000, 5000, 10_000, 30_000])
def test_schedule_equals_the_reference(horizon):
    """Steps, cross-validation rounds, and the repeating steps: the reference's stale max_node count
    (run noise-free on Garland) equals the host's count of steps with an offset."""
    plan = stroquool.schedule(horizon)
    expected = reference_stroquool.schedule(horizon)
    assert (plan.h_max, plan.p_max) == (expected["h_max"], expected["p_max"])
    assert list(zip(plan.depth, plan.p, plan.first)) == expected["steps"]
    assert (plan.cv_start, plan.end) == (expected["cv_start"], expected["end"]) and plan.end <= horizon + 1
    if horizon <= 10_000:
        stale = reference_stroquool.stroquool("garland", 1, horizon).stale
        assert sum(o > 0 for o in plan.offset) == stale
    assert stroquool.min_horizon() == reference_stroquool.min_horizon() == 68


def test_means_are_numpys_pairwise_sums():
    """numpy_sum(a, n) / n is np.sum(a[:n]) / n bit for bit, through every branch of numpy's order:
    fewer than 8 values, one block of up to 128, and the recursive halves."""
    rng = np.random.default_rng(0)
    lengths = [1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 127, 128, 129, 136, 255, 256, 257, 1000, 2110]
    with jax.enable_x64(True):
        total = jax.jit(stroquool.numpy_sum, static_argnums=1)
        for n in lengths:
            a = rng.standard_normal(n + 3) * 10.0 ** rng.uniform(-3, 3, n + 3)
            assert float(total(jnp.asarray(a), n)) == float(np.sum(a[:n])), n


def test_long_run_through_fp_run(garland):
    res = fp.run(_config(10_000, precision="float32", noise="gaussian:0.1"), garland, seeds=4)
    plan = stroquool.schedule(10_000)
    assert (plan.h_max, plan.end, plan.openings) == (42, 793, 76)
    assert np.all(res.nodes == 3 + 2 * 76) and np.all(res.final_regret > 0)


def test_short_horizons_are_refused():
    with pytest.raises(ValueError, match=r"horizon: StroquOOL needs h_max .* T >= 68, got horizon=67"):
        stroquool.StroquOOLConfig(horizon=67, checkpoints=10)
    assert stroquool.StroquOOLConfig(horizon=68, checkpoints=10).capacity == 5


@pytest.mark.parametrize("field,value", [("split", "middle"), ("precision", "float16"), ("horizon", 0),
                                         ("noise", "poisson"), ("checkpoints", 0)])
def test_invalid_parameters_name_themselves(field, value):
    with pytest.raises(ValueError, match=field):
        stroquool.StroquOOLConfig(**{field: value})
