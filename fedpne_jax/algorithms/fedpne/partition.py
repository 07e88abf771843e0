"""The k-ary hierarchical partition of the box, held as a fixed-capacity node table.

A node is a box: along each dimension d it is cell ``a_d`` of the ``k^(e_d)`` equal cells of the
root's side, where e_d counts the node's ancestors split along d.  The cell index is kept as exact
base-k digits packed into int32 words (``digits`` per word, most significant word first), so node
geometry is exact at any depth the tables allow; float32 endpoints would merge nodes past depth ~23
on [0, 1].  Points are produced in the run's float precision only when an objective is evaluated.

All active nodes of a phase share one depth and occupy rows [0, used) in table order; rows beyond
``used`` are padding.  Under split='random' each node carries its own PRNG key, derived from the
run's partition key along the node's path (child j of a node: fold_in(key, j)), and its split
dimension is drawn from that key: one partition per run, identical for all clients, independent of
the table's capacity.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from fedpne_jax.algorithms.fedpne.plan import MAX_DEPTH, Static
from objectives.ordered import prefix_sum


class NodeTable(NamedTuple):
    cells: jax.Array    # (cap, D, W) int32, base-k digits of the cell index per dimension
    levels: jax.Array   # (cap, D) int32, e_d: splits along each dimension
    keys: jax.Array     # (cap, 2) uint32 partition key data per node (split='random')
    used: jax.Array     # () int32, number of active nodes (rows in use)


def root(static: Static, partition_key) -> NodeTable:
    cap, D, W = static.capacity, static.dim, static.words
    keys = jnp.broadcast_to(jax.random.key_data(partition_key), (cap, 2))
    return NodeTable(cells=jnp.zeros((cap, D, W), jnp.int32), levels=jnp.zeros((cap, D), jnp.int32),
                     keys=keys, used=jnp.int32(1))


def random_split_dim(key_data, dim: int):
    """The split dimension of a node under split='random', from its key data (2 uint32)."""
    return jax.random.randint(jax.random.wrap_key_data(key_data), (), 0, dim, dtype=jnp.int32)


def path_split_dim(partition_key, path, dim: int) -> int:
    """Split dimension (split='random') of the node reached from the root by child indices ``path``;
    lets a user (or a test) inspect a run's partition without running it."""
    key = partition_key
    for j in path:
        key = jax.random.fold_in(key, j)
    return int(random_split_dim(jax.random.key_data(key), dim))


def split_dims(static: Static, table: NodeTable, depth):
    """(cap,) split dimension of every row."""
    if static.dim == 1:
        return jnp.zeros((static.capacity,), jnp.int32)
    if static.split == "longest":
        return jnp.broadcast_to(jnp.asarray(static.split_dims, jnp.int32)[depth], (static.capacity,))
    return jax.vmap(lambda kd: random_split_dim(kd, static.dim))(table.keys)


def _kept_rows(keep, n_keep, size):
    """``jnp.nonzero(keep, size=size, fill_value=0)[0]``: the kept rows in table order, then zeros.
    The same algorithm (the s-th kept row is the number of rows whose running count of kept rows is
    at most s) with :func:`objectives.ordered.prefix_sum` for its two cumulative sums, which jnp's
    reduce-window spends sixteen additions an element on."""
    counts = jnp.zeros((size,), jnp.int32).at[prefix_sum(keep.astype(jnp.int32))].add(1, mode="drop")
    return jnp.where(jnp.arange(size) < n_keep, prefix_sum(counts), 0)


