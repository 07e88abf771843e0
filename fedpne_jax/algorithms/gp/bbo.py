"""BBO: batched GP-UCB on M clients (the paper's BBO, App. E.1 "The BBO Algorithm", treats the M
local values of a round as observations of one objective).  The paper ran Wang et al.'s ensemble
BO; here the batch is chosen by the GP-BUCB rule (Desautels, Krause & Burdick, JMLR 2014), the
standard batched GP-UCB.

Round t picks M candidates one after another with hallucinated observations, and client m evaluates
pick m on its local objective.  The rule, the regret and the choices stated (beta, lam, B, delta, R,
kernel, cost per round): docs/algorithms/gp.md, section "BBO".
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
