"""KernelTS, GP-UCB, BO and BBO against the NumPy references of tests/support/reference_gp.py (fresh matrix
inverse every round), reproducibility, sublinear regret and input validation.

Each algorithm compiles two programs (a batch of SEEDS and a single seed); horizon and noise scale
are data, so the noise-free T = 40 runs, the noisy T = 40 runs and the T = 300 runs share them.
"""
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax.algorithms.gp import bbo, bo, gp, gpucb, kernels, kernelts
from fedpne_jax.core import executor
from fedpne_jax.core.errors import ObjectiveError
from tests.support import reference, reference_gp
from tests.support.helpers import assert_same_distribution

T_EXACT = 40
T_RUN = 300
SEEDS = 24
M = 3
COMMON = dict(horizon=T_RUN, checkpoints=T_EXACT, trace=T_EXACT, noise="gaussian:0.1")
CONFIGS = {
    "gpucb": gpucb.GPUCBConfig(**COMMON),
    "kernelts": kernelts.KernelTSConfig(**COMMON),
    "bo": bo.BOConfig(**COMMON),
    # A regular mesh gives exact ties between mirror-image candidates in BBO's first (feedback-free)
    # round, broken by rounding differently in float32 and float64: random candidates have none.
    "bbo": bbo.BBOConfig(num_clients=M, candidates="random", **COMMON),
}
MODULES = {"gpucb": gpucb, "kernelts": kernelts, "bo": bo, "bbo": bbo}
NAMES = tuple(CONFIGS)


def _objective(name):
    return objectives.make_objective("garland", M if name == "bbo" else 1)


def _run(name, seeds, **changes):
    return fp.run(CONFIGS[name].replace(**changes), _objective(name),
                         seeds=seeds)


@pytest.fixture(scope="module")
def runs():
    """Per algorithm: noise-free T = 40, noisy T = 300 (and, on demand, noisy T = 40) batches."""
    return {name: {"exact": _run(name, SEEDS, horizon=T_EXACT, noise="gaussian:0.0"), "noisy": _run(name, SEEDS)}
            for name in NAMES}


def _instance(name, seed):
    """The run's unit-box candidates, its points, and its per-round draws (KernelTS: the standard
    normals, BO: the initial indices), rebuilt from the run's key by the reference's NumPy Threefry
    (no compiled program needed; a wrong rebuild would fail the sequence tests below)."""
    objective = _objective(name)
    static = MODULES[name].ALGORITHM.make_static(CONFIGS[name], objective)
    K, n_noise = static.num_candidates, gp.noise_words(static.batch)
    key = reference_gp.seed_key(0, seed)
    unit = reference_gp.unit_candidates(static.candidates, K, static.dim, static.per_dim, key)
    lo, hi = np.asarray(objective.lo), np.asarray(objective.hi)
    points = lo + (hi - lo) * unit.astype(np.float64)
    draws = {"kernelts": lambda t: reference_gp.standard_normal(
                 reference_gp.unit_floats(reference_gp.words(key, t, n_noise + K)[n_noise:])),
             "bo": lambda t: int(reference_gp.words(key, t, n_noise + 1)[n_noise] % K)}.get(name)
    return unit.astype(np.float64), points, draws


def _reference(name, seed, T, noise_sd=0.0, rng=None, rounds=None):
    """The reference run of seed ``seed`` with horizon T (which sets lam), simulated for ``rounds``
    rounds (default T).  lam and R are the reference's own defaults (test_defaults_are_the_references
    checks the package's against them)."""
    unit, points, draws = _instance(name, seed)
    objective = _objective(name)
    f = reference.garland(points)
    f_star = objective.f_star
    lam = reference_gp.default_lam(T * (M if name == "bbo" else 1))
    T = T if rounds is None else rounds
    if name == "gpucb":
        return reference_gp.gpucb(unit, f, f_star, T, lam=lam, noise_sd=noise_sd, rng=rng)
    if name == "kernelts":
        return reference_gp.kernelts(unit, f, f_star, T, draws, noise_sd=noise_sd, rng=rng)
    if name == "bo":
        return reference_gp.bo(unit, f, f_star, T, draws, noise_sd=noise_sd, rng=rng)
    local = f[:, None] + np.asarray(objective.data["shift"], np.float64)[None, :]
    return reference_gp.bbo(unit, f, local, f_star, T, lam=lam, noise_sd=noise_sd, rng=rng)


@pytest.mark.parametrize("name", ["gpucb", "bbo"])
def test_defaults_are_the_references(name):
    """The package's derived lam and R equal the reference's (IGP-UCB's lam = 1 + 2 / T over the run's
    observations, R the Gaussian noise's sd)."""
    config = CONFIGS[name].replace(noise="gaussian:0.3")
    assert config.lam_value == pytest.approx(reference_gp.default_lam(T_RUN * (M if name == "bbo" else 1)))
    assert config.R_value == pytest.approx(0.3)


# ---------------------------------------------------------------- the posterior

