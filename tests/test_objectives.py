"""Built-in objectives against independent NumPy formulas, and the heterogeneity contract."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import objectives
from tests.support import reference

POINTS = {
    1: np.array([[0.0], [0.1], [0.37], [0.5], [math.pi / 6], [0.93], [1.0]]),
    2: np.array([[0.0, 0.0], [0.3, -0.7], [3.0, 2.0], [-2.805118, 3.131312], [0.9, 0.9], [-1.0, 1.0]]),
}


@pytest.mark.parametrize("name", sorted(objectives.REGISTRY))
def test_values_match_numpy(name):
    spec = objectives.REGISTRY[name]
    D = spec.default_dim
    obj = objectives.make_objective(name, 1, heterogeneity="none")
    lo, hi = spec.lo, spec.hi
    x = lo + (POINTS[D] - POINTS[D].min()) / (POINTS[D].max() - POINTS[D].min()) * (hi - lo)
    if name == "himmelblau":
        x = POINTS[2]
    with jax.enable_x64(True):
        got = np.asarray(objectives.make_objective(name, 1, heterogeneity="none").value(jnp.asarray(x)))
    want = reference.FUNCTIONS[name][0](x)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # float32: away from Garland's cusp at pi/6, where rounding x to float32 moves sqrt|sin 60x| by 1e-3.
    smooth = np.abs(x[:, 0] - math.pi / 6) > 1e-3 if name == "garland" else slice(None)
    np.testing.assert_allclose(np.asarray(obj.value(x))[smooth], want[smooth], rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", sorted(objectives.REGISTRY))
def test_f_star_is_the_supremum(name):
    spec = objectives.REGISTRY[name]
    D = spec.default_dim
    grid = np.stack(np.meshgrid(*[np.linspace(spec.lo, spec.hi, 2001 if D == 1 else 301)] * D), -1).reshape(-1, D)
    argmax = {"garland": [math.pi / 6], "doublesine": [0.5], "himmelblau": [3.0, 2.0]}.get(name, [0.0] * D)
    values = reference.FUNCTIONS[name][0](np.vstack([grid, argmax]))
    assert values[:-1].max() <= spec.f_star + 1e-12
    assert spec.f_star - 1e-7 <= values[-1] <= spec.f_star + 1e-12


def test_garland_optimum_is_at_pi_over_6():
    x = math.pi / 6
    f_star = objectives.REGISTRY["garland"].f_star
    assert f_star == pytest.approx(4 * x * (1 - x), abs=1e-15) == pytest.approx(0.9977724, abs=1e-7)
    # At the cusp sqrt|sin 60x| turns the float64 rounding of sin(10 pi) (~1e-15) into ~3e-8.
    g = reference.FUNCTIONS["garland"][0]
    assert f_star - 1e-7 < g(np.array([[x]]))[0] <= f_star
    assert g(np.array([[x - 1e-4], [x + 1e-4]])).max() < f_star - 1e-3


def test_shift_heterogeneity_keeps_the_global_objective():
    obj = objectives.make_objective("doublesine", 7, heterogeneity="shift", seed=3)
    shifts = np.asarray(obj.data["shift"], np.float64)
    assert abs(shifts.sum()) < 1e-5
    assert shifts.std() > 0.3                             # clients really differ
    x = jnp.linspace(0.0, 1.0, 11)[:, None]
    local = np.asarray(obj.local_values(x))
    assert local.shape == (11, 7)
    np.testing.assert_allclose(local.mean(axis=1), np.asarray(obj.value(x)), atol=1e-6)
    np.testing.assert_allclose(local - np.asarray(obj.value(x))[:, None], np.broadcast_to(shifts, (11, 7)),
                               atol=1e-6)
    same = objectives.make_objective("doublesine", 7, heterogeneity="shift", seed=3)
    np.testing.assert_array_equal(np.asarray(same.data["shift"]), shifts)
    other = objectives.make_objective("doublesine", 7, heterogeneity="shift", seed=4)
    assert not np.allclose(np.asarray(other.data["shift"]), shifts)


def test_dimension_of_ackley_and_rastrigin():
    for name in ("ackley", "rastrigin"):
        obj = objectives.make_objective(name, 2, dim=5)
        assert obj.dim == 5 and obj.lo == (-1.0,) * 5
        assert float(obj.value(jnp.zeros(5))) == 0.0



def test_an_objective_is_traced_once_however_many_sites_call_it():
    import fedpne_jax as fp

    traced = []

    def f(data, x, m=None):
        traced.append(1)
        return jnp.sum(jnp.sin(3 * x)) * data

    obj = objectives.Objective("counted", (0.0, 0.0), (1.0, 1.0), 2.0, 1, f, f, jnp.float32(1.0))
    traced.clear()
    # HCT evaluates the objective at three sites: the pull, the recommendation at a checkpoint and
    # the first point (the regret before any pull).
    res = fp.run(fp.make_config("hct", horizon=64, checkpoints=4), obj, seeds=3)
    assert len(traced) == 1
    x = np.asarray(res.metrics["recommendation"], np.float64)
    np.testing.assert_allclose(np.asarray(res.metrics["simple_curve"])[:, -1], 2.0 - np.sin(3 * x).sum(-1),
                               rtol=1e-5)
