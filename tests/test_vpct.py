"""VPCT (fedpne_jax.algorithms.trees.vpct, GPO over VHCT) and POO over VHCT (the base 'vhct' of
fedpne_jax.algorithms.trees.meta) against PyXAB 0.3.0's own VPCT and POO(algo=VHCT): the same
evaluated points and recommendation without noise on Garland (1-D: no random dimension), in float64
(PyXAB's arithmetic); VPCT runs GPO's program; its paper rule equals tests/support/reference_gpo.py
over the steppable VHCT of reference_bases.py on 2-D Himmelblau, and its noisy regret the
reference's in mean and spread."""
import numpy as np
import pytest

from fedpne_jax.algorithms.trees import gpo, poo, vpct
from fedpne_jax.algorithms.trees.rounds import run_split_dims
from fedpne_jax.core import executor
from tests.support import reference_gpo
from tests.support.helpers import assert_same_distribution, pyxab_run, traced_tree_run

T = 300


def _config(cls=vpct.VPCTConfig, horizon=T, **kw):
    return cls(horizon=horizon, checkpoints=10, **{"noise": "gaussian:0", "precision": "float64", **kw})


SEEDS = 40
_PAPER: dict = {}


def _paper_runs(himmelblau):
    """(traced noise-free outputs of seeds 0 .. SEEDS - 1 under the paper's rule, static), once."""
    if not _PAPER:
        _PAPER["runs"] = traced_tree_run(vpct, _config(), himmelblau, np.arange(SEEDS))
    return _PAPER["runs"]


def _reference(static, seed, **kw):
    cfg = _config()
    dims = run_split_dims(executor.seed_key(0, seed), T, static.chunk, 2, "float64")
    return reference_gpo.gpo("himmelblau", 2, T, base="vhct", numax=cfg.numax, rhomax=cfg.rhomax, pyxab=False,
                             split=cfg.split, root_dims=dims[:1], split_dims=dims, checkpoints=cfg.checkpoints, **kw)


@pytest.fixture(scope="module")
def pyxab_rule(garland):
    return traced_tree_run(vpct, _config(pyxab=True), garland, [0])[0]


def test_garland_evaluates_pyxabs_own_vpct_points(garland, pyxab_rule):
    VPCT = pytest.importorskip("PyXAB.algos.VPCT").VPCT
    points, last = pyxab_run(VPCT(rounds=T, domain=[[0.0, 1.0]]), garland, T)
    np.testing.assert_array_equal(pyxab_rule.points[0], points)
    np.testing.assert_array_equal(pyxab_rule.recommendation[0], last)
    assert pyxab_rule.flags[0] == 0


def test_vpct_is_gpo_over_vhct(garland, pyxab_rule):
    """One program: GPO with base='vhct' and the same fields is VPCT's run, bit for bit."""
    traces = executor.trace_count()
    out, _ = traced_tree_run(gpo, _config(gpo.GPOConfig, base="vhct", pyxab=True), garland, [0])
    assert executor.trace_count() == traces
    np.testing.assert_array_equal(out.points, pyxab_rule.points)
    assert vpct.VPCTConfig(horizon=T).resolved()["base"] == "vhct"


def test_paper_rule_evaluates_the_reference_points(himmelblau, pyxab_rule):
    """The paper's rule on 2-D Himmelblau (random split) equals tests/support/reference_gpo.py over its
    steppable VHCT, seed by seed, and evaluates other points than PyXAB's rule."""
    out, static = _paper_runs(himmelblau)
    for seed in (0, 3):
        ref = _reference(static, seed)
        np.testing.assert_array_equal(out.points[seed], ref.points)
        np.testing.assert_array_equal(out.recommendation[seed], ref.recommendation)
        np.testing.assert_allclose(out.curve[seed], ref.curve, rtol=1e-9)
    assert not np.array_equal(out.points[0], out.points[3]) and np.all(out.flags == 0)


def test_garland_poo_over_vhct_evaluates_pyxabs_own_points(garland):
    POO = pytest.importorskip("PyXAB.algos.POO").POO
    VHCT = pytest.importorskip("PyXAB.algos.VHCT").VHCT
    horizon = 1000
    out, _ = traced_tree_run(poo, _config(poo.POOConfig, horizon, base="vhct", pyxab=True), garland, [0])
    points, last = pyxab_run(POO(rounds=horizon, domain=[[0.0, 1.0]], algo=VHCT), garland, horizon)
    np.testing.assert_array_equal(out.points[0], points)
    np.testing.assert_array_equal(out.recommendation[0], last)


def test_noisy_regret_equals_the_reference_statistically(himmelblau):
    """The noise scale is data: the noisy runs share the noise-free runs' program."""
    _, static = _paper_runs(himmelblau)
    traces = executor.trace_count()
    out, _ = traced_tree_run(vpct, _config(noise="gaussian:0.1"), himmelblau, np.arange(SEEDS))
    assert executor.trace_count() == traces
    rng = np.random.default_rng(5)
    # Other seeds' partitions than the engine's: the two samples share no randomness.
    refs = [_reference(static, seed, noise="gaussian", sigma=0.1, rng=rng) for seed in range(SEEDS, 2 * SEEDS)]
    assert_same_distribution(out.final_regret, [r.final_regret for r in refs], "final regret")
    assert out.final_regret.std() > 0 and np.all(out.flags == 0)


@pytest.mark.parametrize("field,value", [("rhomax", 1.5), ("numax", 0.0), ("pyxab", "no"), ("base", "hct")])
def test_invalid_parameters_name_themselves(field, value):
    with pytest.raises((ValueError, TypeError), match=field):
        vpct.VPCTConfig(**{field: value})
