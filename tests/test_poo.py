"""POO (fedpne_jax.algorithms.trees.poo) against the plain-Python reference (tests/support/reference_poo.py)
and PyXAB's own POO: the same evaluated points and recommendation without noise, for both bases,
under the paper's rule (2-D Himmelblau, random split) and PyXAB's (Garland); the same regret
statistically with noise; the host schedules against the reference's loop and PyXAB's own state;
invalid parameters are refused.

Every run has T = 300, rhomax = 0.95, 10 checkpoints and SEEDS seeds in float64 (PyXAB's
arithmetic) under 'gaussian:s' noise (s = 0 for the exact comparisons; the scale is data), so that
the file compiles three programs: the two bases under the paper's rule on Himmelblau and HCT under
PyXAB's rule on Garland (PyXAB's rule over T-HOO is checked through the reference, which equals
PyXAB's own POO, and the paper-rule programs run T-HOO).  The schedules are checked on the host
over longer horizons; the program's lookup of them is what the point-for-point runs exercise.
"""
from collections import Counter

import numpy as np
import pytest

from fedpne_jax.algorithms.trees import meta, poo
from fedpne_jax.algorithms.trees.rounds import run_split_dims
from fedpne_jax.core import executor
from tests.support import reference_poo
from tests.support.helpers import assert_same_distribution, pyxab_run, traced_tree_run

T = 300
SEEDS = 40
RHOMAX = 0.95           # 32 instances of about 10 evaluations: shallow trees, quicker programs
_RUNS: dict = {}


def config(base, pyxab=False, sigma=0.0, rhomax=RHOMAX):
    return poo.POOConfig(horizon=T, noise=f"gaussian:{sigma}", checkpoints=10, precision="float64", base=base,
                         pyxab=pyxab, rhomax=rhomax)


def run(cfg, objective):
    """(traced outputs of seeds 0 .. SEEDS - 1, static), once per config in this file."""
    key = (cfg, objective.name)
    if key not in _RUNS:
        _RUNS[key] = traced_tree_run(poo, cfg, objective, np.arange(SEEDS))
    return _RUNS[key]


def reference(cfg, name, dim, static, seed, **kw):
    key = executor.seed_key(0, seed)
    dims = dict(root_dims=poo.root_dims(key, static.instances, dim),
                split_dims=run_split_dims(key, T, static.chunk, dim, "float64")) if dim > 1 else {}
    return reference_poo.poo(name, dim, T, base=cfg.base, numax=cfg.numax, rhomax=cfg.rhomax, pyxab=cfg.pyxab,
                             split=cfg.split, u=poo.recommendation_uniform(key, static), instances=static.instances,
                             checkpoints=cfg.checkpoints, **dims, **kw)


def assert_same_run(out, i, ref):
    """Run i evaluates the reference's points and recommends its point, bit for bit, with its trees
    (rows of every instance, deepest node)."""
    np.testing.assert_array_equal(out.points[i], ref.points)
    np.testing.assert_array_equal(out.recommendation[i], ref.recommendation)
    assert (out.nodes[i], out.depth[i], out.flags[i]) == (ref.nodes, ref.depth, 0)
    np.testing.assert_allclose(out.curve[i], ref.curve, rtol=1e-12)


