"""SequOOL (fedpne_jax.algorithms.trees.sequool) against the plain Python reference
(tests/support/reference_sequool.py) and PyXAB's own SequOOL: the same evaluated points, regret,
nodes and depth without noise, in 1-D and 2-D, for both splits; the same regret statistically with
noise; the host's schedule equals the reference's.

Noise-free runs use 'gaussian:0', so that they share a program with the noisy ones, in float64
(PyXAB's arithmetic), and 200 seeds, so that the statistical test runs the same program.  At T = 200
the sweep ends in round 160 and the run then evaluates the root (rounds the recommendation skips);
at T = 300 in 2-D in round 236, after sorts in windows of 2 to 32 nodes; at T = 13 round T falls
between an opening's two children.  (Deeper 2-D runs reach cells whose values differ by less than
the objective's rounding, where the JAX objective and the reference's may order two nodes either way.)
"""
import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.trees import sequool
from fedpne_jax.core import executor
from tests.support import reference_sequool
from tests.support.helpers import (
    assert_runs_equal_reference,
    assert_same_distribution,
    assert_same_tree_run,
    pyxab_run,
    traced_tree_run,
)

T = 200
SEEDS = 200


def _config(horizon=T, **kw):
    return sequool.SequOOLConfig(horizon=horizon, checkpoints=10, **{"precision": "float64", "noise": "gaussian:0", **kw})


def reference(config, name, dim, split_dims=None, **kw):
    """The run's split dimension for children at rows r, r + 1 is the one drawn in round r - 1 (the
    update that makes them; entry 0: the root's)."""
    return reference_sequool.sequool(name, dim, config.horizon, split=config.split, checkpoints=config.checkpoints,
                                     split_dim_fn=None if split_dims is None else (lambda r: int(split_dims[r - 1])),
                                     **kw)


@pytest.fixture(scope="module")
def garland_runs(garland):
    return traced_tree_run(sequool, _config(), garland, np.arange(SEEDS))[0]


def test_noise_free_garland_evaluates_the_reference_points(garland_runs):
    ref = reference(_config(), "garland", 1)
    for i in (0, 7):                  # one dimension and no noise: every seed is the same run
        assert_same_tree_run(garland_runs, i, ref)
    plan = sequool.schedule(T)
    assert plan.sweep_rounds == 160 and plan.h_max == 34
    # After the sweep every round evaluates the root's centre.
    np.testing.assert_array_equal(garland_runs.points[0, 160:], 0.5)
    assert not np.any(garland_runs.points[0, :160] == 0.5)


def test_garland_evaluates_pyxabs_own_sequool_points(garland, garland_runs):
    """PyXAB 0.3.0's SequOOL with its BinaryPartition (1-D: no random dimension) on the same values."""
    SequOOL = pytest.importorskip("PyXAB.algos.SequOOL").SequOOL
    points, last = pyxab_run(SequOOL(n=T, domain=[[0.0, 1.0]]), garland, T)
    np.testing.assert_array_equal(garland_runs.points[3], points)
    np.testing.assert_array_equal(garland_runs.recommendation[3], last)


@pytest.mark.parametrize("split,horizon", [("random", 300), ("longest", 300), ("random", 13)])
def test_noise_free_himmelblau_evaluates_the_reference_points(himmelblau, split, horizon):
    config = _config(horizon, split=split)
    out = assert_runs_equal_reference(sequool, config, himmelblau, [0, 5],
                                      lambda dims: reference(config, "himmelblau", 2, dims))
    assert (split == "longest") == np.array_equal(out.points[0], out.points[1])    # random partitions differ
    plan = sequool.schedule(horizon)
    if horizon == 300:
        assert len(plan.openings) == 47 and plan.sort_sizes == (2, 4, 8, 16, 32) and plan.sweep_rounds == 236
        assert out.depth[0] == 48 and np.all(out.points[:, 236:] == 0.0)      # the root's centre
    else:
        assert plan.openings == (2, 2, 1, 1) and plan.sweep_rounds == 14
        assert out.nodes[0] == 15 and out.depth[0] == 5      # the last opening's first child, in round 13


def test_noisy_regret_equals_the_reference_statistically(garland):
    """The noisy runs share the noise-free runs' program (the noise scale is data)."""
    config = _config(noise="gaussian:0.1")
    traces = executor.trace_count()
    out, _ = traced_tree_run(sequool, config, garland, np.arange(SEEDS))
    assert executor.trace_count() == traces
    rng = np.random.default_rng(11)
    refs = [reference(config, "garland", 1, noise="gaussian", sigma=0.1, rng=rng) for _ in range(SEEDS)]
    assert_same_distribution(out.final_regret, [r.final_regret for r in refs], "final regret")
    assert out.final_regret.std() > 0
    assert np.all(out.nodes == 161) and np.all(out.depth == 35)        # the schedule ignores the values


@pytest.mark.parametrize("horizon", [1, 2, 3, 5, 10, 13, 200, 2000, 10_000, 20_000])
def test_schedule_equals_the_reference(horizon):
    """Depths and openings per depth: the host's schedule against the reference's, which also cuts
    the last depth at round T (the schedule lists it whole; the run stops at T)."""
    plan = sequool.schedule(horizon)
    expected = reference_sequool.pyxab_schedule(horizon)
    assert plan.h_max == reference_sequool.h_max_of(horizon)
    assert [d for d, _ in expected] == list(range(1, len(plan.openings) + 1))
    assert [k for _, k in expected[:-1]] == list(plan.openings[:-1])
    if expected:
        assert 1 <= expected[-1][1] <= plan.openings[-1]
    if plan.sweep_rounds <= horizon:                  # the whole sweep, every depth to h_max
        assert [k for _, k in expected] == list(plan.openings) and len(expected) == plan.h_max
        assert plan.sweep_rounds == 2 + 2 * sum(plan.openings)


def test_long_run_through_fp_run(garland):
    """T = 10^4: the sweep ends at round 9,690 with the tree 1,022 deep; recorded through fp.run."""
    res = fp.run(_config(10_000, precision="float32", noise="gaussian:0.1"), garland, seeds=4)
    assert sequool.schedule(10_000).sweep_rounds == 9690
    assert np.all(res.depth == 1022) and np.all(res.nodes == 9691)
    assert np.all(res.final_regret > 0) and res.config["capacity"] == 10_002


@pytest.mark.parametrize("field,value", [("split", "middle"), ("precision", "float16"), ("horizon", 0),
                                         ("noise", "poisson"), ("checkpoints", 0)])
def test_invalid_parameters_name_themselves(field, value):
    with pytest.raises(ValueError, match=field):
        sequool.SequOOLConfig(**{field: value})