def expand(static: Static, table: NodeTable, keep, depth):
    """Replace the table by all k children of the kept rows, parents in table order, children in
    ascending coordinate order.  Returns (table, demand): demand is the number of children; when it
    exceeds the capacity the table is unusable and the run must stop (the caller flags it)."""
    cap, k = static.capacity, static.k
    n_keep = jnp.sum(keep, dtype=jnp.int32)
    parents = _kept_rows(keep, n_keep, cap)
    slot = jnp.arange(cap, dtype=jnp.int32)
    parent = parents[slot // k]
    j = slot % k
    d = split_dims(static, table, depth)[parent]

    levels = table.levels[parent]                                   # (cap, D)
    cells = table.cells[parent]                                     # (cap, D, W)
    e = jnp.take_along_axis(levels, d[:, None], axis=1)[:, 0]       # splits so far along d
    word = e // static.digits
    on_d = jnp.arange(static.dim)[None, :] == d[:, None]            # (cap, D)
    on_word = jnp.arange(static.words)[None, :] == word[:, None]    # (cap, W)
    target = on_d[:, :, None] & on_word[:, None, :]
    cells = jnp.where(target, cells * k + j[:, None, None], cells)
    levels = levels + on_d.astype(jnp.int32)
    if static.split == "random" and static.dim > 1:
        keys = jax.vmap(lambda kd, jj: jax.random.key_data(
            jax.random.fold_in(jax.random.wrap_key_data(kd), jj)))(table.keys[parent], j)
    else:
        keys = table.keys
    demand = n_keep * k
    return NodeTable(cells, levels, keys, jnp.minimum(demand, cap)), demand


def _powers(k: int, e, dt):
    """k**e for int32 arrays 0 <= e <= MAX_DEPTH, as products of the host's k^(2^b) over e's bits in a
    fixed order (inf past the float range): multiplications round the same way on every backend,
    while a float ``pow`` is exp(e·log k) in each backend's own math library, and DoubleSine's cusp
    turns an ulp of a centre into regret."""
    out = jnp.ones(e.shape, dt)
    largest = float(jnp.finfo(dt).max)
    for b in range(MAX_DEPTH.bit_length()):
        factor = float(k) ** (2 ** b) if 2 ** b * math.log(k) < math.log(largest) else math.inf
        out = jnp.where((e >> b) & 1 == 1, out * jnp.asarray(factor, dt), out)
    return out


def _fraction(static: Static, table: NodeTable, offset: float):
    """(cap, D) position of (cell index + offset) / k^e within the root's side, in [0, 1].

    The last non-empty word is divided as one quotient ((2a + 2 offset) / (2 k^n)), so centres
    such as 1/2 of a ternary split come out exactly instead of as 1/3 + 1/6 with two roundings
    (DoubleSine's cusp at 1/2 turns a one-ulp error into 5e-3 of regret per round).
    """
    dt = static.float_dtype
    k, s = static.k, static.digits
    e = table.levels                                                  # (cap, D)
    last = jnp.maximum(e - 1, 0) // s                                 # word holding the last digit
    frac = jnp.zeros(e.shape, dt)
    for q in reversed(range(static.words)):                          # smallest terms first
        n_q = jnp.clip(e - q * s, 0, s)
        a_q = table.cells[..., q].astype(dt)
        num = jnp.where(last == q, 2.0 * a_q + 2.0 * offset, 2.0 * a_q)
        term = num / (2.0 * _powers(k, n_q, dt)) * jnp.asarray(float(k) ** (-q * s), dt)
        frac = frac + jnp.where(q <= last, term, 0.0)
    return frac


def lower_and_width(static: Static, table: NodeTable, lo, hi):
    """(cap, D) lower corners and widths of all rows, in the run's float precision."""
    dt = static.float_dtype
    lo = jnp.asarray(lo, dt)
    span = jnp.asarray(hi, dt) - lo
    width = span * (1.0 / _powers(static.k, table.levels, dt))
    return lo + span * _fraction(static, table, 0.0), width


def centres(static: Static, table: NodeTable, lo, hi):
    dt = static.float_dtype
    lo = jnp.asarray(lo, dt)
    return lo + (jnp.asarray(hi, dt) - lo) * _fraction(static, table, 0.5)
