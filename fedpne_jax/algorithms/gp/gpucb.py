"""GP-UCB: Improved GP-UCB (IGP-UCB) of Chowdhury & Gopalan, *On Kernelized Multi-armed Bandits*
(ICML 2017), Algorithm 1, on the global objective (centralized, as HCT and KernelTS in the paper's
Section 5).

Round t pulls the candidate maximising mu_{t-1}(x) + beta_t sigma_{t-1}(x), with Theorem 2's lam and
beta_t.  The choices it makes (the information gain of the chosen points for gamma, B, delta, R, the
kernel, the finite candidates): docs/algorithms/gp.md, section "GP-UCB".
"""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple, Optional

import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.gp import gp, steps
from fedpne_jax.core.algorithm import Algorithm, Style
from fedpne_jax.core.noise import subgaussian_scale
from fedpne_jax.core.validation import check_real
from objectives.ordered import first_argmax


@dataclasses.dataclass(frozen=True)
class GPUCBConfig(gp.GPConfig):
    """IGP-UCB.  lam=None means 1 + 2/T; R=None means the noise's sub-Gaussian constant."""

    lam: Optional[float] = None
    B: float = 1.0
    R: Optional[float] = None
    delta: float = 0.1

    def __post_init__(self):
        if self.lam is not None:
            gp.check_noise_var("lam", self.lam)
        check_real("B", self.B, low=0.0, low_open=False, magnitude=gp.GP_MAGNITUDE)
        if self.R is not None:
            check_real("R", self.R, low=0.0, low_open=False, magnitude=gp.GP_MAGNITUDE)
        check_real("delta", self.delta, low=0.0, high=1.0, magnitude=gp.GP_MAGNITUDE)
        super().__post_init__()

    def observations(self) -> int:
        return self.horizon

    @property
    def lam_value(self) -> float:
        return 1.0 + 2.0 / self.observations() if self.lam is None else float(self.lam)

    @property
    def R_value(self) -> float:
        return subgaussian_scale(self.noise_kind, self.noise_scale) if self.R is None else float(self.R)

    def resolved(self) -> dict:
        out = super().resolved()
        out.update(lam=self.lam_value, R=self.R_value)
        return out


class Params(NamedTuple):
    horizon: np.ndarray
    checkpoint_rounds: np.ndarray
    noise_scale: np.ndarray
    lengthscale: np.ndarray
    lam: np.float32
    B: np.float32
    R: np.float32
    log_inv_delta: np.float32


def make_params(config: GPUCBConfig, tables=None) -> Params:
    return Params(**gp.common_params(config), lam=np.float32(config.lam_value), B=np.float32(config.B),
                  R=np.float32(config.R_value), log_inv_delta=np.float32(math.log(1.0 / config.delta)))


def beta(params, gamma):
    """beta_t from gamma_{t-1} (IGP-UCB)."""
    return params.B + params.R * jnp.sqrt(2.0 * (gamma + 1.0 + params.log_inv_delta))


def choose(static, params, model, gamma, t, b, key):
    return first_argmax(model.mean + beta(params, gamma) * jnp.sqrt(model.var))


def information_gain(params, gamma, var_j):
    return gamma + 0.5 * jnp.log1p(var_j / params.lam)


POLICY = gp.Policy(noise_var=lambda params: params.lam, init=lambda static, params: jnp.float32(0.0),
                   choose=choose, on_choice=information_gain)


def run_single(static: gp.Static, params: Params, objective, key) -> gp.Outputs:
    return gp.simulate(static, params, objective, key, POLICY, gp.global_rewards)


ALGORITHM = Algorithm(name="gpucb", config_type=GPUCBConfig, make_static=gp.make_static, make_params=make_params,
                      run_single=run_single, metrics=gp.METRICS, check=gp.check,
                      steps=steps.hook(POLICY, gp.global_rewards),
                      styles=(("gpucb", Style("GP-UCB", "#8c564b", "X")),))
