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
  any n.  Pull s draws from fold_in(phase key, s), so results do not depend on the chunk size.

Randomness is keyed by table row in blocks of ROW_BLOCK rows (see _row_draws), never by the table's
capacity, so a run repeated with a larger table gives the same numbers.  Each block draws all its
clients' randomness in one call per kind of draw: XLA compiles every random call site separately, and
one hash batch per block costs far less than one key per row.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from fedpne_jax.ordered import pairwise_mean
from fedpne_jax.params import Params, Static
from fedpne_jax import noise, partition



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


def _value_flags(static: Static, values, used, rewards: bool = True):
    return noise.value_flags(static.noise_kind, values, used, rewards)


ROW_BLOCK = 16


def _row_draws(static: Static, key, draw, *row_args):
    """Random arrays for every table row.  Block b covers rows [16 b, 16 b + 16) and is drawn by
    ``draw(fold_in(key, b), *args of those rows)``, so row j's numbers depend on (key, j) only: a larger
    table gives the same numbers, at a fraction of the cost of one key per row."""
    blocks = -(-static.capacity // ROW_BLOCK)
    pad = blocks * ROW_BLOCK - static.capacity
    args = [jnp.pad(a, [(0, pad)] + [(0, 0)] * (a.ndim - 1)).reshape((blocks, ROW_BLOCK) + a.shape[1:])
            for a in row_args]
    out = jax.vmap(lambda b, *xs: draw(jax.random.fold_in(key, b), *xs))(jnp.arange(blocks), *args)
    return out.reshape((blocks * ROW_BLOCK,) + out.shape[2:])[:static.capacity]


def _client_mean(static: Static, params: Params, value, n, successes, z):
    """One client's mean of its n rewards of one node (Algorithm 1, lines 7-8 and DP line 8).

    ``successes`` ~ Binomial(n, value) (Bernoulli rewards) and ``z`` ~ N(0, 1) are this client's draws;
    the Gaussian part of n rewards (observation and DP noise) averages to N(0, var / n) exactly.
    """
    nf = n.astype(static.float_dtype)
    base = successes / nf if static.noise_kind == "bernoulli" else value
    if _has_gauss(static):
        base = base + jnp.sqrt(_gauss_var(static, params) / nf) * z
    return base


def _centre_estimate(static, params, objective, x, pulls, n, phase_key, jc, part) -> Estimate:
    used = pulls > 0
    g = objective.value(x)
    gap = objective.f_star - g
    regret = jnp.where(used, gap * pulls.astype(gap.dtype), 0.0)
    row = jnp.minimum(jc, static.capacity - 1)
    partial = jnp.where(part > 0, gap[row] * part.astype(gap.dtype), 0.0)
    flags = _value_flags(static, g, used, rewards=False)
    dt = static.float_dtype
    if static.sampling == "aggregate":
        scale = jnp.sqrt(_gauss_var(static, params) / (n.astype(dt) * static.num_clients))
        noise = _row_draws(static, phase_key, lambda key: jax.random.normal(key, (ROW_BLOCK,), dt)) \
            if _has_gauss(static) else 0.0
        return Estimate(g + scale * noise, regret, partial, flags)

    M = static.num_clients
    local = objective.local_values(x)                                    # (cap, M)
    flags = flags | _value_flags(static, local, used[:, None])
    # All clients' draws for a block of rows come from one call per kind.
    if static.noise_kind == "bernoulli":
        successes = _row_draws(static, jax.random.fold_in(phase_key, 0),
                               lambda key, p: jax.random.binomial(key, n.astype(dt), p, dtype=dt),
                               jnp.clip(local, 0.0, 1.0))
    else:
        successes = jnp.zeros_like(local)
    if _has_gauss(static):
        z = _row_draws(static, jax.random.fold_in(phase_key, 1),
                       lambda key: jax.random.normal(key, (ROW_BLOCK, M), dt))
    else:
        z = jnp.zeros_like(local)
    client_means = jax.vmap(jax.vmap(lambda v, b, zz: _client_mean(static, params, v, n, b, zz)))(local, successes, z)
    return Estimate(pairwise_mean(client_means), regret, partial, flags)


def _pull_rewards(static: Static, params: Params, values, u_noise, u_gauss):
    """Rewards of one pull on every client, from the local values and the pull's uniforms."""
    gauss_var = _gauss_var(static, params) if _has_gauss(static) else None
    return noise.reward(static.noise_kind, params.noise_scale, gauss_var, values, u_noise, u_gauss)


def _compensated_add(acc, x):
    """Kahan summation step.  Explicit sampling adds up to n ~ 1e9 rewards per node: a plain float32
    running sum stalls at 2^24 (adding 1.0 no longer changes it); the compensated sum stays within a
    few ulps for any n."""
    total, lost = acc
    y = x - lost
    t = total + y
    return t, (t - total) - y


def _explicit_estimate(static, params, objective, centre, lower, width, pulls, n, phase_key, jc, part) -> Estimate:
    cap, M, B, D = static.capacity, static.num_clients, static.pull_chunk, static.dim
    dt = static.float_dtype
    clients = jnp.arange(M, dtype=jnp.int32)
    rows = jnp.arange(cap, dtype=jnp.int32)
    if static.pull == "centre":
        local_c = objective.local_values(centre)
        gap_c = objective.f_star - objective.value(centre)
    row = jnp.minimum(jc, cap - 1)

    def one_pull(j, u):
        """Client rewards (M,), regrets (M,) and local values (M,) of one pull of node row j.  One
        uniform draw u (M, D + 2) per client supplies the point, the noise and the Gaussian part."""
        if static.pull == "centre":
            values, gap = local_c[j], jnp.broadcast_to(gap_c[j], (M,))
        else:
            pts = lower[j] + u[:, :D] * width[j]
            values = jax.vmap(objective.local)(pts, clients)
            gap = objective.f_star - jax.vmap(objective.global_value)(pts)
        return _pull_rewards(static, params, values, u[:, D], u[:, D + 1]), gap, values

    def body(carry):
        chunk, sums, flags = carry
        s = chunk * B + jnp.arange(B, dtype=jnp.int32)                     # (B,)
        # Pull s of every row: fold_in(phase key, s), then blocks of rows as everywhere else.
        u = jax.vmap(lambda ss: _row_draws(static, jax.random.fold_in(phase_key, ss),
                                           lambda key: jax.random.uniform(key, (ROW_BLOCK, M, D + 2), dt)))(s)
        rewards, gaps, values = jax.vmap(jax.vmap(one_pull), in_axes=(None, 0))(rows, u)   # (B, cap, ...)
        valid = s[:, None] < pulls[None, :]                                 # (B, cap)
        flags = flags | _value_flags(static, values, valid[..., None]) \
            | _value_flags(static, gaps, valid[..., None], rewards=False)
        mean_gap = jnp.where(valid, pairwise_mean(gaps), 0.0)             # (B, cap)
        in_part = s[:, None] < part[None, :]                                # (B, C)

        # Pulls are added one after another, so the sums do not depend on the chunk size.
        def add(acc, b):
            r, g, p = acc
            r = _compensated_add(r, jnp.where(valid[b][:, None], rewards[b], 0.0))
            g = _compensated_add(g, mean_gap[b])
            p = _compensated_add(p, jnp.where(in_part[b], mean_gap[b][row], 0.0))
            return (r, g, p), None

        sums, _ = jax.lax.scan(add, sums, jnp.arange(B))
        return chunk + 1, sums, flags

    most = pulls[0]                                  # row 0 has the most pulls
    chunks = most // B + (most % B > 0)              # (most + B - 1) // B could pass int32
    pair = lambda shape: (jnp.zeros(shape, dt), jnp.zeros(shape, dt))
    init = (jnp.int32(0), (pair((cap, M)), pair((cap,)), pair(part.shape)), jnp.int32(0))
    _, ((reward_sum, _), (regret_sum, _), (partial, _)), flags = jax.lax.while_loop(
        lambda c: c[0] < chunks, body, init)
    counts = jnp.maximum(pulls, 1).astype(dt)
    mean = pairwise_mean(reward_sum / counts[:, None])
    return Estimate(mean, regret_sum, partial, flags)


def estimate(static: Static, params: Params, objective, table, centre, pulls, n, phase_key, jc, part) -> Estimate:
    """Pull every active node ``pulls[row]`` times on every client and return what the server
    receives (its mean over clients) and the regret paid.  ``jc, part`` locate each checkpoint
    inside the phase: node row jc_c has had part_c of its pulls when checkpoint c is reached."""
    if static.sampling == "explicit":
        lower, width = partition.lower_and_width(static, table, objective.lo, objective.hi) \
            if static.pull == "uniform" else (None, None)
        return _explicit_estimate(static, params, objective, centre, lower, width, pulls, n, phase_key, jc, part)
    return _centre_estimate(static, params, objective, centre, pulls, n, phase_key, jc, part)
