"""B-descent and the update of a path: the rounds of HCT, T-HOO and the algorithms built on them.

:func:`descend` follows the child with the larger B from the root under a stop rule, carrying a row
index, the current row's head and a path buffer (never the table); :func:`descent` is a ``select``
hook made of it.  :func:`update_path` is a round's update of the path it found: the reward credited,
U and B recomputed bottom-up along the path (:func:`chain`, an elementwise chain, not a loop over
the tree), the expansion fused in, and all of it written in one scatter.  Siblings off the path
keep their B, so this equals recomputing the whole tree.

A path's rows are root-first, so a row's depth is its index.  The path buffers hold
``spec.path_rows`` rows: they start at about half the height bound (:func:`start_path`) and a run
whose path outgrew them is rerun with the whole bound (:class:`PathTables`, :func:`grow_path`).
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from fedpne_jax.algorithms.trees.layout import (
    B0,
    B1,
    CHILD,
    COUNT,
    DESCENT,
    DYNAMIC,
    GEN,
    MEAN,
    B,
    Table,
    TreeSpec,
    U,
    as_bits,
    as_float,
    centre,
)
from fedpne_jax.algorithms.trees.partition import allocate, write_children
from fedpne_jax.core.errors import CapacityError

# The height bound of a descent algorithm is its worst case; its paths are far shorter (Garland and
# Himmelblau, T = 10^4, 100 runs: PCT's bound 33, its deepest tree 16; VPCT 49 and 15; POO 42 and
# 11), and a round's update costs in proportion to the buffer (PCT, 1,000 runs: 2.45 s with 17
# rows against 3.45 s with 34).  So the buffers start at half the bound, at least START_PATH rows,
# and a run whose path does not fit is rerun with the whole bound.
START_PATH = 16


class PathTables(NamedTuple):
    whole: bool = False      # path buffers of height + 1 rows, else start_path(height)


def start_path(height: int) -> int:
    return min(height + 1, max(START_PATH, (height + 2) // 2))


def path_of(tables: Optional[PathTables], height: int) -> int:
    """Rows of the path buffers of a descent algorithm with this height bound under ``tables``."""
    return height + 1 if tables is not None and tables.whole else start_path(height)


def path_tables(configs, objective=None) -> PathTables:
    return PathTables()


def grow_path(tables: PathTables, failed, allowed: bool, seeds) -> PathTables:
    """The whole height bound for the runs ``failed`` whose paths outgrew the buffers."""
    if not allowed or tables.whole:
        size = "the height bound" if tables.whole else "half the height bound"
        raise CapacityError(f"a descent's path outgrew its buffers ({size}) in {len(seeds)} seed(s) (e.g. seed "
                            f"{int(seeds[0])})" + ("" if tables.whole else "; rerun with grow=True"))
    return PathTables(whole=True)


def descend(spec: TreeSpec, table: Table, go_on):
    """Follow the child with the larger B from the root while the node has children and
    ``go_on(count, node, depth)`` holds; the upper child wins ties (PyXAB keeps the last child whose B
    is >= the best so far).  Returns (node, its row, path, length): path[0:length] are the rows
    root..node, so a path row's depth is its index."""
    rows = table.rows

    def cond(state):
        v, i, _, row = state
        return (row[CHILD] >= 0) & go_on(row[COUNT], v, i)

    def head(v):
        return jax.lax.dynamic_slice(rows, (v, jnp.zeros_like(v)), (1, DESCENT))[0]

    def body(state):
        _, i, path, row = state
        b = as_float(spec, row[B0:B1 + 1])
        w = (row[CHILD] + (b[1] >= b[0])).astype(jnp.int32)
        return w, i + 1, path.at[i + 1].set(w, mode="drop"), head(w)

    first = (jnp.int32(0), jnp.int32(0), jnp.zeros((spec.path_rows,), jnp.int32), head(0))
    v, i, path, _ = jax.lax.while_loop(cond, body, first)
    return v, rows[v], path, i + 1


class Descent(NamedTuple):
    """A B-descent's choice: the node reached and its path."""
    node: jax.Array       # () int32
    path: jax.Array       # (height + 1,) int32 rows root..node
    length: jax.Array     # () int32


