"""Synthetic test functions of the X-armed bandit literature, as plain JAX functions of one point.

Every function maximises; ``f_star`` is the exact supremum on the stated box.  Sums over coordinates
use objectives.ordered so that a point's value does not depend on the batch it is evaluated in.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import jax
import jax.numpy as jnp

from objectives.ordered import pairwise_mean, pairwise_sum


def garland(x):
    """x(1-x)(4-sqrt|sin 60x|) on [0, 1].

    Its supremum is at x = pi/6, where sin(60x) = sin(10 pi) = 0: f* = 4(pi/6)(1-pi/6).  A grid
    misses this cusp (a 2e6-point grid finds 0.99686) and PyXAB states f* = 1; both bias regret.
    """
    x = x[0]
    return x * (1.0 - x) * (4.0 - jnp.sqrt(jnp.abs(jnp.sin(60.0 * x))))


GARLAND_F_STAR = 4.0 * (math.pi / 6.0) * (1.0 - math.pi / 6.0)

_DS_RHO1, _DS_RHO2, _DS_TMAX = 0.3, 0.8, 0.5
_DS_EP1, _DS_EP2 = -math.log2(_DS_RHO1), -math.log2(_DS_RHO2)


def double_sine(x):
    """DoubleSine (rho1 = 0.3, rho2 = 0.8, tmax = 0.5) on [0, 1], f* = 0 at x = 0.5.

    With u = 2|x - tmax|: s(log2(u)/2) (u^e2 - u^e1) - u^e2, s(y) = (sin(2 pi y) + 1)/2,
    e_i = -log2(rho_i).  We follow PyXAB's last term (-u^e2); the paper's text writes -u^e1, which
    would make f positive near tmax and contradict f* = 0.
    """
    u = 2.0 * jnp.abs(x[0] - _DS_TMAX)
    safe_u = jnp.where(u > 0.0, u, 1.0)
    wave = (jnp.sin(jnp.log2(safe_u) / 2.0 * 2.0 * jnp.pi) + 1.0) / 2.0
    value = wave * (safe_u ** _DS_EP2 - safe_u ** _DS_EP1) - safe_u ** _DS_EP2
    return jnp.where(u > 0.0, value, 0.0)


def himmelblau(x):
    """-((x1^2 + x2 - 11)^2 + (x1 + x2^2 - 7)^2) / 890 on [-5, 5]^2; f* = 0 at its four minima."""
    a = x[0] ** 2 + x[1] - 11.0
    b = x[0] + x[1] ** 2 - 7.0
    return -(a * a + b * b) / 890.0


def ackley(x):
    """Negated Ackley function on [-1, 1]^D, f* = 0 at the origin.

    Written as 20 expm1(-0.2 r) + e expm1(-2 mean sin^2(pi x)), algebraically equal to
    20 exp(-0.2 r) + exp(mean cos 2 pi x) - e - 20 but without the float32 cancellation of ~22.7 - 22.7
    near the optimum, where regret is measured.
    """
    r = jnp.sqrt(pairwise_mean(x * x))
    s2 = jnp.sin(jnp.pi * x) ** 2
    return 20.0 * jnp.expm1(-0.2 * r) + math.e * jnp.expm1(-2.0 * pairwise_mean(s2))


def rastrigin(x):
    """Negated Rastrigin function on [-1, 1]^D, f* = 0 at the origin.

    -(10 D + sum(x^2 - 10 cos 2 pi x)) written as -sum(x^2 + 20 sin^2(pi x)) to avoid cancellation.
    """
    return -pairwise_sum(x * x + 20.0 * jnp.sin(jnp.pi * x) ** 2)


@dataclasses.dataclass(frozen=True)
class SharedFunction:
    """f_k(x) for any f_k of ``functions`` (functions of one point on one box), k read from the data
    (``{"function": k}``, int32) by a switch: objectives built with the same tuple have one structure
    and share a compiled program, where each function alone compiles its own.  The index must not be
    batched (a batched switch computes every branch), so it is the objective's data, the same for
    every run of a batch."""
    functions: tuple[Callable, ...]

    def __call__(self, data, x):
        return jax.lax.switch(data["function"], self.functions, x)