def instances_of_rounds(plan, horizon):
    """The instance each round 1..T evaluates, read from the plan's segments as the program reads
    them (a creation segment runs its instances one after the other, a round robin cycles)."""
    starts = np.array([s.start for s in plan.segments])
    t = np.arange(1, horizon + 1)
    seg = np.array(plan.segments)[np.searchsorted(starts, t, side="right") - 1]
    off = t - seg[:, 0]
    return np.where(seg[:, 3] > 0, off % np.maximum(seg[:, 3], 1), seg[:, 1] + off // np.maximum(seg[:, 2], 1))


@pytest.mark.parametrize("base", ["hoo", "hct"])
def test_noise_free_himmelblau_evaluates_the_reference_points(himmelblau, base):
    cfg = config(base)
    out, static = run(cfg, himmelblau)
    for seed in (0, 7):
        assert_same_run(out, seed, reference(cfg, "himmelblau", 2, static, seed))
    assert not np.array_equal(out.points[0], out.points[7])        # the random partitions differ
    assert static.instances == 32


def test_garland_evaluates_pyxabs_own_poo_points(garland):
    """PyXAB 0.3.0's POO over its HCT (1-D: no random dimension), and the reference's transcription
    of it; the paper's loop evaluates other points."""
    POO = pytest.importorskip("PyXAB.algos.POO").POO
    HCT = pytest.importorskip("PyXAB.algos.HCT").HCT
    cfg = config("hct", pyxab=True)
    out, static = run(cfg, garland)
    points, last = pyxab_run(POO(rhomax=RHOMAX, rounds=T, domain=[[0.0, 1.0]], algo=HCT), garland, T)
    np.testing.assert_array_equal(out.points[0], points)
    np.testing.assert_array_equal(out.recommendation[0], last)
    events: Counter = Counter()
    assert_same_run(out, 0, reference(cfg, "garland", 1, static, 0, events=events))
    assert events["regrown"] > 0                        # PyXAB's HCT re-expansion was exercised
    assert not np.array_equal(reference(config("hct"), "garland", 1, static, 0).points, points)


def test_the_reference_over_t_hoo_is_pyxabs_own_poo(garland):
    """Over T-HOO (the program above covers PyXAB's rule, the paper-rule programs T-HOO in JAX)."""
    POO = pytest.importorskip("PyXAB.algos.POO").POO
    T_HOO = pytest.importorskip("PyXAB.algos.HOO").T_HOO
    points, last = pyxab_run(POO(rounds=T, domain=[[0.0, 1.0]], algo=T_HOO), garland, T)
    ref = reference_poo.poo("garland", 1, T, base="hoo", pyxab=True, rhomax=0.9)
    np.testing.assert_array_equal(ref.points, points)
    np.testing.assert_array_equal(ref.recommendation, last)


@pytest.mark.parametrize("base", ["hoo", "hct"])
def test_noisy_regret_equals_the_reference_statistically(himmelblau, base):
    cfg = config(base, sigma=0.1)
    out, static = run(cfg, himmelblau)
    rng = np.random.default_rng(3)
    # The reference's runs take the partitions of other seeds than the engine's: the two samples share
    # no randomness.
    refs = [reference(cfg, "himmelblau", 2, static, seed, noise="gaussian", sigma=0.1, rng=rng)
            for seed in range(SEEDS, 2 * SEEDS)]
    assert_same_distribution(out.final_regret, [r.final_regret for r in refs], "final regret")
    assert out.final_regret.std() > 0 and np.all(out.flags == 0)
    assert len({tuple(p) for p in out.recommendation}) > 1


@pytest.mark.parametrize("horizon,rhomax", [(1, 0.9), (2, 0.9), (7, 0.5), (300, 0.9), (2000, 0.6), (5000, 0.97)])
def test_the_paper_schedule_is_the_reference_loop(horizon, rhomax):
    """Round by round, the instance of Algorithm 1's loop, the rho of each instance and their budgets."""
    cfg = poo.POOConfig(horizon=horizon, rhomax=rhomax, checkpoints=1)
    order, rhos = reference_poo.paper_order(horizon, rhomax)
    plan = poo.plan(cfg)
    np.testing.assert_array_equal(instances_of_rounds(plan, horizon), order)
    assert plan.rhos[:plan.started] == tuple(rhos) and plan.started == len(rhos)
    assert list(plan.budgets[:plan.started]) == np.bincount(order).tolist()
    assert len(plan.rhos) == max(2, len(rhos))


def pyxab_order(horizon, rhomax):
    """(the instance each round pulls, every instance's rho) of PyXAB's POO itself, over a stand-in
    base that records them (PyXAB's POO reads its base's class name)."""
    POO = pytest.importorskip("PyXAB.algos.POO").POO
    order, rhos = [], []

    class HCT:
        def __init__(self, rho, **_):
            self.index = len(rhos)
            rhos.append(rho)

        def pull(self, time):
            order.append(self.index)
            return [0.5]

        def receive_reward(self, time, reward):
            pass

    algo = POO(rhomax=rhomax, rounds=horizon, domain=[[0.0, 1.0]], algo=HCT)
    for t in range(1, horizon + 1):
        algo.pull(t)
        algo.receive_reward(t, 0.0)
    return order, rhos


@pytest.mark.parametrize("horizon,rhomax", [(1, 0.9), (3, 0.9), (300, 0.9), (3000, 0.85), (5000, 0.97)])
def test_the_pyxab_schedule_is_pyxabs(horizon, rhomax):
    cfg = poo.POOConfig(horizon=horizon, rhomax=rhomax, pyxab=True, checkpoints=1)
    order, rhos = pyxab_order(horizon, rhomax)
    plan = poo.plan(cfg)
    np.testing.assert_array_equal(instances_of_rounds(plan, horizon), order)
    assert plan.rhos[:plan.started] == tuple(rhos)
    assert list(plan.budgets[:plan.started]) == np.bincount(order).tolist()


def test_instances_are_sized_by_their_own_budgets():
    """T-HOO's n is an instance's own budget (the paper) or T (PyXAB); every table holds the largest
    instance, at most 3 + 2u rows for u evaluations."""
    paper, pyxab = poo.plan(config("hoo", rhomax=0.9)), poo.plan(config("hoo", pyxab=True, rhomax=0.9))
    assert [c.horizon for c in paper.configs] == list(paper.budgets)
    assert {c.horizon for c in pyxab.configs} == {T}
    assert config("hoo", pyxab=True, rhomax=0.9).capacity == max(min(c.capacity, 3 + 2 * u)
                                                    for c, u in zip(pyxab.configs, pyxab.budgets))
    assert config("hct", rhomax=0.9).resolved()["instances"] == 16


def test_pyxab_rule_needs_an_instance_before_its_round_robin():
    with pytest.raises(ValueError, match=r"rhomax: PyXAB's POO starts its round robin before any instance"):
        poo.POOConfig(rhomax=0.8, pyxab=True, checkpoints=1)
    poo.POOConfig(rhomax=0.8, checkpoints=1)                      # the paper's loop starts with rhomax


@pytest.mark.parametrize("field,value", [
    ("numax", 0.0), ("numax", float("nan")), ("numax", "1"), ("rhomax", 1.0), ("rhomax", 0.0), ("rhomax", 1.5),
    ("rhomax", 0.9999), ("base", "doo"), ("base", "poo"), ("pyxab", "yes"), ("pyxab", 1), ("split", "middle"),
    ("precision", "float16"), ("horizon", 0), ("noise", "poisson"), ("checkpoints", 0)])
def test_invalid_parameters_name_themselves(field, value):
    with pytest.raises(ValueError, match=field):
        poo.POOConfig(**{field: value})


def test_bases_are_registered_trees():
    assert {"hct", "hoo"} <= set(meta.BASES)
    with pytest.raises(ValueError, match="numax"):          # the base's own refusal, under the meta field
        poo.POOConfig(base="hct", numax=1e-17, checkpoints=1)
