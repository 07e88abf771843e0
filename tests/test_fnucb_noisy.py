"""FN-UCB over whole noisy runs: fp.run's final regret has the distribution of the NumPy reference's
(tests/support/reference_fnucb.py, float64), each side drawing its own grids, networks and rewards.

The reference is first checked against tests/test_fnucb.py's explicit per-client FN-UCB on the same
inputs (the same arms every round), so the two NumPy forms vouch for each other.  fp.run computes in
float32 and the reference in float64: runs cannot be compared draw by draw, only in distribution.
"""
import dataclasses

import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.arms.fnucb import FNUCBConfig
from tests.support import reference_fed1ucb as ref_arms
from tests.support import reference_fnucb
from tests.support.helpers import assert_same_distribution, make, reference_problem
from tests.test_fnucb import np_fnucb

M, T, K, SIGMA = 3, 200, 10, 0.1
# Training every 25th history point keeps the reference's 200 runs to about a minute; the rules are
# those of the default (train_every=1), which tests/test_fnucb.py checks round by round.
CONFIG = FNUCBConfig(num_clients=M, horizon=T, checkpoints=T, noise=f"gaussian:{SIGMA}", arms=K, alpha_ramp=20,
                     train_every=25)
RUNS = 200


def reference_inputs(prob, runs: int, rng):
    """Each run's arms (a random start in the first cell, then the mesh), theta_0 ~ N(0, 1) and
    rewards: the clients' local values plus N(0, SIGMA^2)."""
    offsets = rng.random((runs, 1))
    points = np.stack([ref_arms.grid(u, prob.lo, prob.hi, K) for u in offsets])         # (S, K, 1)
    X = (points - prob.lo) / (prob.hi - prob.lo)
    gaps = prob.f_star - prob.f(points)                                                  # (S, K)
    theta0 = rng.standard_normal((runs, CONFIG.width * 3 + 1))
    rewards = prob.local(points)[:, None] + SIGMA * rng.standard_normal((runs, T, K, M))
    return theta0, X, gaps, rewards


@pytest.fixture(scope="module")
def garland():
    return make("garland", M)


def test_the_batched_reference_pulls_the_explicit_references_arms(garland):
    prob = reference_problem(garland)
    theta0, X, gaps, rewards = reference_inputs(prob, 2, np.random.default_rng(11))
    config = dataclasses.replace(CONFIG, horizon=60, checkpoints=60, train_every=5)
    _, chosen = reference_fnucb.regret(config, theta0, X, gaps, rewards[:, :60])
    for s in range(2):
        explicit = np_fnucb(theta0[s], X[s], gaps[s], lambda t, a, s=s: rewards[s, t, a], 60, config)
        np.testing.assert_array_equal(chosen[s], explicit[:, 0])
    assert len(set(chosen[0].tolist())) > 1


@pytest.fixture(scope="module")
def reference_regret(garland):
    theta0, X, gaps, rewards = reference_inputs(reference_problem(garland), RUNS, np.random.default_rng(5))
    return reference_fnucb.regret(CONFIG, theta0, X, gaps, rewards)[0]


@pytest.mark.parametrize("planted", [False, True], ids=["as-configured", "planted-step-size"])
def test_noisy_final_regret_has_the_references_distribution(garland, reference_regret, planted):
    """The planted case trains fp.run's networks with ten times the reference's SGD step: the
    comparison must fail (twice the noise, or ten times nu, moves FN-UCB's final regret too little to
    be seen at 200 runs: z of about -2)."""
    config = dataclasses.replace(CONFIG, lr=10 * CONFIG.lr) if planted else CONFIG
    jax_regret = fp.run(config, garland, seeds=RUNS, base_seed=3).final_regret
    if not planted:
        assert_same_distribution(jax_regret, reference_regret, "FN-UCB final regret")
    else:
        with pytest.raises(AssertionError, match="FN-UCB final regret"):
            assert_same_distribution(jax_regret, reference_regret, "FN-UCB final regret")
