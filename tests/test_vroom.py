"""VROOM (fedpne_jax.algorithms.trees.vroom) against the plain Python reference
(tests/support/reference_vroom.py): the same evaluated points, curve, recommendation, nodes and depth
without noise, in 1-D and 2-D, both splits, given each run's random numbers (vroom.draws); the same
regret and depth statistically with noise.  PyXAB's own VROOM: tests/test_pyxab_statistics.py.

Noise-free runs use 'gaussian:0' in float64 (PyXAB's arithmetic), so that the noisy test runs the
same program.
"""
import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.trees import vroom
from fedpne_jax.core import executor
from tests.support import reference_vroom
from tests.support.helpers import assert_same_distribution, traced_tree_run

T = 300
SEEDS = 100


def _config(**kw):
    return vroom.VROOMConfig(horizon=T, checkpoints=10, **{"precision": "float64", "noise": "gaussian:0", **kw})


def reference(config, name, dim, seed, **kw):
    dims, words, uniforms = vroom.draws(executor.seed_key(0, seed), config.horizon, dim, config.split, config.precision)
    return reference_vroom.vroom(name, dim, config.horizon, words, uniforms, split_dims=dims, split=config.split,
                                 h_max=config.h_max, b=config.b, f_max=config.f_max, checkpoints=config.checkpoints,
                                 **kw)


def assert_same_run(out, i, ref):
    """Run i equals the reference run: its points, recommendation, nodes and depth bit for bit; its
    regret to rounding (XLA fuses f* - f(x), f ending in a product, into one FMA: a last-bit
    difference per round)."""
    np.testing.assert_array_equal(out.points[i], ref.points)
    np.testing.assert_array_equal(out.recommendation[i], ref.recommendation)
    assert (int(out.nodes[i]), int(out.depth[i])) == (ref.nodes, ref.depth)
    np.testing.assert_allclose(out.curve[i], ref.curve, rtol=1e-13)


@pytest.fixture(scope="module")
def garland_runs(garland):
    return traced_tree_run(vroom, _config(), garland, np.arange(SEEDS))[0]


def test_noise_free_garland_evaluates_the_reference_points(garland_runs):
    for seed in (0, 7, SEEDS - 1):
        assert_same_run(garland_runs, seed, reference(_config(), "garland", 1, seed))
    # Every round credits one cell per depth from the drawn one down to H: the tree fills from the top.
    H = vroom.levels(T)
    assert (garland_runs.depth == H).all() and (garland_runs.nodes > T).all()
    assert len({tuple(p) for p in garland_runs.points[0]}) == T              # uniform points, never repeated


@pytest.mark.parametrize("split", ["random", "longest"])
def test_noise_free_himmelblau_evaluates_the_reference_points(himmelblau, split):
    config = _config(split=split, h_max=5)
    out, _ = traced_tree_run(vroom, config, himmelblau, [0, 3])
    for i, seed in enumerate([0, 3]):
        assert_same_run(out, i, reference(config, "himmelblau", 2, seed))


def test_noisy_regret_and_depth_equal_the_reference_statistically(garland, garland_runs):
    """The noise scale is data: the noisy runs share the noise-free runs' program (``garland_runs``)."""
    traces = executor.trace_count()
    out, _ = traced_tree_run(vroom, _config(noise="gaussian:0.1"), garland, np.arange(SEEDS))
    assert executor.trace_count() == traces
    rng = np.random.default_rng(11)
    refs = [reference(_config(), "garland", 1, seed + 1000, noise="gaussian", sigma=0.1, rng=rng)
            for seed in range(SEEDS)]
    assert_same_distribution(out.final_regret, [r.final_regret for r in refs], "final regret")
    assert_same_distribution(out.nodes, [r.nodes for r in refs], "nodes")


def test_the_draw_follows_the_rank_probabilities():
    """Cell (h, rank l) is drawn with probability 1 / (h l K): the thresholds' gaps, and the draws of many
    rounds, against the formula."""
    H = 6
    high, low = vroom.thresholds(H)
    limits = (high.astype(np.float64) * 2.0 ** 32 + low) / 2.0 ** 64
    gaps = np.diff(np.concatenate([[0.0], limits]))
    slots = np.arange(2, 2 ** (H + 1))
    h = np.floor(np.log2(slots))
    l = slots - 2 ** h + 1
    K = sum(1 / (d * r) for d in range(1, H + 1) for r in range(1, 2 ** d + 1))
    np.testing.assert_allclose(gaps, 1 / (h * l * K), rtol=1e-9, atol=1e-15)
    _, words, _ = vroom.draws(executor.seed_key(0, 0), 40_000 - 1, 1)
    w = (words[:, 0].astype(np.float64) * 2.0 ** 32 + words[:, 1]) / 2.0 ** 64
    drawn = np.minimum(np.searchsorted(limits, w, side="right"), len(limits) - 1)
    depth = np.floor(np.log2(drawn + 2)).astype(int)
    expected = np.array([sum(1 / (d * r * K) for r in range(1, 2 ** d + 1)) for d in range(1, H + 1)])
    observed = np.bincount(depth, minlength=H + 1)[1:] / w.size
    se = np.sqrt(expected * (1 - expected) / w.size)
    assert (np.abs(observed - expected) < 4 * se).all(), (observed, expected)


def test_through_fp_run_with_the_default_precision(garland):
    res = fp.run(fp.make_config("vroom", horizon=64, checkpoints=8, b=2.0, f_max=1.5), garland, seeds=3)
    assert res.capacity == 2 ** 7 - 1 and res.config["ranked_depth"] == 6
    assert (res.depth == 6).all() and np.isfinite(res.final_regret).all()
    assert ((res.recommendation >= 0) & (res.recommendation <= 1)).all()


@pytest.mark.parametrize("field,value,match", [("horizon", 1, r"horizon \(T\): VROOM ranks"), ("h_max", 0, "h_max"),
                                               ("b", 0.0, "^b "), ("f_max", -1.0, "f_max")])
def test_bad_parameters_are_refused(field, value, match):
    with pytest.raises(ValueError, match=match):
        vroom.VROOMConfig(**{"checkpoints": 1, field: value})
