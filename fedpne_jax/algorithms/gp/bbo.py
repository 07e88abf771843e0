"""BBO: batched GP-UCB on M clients (the paper's BBO, App. E.1 "The BBO Algorithm", treats the M
local values of a round as observations of one objective).  The paper ran Wang et al.'s ensemble
BO; here the batch is chosen by the GP-BUCB rule (Desautels, Krause & Burdick, JMLR 2014), the
standard batched GP-UCB.

Round t picks M candidates one after another: pick m maximises mu_fb(x) + beta sigma_{t,m-1}(x), where
mu_fb is the posterior mean at the last feedback (the end of round t - 1) and sigma_{t,m-1} is the
posterior standard deviation after conditioning on the m - 1 points already picked this round
("hallucinated" observations: a GP's variance does not depend on the values).  Client m evaluates
pick m on its local objective f_m with noise; then the mean is conditioned on the M values.  Regret
is the per-client average (1/M) sum_m sum_s (f* - f(x_{m,s})) with f the global objective, as for
Fed-PNE.

Choices, all stated: beta is IGP-UCB's (gpucb: B + R sqrt(2(gamma + 1 + ln(1/delta))), gamma the
information gain of every point picked so far, hallucinated ones included), not GP-BUCB's
exp(C)-inflated beta; lam = 1 + 2/(M T) (IGP-UCB's 1 + 2/n with n = M T observations); B = 1,
delta = 0.1, R = the noise's sub-Gaussian constant (the clients' shifts are not modelled); kernel
exp(-||x - y||), l = 1; candidates as in gp.  A round costs O(M K^2) whatever t is (M rank-one
covariance updates, applied in one pass over the K x K matrix: gp.condition_many), instead of
refitting an (M t) x (M t) GP.
"""
from __future__ import annotations

import dataclasses

from fedpne_jax.algorithms.gp import gp, gpucb, steps
from fedpne_jax.algorithms.gp.gpucb import Params, make_params
from fedpne_jax.core.algorithm import Algorithm, Style
from fedpne_jax.core.validation import check_int

MAX_CLIENTS = 4096


@dataclasses.dataclass(frozen=True)
class BBOConfig(gpucb.GPUCBConfig):
    """GP-BUCB on M clients; lam=None means 1 + 2/(M T)."""

    num_clients: int = 10

    def __post_init__(self):
        check_int("num_clients", self.num_clients, 1, MAX_CLIENTS)
        super().__post_init__()

    def observations(self) -> int:
        return self.horizon * self.num_clients


POLICY = gpucb.POLICY


def make_static(config: BBOConfig, objective, tables=None) -> gp.Static:
    return gp.make_static(config, objective, batch=config.num_clients)


def run_single(static: gp.Static, params: Params, objective, key) -> gp.Outputs:
    return gp.simulate(static, params, objective, key, POLICY, gp.local_rewards)


ALGORITHM = Algorithm(name="bbo", config_type=BBOConfig, make_static=make_static, make_params=make_params,
                      run_single=run_single, metrics=gp.METRICS, federated=True, check=gp.check,
                      steps=steps.hook(POLICY, gp.local_rewards, federated=True),
                      styles=(("bbo", Style("BBO", "#7f7f7f", "h")),))
