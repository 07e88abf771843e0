"""The reward models directly: one node's server-side mean over many phase keys has the mean and
variance the paper's model implies, for every sampler, with and without DP noise.  (Regret-level
tests cannot see a missing DP noise term: its effect on regret is within their standard errors.)"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.fedpne import partition
from fedpne_jax.algorithms.fedpne import sampling as rewards
from fedpne_jax.algorithms.fedpne.plan import Tables, make_params, make_static, plan
from tests.support.helpers import make

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


CASES = [
    # config kwargs, per-pull reward variance (before DP) as a function of the local values
    (dict(noise="gaussian:0.3", sampling="aggregate"), lambda v: 0.09),
    (dict(noise="gaussian:0.3", sampling="client"), lambda v: 0.09),
    (dict(noise="gaussian:0.3", sampling="explicit"), lambda v: 0.09),
    (dict(noise="uniform:0.6"), lambda v: 0.36 / 3),
    (dict(noise="bernoulli"), lambda v: float(np.mean(v * (1 - v)))),
]


@pytest.mark.parametrize("dp", [False, True])
@pytest.mark.parametrize("kwargs,pull_var", CASES)
def test_node_mean_has_the_model_variance(kwargs, pull_var, dp):
    M = 4
    config = fp.FedPNEConfig(num_clients=M, horizon=1000, split="longest", **kwargs,
                             **(dict(dp_epsilon=EPS, dp_delta=DP_DELTA) if dp else {}))
    objective = make("garland", M, heterogeneity="none")
    means, value = _node_means(config, objective)
    values = np.asarray(objective.local_values(jnp.array([0.5])))
    var = (pull_var(values) + (SIGMA_DP2 if dp else 0.0)) / (N_PULLS * M)
    assert abs(means.mean() - value) < 4 * math.sqrt(var / DRAWS)
    assert abs(means.var(ddof=1) / var - 1) < 4 * math.sqrt(2 / (DRAWS - 1))
