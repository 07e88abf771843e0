"""Fed1-UCB: noise-free runs equal the NumPy reference (tests/support/reference_fed1ucb.py) round by round,
noisy runs (Gaussian: exact mean sampling; uniform: every pull) agree with it in distribution
(two-sample z tests over 200 seeds, |z| < 4), a seed alone equals the same seed in a batch, regret
per round falls on Garland, and bad input is refused."""
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.arms import arm_grid as arms
from fedpne_jax.algorithms.arms.fed1ucb import ALGORITHM, Fed1UCBConfig
from fedpne_jax.core import checkpoints, executor
from fedpne_jax.core.errors import FLAG_NONFINITE, FLAG_RANGE, ObjectiveError
from tests.support import reference
from tests.support import reference_fed1ucb as ref
from tests.support.helpers import assert_same_distribution, make, reference_problem, target_hits

M = 3
# One compiled program serves the exact, noisy, alone and error tests: T, the noise scale and sigma are
# data; "gaussian:0" is noise-free.
NOISY = Fed1UCBConfig(num_clients=M, horizon=2000, noise="gaussian:0.5", arms=20, checkpoints=600)
EXACT = NOISY.replace(horizon=600, noise="gaussian:0", sigma=0.02)
SEEDS = 200


def engine(config, objective, seeds, base_seed=0):
    """All of run_single's outputs (also ``eliminated``, which RunResult does not carry)."""
    static, params = ALGORITHM.make_static(config, objective), ALGORITHM.make_params(config)
    out, _, _ = executor.execute(ALGORITHM.run_single, static, params, objective, base_seed, np.asarray(seeds))
    return out


def reference_run(config, objective, offsets=None, rng=None):
    prob = reference_problem(objective)
    if offsets is None:
        offsets = rng.random(objective.dim)
    k = arms.per_dim(config.arms, objective.dim)
    points = ref.grid(offsets, prob.lo, prob.hi, k)
    noise, scale = reference.parse_noise(config.noise)
    # sigma as the user set it (None: the reference's own default from the noise)
    return ref.fed1ucb(prob.f, prob.local, points, prob.f_star, config.horizon, config.num_clients, config.kappa,
                       config.sigma, noise=noise, noise_scale=scale, checkpoints=config.checkpoints, rng=rng)


def offsets_of(seed, dim, base_seed=0):
    return np.asarray(arms.start_offsets(executor.seed_key(base_seed, seed), dim), np.float64)


@pytest.fixture(scope="module")
def garland():
    return make("garland", M)


@pytest.fixture(scope="module")
def noisy(garland):
    return fp.run(NOISY, garland, seeds=SEEDS)


def test_grid_matches_reference():
    """Random start in the first cell, then linspace(lo + w, hi, K - 1); first coordinate slowest."""
    u = np.array([0.3, 0.9])
    got = np.asarray(jax.jit(arms.grid, static_argnums=(1, 2, 3))(jnp.asarray(u, jnp.float32), (0.0, -5.0), (1.0, 5.0), 5))
    want = ref.grid(u, [0.0, -5.0], [1.0, 5.0], 5)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    assert want[0].tolist() == pytest.approx([0.06, -3.2]) and want[1].tolist() == pytest.approx([0.06, -3.0])
    assert arms.default_per_dim(1) == 100 and arms.default_per_dim(2) == 10 and arms.default_per_dim(3) == 4


@pytest.mark.parametrize("horizon", [600, 3000, 170])
def test_noise_free_equals_reference(garland, horizon):
    """Same arms pulled in every round (T = 600, a checkpoint per round), same eliminations, phases,
    uploads, recommendation, best-so-far regret and target rounds.  T = 3000 commits to one arm, T = 170 cuts the second phase (T is data:
    600 and 3000 share one compiled program; 170 has a checkpoint per round too, as C <= T)."""
    config = EXACT.replace(horizon=horizon, checkpoints=min(EXACT.checkpoints, horizon))
    out = engine(config, garland, np.arange(SEEDS))
    seeds = np.arange(4)
    prob = reference_problem(garland)
    checks = config.checkpoint_rounds
    for i, seed in enumerate(seeds):
        r = reference_run(config, garland, offsets_of(seed, 1))
        k = arms.per_dim(config.arms, 1)
        gaps = prob.f_star - prob.f(ref.grid(offsets_of(seed, 1), prob.lo, prob.hi, k))
        cum = np.cumsum(gaps[r.pulled])
        np.testing.assert_allclose(out.curve[i], cum[checks - 1], rtol=2e-5, atol=2e-5)
        best = np.minimum.accumulate(gaps[r.pulled])            # best-so-far regret and its target rounds
        np.testing.assert_allclose(out.best_curve[i], best[checks - 1], rtol=1e-5, atol=1e-6)
        hits, near = target_hits(best, out.target_scale[i] * 10.0 ** checkpoints.TARGET_EXPONENTS)
        np.testing.assert_array_equal(out.hits[i][~near], hits[~near])
        if horizon == config.checkpoints:        # a checkpoint every round: the regret of every pull
            np.testing.assert_allclose(np.diff(out.curve[i], prepend=0.0), gaps[r.pulled], rtol=0, atol=1e-4)
        np.testing.assert_array_equal(out.eliminated[i], r.eliminated)
        assert (out.phases[i], out.uploads[i], out.arms_left[i]) == (r.phases, r.uploads, r.arms_left)
        np.testing.assert_allclose(out.recommendation[i], r.recommendation, atol=1e-6)
        assert out.final_regret[i] == pytest.approx(r.final_regret, rel=2e-5)
    if horizon == 170:   # the run ends in a cut phase
        assert (out.arms_left[seeds] > 1).all()
    else:                # eliminations over many phases; at T = 3000 down to one arm before T
        assert (out.phases[seeds] > 20).all() and len(np.unique(out.eliminated[seeds])) > 4
        assert (out.arms_left[seeds] == 1).all() == (horizon == 3000)


