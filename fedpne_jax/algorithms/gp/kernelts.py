"""KernelTS: GP Thompson sampling (Chowdhury & Gopalan, ICML 2017, GP-TS) as in the public KernelTS
code the paper ran (github.com/ZeroWeight/NeuralTS, ``learner_kernel.py``; paper App. E.1), on the
global objective (centralized).

Each round draws r(x) ~ N(mu(x), nu^2 sigma^2(x)) independently for every candidate and pulls the
argmax; defaults are the public code's (kernel exp(-||x - y||), lam = 1, nu = 1).  The differences
from the public code and from GP-TS proper: docs/algorithms/gp.md, section "KernelTS".
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.gp import gp, steps
from fedpne_jax.core import noise
from fedpne_jax.core.algorithm import Algorithm, Style
from fedpne_jax.core.counters import unit_floats
from fedpne_jax.core.validation import check_real
from objectives.ordered import first_argmax


@dataclasses.dataclass(frozen=True)
class KernelTSConfig(gp.GPConfig):
    lam: float = 1.0
    nu: float = 1.0

    def __post_init__(self):
        gp.check_noise_var("lam", self.lam)
        check_real("nu", self.nu, low=0.0, low_open=False, magnitude=gp.GP_MAGNITUDE)
        super().__post_init__()


class Params(NamedTuple):
    horizon: np.ndarray
    checkpoint_rounds: np.ndarray
    noise_scale: np.ndarray
    lengthscale: np.ndarray
    lam: np.float32
    nu: np.float32


def make_params(config: KernelTSConfig, tables=None) -> Params:
    return Params(**gp.common_params(config), lam=np.float32(config.lam), nu=np.float32(config.nu))


def standard_normals(key, t, static: gp.Static):
    """The N(0, 1) draws of round t (1-based) of the run with key ``key``, one per candidate."""
    w = gp.words(key, t, gp.noise_words(static.batch) + static.num_candidates)
    return _normals(static, w[gp.noise_words(static.batch):])


def _normals(static, w):
    # The inverse CDF of noise.standard_normal (as jax.random.normal).
    return noise.standard_normal(unit_floats(w))


def choose(static, params, model, extra, t, b, z):
    return first_argmax(model.mean + params.nu * jnp.sqrt(model.var) * z)


POLICY = gp.Policy(noise_var=lambda params: params.lam, init=lambda static, params: (), choose=choose,
                   num_words=lambda static: static.num_candidates, draw=_normals)


def run_single(static: gp.Static, params: Params, objective, key) -> gp.Outputs:
    return gp.simulate(static, params, objective, key, POLICY, gp.global_rewards)


ALGORITHM = Algorithm(name="kernelts", config_type=KernelTSConfig, make_static=gp.make_static,
                      make_params=make_params, run_single=run_single, metrics=gp.METRICS, check=gp.check,
                      steps=steps.hook(POLICY, gp.global_rewards),
                      styles=(("kernelts", Style("KernelTS", "#9467bd", "P")),))