@pytest.mark.parametrize("kind, lengthscale, lam", [("exponential", 1.0, 1.0), ("matern52", 0.2, 0.01)])
def test_rank_one_posterior_equals_fresh_inverse(kind, lengthscale, lam):
    """After t = 200 observations (with repeats) at 60 random 2-D candidates, the rank-one posterior
    equals the fresh-inverse formulas: |mean diff| <= 3e-5 (values in [-1, 1]), |variance diff| <= 1e-5."""
    rng = np.random.default_rng(5)
    unit = rng.random((60, 2)).astype(np.float32)
    js = rng.integers(0, 60, 200).astype(np.int32)
    ys = rng.uniform(-1, 1, 200).astype(np.float32)

    @jax.jit
    def posterior(unit, js, ys):
        def step(state, jy):
            mean, cov = state
            cov_new, c, d = gp.condition_cov(cov, jy[0], lam)
            return (gp.condition_mean(mean, c, d, jy[0], jy[1]), cov_new), None
        cov0 = kernels.kernel_matrix(kind, unit, unit, jnp.float32(lengthscale))
        (mean, cov), _ = jax.lax.scan(step, (jnp.zeros(60), cov0), (js, ys))
        return mean, gp.variances(cov), cov

    mean, var, cov = map(np.asarray, posterior(unit, js, ys))
    ref_mean, ref_var = reference_gp.posterior(kind, lengthscale, lam, unit, unit[js], ys)
    np.testing.assert_allclose(mean, ref_mean, rtol=0, atol=3e-5)
    np.testing.assert_allclose(var, ref_var, rtol=0, atol=1e-5)
    assert np.array_equal(cov, cov.T)            # h h^T keeps it exactly symmetric


@pytest.mark.parametrize("picks", [1, 5, 10, 17, 40])
def test_a_round_of_picks_conditioned_at_once_equals_one_pick_at_a_time(picks):
    """A round's picks (repeats included) taken one at a time by condition_cov, against the same picks
    read off the round-start matrix (gp.column, the variances less h * h) and applied at once
    (gp.condition_many, whose groups and padding differ at 5, 10, 17 and 40 picks): every column, every
    variance and the final matrix, bit for bit, in a batch of runs and alone."""
    rng = np.random.default_rng(picks)
    runs, K, lam = 3, 60, 0.3
    unit = rng.random((runs, K, 2)).astype(np.float32)
    js = rng.integers(0, K, (runs, picks)).astype(np.int32)
    js[:, -1] = js[:, 0]

    def one_at_a_time(unit, js):
        def step(cov, j):
            var_j = gp.variances(cov)[j]
            cov, c, d = gp.condition_cov(cov, j, lam)
            return cov, (c, var_j)
        return jax.lax.scan(step, kernels.kernel_matrix("exponential", unit, unit, jnp.float32(1.0)), js)

    def at_once(unit, js):
        cov = kernels.kernel_matrix("exponential", unit, unit, jnp.float32(1.0))

        def step(b, state):
            diag, hs, cols, var_js = state
            j = js[b]
            c = gp.column(cov, hs, b, j)
            h = c / objectives.ordered.exact_sqrt(c[j] + lam)
            return diag - h * h, hs.at[b].set(h), cols.at[b].set(c), var_js.at[b].set(jnp.maximum(diag, 0.0)[j])
        zeros = jnp.zeros((picks, K), jnp.float32)
        _, hs, cols, var_js = jax.lax.fori_loop(0, picks, step, (jnp.diagonal(cov), zeros, zeros,
                                                                 jnp.zeros((picks,), jnp.float32)))
        return gp.condition_many(cov, hs), (cols, var_js)

    want = jax.tree.map(np.asarray, jax.jit(jax.vmap(one_at_a_time))(unit, js))
    got = jax.tree.map(np.asarray, jax.jit(jax.vmap(at_once))(unit, js))
    for w, g in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
        np.testing.assert_array_equal(g.view(np.uint32), w.view(np.uint32))
    alone = jax.tree.map(np.asarray, jax.jit(at_once)(unit[1], js[1]))
    for w, g in zip(jax.tree.leaves(want), jax.tree.leaves(alone)):
        np.testing.assert_array_equal(g.view(np.uint32), w[1].view(np.uint32))


def test_log_expected_improvement_factor():
    """log(u Phi(u) + phi(u)) against float64 over the three branches: within 2e-5 plus float32's own
    rounding of log EI (2e-7 relative; -u^2/2 alone is only that exact)."""
    u = np.concatenate([np.linspace(-40, 8, 2001), [-8.0, -8.0001, 0.0]])
    got = np.asarray(jax.jit(bo.log_ei_factor)(jnp.asarray(u, jnp.float32)), np.float64)
    u32 = u.astype(np.float32).astype(np.float64)
    cdf = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in u32])
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.log(u32 * cdf + np.exp(-0.5 * u32 ** 2) / math.sqrt(2 * math.pi))
    ok = u32 > -37          # float64's own EI underflows beyond
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got[ok], want[ok], rtol=2e-7, atol=2e-5)


