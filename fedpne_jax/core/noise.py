"""Observation noise of one pull, shared by Fed-PNE's per-pull sampler and the baselines.

A reward is drawn from two uniforms: ``u_noise`` gives the Bernoulli outcome or the uniform noise,
``u_gauss`` the Gaussian part (observation noise and, under DP, the privacy noise) by the inverse
CDF.  Drawing from uniforms keeps one random call per batch of pulls, whatever the noise kind.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from fedpne_jax.core.errors import FLAG_ABOVE_F_STAR, FLAG_NONFINITE, FLAG_RANGE, f_star_tolerance
from objectives.ordered import no_contraction


def standard_normal(u):
    """N(0, 1) from U[0, 1) by the inverse CDF, as jax.random.normal does: 2u - 1 is kept above -1
    (by one ulp; -1 + tiny rounds back to -1) so that u = 0, drawn once in 2^23, is not -inf."""
    lowest = jnp.nextafter(jnp.asarray(-1.0, u.dtype), jnp.asarray(0.0, u.dtype))
    return jnp.sqrt(2.0).astype(u.dtype) * jax.lax.erf_inv(jnp.maximum(2.0 * u - 1.0, lowest))


def reward(kind: str, scale, gauss_var, values, u_noise, u_gauss):
    """Rewards at objective ``values`` (any shape) from uniforms of the same shape.

    kind: 'gaussian' | 'bernoulli' | 'uniform' | 'none' (static).  ``scale``: the half-width a of
    uniform noise.  ``gauss_var``: variance of the Gaussian part, or None when there is none.  Each
    noise term is kept out of an FMA with the value it is added to (no_contraction), so a reward is
    the same number compiled and under jax.disable_jit.
    """
    if kind == "bernoulli":
        r = (u_noise < values).astype(values.dtype)
    elif kind == "uniform":
        r = values + no_contraction(scale * (2.0 * u_noise - 1.0))
    else:
        r = values
    if gauss_var is not None:
        r = r + no_contraction(jnp.sqrt(gauss_var) * standard_normal(u_gauss))
    return r


def subgaussian_scale(kind: str, scale: float) -> float:
    """The sub-Gaussian scale R of one observation's noise, used by every confidence bound: sigma for
    'gaussian:sigma'; a / sqrt(3) for 'uniform:a' (U[-a, a] is strictly sub-Gaussian: its best
    variance proxy is its variance a^2 / 3); 1/2 for Bernoulli rewards (any variable in [0, 1]); 0
    without noise."""
    return {"gaussian": scale, "uniform": scale / math.sqrt(3.0), "bernoulli": 0.5, "none": 0.0}[kind]


def observe(key, kind: str, scale, values):
    """One noisy reward per entry of ``values`` with the run's noise model (no DP noise):
    gaussian N(0, scale^2), uniform U[-scale, scale], Bernoulli(value), or none."""
    u = jax.random.uniform(key, (2,) + jnp.shape(values), jnp.result_type(values))
    return reward(kind, scale, scale ** 2 if kind == "gaussian" else None, values, u[0], u[1])


def value_flags(kind: str, values, used, rewards: bool = True, f_star=None):
    """FLAG_NONFINITE if a used value is NaN/inf; with ``rewards`` (values that become rewards of
    noise ``kind``) also FLAG_RANGE if Bernoulli rewards meet a value outside [0, 1].  With
    ``f_star`` (the values are the global objective, whose regret f* - f is paid) also
    FLAG_ABOVE_F_STAR if a used value exceeds f* by more than :func:`fedpne_jax.core.errors.f_star_tolerance`."""
    flags = jnp.where(jnp.any(used & ~jnp.isfinite(values)), FLAG_NONFINITE, 0)
    if rewards and kind == "bernoulli":
        flags = flags | jnp.where(jnp.any(used & ((values < 0.0) | (values > 1.0))), FLAG_RANGE, 0)
    if f_star is not None:
        real = jnp.result_type(values.dtype, jnp.float32)     # integer values compare as reals
        # f* is the objective's data (a traced scalar), so the bound is computed in the run's precision.
        f_star = jnp.asarray(f_star, real)
        bound = f_star + f_star_tolerance(f_star)
        flags = flags | jnp.where(jnp.any(used & (values.astype(real) > bound)), FLAG_ABOVE_F_STAR, 0)
    return flags.astype(jnp.int32)

