"""Rewards of one phase: what the clients observe when they pull the nodes, and the regret paid.

Three samplers, all exact in distribution (see FedPNEConfig.sampling): ``aggregate`` (the server's
mean drawn directly), ``client`` (each client's mean drawn) and ``explicit`` (every pull simulated,
a block at a time: pulls.py).  Randomness is keyed by table row in blocks of ROW_BLOCK rows, never by
the table's capacity.

What each sampler draws and when it is exact, where the objective is evaluated, and how the
randomness is keyed: docs/algorithms/fedpne.md, section "Sampling a phase" (and
docs/concepts/semantics.md).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from fedpne_jax.algorithms.fedpne import partition
from fedpne_jax.algorithms.fedpne.plan import Params, Static
from fedpne_jax.core import blocks, counters, noise
from fedpne_jax.core import pulls as pulls_lib
from objectives.ordered import inclusive_scan, no_contraction, pairwise_mean


class Estimate(NamedTuple):
    mean: jax.Array       # (cap,) server's mean reward estimate per node
    regret: jax.Array     # (cap,) per-client average regret paid by each node's pulls this phase
    partial: jax.Array | None  # (C,) regret of the first part_c pulls of node jc_c: uniform points only
    flags: jax.Array      # () int32
    evaluated: jax.Array  # (4,) int32 objective evaluations, in the units of evaluation.py
    gap: jax.Array        # (cap,) f* - f at the node's centre, inf where not pulled; NaN with uniform points


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


def _value_flags(static: Static, values, used, rewards: bool = True, f_star=None):
    return noise.value_flags(static.noise_kind, values, used, rewards, f_star)


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


def gaussian_mean_noise(var, n, z):
    """The Gaussian part of a mean of ``n`` rewards, each with independent N(0, ``var``) noise, from
    one standard normal ``z``: exactly N(0, var / n) (``n`` in the rewards' float type)."""
    return jnp.sqrt(var / n) * z


def _client_mean(static: Static, params: Params, value, n, successes, z):
    """One client's mean of its n rewards of one node (Algorithm 1, lines 7-8 and DP line 8).

    ``successes`` ~ Binomial(n, value) (Bernoulli rewards) and ``z`` ~ N(0, 1) are this client's draws;
    the Gaussian part of n rewards (observation and DP noise) averages to N(0, var / n) exactly.
    """
    nf = n.astype(static.float_dtype)
    base = successes / nf if static.noise_kind == "bernoulli" else value
    if _has_gauss(static):
        base = base + gaussian_mean_noise(_gauss_var(static, params), nf, z)
    return base


def server_mean(client_means):
    """The server's estimate of each node (Algorithm 2, line 12): the mean of the M clients' means,
    ``client_means`` (..., M), in a fixed order."""
    return pairwise_mean(client_means)


def centre_regret(static, f_star, g, pulls, check_f_star: bool = True):
    """(regret per node, flags, gap per pulled node) of pulls at the node centres, whose global
    values are ``g``: n pulls of a node cost n times its gap, with no per-pull work (a checkpoint
    within a node's pulls is priced the same way, by phase.write_span).  ``check_f_star``: flag a
    value above f* (values of the objective; not means told by clients, which noise may lift)."""
    gap = f_star - g
    regret = jnp.where(pulls > 0, gap * pulls.astype(gap.dtype), 0.0)
    return regret, _value_flags(static, g, pulls > 0, rewards=False, f_star=f_star if check_f_star else None), \
        jnp.where(pulls > 0, gap, jnp.inf)


def _pulled_rows(pulls):
    """Rows [0, r) hold every pulled row (a phase pulls a prefix of the table)."""
    return jnp.max(jnp.where(pulls > 0, jnp.arange(pulls.shape[0], dtype=jnp.int32) + 1, 0))


def _centre_values(static, objective, x, pulls, local: bool):
    """Global values at the pulled rows (and the clients' local values when ``local``), and the count.
    With the local values, an objective whose global value combines them (objectives.averages) is
    evaluated at the local site only."""
    fn = objective.values_and_locals if local else lambda p: (objective.value(p),)
    values, rows = blocks.at_rows(static.eval_block, static.capacity, fn, x, _pulled_rows(pulls))
    at_global = jnp.int32(0) if local and objective.combine is not None else rows
    return values, centre_evaluations(at_global, rows if local else jnp.int32(0))


def centre_evaluations(global_rows, local_rows):
    """A phase's evaluation counters (evaluation.py's units): rows at the global and the local site,
    no pull blocks, one evaluation call."""
    return jnp.stack([global_rows, local_rows, jnp.int32(0), jnp.int32(1)])


def told_estimate(static: Static, objective, centre, pulls, told, f_star) -> Estimate:
    """What the server makes of the clients' told means ``told`` (M, cap) of a phase pulled at the
    node centres ``centre`` ``pulls`` times (ask/tell, steps.py): their :func:`server_mean`, and the
    regret of the pulls, at the global values of ``objective`` where there is one (as the samplers
    price it), else at the server's means (f* - mean; NaN for f* unknown).  The clients evaluated
    their local values: the counters hold the rows evaluated here and the rows asked of them."""
    mean = server_mean(told.T)
    rows = _pulled_rows(pulls)
    if objective is None:
        regret, flags, gap = centre_regret(static, f_star, mean, pulls, check_f_star=False)
        return Estimate(mean, regret, None, flags, centre_evaluations(jnp.int32(0), rows), gap)
    (g,), _ = _centre_values(static, objective, centre, pulls, local=False)
    regret, flags, gap = centre_regret(static, f_star, g, pulls)
    flags = flags | _value_flags(static, mean, pulls > 0, rewards=False)
    return Estimate(mean, regret, None, flags, centre_evaluations(rows, rows), gap)


def _centre_estimate(static, params, objective, x, pulls, n, phase_key) -> Estimate:
    used = pulls > 0
    aggregate = static.sampling == "aggregate"
    values, evaluated = _centre_values(static, objective, x, pulls, local=not aggregate)
    g = values[0]
    regret, flags, gap = centre_regret(static, objective.f_star, g, pulls)
    dt = static.float_dtype
    if aggregate:
        scale = jnp.sqrt(_gauss_var(static, params) / (n.astype(dt) * static.num_clients))
        noise = _row_draws(static, phase_key, lambda key: jax.random.normal(key, (ROW_BLOCK,), dt)) \
            if _has_gauss(static) else 0.0
        return Estimate(g + scale * noise, regret, None, flags, evaluated, gap)

    M = static.num_clients
    local = values[1]                                                    # (cap, M)
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
    return Estimate(server_mean(client_means), regret, None, flags, evaluated, gap)


def _explicit_estimate(static, params, objective, centre, lower, width, pulls, n, phase_key, jc, part,
                       complete) -> Estimate:
    """Every pull simulated (see pulls.py): point, reward and regret of each pull of each client.

    Rewards are drawn only in a phase that completes: a phase cut at T uploads nothing, so its
    rewards reach no estimate and no output.  With centre pulls the regret of n pulls is n times the
    node's gap, exactly as in the other samplers; with uniform points every pull's regret is f* - f
    at its own point, averaged over the clients."""
    cap, M, D, dt = static.capacity, static.num_clients, static.dim, static.float_dtype
    key = counters.key_words(phase_key)
    gauss_var = _gauss_var(static, params) if _has_gauss(static) else None
    kind = static.noise_kind
    uniform_points = static.pull == "uniform"
    words = D * uniform_points + pulls_lib.noise_words(kind, gauss_var is not None)
    blocks = pulls_lib.block_count(n)
    zero = jnp.zeros((), dt)

    if not uniform_points:
        (g, local_c), evaluated = _centre_values(static, objective, centre, pulls, local=True)   # (cap,), (cap, M)
        regret, flags, gap = centre_regret(static, objective.f_star, g, pulls)
        flags = flags | _value_flags(static, local_c, (pulls > 0)[:, None])
        if words == 0:                       # no noise: every reward is the value itself
            return Estimate(server_mean(local_c), regret, None, flags, evaluated, gap)

        def centre_block(j, b):
            lanes = pulls_lib.block_uniforms(key, j, b, M, words, dt)                  # 4 x (words, M, P/4)
            r = [pulls_lib.rewards(kind, params.noise_scale, gauss_var, local_c[j][:, None], u) for u in lanes]
            return pulls_lib.block_sum(r, (pulls_lib.block_offsets(b) < pulls[j])[:, None, :]), (), jnp.int32(0)

        rows = jnp.where(complete, jnp.sum(pulls > 0, dtype=jnp.int32), 0)
        sums, _, _ = pulls_lib.row_sums(rows, blocks, centre_block, jnp.zeros((M,), dt), (), cap)
        counts = jnp.maximum(pulls, 1).astype(dt)
        # The clients' mean sum, then one division, kept apart: dividing each client's sum first (or
        # letting XLA fold the two divisions) compiles to other last bits than the eager run.
        return Estimate(no_contraction(pairwise_mean(sums)) / counts, regret, None, flags, evaluated, gap)

    clients = jnp.arange(M, dtype=jnp.int32)

    def point_block(j, b):
        valid = (pulls_lib.block_offsets(b) < pulls[j])[:, None, :]                  # (4, 1, P/4)
        u = jnp.stack(pulls_lib.block_uniforms(key, j, b, M, words, dt))              # (4, words, M, P/4)
        pts = lower[j] + no_contraction(jnp.moveaxis(u[:, :D], 1, -1) * width[j])      # (4, M, P/4, D)
        local = lambda p, m: jax.vmap(lambda x: objective.local(x, m))(p)
        values = jax.vmap(jax.vmap(local, in_axes=(0, 0)), in_axes=(0, None))(pts, clients)   # (4, M, P/4)
        g = jax.vmap(jax.vmap(jax.vmap(objective.global_value)))(pts)
        gaps = objective.f_star - g
        flags = _value_flags(static, values, valid) | _value_flags(static, g, valid, False, objective.f_star)
        r = pulls_lib.rewards(kind, params.noise_scale, gauss_var, values, jnp.moveaxis(u[:, D:], 1, 0))
        reward_sum = pulls_lib.block_sum(r, valid & complete)
        mean_gap = jnp.where(valid[:, 0], pairwise_mean(jnp.moveaxis(gaps, 1, -1)), zero)   # (4, P/4)
        # The regret of the block's first i pulls, for every i: checkpoint c inside this block reads
        # its prefix, one after it the whole block.
        prefix = inclusive_scan(pulls_lib.in_pull_order(mean_gap))
        upto = part - b * pulls_lib.PULL_BLOCK
        partial = jnp.where((jc == j) & (upto > 0),
                            prefix[jnp.clip(upto, 1, pulls_lib.PULL_BLOCK) - 1], zero)
        return (reward_sum, prefix[-1]), partial, flags

    rows = jnp.sum(pulls > 0, dtype=jnp.int32)
    (sums, regret), partial, flags = pulls_lib.row_sums(
        rows, blocks, point_block, (jnp.zeros((M,), dt), zero), jnp.zeros(part.shape, dt), cap)
    counts = jnp.maximum(pulls, 1).astype(dt)
    evaluated = jnp.stack([jnp.int32(0), jnp.int32(0), rows * blocks, jnp.int32(0)])      # row_sums' trips
    # Uniform points: the best-so-far regret would need every pull's value in order; not recorded.
    gap = jnp.full((cap,), jnp.nan, dt)
    return Estimate(no_contraction(pairwise_mean(sums)) / counts, regret, partial, flags, evaluated, gap)   # (as above)


def estimate(static: Static, params: Params, objective, table, centre, pulls, n, phase_key, jc, part,
             complete=True) -> Estimate:
    """Pull every active node ``pulls[row]`` times on every client and return what the server
    receives (its mean over clients) and the regret paid.  ``jc, part`` locate each checkpoint
    inside the phase: node row jc_c has had part_c of its pulls when checkpoint c is reached (read
    with uniform points only, whose pulls each have their own regret).
    ``complete``: the phase reaches its end (its estimates are uploaded); a cut phase's estimate
    is never read, and the explicit sampler does not draw it."""
    if static.sampling == "explicit":
        lower, width = partition.lower_and_width(static, table, objective.lo, objective.hi) \
            if static.pull == "uniform" else (None, None)
        return _explicit_estimate(static, params, objective, centre, lower, width, pulls, n, phase_key, jc, part,
                                  complete)
    return _centre_estimate(static, params, objective, centre, pulls, n, phase_key)
