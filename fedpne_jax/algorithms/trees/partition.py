"""The binary partition of the box, and the expansion of a node into its two halves.

Expanding a node halves its box along one dimension into a lower child (row ``child``) and an upper
child (row ``child + 1``); a node's point is its box's centre.  The dimension is ``random`` (one
per expansion, drawn in expansion order, as PyXAB draws it: the node expanded in round t splits
along floor(u_t D) for the round's split uniform u_t, the root along the top bits of the run key) or
``longest`` (the longest side, lowest index on ties: a per-depth table decided on the host).

:func:`new_table` is a run's table before round 1 (the root, and its two children when the
algorithm starts with the root expanded); :func:`expand` is the one expansion of a leaf (two rows,
capacity checked, one scatter that may also carry one row of the caller's); :func:`allocate` and
:func:`write_children` are the same expansion cut in two, for an update that fuses it into its own
scatter.  Halving is exact while a side's endpoints fit the mantissa (about 24 halvings per
dimension on [0, 1] in float32, 53 in float64).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from fedpne_jax.algorithms.trees.layout import B0, B1, CHILD, DEPTH, GEN, Table, TreeSpec, U, as_bits, box_of

MAX_RANDOM_DIM = 1 << 16


def check_objective(split: str, objective) -> None:
    if split == "random" and objective.dim >= MAX_RANDOM_DIM:
        raise ValueError(f"split 'random' supports dimensions below {MAX_RANDOM_DIM}, objective "
                         f"{objective.name!r} has {objective.dim}; use split 'longest'")


def root_dim(key, dim: int):
    """Split dimension of the root under split='random': floor(w D / 2^16) for w the top 16 bits of
    the run key's first data word (the key is itself a hash output; D < 2^16)."""
    word = jax.random.key_data(key)[0]
    return (((word >> 16) * jnp.uint32(dim)) >> 16).astype(jnp.int32)


def random_dim(u, dim: int):
    """Split dimension floor(u D) of a uniform u in [0, 1)."""
    return jnp.minimum((u * dim).astype(jnp.int32), dim - 1)


def split_dim(spec: TreeSpec, depth, u):
    """Split dimension of a node at ``depth``; ``u``: the round's split uniform (split='random')."""
    if spec.dim == 1:
        return jnp.int32(0)
    if spec.split == "random":
        return random_dim(u, spec.dim)
    return jnp.asarray(spec.longest_dims, jnp.int32)[jnp.minimum(depth, spec.height)]


def _row(spec: TreeSpec, child, count, depth, parent, gen, mean, u, b, b0, b1, box):
    def ints(*v):
        return jnp.stack([jnp.asarray(x).astype(spec.itype) for x in v])

    def floats(*v):
        return as_bits(spec, jnp.stack([jnp.asarray(x, spec.dtype) for x in v]))

    return jnp.concatenate([ints(child, count), floats(b0, b1), ints(gen), floats(mean, u, b), ints(depth, parent),
                            as_bits(spec, box)])


def halves(spec: TreeSpec, box, d):
    """(2, 2, D) lower and upper half of a (2, D) box along ``d``; the cut is (lo + hi) / 2, PyXAB's
    midpoint."""
    lo, hi = box[0], box[1]
    on_d = jnp.arange(spec.dim) == d
    mid = (lo[d] + hi[d]) / 2
    return jnp.stack([jnp.stack([lo, jnp.where(on_d, mid, hi)]), jnp.stack([jnp.where(on_d, mid, lo), hi])])


def _children(spec: TreeSpec, row, me, d):
    """(2, width) rows of the lower and upper half of node row ``row`` (at table row ``me``) along
    ``d``."""
    boxes = halves(spec, box_of(spec, row), d).reshape(2, 2 * spec.dim)
    inf = jnp.inf
    return jax.vmap(lambda box: _row(spec, -1, 0, row[DEPTH] + 1, me, 0, 0.0, inf, inf, inf, inf, box))(boxes)


