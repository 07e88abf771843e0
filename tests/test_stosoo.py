"""StoSOO (fedpne_jax.algorithms.trees.stosoo) against the plain Python reference
(tests/support/reference_stosoo.py) and PyXAB's own StoSOO: the same evaluated points without noise,
in 1-D and 2-D, for the paper's rule and PyXAB's, both splits; the same regret and depth statistically
with noise; PyXAB's defaults; invalid parameters are refused.

Every run here has T = 300, 10 checkpoints and SEEDS seeds, in float64 (PyXAB's arithmetic), under
'gaussian:s' noise (s = 0 for the exact comparisons), and the noise scale and the rule are data, so
that each objective and split is one program, three in all.  Rastrigin with k = 3 and h_max = 6 goes
through every branch of the rules: leaves below v_max (the paper's), several expansions between two
evaluations (random split dimensions drawn past the round's own), expansions at depth h_max, and
PyXAB's ``pull`` returning None.
"""
from collections import Counter

import numpy as np
import pytest

import objectives
from fedpne_jax.algorithms.trees import stosoo
from fedpne_jax.core import executor
from tests.support import reference_stosoo
from tests.support.helpers import assert_same_distribution, pyxab_run, traced_tree_run

T = 300
SEEDS = 64
_RUNS: dict = {}


@pytest.fixture(scope="module")
def rastrigin():
    return objectives.make_objective("rastrigin", num_clients=1, heterogeneity="none", dim=2)


def config(sigma=0.0, **fields):
    return stosoo.StoSOOConfig(horizon=T, noise=f"gaussian:{sigma}", checkpoints=10, precision="float64", **fields)


def run(config, objective):
    """The traced outputs of SEEDS runs (seeds 0 .. SEEDS - 1), once per config in this file."""
    key = (config, objective.name)
    if key not in _RUNS:
        _RUNS[key] = traced_tree_run(stosoo, config, objective, np.arange(SEEDS))
    return _RUNS[key]


def reference(config, name, dim, seed=0, chunk=None, **kw):
    dims = None
    if config.split == "random" and dim > 1:
        dims = stosoo.run_split_dims(executor.seed_key(0, seed), config.horizon, chunk, dim, config.precision)
    return reference_stosoo.stosoo(name, dim, config.horizon, k=config.k_value, delta=config.delta_value,
                                   h_max=config.h_max, pyxab=config.pyxab, split=config.split, split_dim_fn=dims,
                                   checkpoints=config.checkpoints, **kw)


def assert_same_run(out, i, ref):
    """Run i evaluates the reference's points and recommends its point, bit for bit, with its tree.
    The regret is summed in the same order over the same points; only f may differ in its last bit
    (XLA's sin and cos against NumPy's)."""
    np.testing.assert_array_equal(out.points[i], ref.points)
    np.testing.assert_array_equal(out.recommendation[i], ref.recommendation)
    assert (out.nodes[i], out.depth[i], out.flags[i]) == (ref.nodes, ref.depth, 0)
    np.testing.assert_allclose(out.curve[i], ref.curve, rtol=1e-12)


def test_defaults_are_pyxabs():
    """k = ceil(n / ln(n)^3), delta = 1 / sqrt(n), h_max = 100, and the b-values' log(n k / delta),
    as PyXAB's constructor and ``compute_b_value`` compute them."""
    StoSOO = pytest.importorskip("PyXAB.algos.StoSOO").StoSOO
    for n in (2, 3, 10, 100, 300, 1000, 10 ** 4, 10 ** 5, 10 ** 6):
        ours, theirs = stosoo.StoSOOConfig(horizon=n, checkpoints=1), StoSOO(n=n, domain=[[0.0, 1.0]])
        assert (ours.k_value, ours.delta_value, ours.h_max) == (theirs.k, theirs.delta, theirs.h_max)
        assert ours.log_term == np.log(theirs.n * theirs.k / theirs.delta)
    assert stosoo.StoSOOConfig(horizon=1, checkpoints=1).k_value == 1      # PyXAB divides by ln(1) = 0
    assert stosoo.StoSOOConfig(horizon=T).resolved()["k"] == 2


