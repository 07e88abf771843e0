"""GPO and PCT (fedpne_jax.algorithms.trees.gpo, pct) against the plain-Python reference
(tests/support/reference_gpo.py) and PyXAB's own GPO and PCT: the same evaluated points and
recommendation without noise, for both bases, under the paper's rule (2-D Himmelblau, random split)
and PyXAB's (Garland); the same regret statistically with noise; N, L and the budget of PyXAB's one
instance against PyXAB's own; invalid parameters are refused.

Every run has T = 300, 10 checkpoints and SEEDS seeds in float64 (PyXAB's arithmetic) under
'gaussian:s' noise (s = 0 for the exact comparisons; the scale is data), so that the file compiles
four programs: the two bases under the paper's rule on Himmelblau and under PyXAB's on Garland (PCT
runs GPO's program over HCT).
"""
from collections import Counter

import numpy as np
import pytest

from fedpne_jax.algorithms.trees import gpo, pct
from fedpne_jax.algorithms.trees.rounds import run_split_dims
from fedpne_jax.core import executor
from tests.support import reference_gpo
from tests.support.helpers import assert_same_distribution, pyxab_run, traced_tree_run

T = 300
SEEDS = 40
_RUNS: dict = {}


def config(base, pyxab=False, sigma=0.0, **fields):
    return gpo.GPOConfig(horizon=T, noise=f"gaussian:{sigma}", checkpoints=10, precision="float64", base=base,
                         pyxab=pyxab, **fields)


def run(module, cfg, objective):
    """(traced outputs of seeds 0 .. SEEDS - 1, static), once per config in this file."""
    key = (cfg, objective.name)
    if key not in _RUNS:
        _RUNS[key] = traced_tree_run(module, cfg, objective, np.arange(SEEDS))
    return _RUNS[key]


def reference(cfg, name, dim, static, seed, **kw):
    key = executor.seed_key(0, seed)
    dims = run_split_dims(key, T, static.chunk, dim, "float64") if dim > 1 else None
    return reference_gpo.gpo(name, dim, T, base=cfg.base_name, numax=cfg.numax, rhomax=cfg.rhomax, pyxab=cfg.pyxab,
                             split=cfg.split, root_dims=None if dims is None else dims[:1], split_dims=dims,
                             checkpoints=cfg.checkpoints, **kw)


def assert_same_run(out, i, ref):
    """Run i evaluates the reference's points and recommends its point, bit for bit, with the last
    instance's tree."""
    np.testing.assert_array_equal(out.points[i], ref.points)
    np.testing.assert_array_equal(out.recommendation[i], ref.recommendation)
    assert (out.nodes[i], out.depth[i], out.flags[i]) == (ref.nodes, ref.depth, 0)
    np.testing.assert_allclose(out.curve[i], ref.curve, rtol=1e-12)


@pytest.mark.parametrize("base", ["hoo", "hct"])
def test_noise_free_himmelblau_evaluates_the_reference_points(himmelblau, base):
    cfg = config(base)
    out, static = run(gpo, cfg, himmelblau)
    for seed in (0, 7):
        assert_same_run(out, seed, reference(cfg, "himmelblau", 2, static, seed))
    assert not np.array_equal(out.points[0], out.points[7])        # the random partitions differ
    assert (static.slots, static.half) == (12, 12)


@pytest.mark.parametrize("base,module,algo", [("hoo", "HOO", "T_HOO"), ("hct", "HCT", "HCT")])
def test_garland_evaluates_pyxabs_own_gpo_points(garland, base, module, algo):
    """PyXAB 0.3.0's GPO over its T_HOO or HCT with its defaults (1-D: no random dimension), and the
    reference's transcription of it, through every kind of round: its one instance, fed again at the
    end of a phase, frozen in the last; the paper's rule evaluates other points."""
    GPO = pytest.importorskip("PyXAB.algos.GPO").GPO
    Base = getattr(pytest.importorskip(f"PyXAB.algos.{module}"), algo)
    cfg = config(base, pyxab=True)
    out, static = run(gpo, cfg, garland)
    points, last = pyxab_run(GPO(rounds=T, domain=[[0.0, 1.0]], algo=Base), garland, T)
    np.testing.assert_array_equal(out.points[0], points)
    np.testing.assert_array_equal(out.recommendation[0], last)
    events: Counter = Counter()
    assert_same_run(out, 0, reference(cfg, "garland", 1, static, 0, events=events))
    unrewarded = events["pulls"] - (events["received"] - events["again"])
    assert (events["again"], unrewarded) == (10, 11)          # N - 2 rewards fed again, L - 1 frozen pulls
    assert events["received"] == gpo.plan(cfg).budgets[0]
    assert not np.array_equal(reference(config(base), "garland", 1, static, 0).points, points)


