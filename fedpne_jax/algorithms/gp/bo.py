"""BO: Bayesian optimisation with expected improvement, GPyOpt's defaults in spirit (the paper's BO,
App. E.1 "The BO Algorithm", ran GPyOpt with its defaults), on the global objective (centralized).

GPyOpt's default loop: 5 random initial points, then the maximiser of expected improvement under a
Matern-5/2 GP on the standardised observations.  The formulas, the fixed hyper-parameters, the
incremental standardisation and the log-EI comparison: docs/algorithms/gp.md, section "BO".
"""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.gp import gp, steps
from fedpne_jax.core.algorithm import Algorithm, Style
from fedpne_jax.core.validation import check_int, check_real
from objectives.ordered import exact_sqrt, first_argmax


@dataclasses.dataclass(frozen=True)
class BOConfig(gp.GPConfig):
    kernel: str = "matern52"
    lengthscale: float = 0.2
    noise_var: float = 0.01
    xi: float = 0.01
    initial: int = 5

    def __post_init__(self):
        gp.check_noise_var("noise_var", self.noise_var)
        check_real("xi", self.xi, low=0.0, low_open=False, magnitude=gp.GP_MAGNITUDE)
        check_int("initial", self.initial, 1)
        super().__post_init__()


class Params(NamedTuple):
    horizon: np.ndarray
    checkpoint_rounds: np.ndarray
    noise_scale: np.ndarray
    lengthscale: np.ndarray
    noise_var: np.float32
    xi: np.float32
    initial: np.int32


def make_params(config: BOConfig, tables=None) -> Params:
    return Params(**gp.common_params(config), noise_var=np.float32(config.noise_var),
                  xi=np.float32(config.xi), initial=np.int32(min(config.initial, 2**31 - 1)))


class Extra(NamedTuple):
    ones: jax.Array              # (K,) A 1: the posterior mean of observations that were all 1
    observed: jax.Array          # observations so far
    y_mean: jax.Array            # their running mean and sum of squared deviations (Welford)
    y_m2: jax.Array


_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def log_ei_factor(u):
    """log h(u), h(u) = u Phi(u) + phi(u) = EI / sigma, for any float32 u without underflow.

    With a = |u| and g(a) = 1 - a M(a), M(a) = Phi(-a)/phi(a) = sqrt(pi/2) erfcx(a/sqrt2) (Mills'
    ratio): h(u) = phi(u) g(a) for u <= 0 and h(u) = u + phi(u) g(a) for u > 0 (as Phi(u) =
    1 - phi(u) M(u)).  g is evaluated as 1 - a M(a) for a <= 8 (relative error ~ a^2 eps) and by the
    asymptotic series (1/a^2)(1 - 3/a^2 + 15/a^4 - 105/a^6 + 945/a^8) beyond (relative error
    < 1e-5); the u <= 0 side is summed in logs, so nothing underflows.  One erfcx, one exp, two logs.
    """
    a = jnp.abs(u)
    log_phi = -0.5 * u * u - _LOG_SQRT_2PI
    near = 1.0 - a * (math.sqrt(math.pi / 2.0) * jax.scipy.special.erfcx(a * (1.0 / math.sqrt(2.0))))
    w = 1.0 / jnp.maximum(a * a, 64.0)
    far = w * (1.0 + w * (-3.0 + w * (15.0 + w * (-105.0 + w * 945.0))))
    g = jnp.where(a <= 8.0, near, far)
    return jnp.where(u > 0.0, jnp.log(u + jnp.exp(log_phi) * g), log_phi + jnp.log(g))


def initial_index(key, t, static: gp.Static):
    """The random candidate of initial round t (1-based) of the run with key ``key``."""
    w = gp.words(key, t, gp.noise_words(static.batch) + 1)
    return _initial(static, w[gp.noise_words(static.batch):])


def _initial(static, w):
    # A uniform index: the word modulo K (bias below K / 2^32).
    return (w[0] % jnp.uint32(static.num_candidates)).astype(jnp.int32)


def _scale(extra: Extra):
    sd = jnp.sqrt(extra.y_m2 / jnp.maximum(extra.observed, 1.0))
    return jnp.where(sd > 0.0, sd, 1.0)


def standardised_mean(model, extra: Extra):
    """(A y - mean(y) A 1) / std(y): the posterior mean of the standardised observations."""
    return (model.mean - extra.y_mean * extra.ones) / _scale(extra)


def choose(static, params, model, extra: Extra, t, b, random):
    mu = standardised_mean(model, extra)
    sigma = exact_sqrt(jnp.maximum(model.var, 1e-10))       # GPyOpt clips v at 1e-10
    best = jnp.max(jnp.where(model.observed, mu, -jnp.inf))
    u = (mu - best - params.xi) / sigma
    ei = first_argmax(jnp.log(sigma) + log_ei_factor(u))
    return jnp.where(t <= params.initial, random, ei)


def on_observation(params, extra: Extra, c, d, j, y):
    count = extra.observed + 1.0
    delta = y - extra.y_mean
    y_mean = extra.y_mean + delta / count
    return Extra(ones=gp.condition_mean(extra.ones, c, d, j, 1.0), observed=count, y_mean=y_mean,
                 y_m2=extra.y_m2 + delta * (y - y_mean))


def recommend(params, model, extra: Extra):
    return first_argmax(model.mean - extra.y_mean * extra.ones)


def init(static, params) -> Extra:
    zero = jnp.float32(0.0)
    return Extra(ones=jnp.zeros((static.num_candidates,), jnp.float32), observed=zero, y_mean=zero, y_m2=zero)


POLICY = gp.Policy(noise_var=lambda params: params.noise_var, init=init, choose=choose,
                   num_words=lambda static: 1, draw=_initial,
                   on_observation=on_observation, recommend=recommend)


def run_single(static: gp.Static, params: Params, objective, key) -> gp.Outputs:
    return gp.simulate(static, params, objective, key, POLICY, gp.global_rewards)


ALGORITHM = Algorithm(name="bo", config_type=BOConfig, make_static=gp.make_static, make_params=make_params,
                      run_single=run_single, metrics=gp.METRICS, check=gp.check,
                      steps=steps.hook(POLICY, gp.global_rewards),
                      styles=(("bo", Style("BO", "#e377c2", "*")),))