@pytest.mark.parametrize("pyxab", [False, True])
def test_noise_free_garland_evaluates_the_reference_points(garland, pyxab):
    out, _ = run(config(pyxab=pyxab), garland)
    ref = reference(config(pyxab=pyxab), "garland", 1)
    for i in (0, 7):                  # one dimension and no noise: every seed is the same run
        assert_same_run(out, i, ref)


def test_garland_evaluates_pyxabs_own_stosoo_points(garland):
    """PyXAB 0.3.0's StoSOO with its defaults and BinaryPartition (1-D: no random dimension) on the
    same values; the paper's sweeps evaluate other points."""
    StoSOO = pytest.importorskip("PyXAB.algos.StoSOO").StoSOO
    out, _ = run(config(pyxab=True), garland)
    points, last = pyxab_run(StoSOO(n=T, domain=[[0.0, 1.0]]), garland, T)
    np.testing.assert_array_equal(out.points[0], points)
    np.testing.assert_array_equal(out.recommendation[0], last)
    paper, _ = run(config(), garland)
    assert not np.array_equal(paper.points[0], points)


@pytest.mark.parametrize("pyxab,split,seeds", [(False, "random", (0, 3)), (True, "random", (0, 1)),
                                               (False, "longest", (0,)), (True, "longest", (0,))])
def test_noise_free_rastrigin_evaluates_the_reference_points(rastrigin, pyxab, split, seeds):
    cfg = config(pyxab=pyxab, split=split, k=3, h_max=6)
    out, static = run(cfg, rastrigin)
    events: Counter = Counter()
    for seed in seeds:
        assert_same_run(out, seed, reference(cfg, "rastrigin", 2, seed, static.chunk, events=events))
    assert events["later"] > 0 and events["top"] > 0 and (events["again"] > 0) == pyxab
    if pyxab:
        # PyXAB's v_max never refuses a leaf: it is set by an expansion, and the next depth then
        # holds the new children, at b = +inf.
        assert events["refused"] == 0
    elif split == "random":
        assert events["refused"] > 0
    # Random partitions differ between seeds; the longest sides are the same in every run.
    assert np.array_equal(out.points[0], out.points[1]) == (split == "longest")


@pytest.mark.parametrize("pyxab", [False, True])
def test_noisy_regret_and_depth_equal_the_reference_statistically(garland, pyxab):
    cfg = config(0.1, pyxab=pyxab)
    out, _ = run(cfg, garland)
    rng = np.random.default_rng(11)
    refs = [reference(cfg, "garland", 1, noise="gaussian", sigma=0.1, rng=rng) for _ in range(SEEDS)]
    assert_same_distribution(out.final_regret, [r.final_regret for r in refs], "final regret")
    assert out.final_regret.std() > 0
    depths = [r.depth for r in refs]
    if np.std(depths) > 0 or out.depth.std() > 0:
        assert_same_distribution(out.depth, depths, "depth")
    else:
        assert set(out.depth.tolist()) == set(depths)
    assert np.all(out.nodes <= cfg.capacity) and np.all(out.flags == 0)


def test_k_and_h_max_bound_the_horizon():
    assert stosoo.StoSOOConfig(horizon=93, k=3, h_max=4, checkpoints=9).most_evaluations == 93
    with pytest.raises(ValueError, match=r"horizon: StoSOO with k=3, h_max=4 evaluates at most 93 times, "
                                         r"got horizon=94"):
        stosoo.StoSOOConfig(horizon=94, k=3, h_max=4, checkpoints=8)
    with pytest.raises(ValueError, match=r"horizon: PyXAB's StoSOO with k=1, h_max=4 evaluates at most 31"):
        stosoo.StoSOOConfig(horizon=32, k=1, h_max=4, pyxab=True, checkpoints=8)


@pytest.mark.parametrize("field,value", [
    ("k", 0), ("k", 2.5), ("k", True), ("h_max", -1), ("h_max", 2.5), ("h_max", True), ("delta", 0.0),
    ("delta", 1.5), ("delta", "small"), ("delta", 1e-320), ("pyxab", "yes"), ("pyxab", 1), ("split", "middle"),
    ("precision", "float16"), ("horizon", 0), ("noise", "poisson")])
def test_invalid_parameters_name_themselves(field, value):
    with pytest.raises(ValueError, match=field):
        stosoo.StoSOOConfig(**{field: value})
