"""Shared test helpers: run the engine and the NumPy reference on the same problem."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import math
import os

import numpy as np

import fedpne_jax as fp
import objectives
from fedpne_jax import cli
from fedpne_jax.algorithms.fedpne import partition
from fedpne_jax.algorithms.fedpne.engine import run_keys
from fedpne_jax.core import executor
from fedpne_jax.core.executor import seed_key
from tests.support import reference


def reference_problem(objective) -> reference.RefProblem:
    shifts = np.asarray(objective.data["shift"], np.float64) if "shift" in objective.data \
        else np.zeros(objective.num_clients)
    return reference.problem(objective.name, objective.num_clients, objective.dim, shifts=shifts)


def random_split_fn(base_seed: int, seed: int, dim: int):
    """The engine's random partition of one run, as the reference's split_dim_fn(path)."""
    pkey, _ = run_keys(seed_key(base_seed, seed))
    return functools.lru_cache(maxsize=None)(lambda path: partition.path_split_dim(pkey, path, dim))


def reference_run(config: fp.FedPNEConfig, objective, rng=None, split_dim_fn=None):
    """The NumPy reference's run of ``config``, and its simple regret at the checkpoints (``simple``).
    The reference is given the parameters the user set (None where the config leaves the default) and
    derives the rest itself, from the paper: c, delta, the DP noise's variance and the noise string's
    scale, so that a wrong default formula in the package shows."""
    prob = reference_problem(objective)
    noise, sigma = reference.parse_noise(config.noise)
    ref = reference.fedpne(
        prob, config.horizon, k=config.k, split=config.split, nu=config.nu,
        rho=config.rho, c=config.c, c1=config.c1, delta=config.delta, noise=noise, sigma=sigma,
        dp_sigma2=reference.dp_sigma2(config.dp_epsilon, config.dp_delta), pull=config.pull,
        checkpoints=config.checkpoints, rng=rng, split_dim_fn=split_dim_fn)
    ref.simple = reference.simple_curve(prob, ref, config.horizon, config.checkpoints)
    return ref


def make(name, M, dim=None, heterogeneity="shift"):
    return objectives.make_objective(name, num_clients=M, heterogeneity=heterogeneity, dim=dim)


# The suite's false alarms.  A statistical comparison (against a NumPy reference, PyXAB's recorded runs,
# another sampler, or a sampler's model) tests the mean and the spread of a sample, each as a z
# statistic that is normal under the null hypothesis (samples of 200 or more, or of 24 Gaussian-like
# sums in test_gp_baselines): the mean by two_sample_z (or mean_z), the spread by spread_z (or
# variance_z), the log variance ratio with a kurtosis-pooled standard error (Layard 1973, Shoemaker
# 2003), which is robust to the skewed, heavy-tailed regrets where an F test is not.  A mean fails at
# |z| >= Z_MEAN (two-sided false-alarm rate 6.3e-5), a spread at |z| >= Z_SPREAD (6.8e-6).  The whole
# suite (gate and --thorough, as .ci/run runs it) makes at most MEAN_TESTS and SPREAD_TESTS such
# comparisons (FEDPNE_STATISTICS_LOG=FILE lists them: the README's Tests section gives the count).  The
# tests that keep their own statistics add ELSEWHERE: tests/test_asktell_noisy.py's 14 comparisons
# (below 2.3e-3, its docstring) and five |z| < 4 checks of test_flower.py (3) and test_plugins.py (2).
# By Bonferroni the suite's family-wise false-alarm rate is below FAMILY_RATE + ELSEWHERE < 1 % per CI
# run.  Tests of an effect (z > 4 where DP must raise regret) are not false alarms and are not counted.
Z_MEAN = 4.0
Z_SPREAD = 4.5
MEAN_TESTS = 100
SPREAD_TESTS = 100
FAMILY_RATE = MEAN_TESTS * math.erfc(Z_MEAN / math.sqrt(2)) + SPREAD_TESTS * math.erfc(Z_SPREAD / math.sqrt(2))
ELSEWHERE = 2.3e-3 + 5 * math.erfc(Z_MEAN / math.sqrt(2))
assert FAMILY_RATE + ELSEWHERE < 0.01


def _log_statistic(kind: str, z) -> None:
    path = os.environ.get("FEDPNE_STATISTICS_LOG")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{kind}\t{z}\t{os.environ.get('PYTEST_CURRENT_TEST', '?')}\n")


def two_sample_z(a, b) -> float:
    """z statistic of the difference of two sample means (independent samples)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    se = np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    return float((a.mean() - b.mean()) / se)


def _ln_variance_se2(n: int, kurtosis: float) -> float:
    """Variance of ln s^2 for a sample of n with the given (non-excess) kurtosis (Shoemaker 2003);
    2 / n for a normal sample."""
    return (kurtosis - (n - 3) / (n - 1)) / n


