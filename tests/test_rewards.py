"""The reward models directly: one node's server-side mean over many phase keys has the mean and
variance the paper's model implies, for every sampler, with and without DP noise.  (Regret-level
tests cannot see a missing DP noise term: its effect on regret is within their standard errors.)

The gate runs the cases named GATE (a few seconds): Gaussian noise at sigma = 0.5, whose variance
sigma^2 = 0.25 a scale used as the variance (0.5) would double, uniform noise (a^2 / 3), and DP-Fed-PNE's
privacy noise alone (noise-free rewards) for each sampler, whose uploaded means must carry Appendix D's
sigma_dp^2 = 2 log(1.25 / delta) / eps^2 per reward, computed here from the paper's formula."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.fedpne import partition
from fedpne_jax.algorithms.fedpne import sampling as rewards
from fedpne_jax.algorithms.fedpne.plan import Tables, make_params, make_static, plan
from tests.support import tiers
from tests.support.helpers import assert_matches_model, make

DRAWS = 4000
N_PULLS = 5
EPS, DP_DELTA = 5.0, 0.1
SIGMA_DP2 = 2 * math.log(1.25 / DP_DELTA) / EPS ** 2          # 0.202


def _node_means(config, objective):
    tables = Tables(capacity=16, depth=plan(config).depth_limit)
    static = make_static(config, objective, tables)
    params = jax.tree.map(jnp.asarray, make_params(config, tables))
    table = partition.root(static, jax.random.key(0))
    centre = partition.centres(static, table, objective.lo, objective.hi)
    n = jnp.int32(N_PULLS)
    pulls = jnp.where(jnp.arange(16) < 1, n, 0)
    none = jnp.zeros((static.checkpoints,), jnp.int32)
    keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(1), i))(jnp.arange(DRAWS))
    draw = jax.jit(jax.vmap(lambda k: rewards.estimate(static, params, objective, table, centre, pulls, n, k,
                                                       none, none).mean[0]))
    return np.asarray(draw(keys), np.float64), float(objective.local_values(centre[:1]).mean())


def _case(name, pull_var, **kwargs):
    return pytest.param(kwargs, pull_var, id=name)


CASES = [
    # config kwargs, per-pull reward variance (before DP) as a function of the local values
    _case("gaussian-aggregate", lambda v: 0.09, noise="gaussian:0.3", sampling="aggregate"),
    _case("gaussian-client", lambda v: 0.09, noise="gaussian:0.3", sampling="client"),
    _case("gaussian-explicit", lambda v: 0.09, noise="gaussian:0.3", sampling="explicit"),
    _case("gaussian0.5", lambda v: 0.25, noise="gaussian:0.5"),
    _case("uniform", lambda v: 0.36 / 3, noise="uniform:0.6"),
    _case("bernoulli", lambda v: float(np.mean(v * (1 - v))), noise="bernoulli"),
    _case("none-aggregate", lambda v: 0.0, noise="none", sampling="aggregate"),
    _case("none-client", lambda v: 0.0, noise="none", sampling="client"),
    _case("none-explicit", lambda v: 0.0, noise="none", sampling="explicit"),
]
# The cases the gate runs (tests/support/tiers.py names the others).
GATE = ("gaussian0.5-plain", "uniform-plain", "none-aggregate-dp", "none-client-dp", "none-explicit-dp")
# Without any noise a node's mean is its value: tests/test_exact.py.
RUNS = [pytest.param(case.values[0], case.values[1], dp, id=f"{case.id}-{'dp' if dp else 'plain'}")
        for case in CASES for dp in (False, True) if dp or case.values[0]["noise"] != "none"]


@pytest.mark.parametrize("kwargs,pull_var,dp", RUNS)
def test_node_mean_has_the_model_variance(kwargs, pull_var, dp):
    M = 4
    config = fp.FedPNEConfig(num_clients=M, horizon=1000, split="longest", **kwargs,
                             **(dict(dp_epsilon=EPS, dp_delta=DP_DELTA) if dp else {}))
    assert config.resolved_sampling == kwargs.get("sampling", config.resolved_sampling)
    objective = make("garland", M, heterogeneity="none")
    means, value = _node_means(config, objective)
    values = np.asarray(objective.local_values(jnp.array([0.5])))
    # Each client averages N_PULLS rewards, each with the observation noise and (DP, Algorithm 1 line
    # 8) an independent N(0, sigma_dp^2); the server averages the M clients' means.
    var = (pull_var(values) + (SIGMA_DP2 if dp else 0.0)) / (N_PULLS * M)
    assert_matches_model(means, value, var, "node mean")


def test_the_gate_runs_the_named_cases():
    """GATE (the docstring's promise) is what tests/support/tiers.py leaves to the gate."""
    gate = [run.id for run in RUNS if not tiers.thorough(f"tests/test_rewards.py::{FUNCTION}[{run.id}]")]
    assert sorted(gate) == sorted(GATE)


FUNCTION = test_node_mean_has_the_model_variance.__name__
