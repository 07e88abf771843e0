"""Rewards of one phase: what the clients observe when they pull the nodes, and the regret paid.

Three samplers, all exact in distribution (see FedPNEConfig.sampling):

* ``aggregate``: the server's mean (1/M) sum_m mu_m,i of client means is drawn directly as
  f(x_i) + N(0, (sigma^2 + sigma_dp^2) / (n M)).  Exact for Gaussian (or no) noise with centre
  pulls because f is the mean of the local objectives and independent Gaussians sum to a Gaussian.
* ``client``: each client m draws its mean of n pulls, f_m(x_i) + N(0, (sigma^2 + sigma_dp^2)/n), or
  Binomial(n, f_m(x_i))/n (+ N(0, sigma_dp^2/n) under DP) for Bernoulli rewards (Algorithm 1),
  vmapped over clients; the server averages them (Algorithm 2).
* ``explicit``: every pull is simulated: a point (the centre, or uniform in the node), its reward
  with per-pull noise, and the regret at that point; pulls run in chunks so memory stays bounded for
  any n.  Every pull's randomness comes from fold_in(node key, pull index), so results do not depend
  on the chunk size or on the table's capacity.

Randomness is keyed per node row (fold_in(phase key, row)), never by the table's capacity, so a run
that is repeated with a larger table gives the same numbers.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from fedpne_jax.params import Params, Static
from fedpne_jax import partition

FLAG_NONFINITE = 4
FLAG_RANGE = 8


class Estimate(NamedTuple):
    mean: jax.Array      # (cap,) server's mean reward estimate per node
    regret: jax.Array    # (cap,) per-client average regret paid by each node's pulls this phase
    partial: jax.Array   # (C,) regret of the first part_c pulls of node jc_c
    flags: jax.Array     # () int32


def _gauss_var(static: Static, params: Params):
    """Variance per pull of the Gaussian part of a reward: observation noise plus DP noise."""
    var = jnp.zeros((), static.float_dtype)
    if static.noise_kind == "gaussian":
        var = var + params.noise_scale ** 2
    if static.dp:
        var = var + params.dp_var
    return var


def _has_gauss(static: Static) -> bool:
    return static.noise_kind == "gaussian" or static.dp


def _value_flags(static: Static, values, used):
    bad = jnp.any(used & ~jnp.isfinite(values))
    flags = jnp.where(bad, FLAG_NONFINITE, 0)
    if static.noise_kind == "bernoulli":
        out = jnp.any(used & ((values < 0.0) | (values > 1.0)))
        flags = flags | jnp.where(out, FLAG_RANGE, 0)
    return flags.astype(jnp.int32)


def _node_keys(static: Static, phase_key):
    return jax.vmap(lambda j: jax.random.fold_in(phase_key, j))(jnp.arange(static.capacity))


def _client_mean(static: Static, params: Params, value, n, key):
    """One client's exact mean of n rewards of one node (Algorithm 1, lines 7-8)."""
    nf = n.astype(static.float_dtype)
    if static.noise_kind == "bernoulli":
        p = jnp.clip(value, 0.0, 1.0)
        base = jax.random.binomial(jax.random.fold_in(key, 0), nf, p) / nf
    else:
        base = value
    if _has_gauss(static):
        base = base + jnp.sqrt(_gauss_var(static, params) / nf) * jax.random.normal(jax.random.fold_in(key, 1))
    return base


def _centre_estimate(static, params, objective, x, pulls, n, phase_key, jc, part) -> Estimate:
    used = pulls > 0
    g = jax.vmap(objective.global_value)(x)
    gap = objective.f_star - g
    regret = jnp.where(used, gap * pulls.astype(gap.dtype), 0.0)
    row = jnp.minimum(jc, static.capacity - 1)
    partial = jnp.where(part > 0, gap[row] * part.astype(gap.dtype), 0.0)
    flags = _value_flags(static, g, used) & FLAG_NONFINITE
    keys = _node_keys(static, phase_key)
    if static.sampling == "aggregate":
        scale = jnp.sqrt(_gauss_var(static, params) / (n.astype(static.float_dtype) * static.num_clients))
        noise = jax.vmap(lambda key: jax.random.normal(key))(keys) if _has_gauss(static) else 0.0
        mean = g + scale * noise
    else:
        clients = jnp.arange(static.num_clients, dtype=jnp.int32)
        local = jax.vmap(lambda p: jax.vmap(lambda m: objective.local(p, m))(clients))(x)   # (cap, M)
        flags = flags | _value_flags(static, local, used[:, None])
        client_keys = jax.vmap(lambda kj: jax.vmap(lambda m: jax.random.fold_in(kj, m))(clients))(keys)
        per_client = jax.vmap(jax.vmap(lambda v, key: _client_mean(static, params, v, n, key)))
        mean = jnp.mean(per_client(local, client_keys), axis=1)
    return Estimate(mean, regret, partial, flags)