def descent(stop_rule: Optional[Callable] = None) -> Callable:
    """A ``select`` hook: descend by B while ``stop_rule(static, params, t)(count, node, depth)`` holds (to a
    leaf when None) and evaluate the centre of the node reached."""
    def select(static, params, table, extra, t):
        go_on = (lambda count, node, depth: jnp.bool_(True)) if stop_rule is None else stop_rule(static, params, t)
        node, row, path, length = descend(static.tree, table, go_on)
        return Descent(node, path, length), centre(static.tree, row)
    return select


def chain_loop(is_last, at_node, u, sib):
    """B along a path (see :func:`chain`) by a loop over its rows, one small kernel a row."""
    h = u.shape[0]

    def body(i, state):
        cur, out = state
        j = h - 1 - i
        cur = jnp.where(is_last[j], at_node[j], jnp.minimum(u[j], jnp.maximum(cur, sib[j])))
        return cur, out.at[j].set(cur)

    return jax.lax.fori_loop(0, h, body, (jnp.asarray(-jnp.inf, u.dtype), jnp.zeros((h,), u.dtype)))[1]


def chain_scan(is_last, at_node, u, sib):
    """B along a path (see :func:`chain`) by an associative scan of log depth: f_j(x) = min(a_j,
    max(x, b_j)) compose in closed form, f_2(f_1(x)) = min(min(a_2, max(a_1, b_2)), max(x, max(b_1,
    b_2)))."""
    def then(below, above):          # above after below (the scan runs from the deepest row up)
        return jnp.minimum(above[0], jnp.maximum(below[0], above[1])), jnp.maximum(below[1], above[1])

    a, b = jax.lax.associative_scan(then, (jnp.where(is_last, at_node, u), jnp.where(is_last, at_node, sib)),
                                    reverse=True)
    return jnp.minimum(a, b)         # applied to -inf


def chain(is_last, at_node, u, sib):
    """B along the path, bottom-up: -inf below the node, at_node at it, min(U, max(B below, sibling's
    B)) above: row j applies f_j(x) = min(a_j, max(x, b_j)) to the B below it (the node: a = b =
    at_node, a constant).

    On a CPU a loop (:func:`chain_loop`); elsewhere, where a kernel costs microseconds to launch, a
    scan (:func:`chain_scan`).  Unrolled step by step, XLA recomputed every step's prefix inside each
    step's kernel: O(height^2) work a round, half of a round of PCT (height 34).  min and max select
    one of their operands, so both give the step-by-step chain's B, bit for bit."""
    return jax.lax.platform_dependent(is_last, at_node, u, sib, cpu=chain_loop, default=chain_scan)


def _recompute_b(spec: TreeSpec, rows, path, length, u):
    """(B, lower child's B, upper child's B) of path rows root..node given their U: B = U at a leaf,
    min(U, max of the children's B) at the node, and above it B_j = min(U_j, max(B_{j+1}, B of the
    sibling of path[j+1])), an elementwise chain over the path buffer's rows; each row's children's B
    then take the new B of path[j+1]."""
    idx = jnp.arange(spec.path_rows)
    last = length - 1
    values = as_float(spec, rows)
    child, b0, b1 = rows[:, CHILD], values[:, B0], values[:, B1]
    at_node = jnp.where(child >= 0, jnp.minimum(u, jnp.maximum(b0, b1)), u)
    upper = jnp.roll(path, -1) != child                       # path[j+1] is the upper child
    sib = jnp.where(upper, b0, b1)
    b = chain(idx == last, at_node, u, sib)
    below = jnp.roll(b, -1)
    inner = idx < last
    return b, jnp.where(inner, jnp.where(upper, sib, below), b0), jnp.where(inner, jnp.where(upper, below, sib), b1)


