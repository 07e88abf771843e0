"""Noisy runs: the engine's distribution of regret equals the reference's, and the three samplers
(aggregate, per-client, explicit per-pull) agree.  Each comparison tests the mean and the spread of the
final regret (and of the phase count) over seeds (tests/support/helpers.py: its false-alarm rates)."""
import numpy as np
import pytest

import fedpne_jax as fp
from tests.support.helpers import assert_same_distribution, make, reference_run

SEEDS = 200


def _reference_finals(config, objective, seeds=SEEDS):
    return _reference_runs(config, objective, seeds)[0]


def _reference_runs(config, objective, seeds=SEEDS):
    """(final regrets, phases) of ``seeds`` reference runs."""
    rng = np.random.default_rng(12345)
    runs = [reference_run(config, objective, rng=rng) for _ in range(seeds)]
    return np.array([r.final_regret for r in runs]), np.array([r.phases for r in runs])


def _assert_matches_reference(res, ref):
    """Final regret and phase count of engine runs ``res`` against reference (finals, phases), their means
    and spreads; a phase count that no seed varies must be the same number on both sides."""
    finals, phases = ref
    assert_same_distribution(res.final_regret, finals, "final regret")
    if np.ptp(res.phases) == 0 and np.ptp(phases) == 0:
        assert res.phases[0] == phases[0]
    else:
        assert_same_distribution(res.phases, phases, "phases")


def test_gaussian_noise_matches_reference():
    config = fp.FedPNEConfig(num_clients=10, horizon=10_000, split="longest", noise="gaussian:0.5")
    objective = make("garland", 10)
    res = fp.run(config, objective, seeds=SEEDS)
    ref = _reference_finals(config, objective)
    assert res.final_regret.std() > 1.0          # the noise really changes the runs
    assert_same_distribution(res.final_regret, ref, "final regret")


@pytest.mark.parametrize("sampling", ["client", "explicit"])
def test_samplers_agree_with_aggregate(sampling):
    base = fp.FedPNEConfig(num_clients=4, horizon=4_000, split="longest", noise="gaussian:0.5",
                           sampling="aggregate")
    objective = make("doublesine", 4)
    agg = fp.run(base, objective, seeds=SEEDS)
    other = fp.run(base.replace(sampling=sampling), objective, seeds=SEEDS, base_seed=1)
    assert agg.final_regret.std() > 1.0
    assert_same_distribution(agg.final_regret, other.final_regret, "final regret")
    # Different randomness, same distribution: the runs themselves differ.
    assert not np.array_equal(agg.final_regret, other.final_regret)


@pytest.mark.parametrize("sampling", ["client", "explicit"])
def test_bernoulli_matches_reference(sampling):
    """Bernoulli rewards as Binomial counts per client, or pull by pull."""
    config = fp.FedPNEConfig(num_clients=3, horizon=5_000, split="longest", noise="bernoulli", sampling=sampling)
    objective = make("garland", 3, heterogeneity="none")     # values in [0, 1]
    res = fp.run(config, objective, seeds=SEEDS)
    assert res.final_regret.std() > 1.0
    _assert_matches_reference(res, _reference_runs(config, objective))


UNIFORM_PULLS = fp.FedPNEConfig(num_clients=3, horizon=3_000, split="longest", noise="uniform:0.5",
                                pull="uniform", checkpoints=10, capacity=64)


@pytest.fixture(scope="module")
def uniform_pulls():
    return fp.run(UNIFORM_PULLS, make("garland", 3), seeds=SEEDS)


def test_uniform_pulls_match_reference(uniform_pulls):
    """Uniform pull points (every pull simulated): regret uses f at the points actually pulled."""
    assert UNIFORM_PULLS.resolved_sampling == "explicit"
    res = uniform_pulls
    ref = _reference_runs(UNIFORM_PULLS, make("garland", 3))
    assert res.final_regret.std() > 0.5
    _assert_matches_reference(res, ref)
    assert np.all(np.diff(res.curves, axis=1) >= -1e-3)   # cumulative regret never decreases
    assert np.all((res.recommendation >= 0.0) & (res.recommendation <= 1.0))


def test_dp_with_uniform_noise_matches_reference():
    """DP noise on explicit pulls (uniform observation noise) against the reference."""
    config = fp.FedPNEConfig(num_clients=3, horizon=3_000, split="longest", noise="uniform:0.5",
                             dp_epsilon=4.0, dp_delta=0.05, capacity=64)
    objective = make("garland", 3)
    assert config.resolved_sampling == "explicit"
    res = fp.run(config, objective, seeds=SEEDS)
    _assert_matches_reference(res, _reference_runs(config, objective))


def test_uniform_noise_centre_pulls_match_reference():
    config = fp.FedPNEConfig(num_clients=3, horizon=3_000, split="longest", noise="uniform:0.8")
    objective = make("doublesine", 3)
    res = fp.run(config, objective, seeds=SEEDS)
    assert res.final_regret.std() > 1.0
    _assert_matches_reference(res, _reference_runs(config, objective))


def test_explicit_results_do_not_depend_on_capacity(uniform_pulls):
    """Each draw is keyed by (phase, pull, node row, client), never by the table's size, and each
    row's pulls are summed block after block: a larger node table gives a seed the same numbers."""
    assert uniform_pulls.capacity == 64
    other = fp.run(UNIFORM_PULLS.replace(capacity=256), make("garland", 3), seeds=[0, 1, 2, 3])
    for field in ("phases", "recommendation", "final_regret", "curves", "uploads", "depth"):
        np.testing.assert_array_equal(getattr(other, field), getattr(uniform_pulls, field)[:4])


def test_uniform_pull_points_alone_equal_batch(uniform_pulls):
    """Every client pulls its own random point: the regret averaged over clients is summed in a fixed
    order, so a seed run alone equals the same seed in the batch of 200, bit for bit."""
    alone = fp.run(UNIFORM_PULLS, make("garland", 3), seeds=[17])
    for field in ("final_regret", "curves", "phases", "uploads", "depth", "recommendation"):
        np.testing.assert_array_equal(getattr(alone, field)[0], getattr(uniform_pulls, field)[17])


def test_compensated_sums_do_not_stall():
    """A float32 running sum of 1.0 stops growing at 2^24; explicit sampling adds up to n ~ 1e9
    rewards per node, so it sums with compensation."""
    import jax
    import jax.numpy as jnp

    from objectives.ordered import compensated_add

    def total(x, steps):
        init = (jnp.zeros((), jnp.float32), jnp.zeros((), jnp.float32))
        return jax.lax.fori_loop(0, steps, lambda i, acc: compensated_add(acc, x), init)[0]

    assert float(jax.jit(total, static_argnums=1)(jnp.float32(1.0), 2**24 + 1000)) == 2**24 + 1000
    np.testing.assert_allclose(float(jax.jit(total, static_argnums=1)(jnp.float32(0.1), 10**7)),
                               1e6, rtol=1e-6)
