"""DP-Fed-PNE (Appendix D): the same phase function with Gaussian noise N(0, sigma_dp^2) per reward."""
import math

import numpy as np
import pytest

import fedpne_jax as fp
from tests.support import reference
from tests.support.helpers import assert_same_distribution, make, reference_run, two_sample_z

SEEDS = 200


def test_sigma_and_default_c_follow_the_paper():
    cfg = fp.FedPNEConfig(num_clients=10, dp_epsilon=2.0, dp_delta=1e-3)
    assert cfg.dp_sigma2 == pytest.approx(2 * math.log(1.25 / 1e-3) / 4.0)
    assert cfg.c_value == pytest.approx(0.1 * math.sqrt(1 + 4 * cfg.dp_sigma2))
    # The reference derives its own (tests/helpers.reference_run passes it none of these).
    assert cfg.dp_sigma2 == pytest.approx(reference.dp_sigma2(2.0, 1e-3))
    assert cfg.c_value == pytest.approx(reference.default_c(reference.dp_sigma2(2.0, 1e-3)))
    assert fp.FedPNEConfig().c_value == reference.default_c() == 0.1
    assert cfg.delta_value == pytest.approx(1 / 10)
    assert cfg.replace(c=0.3).c_value == 0.3                      # an explicit c is kept
    assert fp.FedPNEConfig().dp_sigma2 == 0.0


@pytest.mark.parametrize("sampling", ["aggregate", "client"])
def test_huge_epsilon_equals_non_dp(sampling):
    objective = make("garland", 4, heterogeneity="none")
    plain = fp.FedPNEConfig(num_clients=4, horizon=3000, noise="gaussian:0.2", sampling=sampling, c=0.1)
    dp = plain.replace(dp_epsilon=1e9, dp_delta=0.1)
    a = fp.run(plain, objective, seeds=16)
    b = fp.run(dp, objective, seeds=16)
    np.testing.assert_array_equal(a.phases, b.phases)
    np.testing.assert_array_equal(a.depth, b.depth)
    np.testing.assert_allclose(a.final_regret, b.final_regret, rtol=1e-6)


def test_regret_rises_as_epsilon_falls():
    objective = make("garland", 10)
    base = fp.FedPNEConfig(num_clients=10, horizon=10_000, noise="gaussian:0.1", capacity=64)
    # The three privacy levels differ only in data (sigma_dp^2, c), so they run as one grid: one program.
    configs = [base.replace(dp_epsilon=eps, dp_delta=0.01) for eps in (10.0, 1.0, 0.1)]
    finals = [r.final_regret for r in fp.run_grid(configs, objective, seeds=SEEDS)]
    for weaker, stronger in zip(finals, finals[1:]):
        assert two_sample_z(stronger, weaker) > 4


def test_dp_matches_reference():
    config = fp.FedPNEConfig(num_clients=5, horizon=10_000, split="longest", noise="gaussian:0.1",
                             dp_epsilon=5.0, dp_delta=0.01)
    objective = make("doublesine", 5)
    res = fp.run(config, objective, seeds=SEEDS)
    rng = np.random.default_rng(7)
    ref = [reference_run(config, objective, rng=rng).final_regret for _ in range(SEEDS)]
    assert_same_distribution(res.final_regret, ref, "final regret")
