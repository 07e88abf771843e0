"""Every pull simulated, a block at a time: counter-based draws and sums in a fixed order.

Shared by Fed-PNE's ``explicit`` sampler and Fed1-UCB's per-pull noise.  A row (a node, or an arm)
is pulled ``pulls[row]`` times by each of M clients, in blocks of PULL_BLOCK, one block of one row
per loop trip.  Word w of pull s of client m at row j is lane s % 4 of Philox4x32-10 at counter
(s // 4, j, m, w) under the caller's key; a block is summed by a pairwise tree fixed by PULL_BLOCK,
then added to its row's total by Kahan addition in block order.

Why these draws and sums, and why one row per trip: docs/concepts/semantics.md, section "Semantics"
(per-pull randomness and sums).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from fedpne_jax.core import counters, noise
from objectives.ordered import compensated_add, pairwise_sum

PULL_BLOCK = 256        # pulls per block: a constant of the algorithm (it fixes the order of every sum)


def block_count(n):
    """Blocks of a row with n pulls (int32-safe: (n + P - 1) // P could pass 2^31 - 1)."""
    return n // PULL_BLOCK + (n % PULL_BLOCK > 0).astype(n.dtype)


def block_uniforms(key, row, block, num_clients: int, words: int, dtype):
    """The uniforms in [0, 1) of block ``block`` of row ``row`` as four lanes, each (words, M, P/4):
    pull s = block P + l P/4 + i (lane l, position i) draws word w for client m from lane l of
    Philox(counter (block P/4 + i, row, m, w)).  The lanes stay separate arrays until they are summed
    (block_sum): stacking or interleaving them first costs XLA a copy of every number, and about
    half the throughput on a CPU."""
    quads = PULL_BLOCK // 4
    q = (block * quads).astype(jnp.uint32) + jnp.arange(quads, dtype=jnp.uint32)
    m = jnp.arange(num_clients, dtype=jnp.uint32)
    w = jnp.arange(words, dtype=jnp.uint32)
    bits = counters.philox4x32((q[None, None, :], jnp.asarray(row).astype(jnp.uint32), m[None, :, None],
                              w[:, None, None]), key)
    return [counters.unit_floats(jnp.broadcast_to(b, (words, num_clients, quads)), dtype) for b in bits]


def block_offsets(block):
    """(4, PULL_BLOCK / 4) int32 pull indices s of a block: row l holds lane l (see block_uniforms)."""
    return block * PULL_BLOCK + jnp.arange(PULL_BLOCK, dtype=jnp.int32).reshape(4, PULL_BLOCK // 4)


def in_pull_order(lanes):
    """Four lanes (..., P/4) as one (..., P) array in pull order."""
    return jnp.concatenate(list(lanes), axis=-1)


def block_sum(lanes, valid):
    """Sum over a block, given as four lanes (..., P/4), of the entries where ``valid`` ((4, ..., P/4),
    lane l in row l): the pairwise tree of ordered.pairwise_sum over the block in pull order, whose
    first two levels, lanes (0 + 2) and (1 + 3), then their sum, are elementwise here."""
    x = [jnp.where(valid[lane], lanes[lane], jnp.zeros((), lanes[lane].dtype)) for lane in range(4)]
    return pairwise_sum((x[0] + x[2]) + (x[1] + x[3]))


def noise_words(kind: str, gauss: bool) -> int:
    """Uniforms one reward needs: one for uniform or Bernoulli noise, one for the Gaussian part
    (observation noise and DP noise together are one normal), none otherwise."""
    return int(kind in ("uniform", "bernoulli")) + int(gauss)


def rewards(kind: str, scale, gauss_var, values, u):
    """Rewards at ``values`` from the noise uniforms ``u`` (noise_words(kind, gauss) leading rows)."""
    first = kind in ("uniform", "bernoulli")
    u_noise = u[0] if first else None
    u_gauss = u[int(first)] if gauss_var is not None else None
    return noise.reward(kind, scale, gauss_var, values, u_noise, u_gauss)


def row_sums(rows, blocks, block_fn, row_zero, total_zero, capacity: int):
    """Sums over every pull of rows [0, rows), ``blocks`` blocks each, in one loop of rows x blocks trips.

    ``block_fn(row, block) -> (row_part, total_part, flags)``: a block's sums for its row (a pytree
    like ``row_zero``), for quantities summed over all rows (like ``total_zero``), and int32 flags.
    Returns (a pytree of (capacity,) + leaf tables of row sums, zero in rows not reached; the total
    sums; the OR of the flags).  All sums are compensated, in block order.
    """
    table = jax.tree.map(lambda z: jnp.zeros((capacity,) + jnp.shape(z), jnp.result_type(z)), row_zero)
    trips = rows * blocks

    def body(carry):
        i, acc, table, total, flags = carry
        row, block = i // blocks, i % blocks
        row_part, total_part, f = block_fn(row, block)
        fresh = block == 0
        acc = _kahan(jax.tree.map(lambda a: jnp.where(fresh, jnp.zeros_like(a), a), acc), row_part)
        total = _kahan(total, total_part)
        last = block == blocks - 1
        table = jax.tree.map(lambda t, a: t.at[row].set(jnp.where(last, a, t[row])), table, acc[0])
        return i + 1, acc, table, total, flags | f

    pair = lambda tree: (tree, jax.tree.map(jnp.zeros_like, tree))
    init = (jnp.int32(0), pair(row_zero), table, pair(total_zero), jnp.int32(0))
    _, _, table, total, flags = jax.lax.while_loop(lambda c: c[0] < trips, body, init)
    return table, total[0], flags


def _kahan(acc, x):
    """compensated_add over pytrees: acc = (totals, losses), x like totals."""
    totals, losses = acc
    out = jax.tree.map(lambda t, lost, v: compensated_add((t, lost), v), totals, losses, x)
    return (jax.tree.map(lambda _, o: o[0], totals, out), jax.tree.map(lambda _, o: o[1], totals, out))