def spread_z(a, b) -> float:
    """z statistic of ln(var a / var b), its standard error from the two samples' pooled kurtosis (each
    centred on its own mean): a test of equal spread that holds its level for non-normal samples.
    NaN when either sample is constant."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    da, db = a - a.mean(), b - b.mean()
    va, vb = da.var(ddof=1), db.var(ddof=1)
    if va == 0 or vb == 0:
        return math.nan
    m2 = np.sum(da ** 2) + np.sum(db ** 2)
    kurtosis = (a.size + b.size) * (np.sum(da ** 4) + np.sum(db ** 4)) / m2 ** 2
    se = math.sqrt(_ln_variance_se2(a.size, kurtosis) + _ln_variance_se2(b.size, kurtosis))
    return float(math.log(va / vb) / se)


def mean_z(sample, mean: float, var: float) -> float:
    """z statistic of a sample's mean against a model's mean and per-draw variance."""
    sample = np.asarray(sample, float)
    return float((sample.mean() - mean) / math.sqrt(var / sample.size))


def variance_z(sample, var: float) -> float:
    """z statistic of ln(s^2 / var), a sample's variance against a model's, with the sample's own
    kurtosis in the standard error."""
    sample = np.asarray(sample, float)
    d = sample - sample.mean()
    kurtosis = sample.size * np.sum(d ** 4) / np.sum(d ** 2) ** 2
    return float(math.log(d.var(ddof=1) / var) / math.sqrt(_ln_variance_se2(sample.size, kurtosis)))


def assert_same_distribution(a, b, what: str = "final regret") -> None:
    """Samples ``a`` and ``b`` (independent) come from one distribution: their means within Z_MEAN and
    their variances within Z_SPREAD (not tested where a sample is constant, as a count may be: the
    mean's test and the callers' checks of the values cover it)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    z = two_sample_z(a, b)
    _log_statistic("mean", z)
    assert abs(z) < Z_MEAN, f"{what}: means {a.mean():.6g} and {b.mean():.6g}, z = {z:.2f}"
    z = spread_z(a, b)
    if not math.isnan(z):
        _log_statistic("spread", z)
        assert abs(z) < Z_SPREAD, f"{what}: standard deviations {a.std(ddof=1):.6g} and {b.std(ddof=1):.6g}, z = {z:.2f}"


def assert_matches_model(sample, mean: float, var: float, what: str = "sample") -> None:
    """A sample's mean and variance equal a model's (mean, per-draw variance): |z| < Z_MEAN and
    Z_SPREAD."""
    sample = np.asarray(sample, float)
    z = mean_z(sample, mean, var)
    _log_statistic("mean", z)
    assert abs(z) < Z_MEAN, f"{what}: mean {sample.mean():.6g} against the model's {mean:.6g}, z = {z:.2f}"
    z = variance_z(sample, var)
    _log_statistic("spread", z)
    assert abs(z) < Z_SPREAD, f"{what}: variance {sample.var(ddof=1):.6g} against the model's {var:.6g}, z = {z:.2f}"


def assert_same_tree_run(out, i, ref):
    """Run i of an HCT/T-HOO batch equals a tree reference run: every pulled point bit for bit."""
    np.testing.assert_array_equal(out.points[i], ref.points)
    np.testing.assert_array_equal(out.recommendation[i], ref.recommendation)
    assert (out.nodes[i], out.depth[i]) == (ref.nodes, ref.depth)
    np.testing.assert_allclose(out.curve[i], ref.curve, rtol=2e-5)  # float32 sums of float32 values
    assert out.flags[i] == 0


def assert_regret_per_round_falls(curves, checkpoint_rounds):
    """The mean regret per round of the second half of a run is below 0.9 times the first half's
    (regret grows sublinearly); returns the mean curve."""
    rounds = np.asarray(checkpoint_rounds)
    mean = np.asarray(curves).mean(axis=0)
    half = len(rounds) // 2 - 1
    first = mean[half] / rounds[half]
    second = (mean[-1] - mean[half]) / (rounds[-1] - rounds[half])
    assert second < 0.9 * first
    return mean


def traced_tree_run(module, config, objective, seeds, base_seed=0):
    """(outputs with the pulled points, static) of a tree algorithm's module (hct, hoo, doo, soo):
    its static with trace=True, one compiled program per config and shape."""
    static = dataclasses.replace(module.make_static(config, objective), trace=True)
    out, _, _ = executor.execute(module.run_single, static, module.make_params(config), objective, base_seed,
                                 np.asarray(seeds))
    return out, static


def assert_runs_equal_reference(module, config, objective, seeds, reference):
    """Each seed's run of a tree algorithm (its pulled points traced) equals ``reference(split_dims)``,
    the reference run given that seed's split dimensions (run_split_dims: entry 0 the root's,
    entry t the round-t draw); returns the outputs."""
    from fedpne_jax.algorithms.trees.rounds import run_split_dims
    out, static = traced_tree_run(module, config, objective, seeds)
    for i, seed in enumerate(seeds):
        dims = run_split_dims(seed_key(0, seed), config.horizon, static.chunk, objective.dim, config.precision)
        assert_same_tree_run(out, i, reference(dims))
    return out


def pyxab_run(algo, objective, T: int):
    """(pulled points, get_last_point()) of a PyXAB algorithm object over T noise-free rounds of
    ``objective``'s global value, evaluated in float64 (PyXAB's arithmetic)."""
    import jax
    points = []
    with jax.enable_x64(True):
        for t in range(1, T + 1):
            x = algo.pull(t)
            points.append(x)
            algo.receive_reward(t, float(objective.value(np.asarray(x, np.float64))))
    return np.asarray(points), algo.get_last_point()


def target_hits(best, goals, rtol=1e-5):
    """(first round, 1-based, at which the per-round best-so-far regret ``best`` reaches each goal,
    0 if never; the goals within ``rtol`` of some value of ``best``, where float32 and float64 may
    land either way)."""
    best, goals = np.asarray(best, np.float64), np.asarray(goals, np.float64)
    reached = best[None, :] <= goals[:, None]
    hits = np.where(reached.any(axis=1), reached.argmax(axis=1) + 1, 0)
    near = np.isclose(goals[:, None], best[None, :], rtol=rtol, atol=1e-9).any(axis=1)
    return hits, near


def cli_call(argv) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``fedpne ARGV`` in this process; any exception but
    argparse's SystemExit propagates, failing the test as the traceback a user would see."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exit_:
            code = exit_.code
    return code, out.getvalue(), err.getvalue()
