"""The refresh of every U and B of the table (PyXAB's updateUvalueTree and updateBackwardTree).

HCT and VHCT recompute every node's U at the rounds 2^k, where their confidence term moves, and
then every B bottom-up; GPO's and PCT's instances do the same inside their own schedules.
:func:`refresh_all` is that pass: one sweep over the rows per level of the tree.  Given a bound on
the rows in use (:func:`rows_after_updates`, the same in every run of a batch) it recomputes only
the smallest of a few fixed prefixes of the table that holds them (:func:`prefix_sizes`), so that a
refresh of a young tree in a large table touches the young tree's rows.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from fedpne_jax.algorithms.trees.layout import (
    B0,
    B1,
    CHILD,
    COUNT,
    DEPTH,
    MEAN,
    B,
    Table,
    TreeSpec,
    U,
    as_bits,
    as_float,
)


def rows_after_updates(k):
    """The most rows a table that starts as the root and its two children holds before the update
    of its round 2^k (HCT's and VHCT's refresh): 2^k - 1 updates, each expanding at most one node
    into two rows (a re-expansion reuses its rows)."""
    k = jnp.asarray(k, jnp.int32)
    return jnp.where(k >= 30, jnp.int32(2 ** 31 - 1), jnp.left_shift(jnp.int32(1), jnp.minimum(k, 29) + 1) + 1)


def prefix_sizes(capacity: int) -> tuple:
    """The row counts a bounded :func:`refresh_all` compiles a branch for: 1 + 16^j below the capacity,
    then the capacity.  Each branch costs compile time (about 0.3 s on a CPU), so they are few:
    :func:`rows_after_updates` equals one of them at every fourth k."""
    sizes, m = [], 16
    while m + 1 < capacity:
        sizes.append(m + 1)
        m *= 16
    return tuple(sizes) + (capacity,)


def refresh_all(spec: TreeSpec, table: Table, u_fn, live=None, per_row=()) -> Table:
    """U = u_fn(mean, count, depth, *per_row) of every credited node (+inf for the others) and then
    B of every node bottom-up (PyXAB's updateUvalueTree and updateBackwardTree): one sweep over the
    rows per level, ``height`` sweeps.  ``per_row``: arrays with a leading capacity axis that u_fn
    reads (VHCT's second moments), sliced with the rows.

    ``live``: a bound on the rows in use (same in every run of a batch, e.g.
    :func:`rows_after_updates`): only the smallest :func:`prefix_sizes` prefix that holds them is
    recomputed.  A refresh at round 2^k of a large table then touches O(2^k) rows, not the whole
    table (PCT refreshes each of its 21 instances 8 times in tables of 479 rows): the rows past the
    tree are unreachable, and every row of the tree gets the values a whole-table pass gives."""
    if live is None:
        return _refresh_prefix(spec, spec.capacity, u_fn, table, per_row)
    sizes = prefix_sizes(spec.capacity)
    index = jnp.searchsorted(jnp.asarray(sizes, jnp.int32), jnp.minimum(live, spec.capacity)).astype(jnp.int32)
    branches = [lambda tb, extra, m=m: _refresh_prefix(spec, m, u_fn, tb, extra) for m in sizes]
    return jax.lax.switch(index, branches, table, tuple(per_row))


def _refresh_prefix(spec: TreeSpec, m: int, u_fn, table: Table, per_row) -> Table:
    rows = table.rows[:m]
    count = rows[:, COUNT]
    u = jnp.where(count > 0, u_fn(as_float(spec, rows[:, MEAN]), jnp.maximum(count, 1), rows[:, DEPTH],
                                  *(a[:m] for a in per_row)), jnp.inf)
    u = u.astype(spec.dtype)
    has = rows[:, CHILD] >= 0
    c = jnp.maximum(rows[:, CHILD], 0)

    def sweep(_, b):
        return jnp.where(has, jnp.minimum(u, jnp.maximum(b[c], b[c + 1])), u)

    b = jax.lax.fori_loop(0, table.height, sweep, u)
    pair = jnp.where(has[:, None], jnp.stack([b[c], b[c + 1]], 1), jnp.inf)
    rows = rows.at[:, U:B + 1].set(as_bits(spec, jnp.stack([u, b], 1))).at[:, B0:B1 + 1].set(as_bits(spec, pair))
    return table._replace(rows=rows if m == spec.capacity else jax.lax.dynamic_update_slice(table.rows, rows, (0, 0)))