def test_gaussian_noise_matches_reference(garland, noisy):
    rng = np.random.default_rng(2024)
    refs = [reference_run(NOISY, garland, rng=rng) for _ in range(SEEDS)]
    assert noisy.final_regret.std() > 1.0
    assert_same_distribution(noisy.final_regret, [r.final_regret for r in refs], "final regret")
    assert_same_distribution(noisy.phases, [r.phases for r in refs], "phases")
    assert_same_distribution(noisy.arms_left, [r.arms_left for r in refs], "arms_left")
    assert_same_distribution(noisy.uploads, [r.uploads for r in refs], "uploads")


def test_uniform_noise_matches_reference(garland):
    """Uniform noise draws every pull (per active arm); sigma = a / sqrt(3)."""
    config = NOISY.replace(noise="uniform:0.8")
    assert config.sigma_value == pytest.approx(0.8 / math.sqrt(3)) == ref.subgaussian_scale("uniform", 0.8)
    res = fp.run(config, garland, seeds=SEEDS)
    rng = np.random.default_rng(7)
    refs = [reference_run(config, garland, rng=rng) for _ in range(SEEDS)]
    assert_same_distribution(res.final_regret, [r.final_regret for r in refs], "final regret")
    assert_same_distribution(res.phases, [r.phases for r in refs], "phases")


def test_regret_sublinear_on_garland(noisy):
    """(A seed alone equals the same seed in a batch: tests/test_contract.py.)"""
    assert len(set(noisy.final_regret.tolist())) > SEEDS // 2
    per_round = noisy.regret_mean / noisy.checkpoints
    assert per_round[-1] < 0.6 * per_round[119]        # R(T)/T well below R(T/5)/(T/5)
    assert np.all(np.diff(per_round[119::60]) < 0)       # and keeps falling


def test_registry_and_json(garland, tmp_path):
    res = fp.run(NOISY.replace(horizon=300, checkpoints=300), garland, seeds=[5])
    assert res.algorithm == "fed1ucb" and res.recommendation.shape == (1, 1)
    assert res.config["pulls_per_phase"] == math.ceil(math.log(300)) and res.config["sigma"] == 0.5
    res.write_json(tmp_path / "r.json")
    assert "Fed1-UCB" in res.summary()


@pytest.mark.parametrize("field, value", [
    ("num_clients", 0), ("num_clients", 2.5), ("arms", 0), ("arms", True), ("arms", 2**17), ("kappa", 0.0),
    ("kappa", float("nan")), ("kappa", 1e9), ("sigma", -1.0), ("sigma", float("inf")), ("horizon", 0),
    ("noise", "laplace:1"), ("noise", "gaussian:1e30"), ("checkpoints", 0)])
def test_bad_parameters_are_refused(field, value):
    with pytest.raises(ValueError, match=field.split("_")[0]):
        Fed1UCBConfig(**{field: value})


def test_bad_combinations_are_refused(garland):
    with pytest.raises(ValueError, match="num_clients"):
        fp.run(NOISY.replace(num_clients=4), garland)
    with pytest.raises(ValueError, match="arms"):     # 100^2 grid points in D = 2 is fine; 300^2 is not
        fp.run(NOISY.replace(arms=300), make("himmelblau", M, dim=2))
    with pytest.raises(ValueError, match="bernoulli"):
        fp.run(NOISY.replace(noise="bernoulli"), make("himmelblau", M, dim=2))
    with pytest.raises(ValueError, match="config"):
        fp.run(object(), garland)


def test_objective_errors(garland):
    """NaN at an arm that is pulled raises ObjectiveError naming the objective (the NaN comes in as
    objective data: the same compiled program)."""
    shift = np.asarray(garland.data["shift"]).copy()
    shift[1] = np.nan
    bad = dataclasses.replace(garland, data={"shift": jnp.asarray(shift)})
    with pytest.raises(ObjectiveError, match="garland.*NaN"):
        fp.run(NOISY.replace(horizon=300, checkpoints=300), bad, seeds=[0])


def test_flags_of_pulled_arms_only():
    """Bernoulli rewards refuse values outside [0, 1]; only arms that were pulled count."""
    values = jnp.array([0.5, 2.0, jnp.nan])
    local = jnp.array([[0.5, 0.4], [0.5, -0.1], [0.5, 0.5]])
    pulled = jnp.array([[True, False, False], [True, True, False], [False, False, True]])
    flags = jax.jit(lambda v, l, p: jnp.stack([arms.flags("bernoulli", v, l, p[0]), arms.flags("bernoulli", v, l, p[1]),
                                               arms.flags("gaussian", v, l, p[1]), arms.flags("gaussian", v, l, p[2])]))
    assert np.asarray(flags(values, local, pulled)).tolist() == [0, FLAG_RANGE, 0, FLAG_NONFINITE]