def test_pct_is_gpo_over_hct_and_pyxabs_pct(garland):
    """PCT runs GPO's compiled program over HCT, and equals PyXAB 0.3.0's PCT."""
    PCT = pytest.importorskip("PyXAB.algos.PCT").PCT
    cfg = pct.PCTConfig(horizon=T, noise="gaussian:0", checkpoints=10, precision="float64", pyxab=True)
    assert pct.make_static(cfg, garland) == gpo.make_static(config("hct", pyxab=True), garland)
    out, _ = run(gpo, config("hct", pyxab=True), garland)
    traces = executor.trace_count()
    mine, _ = traced_tree_run(pct, cfg, garland, np.arange(SEEDS))
    assert executor.trace_count() == traces
    points, last = pyxab_run(PCT(rounds=T, domain=[[0.0, 1.0]]), garland, T)
    np.testing.assert_array_equal(mine.points[0], points)
    np.testing.assert_array_equal(mine.recommendation[0], last)
    assert cfg.resolved()["base"] == "hct" and pct.ALGORITHM.name == "pct"


@pytest.mark.parametrize("base", ["hoo", "hct"])
def test_noisy_regret_equals_the_reference_statistically(himmelblau, base):
    cfg = config(base, sigma=0.1)
    out, static = run(gpo, cfg, himmelblau)
    rng = np.random.default_rng(5)
    # The reference's runs take the partitions of other seeds than the engine's: the two samples share
    # no randomness.
    refs = [reference(cfg, "himmelblau", 2, static, seed, noise="gaussian", sigma=0.1, rng=rng)
            for seed in range(SEEDS, 2 * SEEDS)]
    assert_same_distribution(out.final_regret, [r.final_regret for r in refs], "final regret")
    assert out.final_regret.std() > 0 and np.all(out.flags == 0)
    assert len({tuple(p) for p in out.recommendation}) > 1


def pyxab_gpo(horizon, rhomax):
    """(PyXAB's GPO after ``horizon`` rounds, the rho of every instance it made, the rewards they
    received), over a stand-in base that records them (PyXAB's GPO reads its base's class name)."""
    GPO = pytest.importorskip("PyXAB.algos.GPO").GPO
    rhos, received = [], []

    class HCT:
        def __init__(self, rho, **_):
            rhos.append(rho)

        def pull(self, time):
            return [0.5]

        def receive_reward(self, time, reward):
            received.append(time)

    algo = GPO(rhomax=rhomax, rounds=horizon, domain=[[0.0, 1.0]], algo=HCT)
    for t in range(1, horizon + 1):
        algo.pull(t)
        algo.receive_reward(t, 0.0)
    return algo, rhos, received


@pytest.mark.parametrize("horizon,rhomax", [(20, 0.9), (300, 0.9), (301, 0.9), (1000, 0.5), (4321, 0.8)])
def test_sizes_and_pyxabs_one_instance_are_pyxabs(horizon, rhomax):
    algo, rhos, received = pyxab_gpo(horizon, rhomax)
    plan = gpo.plan(gpo.GPOConfig(horizon=horizon, rhomax=rhomax, pyxab=True, checkpoints=1))
    assert (plan.slots, plan.half) == (algo.N, algo.half_phase_length)
    assert plan.rhos == tuple(rhos) and len(rhos) == 1               # one instance, phase 1's
    assert plan.budgets == (len(received),)
    paper = gpo.plan(gpo.GPOConfig(horizon=horizon, rhomax=rhomax, checkpoints=1))
    assert (paper.slots, paper.half) == (algo.N, algo.half_phase_length) and paper.budgets == (paper.half,) * paper.slots
    assert paper.rhos == tuple(rhomax ** (2 * algo.N / (2 * i + 1)) for i in range(1, paper.slots + 1))


def test_horizons_and_instances_out_of_reach_are_refused():
    with pytest.raises(ValueError, match=r"horizon: GPO's N = 4 instances need a horizon of at least 2N = 8 rounds"):
        gpo.GPOConfig(horizon=5, checkpoints=1)
    with pytest.raises(ValueError, match=r"horizon, rhomax: GPO needs 1 to"):
        gpo.GPOConfig(horizon=2, checkpoints=1)
    with pytest.raises(ValueError, match=r"horizon, rhomax: PyXAB's GPO needs 2 to"):
        gpo.GPOConfig(horizon=T, rhomax=0.3, pyxab=True, checkpoints=1)
    assert gpo.plan(gpo.GPOConfig(horizon=T, rhomax=0.3, checkpoints=1)).slots == 1


@pytest.mark.parametrize("field,value", [
    ("numax", 0.0), ("numax", float("inf")), ("rhomax", 1.0), ("rhomax", -0.5), ("rhomax", "0.9"), ("rhomax", 0.99999),
    ("base", "soo"), ("base", "pct"), ("pyxab", "no"), ("split", "middle"), ("precision", "float16"), ("horizon", 0),
    ("noise", "poisson"), ("checkpoints", 0)])
def test_invalid_parameters_name_themselves(field, value):
    with pytest.raises(ValueError, match=field):
        gpo.GPOConfig(**{field: value})
    if field != "base":
        with pytest.raises(ValueError, match=field):
            pct.PCTConfig(**{field: value})