# ---------------------------------------------------------------- against the references

@pytest.mark.parametrize("name", NAMES)
def test_noise_free_runs_pull_the_reference_points(runs, name):
    """Noise-free: the same candidates in the same order for 40 rounds (BBO: 25 rounds of M = 3
    picks, its reference being the slowest), and the same regret."""
    res = runs[name]["exact"]
    rounds = 25 if name == "bbo" else T_EXACT
    for seed in (0, 1):
        ref = _reference(name, seed, T_EXACT, rounds=rounds)
        np.testing.assert_array_equal(res.choices[seed][:rounds], ref.chosen)
        np.testing.assert_allclose(res.curves[seed][:rounds], ref.regret, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_noisy_runs_agree_with_reference_in_distribution(runs, name):
    """gaussian:0.3 noise, T = 40, 24 seeds each: the reference draws its own noise, on the candidates of
    other seeds than the engine's (the samples share no randomness); the final regrets' means and
    spreads agree."""
    res = _run(name, SEEDS, horizon=T_EXACT, noise="gaussian:0.3")
    rng = np.random.default_rng(11)
    ref = np.array([_reference(name, seed, T_EXACT, noise_sd=0.3, rng=rng).regret[-1]
                    for seed in range(SEEDS, 2 * SEEDS)])
    assert_same_distribution(res.final_regret, ref, "final regret")
    assert res.final_regret.std() > 0


# ---------------------------------------------------------------- reproducibility and behaviour

@pytest.mark.parametrize("name", NAMES)
def test_regret_is_sublinear_on_garland(runs, name):
    """Mean over 24 seeds, T = 300: regret per round falls from the first quarter to the last.
    (A seed alone equals the same seed in a batch: tests/test_contract.py, for every algorithm.)"""
    res = runs[name]["noisy"]
    assert len(set(res.final_regret.tolist())) > SEEDS // 2
    mean = res.regret_mean
    rounds = res.checkpoints
    quarter, three = np.searchsorted(rounds, T_RUN // 4), np.searchsorted(rounds, 3 * T_RUN // 4)
    first = mean[quarter] / rounds[quarter]
    last = (mean[-1] - mean[three]) / (rounds[-1] - rounds[three])
    assert last < 0.8 * first
    assert mean[-1] / rounds[-1] < first


def test_horizon_and_noise_scale_do_not_recompile(runs):
    traces = executor.trace_count()
    _run("gpucb", SEEDS, horizon=77, noise="gaussian:0.5")
    assert executor.trace_count() == traces


def test_nan_objective_raises(runs):
    """A client whose local objective is NaN (its shift, data of the same compiled program)."""
    objective = _objective("bbo")
    shifts = np.asarray(objective.data["shift"]).copy()
    shifts[1] = np.nan
    bad = dataclasses.replace(objective, data=dict(objective.data, shift=jnp.asarray(shifts)))
    with pytest.raises(ObjectiveError, match="garland"):
        fp.run(CONFIGS["bbo"].replace(horizon=T_EXACT), bad, seeds=SEEDS)


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("module, field, value", [
    (gpucb, "kernel", "linear"), (gpucb, "lengthscale", 0.0), (gpucb, "lengthscale", float("nan")),
    (gpucb, "candidates", "sobol"), (gpucb, "num_candidates", 0), (gpucb, "num_candidates", 10**6),
    (gpucb, "trace", -1), (gpucb, "lam", 0.0), (gpucb, "B", -1.0), (gpucb, "R", -0.1), (gpucb, "delta", 1.0),
    (gpucb, "horizon", 0), (kernelts, "lam", -1.0), (kernelts, "nu", "1"), (bo, "noise_var", 0.0),
    (bo, "xi", -0.1), (bo, "initial", 0), (bo, "initial", 2.5), (bbo, "num_clients", 0),
    # A noise variance under float32's resolution of the prior's 1 (the runs collapse at 1e-8).
    (gpucb, "lam", 1e-8), (kernelts, "lam", 5e-7), (bo, "noise_var", 1e-8), (bbo, "lam", 1e-50),
])
def test_bad_parameters_raise_naming_them(module, field, value):
    with pytest.raises(ValueError, match=field):
        module.ALGORITHM.config_type(**{field: value})


def test_mesh_size_must_be_a_power_of_the_dimension():
    himmelblau = objectives.make_objective("himmelblau", 1)
    with pytest.raises(ValueError, match="num_candidates"):
        fp.run(gpucb.GPUCBConfig(num_candidates=50), himmelblau)
    with pytest.raises(ValueError, match="num_clients"):
        fp.run(bbo.BBOConfig(num_clients=4), objectives.make_objective("garland", 3))
    assert gp.resolve_candidates(gpucb.GPUCBConfig(), 2) == (400, 20)
    assert gp.resolve_candidates(gpucb.GPUCBConfig(candidates="random", num_candidates=50), 2) == (50, 0)
