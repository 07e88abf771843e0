"""The best row of the table under a score: the argmax every non-descending policy selects by.

:func:`best_row` and :func:`best_leaf` take the argmax of a score over the live rows (or the
leaves), ties to the last row (PyXAB's ``>=`` over its nodes in creation order), with an optional
mask such as a depth; :func:`last_max` is the same over any 1-D array.  Two structures keep that
argmax up to date instead of recomputing it: :class:`RunningBest`, for a policy that evaluates each
node once in row order (DOO, SOO, SequOOL; its recommendation is then one gather), and
:class:`Tournament` with :func:`tournament_pop`, a max-tournament over the rows that costs
O(log capacity) per change (DOO's best leaf).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.trees.layout import CHILD, Table, TreeSpec, as_bits, as_float, centre


def _halve(v, combine):
    """``combine`` folded over a power-of-two axis by halves: log2 n elementwise steps, where XLA's
    CPU reduction of a short row (under vmap, many short rows) costs several times more."""
    while v.shape[-1] > 1:
        half = v.shape[-1] // 2
        v = combine(v[..., :half], v[..., half:])
    return v[..., 0]


def last_max(score, where=True):
    """(row, score) of the largest ``score`` (a 1-D array) among the rows where ``where`` holds, the
    last such row on ties (PyXAB's ``>=`` in creation order); row -1 when there is none."""
    n = score.shape[0]
    p = 1 << max(0, (n - 1).bit_length())
    rows = jnp.arange(p, dtype=jnp.int32)
    score = jnp.where(where, score, -jnp.inf)
    live = jnp.broadcast_to(jnp.asarray(where), (n,))
    if p > n:
        score = jnp.concatenate([score, jnp.full((p - n,), -jnp.inf, score.dtype)])
        live = jnp.concatenate([live, jnp.zeros((p - n,), bool)])
    top = _halve(score, jnp.maximum)
    return _halve(jnp.where(live & (score == top), rows, -1), jnp.maximum), top


def best_row(spec: TreeSpec, table: Table, score, where=True):
    """The live row with the largest ``score`` (a (capacity,) array) among the rows where ``where``
    holds; the last such row wins ties (PyXAB's ``>=`` over its nodes in creation order).  Returns
    (row, its score); row -1 when there is none."""
    return last_max(score, (jnp.arange(spec.capacity, dtype=jnp.int32) < table.size) & where)


class RunningBest(NamedTuple):
    """The recommendation of a policy that evaluates each node once, in row order, and keeps its value
    (DOO, SOO, SequOOL): the evaluated node with the largest value, the last created on ties (PyXAB's
    ``get_last_point`` over nodes evaluated once), kept up to date as the last row whose value is at
    least every earlier one.  The recommendation then costs a gather, not an argmax over the table
    (the simple regret asks for it at every checkpoint)."""
    row: jax.Array        # () int32
    value: jax.Array      # () -inf before the first evaluation


def running_best(dtype) -> RunningBest:
    return RunningBest(jnp.int32(0), jnp.asarray(-jnp.inf, dtype))


def running_best_step(best: RunningBest, row, value, active) -> RunningBest:
    """``best`` after row ``row`` is evaluated at ``value`` (nothing changes unless ``active``)."""
    better = active & (value >= best.value)
    return RunningBest(jnp.where(better, row, best.row), jnp.where(better, value, best.value))


def running_best_point(static, params, table: Table, extra, last):
    """A ``recommend`` hook for a policy whose ``extra`` keeps a :class:`RunningBest` as ``extra.best``:
    the centre of its row."""
    return centre(static.tree, table.rows[extra.best.row])


def best_leaf(spec: TreeSpec, table: Table, score, where=True):
    """:func:`best_row` among the leaves (DOO's and SOO's choice of the node to expand; ``where``: a
    depth mask for SOO's sweep)."""
    return best_row(spec, table, score, (table.rows[:, CHILD] < 0) & where)


class Tournament(NamedTuple):
    """A max-tournament over the table's rows: node ``P + r`` holds row r's score, every inner node
    ``i`` the better of ``2i`` and ``2i + 1`` (the right one on ties, so the last row wins, as in
    :func:`best_row`), and node 1 the best row: O(log capacity) per change instead of an argmax over
    the table (DOO's best leaf).  One integer array, score bits and row side by side, so that a
    change is one gather and one scatter of one array (XLA copies an array that is read for the
    update of another)."""
    nodes: jax.Array      # (2P, 2) itype: score bits, row; P = capacity rounded up to a power of 2


def tournament(spec: TreeSpec) -> Tournament:
    """Every row at -inf."""
    p = 1 << max(0, (spec.capacity - 1).bit_length())
    row = np.concatenate([np.zeros(p, np.int64), np.arange(p, dtype=np.int64)])
    for i in range(p - 1, 0, -1):
        row[i] = row[2 * i + 1]
    score = jnp.broadcast_to(as_bits(spec, -jnp.inf), (2 * p,))
    return Tournament(jnp.stack([score, jnp.asarray(row, spec.itype)], 1))


def _replay(sib_value, sib_row, value, win):
    """(values, rows) of the tournament nodes on a path, leaf .. root, when the leaf holds (value,
    win) and the path's siblings hold (sib_value, sib_row): node j holds the best of the leaf and
    siblings 0..j-1, the larger row on ties (merging right-wins-ties is the larger row, since a right
    subtree's rows are larger).  A prefix maximum over the path, as an associative scan: the
    (levels x levels) masked maxima it replaces were a third of DOO's round at 1,000 runs, and an
    unrolled chain of levels is a kernel per level."""
    values = jnp.concatenate([value[None], sib_value])
    rows = jnp.concatenate([win[None], sib_row])

    def better(a, b):
        take = (b[0] > a[0]) | ((b[0] == a[0]) & (b[1] > a[1]))
        return jnp.where(take, b[0], a[0]), jnp.where(take, b[1], a[1])

    return jax.lax.associative_scan(better, (values, rows))


def tournament_pop(spec: TreeSpec, tour: Tournament, row, value, do=True, take=False):
    """Row ``row``'s score set to ``value`` when ``do``; then the best row, which is returned, removed
    (score -inf) when ``take``.  Returns (tournament, best row).  Both changes are replayed on their
    two paths (log2 P + 1 nodes each) and written in one scatter."""
    p = tour.nodes.shape[0] // 2
    levels = jnp.arange(p.bit_length(), dtype=jnp.int32)
    row = jnp.asarray(row, jnp.int32)
    path = (p + row) >> levels                                           # leaf .. root
    sib = path[:-1] ^ 1
    read = tour.nodes[jnp.concatenate([path[:1], sib])]
    scores, rows = as_float(spec, read[:, 0]), read[:, 1].astype(jnp.int32)
    values, winners = _replay(scores[1:], rows[1:], jnp.where(do, jnp.asarray(value, spec.dtype), scores[0]), row)
    best = winners[-1]
    gone = (p + best) >> levels
    sib_gone = gone[:-1] ^ 1
    read = tour.nodes[sib_gone]
    changed = sib_gone == path[:-1]                                      # a sibling the first change rewrote
    gone_values, gone_rows = _replay(jnp.where(changed, values[:-1], as_float(spec, read[:, 0])),
                                     jnp.where(changed, winners[:-1], read[:, 1].astype(jnp.int32)),
                                     jnp.asarray(-jnp.inf, spec.dtype), best)
    index = jnp.concatenate([jnp.where(take & (path == gone), 2 * p, path), jnp.where(take, gone, 2 * p)])
    new = jnp.stack([as_bits(spec, jnp.concatenate([values, gone_values])),
                     jnp.concatenate([winners, gone_rows]).astype(spec.itype)], 1)
    return Tournament(tour.nodes.at[index].set(new, mode="drop")), best