def new_table(spec: TreeSpec, lo, hi, key, root_expanded: bool = True) -> Table:
    """The root (row 0) and, when ``root_expanded`` (PyXAB's HCT and T-HOO expand the root when they
    are created), its two children (rows 1, 2).  Unused rows are leaves with B = +inf."""
    n = spec.capacity
    box = jnp.concatenate([jnp.asarray(lo, spec.dtype), jnp.asarray(hi, spec.dtype)])
    inf = jnp.inf
    root = _row(spec, 1 if root_expanded else -1, 0, 0, -1, 1 if root_expanded else 0, 0.0, inf, inf, inf, inf, box)
    blank = root.at[CHILD].set(-1).at[GEN].set(0)
    if not root_expanded:
        return Table(rows=jnp.concatenate([root[None], jnp.broadcast_to(blank, (n - 1, spec.width))]),
                     size=jnp.int32(1), height=jnp.int32(0))
    d = root_dim(key, spec.dim) if spec.split == "random" and spec.dim > 1 else split_dim(spec, jnp.int32(0), None)
    kids = _children(spec, root, 0, d)
    rows = jnp.concatenate([root[None], kids, jnp.broadcast_to(blank, (n - 3, spec.width))])
    return Table(rows=rows, size=jnp.int32(3), height=jnp.int32(1))


def allocate(spec: TreeSpec, table: Table, node_row, do):
    """Rows for the children of a node being expanded: its own children's rows when it has some (a
    re-expansion replaces them), else the next two free rows.  Returns (row, do, overflow, again):
    ``do`` is False and ``overflow`` True when there is no room."""
    again = node_row[CHILD] >= 0
    row = jnp.where(again, node_row[CHILD], table.size).astype(jnp.int32)
    fits = again | (table.size + 2 <= spec.capacity)
    return row, do & fits, do & ~fits, again


def write_children(spec: TreeSpec, rows, table: Table, node_row, node, depth, row, do, again, split_u) -> Table:
    """``rows`` with node ``node``'s two children (split by the rule at ``depth``) at ``row``, ``row`` + 1
    when ``do``; size and height follow."""
    kids = _children(spec, node_row, node, split_dim(spec, depth, split_u))
    rows = rows.at[jnp.where(do, row + jnp.arange(2, dtype=jnp.int32), spec.capacity)].set(kids, mode="drop")
    return Table(rows=rows, size=jnp.where(do & ~again, table.size + 2, table.size),
                 height=jnp.where(do, jnp.maximum(table.height, depth + 1), table.height))


def expand(spec: TreeSpec, table: Table, node, do, split_u, node_row=None, child_u=None, also=None):
    """Expand leaf ``node`` when ``do``: two children in the next two free rows (the split dimension
    of its depth, or from the round's uniform ``split_u``), its child pointer set and its generation
    counted, all in one scatter.  Returns (table, overflow): overflow when the table had no room
    (nothing written).  (Re-expanding an internal node is :func:`update_path`'s.)

    ``node_row``: the node's row when the caller has changed it since ``table`` (default: the
    table's); ``child_u(kids) -> (2,)``: the children's U column from their (2, width) rows (default
    +inf); ``also``: (index, row, do) of one more row the caller writes in the same scatter, skipped
    when it is the expanded node (whose new row ``node_row`` then carries).

    Every read of the table here feeds its one write, and the new height is read back after it: XLA
    copies the whole table when a read of it cannot be ordered before its in-place update."""
    node_row = table.rows[node] if node_row is None else node_row
    row = table.size
    do, overflow = do & (row + 2 <= spec.capacity), do & (row + 2 > spec.capacity)
    head = node_row.at[CHILD].set(row.astype(spec.itype)).at[GEN].add(1) \
        .at[B0:B1 + 1].set(as_bits(spec, jnp.full((2,), jnp.inf)))
    kids = _children(spec, node_row, node, split_dim(spec, node_row[DEPTH], split_u))
    if child_u is not None:
        kids = kids.at[:, U].set(as_bits(spec, child_u(kids)))
    n = spec.capacity
    index = [jnp.where(do, node, n), jnp.where(do, row, n), jnp.where(do, row + 1, n)]
    new = [head, kids[0], kids[1]]
    if also is not None:
        at, also_row, also_do = also
        index.append(jnp.where(also_do & ~(do & (at == node)), at, n))
        new.append(also_row)
    rows = table.rows.at[jnp.stack(index).astype(jnp.int32)].set(jnp.stack(new), mode="drop")
    depth = rows[jnp.minimum(row, n - 1), DEPTH].astype(jnp.int32)
    return Table(rows=rows, size=jnp.where(do, row + 2, row),
                 height=jnp.where(do, jnp.maximum(table.height, depth), table.height)), overflow