def update_path(spec: TreeSpec, table: Table, path, length, credited, reward, u_fn, grow_fn=None, split_u=None,
                active=True, pending=None):
    """One round's update of the rows root..node (path[0:length]): one scatter of their first
    DYNAMIC columns, and one of the two new rows when the node is expanded (nothing unless
    ``active``).  Returns (table, overflow, regrown).

    Credit ``reward`` to the rows where ``credited`` (count + 1, mean += (r - mean) / count, so a
    node whose rewards are all equal keeps that value exactly) and set their U = u_fn(mean, count,
    depth); recompute B bottom-up along the path (:func:`_recompute_b`), the only nodes whose U or
    subtree changed.  Siblings off the path keep their B, so this equals recomputing the whole tree.

    ``pending``: (path, length) of a node whose children were replaced last round (PyXAB's HCT):
    its path's B are recomputed first, and the rows it shares with ``path`` (a common prefix) are
    then updated from those values, so the two passes give PyXAB's whole-tree recomputation.

    Then, when ``grow_fn(count, depth, child)`` (of the updated rows) holds at the node, expand it
    with the split uniform ``split_u`` (:func:`expand`'s allocation, fused into the path's scatter):
    two children in new rows at the end of the table, or, when the node already has children (PyXAB's
    HCT re-expanding an internal node; ``regrown``), fresh nodes in its children's rows (the old
    subtree below them is dropped, as PyXAB drops it).  Its B keeps the value just computed: a new
    leaf's children have B = +inf, which leaves min(U, max) = U, and a re-expanded node's B changes
    only at PyXAB's next update.  ``overflow``: the table had no room (nothing written for the
    children), or the path did not fit the path buffer (spec.path_rows; nothing it wrote counts)."""
    n, h = spec.capacity, spec.path_rows
    outgrown = active & (length > h)
    idx = jnp.arange(h)
    last = length - 1
    is_last = idx == last
    path = jnp.where(idx < length, path, 0)
    rows = table.rows[path]                                   # (h, width)
    targets = []
    if pending is not None:
        p_path, p_length = pending
        p_path = jnp.where(idx < p_length, p_path, 0)
        p_rows = table.rows[p_path]
        b, b0, b1 = _recompute_b(spec, p_rows, p_path, p_length, as_float(spec, p_rows)[:, U])
        p_rows = p_rows.at[:, B0:B1 + 1].set(as_bits(spec, jnp.stack([b0, b1], 1))).at[:, B].set(as_bits(spec, b))
        common = (p_path == path) & (idx < p_length) & (idx < length)
        rows = jnp.where(common[:, None], p_rows, rows)
        targets.append((jnp.where((idx < p_length) & ~common & active, p_path, n), p_rows[:, :DYNAMIC]))
    values = as_float(spec, rows)
    child = rows[:, CHILD]
    count = rows[:, COUNT] + credited.astype(spec.itype)
    mean = values[:, MEAN]
    mean = jnp.where(credited, mean + (reward - mean) / count.astype(spec.dtype), mean)
    u = jnp.where(credited, u_fn(mean, count, idx), values[:, U])
    b, b0, b1 = _recompute_b(spec, rows, path, length, u)

    if grow_fn is not None:
        node_row = rows[last]
        row, do, overflow, again = allocate(spec, table, node_row, jnp.any(is_last & grow_fn(count, idx, child))
                                             & active)
        grown = is_last & do
        child = jnp.where(grown, row, child)
        b0 = jnp.where(grown, jnp.inf, b0)
        b1 = jnp.where(grown, jnp.inf, b1)
        gen = rows[:, GEN] + grown
    else:
        gen = rows[:, GEN]
    new = jnp.concatenate([jnp.stack([child, count], 1), as_bits(spec, jnp.stack([b0, b1], 1)),
                           gen[:, None].astype(spec.itype), as_bits(spec, jnp.stack([mean, u, b], 1))], 1)
    targets.append((jnp.where((idx < length) & active, path, n), new))     # row n: dropped
    where = jnp.concatenate([t for t, _ in targets])
    rows = table.rows.at[where, :DYNAMIC].set(jnp.concatenate([r for _, r in targets]), mode="drop")
    if grow_fn is None:
        return Table(rows=rows, size=table.size, height=table.height), outgrown, jnp.bool_(False)
    table = write_children(spec, rows, table, node_row, path[last], last, row, do, again, split_u)
    return table, overflow | outgrown, do & again