def _pull_reward(static: Static, params: Params, value, key):
    """One reward at a point with local value ``value`` (explicit sampling)."""
    if static.noise_kind == "bernoulli":
        r = (jax.random.uniform(jax.random.fold_in(key, 0)) < value).astype(static.float_dtype)
    elif static.noise_kind == "uniform":
        a = params.noise_scale
        r = value + jax.random.uniform(jax.random.fold_in(key, 0), minval=-a, maxval=a)
    else:
        r = value
    if _has_gauss(static):
        r = r + jnp.sqrt(_gauss_var(static, params)) * jax.random.normal(jax.random.fold_in(key, 1))
    return r


def _explicit_estimate(static, params, objective, centre, lower, width, pulls, n, phase_key, jc, part) -> Estimate:
    cap, M, B, D = static.capacity, static.num_clients, static.pull_chunk, static.dim
    clients = jnp.arange(M, dtype=jnp.int32)
    node_keys = _node_keys(static, phase_key)
    if static.pull == "centre":
        local_c = jax.vmap(lambda p: jax.vmap(lambda m: objective.local(p, m))(clients))(centre)
        gap_c = objective.f_star - jax.vmap(objective.global_value)(centre)
    row = jnp.minimum(jc, cap - 1)

    def one_pull(j, s):
        """Client rewards (M,) and mean regret () of pull s of node row j."""
        key = jax.random.fold_in(node_keys[j], s)
        ckeys = jax.vmap(lambda m: jax.random.fold_in(key, m))(clients)
        if static.pull == "centre":
            values, gap = local_c[j], gap_c[j] * jnp.ones((M,), static.float_dtype)
        else:
            u = jax.vmap(lambda kk: jax.random.uniform(jax.random.fold_in(kk, 2), (D,)))(ckeys)
            pts = lower[j] + u * width[j]
            values = jax.vmap(objective.local)(pts, clients)
            gap = objective.f_star - jax.vmap(objective.global_value)(pts)
        rewards = jax.vmap(lambda v, kk: _pull_reward(static, params, v, kk))(values, ckeys)
        return rewards, gap, values

    def body(carry):
        chunk, reward_sum, regret_sum, partial, flags = carry
        s = chunk * B + jnp.arange(B, dtype=jnp.int32)                     # (B,)
        rows = jnp.arange(cap, dtype=jnp.int32)
        rewards, gaps, values = jax.vmap(lambda j: jax.vmap(lambda ss: one_pull(j, ss))(s))(rows)
        valid = s[None, :] < pulls[:, None]                                 # (cap, B)
        flags = flags | _value_flags(static, values, valid[:, :, None]) \
            | _value_flags(static, gaps, valid[:, :, None]) & FLAG_NONFINITE
        reward_sum = reward_sum + jnp.sum(jnp.where(valid[:, :, None], rewards, 0.0), axis=1)
        mean_gap = jnp.where(valid, jnp.mean(gaps, axis=-1), 0.0)          # (cap, B)
        regret_sum = regret_sum + jnp.sum(mean_gap, axis=1)
        in_part = s[None, :] < part[:, None]                                # (C, B)
        partial = partial + jnp.sum(jnp.where(in_part, mean_gap[row], 0.0), axis=1)
        return chunk + 1, reward_sum, regret_sum, partial, flags

    chunks = (pulls[0] + B - 1) // B      # row 0 has the most pulls
    dt = static.float_dtype
    init = (jnp.int32(0), jnp.zeros((cap, M), dt), jnp.zeros((cap,), dt), jnp.zeros(part.shape, dt), jnp.int32(0))
    _, reward_sum, regret_sum, partial, flags = jax.lax.while_loop(lambda c: c[0] < chunks, body, init)
    counts = jnp.maximum(pulls, 1).astype(dt)
    mean = jnp.mean(reward_sum / counts[:, None], axis=1)
    return Estimate(mean, regret_sum, partial, flags)


def estimate(static: Static, params: Params, objective, table, pulls, n, phase_key, jc, part) -> Estimate:
    """Pull every active node ``pulls[row]`` times on every client and return what the server
    receives (its mean over clients) and the regret paid.  ``jc, part`` locate each checkpoint
    inside the phase: node row jc_c has had part_c of its pulls when checkpoint c is reached."""
    centre = partition.centres(static, table, objective.lo, objective.hi)
    if static.sampling == "explicit":
        lower, width = partition.lower_and_width(static, table, objective.lo, objective.hi)
        return _explicit_estimate(static, params, objective, centre, lower, width, pulls, n, phase_key, jc, part)
    return _centre_estimate(static, params, objective, centre, pulls, n, phase_key, jc, part)
