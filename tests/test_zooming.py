"""Zooming (fedpne_jax.algorithms.trees.zooming) against the plain Python reference
(tests/support/reference_zooming.py) and PyXAB's own Zooming: the same evaluated points,
recommendation, nodes and depth without noise, in 1-D and 2-D, both splits; the same regret
statistically with noise; runs that outgrow the arm and cell tables are rerun with larger ones and
give the same numbers as a run that started with room.

Noise-free runs use 'gaussian:0' in float64 (PyXAB's arithmetic) with SEEDS seeds, so that the
noisy test runs the same program.
"""
import dataclasses

import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.trees import zooming
from fedpne_jax.core import executor
from tests.support import reference_zooming
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
    return zooming.ZoomingConfig(horizon=horizon, checkpoints=10,
                                 **{"precision": "float64", "noise": "gaussian:0", **kw})


def reference(config, name, dim, split_dims=None, **kw):
    """A split made after round t's reward splits along the dimension drawn in round t (entry 0:
    the root's)."""
    return reference_zooming.zooming(name, dim, config.horizon, nu=config.nu, rho=config.rho, split=config.split,
                                     split_dim_fn=None if split_dims is None else (lambda s, t: int(split_dims[t])),
                                     checkpoints=config.checkpoints, **kw)


@pytest.fixture(scope="module")
def garland_runs(garland):
    return traced_tree_run(zooming, _config(), garland, np.arange(SEEDS))[0]


def test_noise_free_garland_evaluates_the_reference_points(garland_runs):
    ref = reference(_config(), "garland", 1)
    for i in (0, SEEDS - 1):          # one dimension and no noise: every seed is the same run
        assert_same_tree_run(garland_runs, i, ref)
    assert ref.splits > 5 and ref.arms > 4


def test_garland_evaluates_pyxabs_own_zooming_points(garland, garland_runs):
    """PyXAB 0.3.0's Zooming with its defaults (1-D: no random dimension) on the same values."""
    Zooming = pytest.importorskip("PyXAB.algos.Zooming").Zooming
    points, last = pyxab_run(Zooming(domain=[[0.0, 1.0]]), garland, T)
    np.testing.assert_array_equal(garland_runs.points[2], points)
    np.testing.assert_array_equal(garland_runs.recommendation[2], last)


@pytest.mark.parametrize("split", ["random", "longest"])
def test_noise_free_himmelblau_evaluates_the_reference_points(himmelblau, split):
    config = _config(split=split)
    out = assert_runs_equal_reference(zooming, config, himmelblau, [0, 3],
                                      lambda dims: reference(config, "himmelblau", 2, dims))
    assert (split == "longest") == np.array_equal(out.points[0], out.points[1])    # random partitions differ


def test_noisy_regret_equals_the_reference_statistically(garland):
    """The noise scale is data: the noisy runs share the noise-free runs' program."""
    traces = executor.trace_count()
    out, _ = traced_tree_run(zooming, _config(noise="gaussian:0.1"), garland, np.arange(SEEDS))
    assert executor.trace_count() == traces
    rng = np.random.default_rng(7)
    refs = [reference(_config(), "garland", 1, noise="gaussian", sigma=0.1, rng=rng) for _ in range(SEEDS)]
    assert_same_distribution(out.final_regret, [r.final_regret for r in refs], "final regret")
    nodes = [r.nodes for r in refs]
    if np.std(nodes) > 0 or out.nodes.std() > 0:
        assert_same_distribution(out.nodes, nodes, "nodes")
    else:
        assert set(out.nodes.tolist()) == set(nodes)
    assert out.final_regret.std() > 0


def test_outgrown_tables_are_rerun_with_the_same_numbers(garland):
    """nu = 4 makes about 70 arms in 2,000 rounds: more than the first table holds (64 arms) in some
    runs; fp.run grows it, and every run equals a run that started with room for all."""
    config = _config(2000, nu=4.0, precision="float32", noise="gaussian:0.1")
    with pytest.raises(fp.CapacityError, match="rerun with grow=True"):
        fp.run(config, garland, seeds=6, grow=False)
    res = fp.run(config, garland, seeds=6)
    roomy = dataclasses.replace(zooming.make_static(config, garland, zooming.Tables(arms=1024)))
    out, _, _ = executor.execute(zooming.run_single, roomy, zooming.make_params(config), garland, 0, np.arange(6))
    np.testing.assert_array_equal(res.final_regret, out.final_regret)
    np.testing.assert_array_equal(res.curves, out.curve)
    np.testing.assert_array_equal(res.nodes, out.nodes)
    np.testing.assert_array_equal(res.depth, out.depth)


def test_tables_are_bounded_on_the_host():
    """A split at depth h needs n >= 8 / (nu^2 rho^(2h)) - 2 pulls: the bound of splits and depth."""
    assert zooming.bounds(1000, 1.0, 0.9) == (570, 23)
    assert zooming.bounds(1000, 1.0, 0.5) == (41, 4)       # 8 * 4^4 - 2 > 1000: no split at depth 4
    config = _config()
    assert (config.arms, config.capacity, config.height) == (572, 1143, 23)


@pytest.mark.parametrize("field,value", [("nu", 0.0), ("nu", -1.0), ("rho", 1.0), ("rho", 0.0), ("split", "middle"),
                                         ("precision", "float16"), ("horizon", 0), ("noise", "poisson")])
def test_invalid_parameters_name_themselves(field, value):
    with pytest.raises(ValueError, match=field):
        zooming.ZoomingConfig(**{field: value})
