"""The skeleton of every tree algorithm: one node table, one round driver, one regret book.

An algorithm is a :class:`TreePolicy`, a frozen dataclass of plain functions (its selection, update
and expansion rules), and :func:`run` is the whole of its ``run_single``.  The skeleton owns what
they share: the partition (a binary split of the box, PyXAB's ``BinaryPartition``), the node table
(fixed-size padded rows, capacity decided on the host, FLAG_CAPACITY when a run outgrows it), the
round loop (a round is one evaluation of the global objective; uniforms drawn in chunks), and the
book (regret f* - f(x_t) summed over rounds, written at the checkpoints, the optional trace).

Hooks (``static``, ``params``: the algorithm's own; ``table``: :class:`Table`; ``extra``: the
policy's own state, any pytree; ``last``: :class:`Last`, the round's selection and its reward):

* ``select(static, params, table, extra, t) -> (choice, point)``: round t's node (``choice``, any
  pytree the update reads back) and the point evaluated;
* ``update(static, params, table, extra, last, t, active) -> (table, extra, overflow)``: credit
  round t's reward and apply the expansion rule (:func:`expand`, or the fused :func:`update_path`);
  nothing may change unless ``active`` (round 0 only updates nothing);
* ``init(static, params, table, key) -> extra`` (``key``: the run's key, for a policy that draws
  its own random numbers, as VROOM does; each instance's own under :func:`parallel`);
  ``refresh(static, params, k, table, extra) -> (table, extra)``: run at round 2^k (or k * ``refresh_every``) between its selection and its update (None:
  never);
  ``recommend(static, params, table, extra, last) -> point`` (default :func:`next_selection`:
  round T + 1's selection; also called after each checkpoint round, for the simple regret);
  ``root_expanded``: the table starts with the root's two children (PyXAB's HCT and HOO) or the
  root alone.

The library below the hooks: :func:`descend` (B-descent from the root under a stop rule) and
:func:`descent` (a ``select`` made of it); :func:`update_path` (credit, U and B of a path in one
scatter, the expansion fused into it); :func:`refresh` (every U and B); :func:`expand` (the one
expansion of a leaf: two rows, capacity checked, one scatter that also carries the caller's row);
:func:`best_leaf` and :func:`best_row` (argmax of a score over the table, ties to the last row, an
optional mask such as a depth); :class:`Tournament` and :func:`tournament_pop` (the same argmax
kept up to date in O(log capacity) a change); :func:`parallel` (N instances of a policy side by
side).  A round reads the table and then writes it once: XLA copies the whole table when a read
cannot be ordered before the in-place write (DOO: 2 s for 100 runs of 10^4 rounds on two CPU cores,
90 s when its table was copied every round).

How each algorithm maps onto the hooks:

* HCT, T-HOO (hct.py, hoo.py): ``select`` = :func:`descent` with their stop rules; ``update`` =
  :func:`update_path` with their credited rows, U and growth rule; HCT's ``refresh`` recomputes every
  U and B at t = 2^k and its ``extra`` is the path of a re-expanded node whose B are due.
* DOO (doo.py): ``root_expanded=False``; every node is evaluated once, in creation order, so
  ``select`` is row t - 1; ``update`` writes the value (MEAN) and delta(h) (U) into the row and,
  once every row is evaluated, expands :func:`best_leaf` of b = MEAN + U.
* SOO, StoSOO, SequOOL, StroquOOL: ``extra`` holds the sweep (current depth, v_max, per-depth
  budget for SequOOL's and StroquOOL's schedules); ``update`` credits the node and advances the
  sweep, expanding :func:`best_leaf` of the depth-h leaves (``depth`` mask) in one bounded
  ``while_loop`` over depths until a node needs an evaluation; ``select`` returns that node.
  StoSOO's k pulls per node before expansion: COUNT < k keeps ``select`` on the node, COUNT and
  MEAN are the running statistics :func:`update_path` already keeps (a path of length 1).
* POO, GPO: :func:`parallel` (N instances of HCT's or T-HOO's policy over a leading axis of the
  table, ``extra`` and ``params.instances``, e.g. a rho grid; ``static.instances`` = N).  Their own
  policy adds the ``schedule`` (round t -> instance: POO's phases, GPO's blocks, from t in closed
  form or a host-computed table in ``params``), the per-instance reward sums of their final choice
  (in ``extra``) and a ``recommend`` that picks the best instance.
* VHCT: a per-node variance, i.e. one more statistic per row (the running sum of squared rewards)
  beside COUNT and MEAN: a column inside the DYNAMIC block, so that :func:`update_path`'s one
  gather and scatter of the path carry it, credited next to the mean and passed to its ``u_fn``.

Layout.  One padded (capacity, 10 + 2D) integer array, a node per row, rows [0, size) live, so that
reading or writing a node is one gather or scatter (XLA's CPU gathers cost about the same for a row
as for a scalar): child (lower child's row, upper = child + 1; -1 for a leaf), count (T_node), the two
children's B (kept in the parent, so that a descent step reads one short slice and a sibling's B
comes with the parent's row), generation (times expanded), mean, U, B, then the columns fixed when
the node is created: depth, parent (-1 for the root) and the box's lower and upper corners.  Floats
are stored as their bits: int32 rows with float32 values, int64 with float64 (bit casts of equal
width, so every value is stored exactly).

Partition.  Expanding a node halves its box along one dimension into a lower child (row ``child``)
and an upper child (row ``child + 1``); a node's point is its box's centre ``(lo + hi) / 2``.  The
dimension is ``random`` (PyXAB draws one per expansion) or ``longest`` (the longest side, lowest
index on ties; every node of one depth then has the same shape, so the dimension is a per-depth
table decided on the host in exact arithmetic).  Random dimensions are drawn in expansion order, as
PyXAB's np.random draws them: the node expanded in round t splits along floor(u_t D) for u_t a
uniform of that round's draw (the draw that also gives the round's reward noise, see
:func:`run_rounds`), and a root expanded before round 1 along the top bits of the run key's data.
:func:`run_split_dims` recomputes them on the host (tests give them to the NumPy references).

The descent carries a row index, the current row's head and a path buffer (spec.path_rows, which
grows after a run outgrows it: :class:`PathTables`), never the table (under vmap a while loop whose
condition differs between runs selects its whole carry every iteration); a path's rows are
root-first, so a row's depth is its index.  A round updates the table with one scatter of the path's
changing columns (and one of the two new rows when it expands), and the bottom-up B recomputation
along the path is an elementwise chain, not a loop.

Precision: boxes are float endpoints (as PyXAB's float64 lists are).  Halving is exact while a side's
endpoints fit the mantissa: about 24 halvings per dimension on [0, 1] in float32, 53 in float64.
Deeper splits would give children equal to their parent; precision='float64' matches PyXAB's own
arithmetic.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.core import checkpoints, noise
from fedpne_jax.core.config import PRECISIONS, BaselineConfig
from fedpne_jax.core.counters import key_words, unit_floats, unit_floats_52
from fedpne_jax.core.errors import FLAG_CAPACITY, CapacityError
from fedpne_jax.core.split import SPLITS, longest_dims
from fedpne_jax.core.validation import check_choice
from objectives.ordered import no_contraction

MAX_RANDOM_DIM = 1 << 16
MAX_HEIGHT = 2048          # deepest tree a B-descent may need (path buffers hold height + 1 rows)

# Columns of a row.  A descent step reads the first DESCENT columns; a round's update of a path
# writes the first DYNAMIC (the rest is written once, when the node is created).
CHILD, COUNT, B0, B1, GEN, MEAN, U, B, DEPTH, PARENT = range(10)
DESCENT, DYNAMIC = 4, 8
BOX = 10          # lower corner BOX .. BOX + D - 1, upper corner BOX + D .. BOX + 2D - 1


# ---------------------------------------------------------------- the node table

@dataclasses.dataclass(frozen=True)
class TreeSpec:
    """Host-decided shape of a run's tree (part of an algorithm's static key)."""

    capacity: int          # rows; sized by the algorithm so that it cannot overflow
    height: int            # deepest depth a node can reach
    dim: int
    split: str
    longest_dims: tuple    # split='longest': dimension per depth 0..height (empty otherwise)
    real: str              # 'float32' or 'float64'
    path: int = 0          # rows of a descent's path buffers, at most height + 1 (0: height + 1)

    @property
    def path_rows(self) -> int:
        return self.path or self.height + 1

    @property
    def dtype(self):
        return jnp.dtype(self.real)

    @property
    def itype(self):
        return jnp.dtype(jnp.int32 if self.real == "float32" else jnp.int64)

    @property
    def width(self) -> int:
        return BOX + 2 * self.dim


class Table(NamedTuple):
    rows: jax.Array     # (N, 10 + 2D) integer rows (see the module docstring)
    size: jax.Array     # () int32 rows in use
    height: jax.Array   # () int32 deepest depth in use


def as_float(spec: TreeSpec, bits):
    return jax.lax.bitcast_convert_type(bits, spec.dtype)


def as_bits(spec: TreeSpec, values):
    return jax.lax.bitcast_convert_type(jnp.asarray(values, spec.dtype), spec.itype)


def box_of(spec: TreeSpec, row):
    """(2, D) lower and upper corner of a row (or (..., 2, D) of rows)."""
    return as_float(spec, row[..., BOX:]).reshape(row.shape[:-1] + (2, spec.dim))


def centre(spec: TreeSpec, row):
    box = box_of(spec, row)
    return (box[..., 0, :] + box[..., 1, :]) / 2


def root_dim(key, dim: int):
    """Split dimension of the root under split='random': floor(w D / 2^16) for w the top 16 bits of
    the run key's first data word (the key is itself a hash output; D < 2^16)."""
    word = jax.random.key_data(key)[0]
    return (((word >> 16) * jnp.uint32(dim)) >> 16).astype(jnp.int32)


def random_dim(u, dim: int):
    """Split dimension floor(u D) of a uniform u in [0, 1)."""
    return jnp.minimum((u * dim).astype(jnp.int32), dim - 1)


def make_spec(capacity: int, height: int, objective, split: str, real: str, path: Optional[int] = None) -> TreeSpec:
    """``path``: rows of the descents' path buffers (default height + 1, the most a path can need)."""
    dims = longest_dims(objective.lo, objective.hi, 2, height) if split == "longest" and objective.dim > 1 else ()
    rows = height + 1 if path is None else min(int(path), height + 1)
    return TreeSpec(capacity=int(capacity), height=int(height), dim=objective.dim, split=split, longest_dims=dims,
                    real=real, path=0 if rows == height + 1 else rows)


# ---------------------------------------------------------------- path buffers that grow

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


def check_height(height: int, what: str) -> None:
    if height > MAX_HEIGHT:
        raise ValueError(f"{what}: the tree could reach depth {height} (at most {MAX_HEIGHT})")


def check_objective(split: str, objective) -> None:
    if split == "random" and objective.dim >= MAX_RANDOM_DIM:
        raise ValueError(f"split 'random' supports dimensions below {MAX_RANDOM_DIM}, objective "
                         f"{objective.name!r} has {objective.dim}; use split 'longest'")


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


def init(spec: TreeSpec, lo, hi, key, root_expanded: bool = True) -> Table:
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


def _allocate(spec: TreeSpec, table: Table, node_row, do):
    """Rows for the children of a node being expanded: its own children's rows when it has some (a
    re-expansion replaces them), else the next two free rows.  Returns (row, do, overflow, again):
    ``do`` is False and ``overflow`` True when there is no room."""
    again = node_row[CHILD] >= 0
    row = jnp.where(again, node_row[CHILD], table.size).astype(jnp.int32)
    fits = again | (table.size + 2 <= spec.capacity)
    return row, do & fits, do & ~fits, again


def _write_children(spec: TreeSpec, rows, table: Table, node_row, node, depth, row, do, again, split_u) -> Table:
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


# ---------------------------------------------------------------- B-descent (HCT, T-HOO)

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

    init = (jnp.int32(0), jnp.int32(0), jnp.zeros((spec.path_rows,), jnp.int32), head(0))
    v, i, path, _ = jax.lax.while_loop(cond, body, init)
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
        row, do, overflow, again = _allocate(spec, table, node_row, jnp.any(is_last & grow_fn(count, idx, child))
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
    table = _write_children(spec, rows, table, node_row, path[last], last, row, do, again, split_u)
    return table, overflow | outgrown, do & again


def rows_after_updates(k):
    """The most rows a table that starts as the root and its two children holds before the update
    of its round 2^k (HCT's and VHCT's refresh): 2^k - 1 updates, each expanding at most one node
    into two rows (a re-expansion reuses its rows)."""
    k = jnp.asarray(k, jnp.int32)
    return jnp.where(k >= 30, jnp.int32(2 ** 31 - 1), jnp.left_shift(jnp.int32(1), jnp.minimum(k, 29) + 1) + 1)


def prefix_sizes(capacity: int) -> tuple:
    """The row counts a bounded :func:`refresh` compiles a branch for: 1 + 16^j below the capacity,
    then the capacity.  Each branch costs compile time (about 0.3 s on a CPU), so they are few:
    :func:`rows_after_updates` equals one of them at every fourth k."""
    sizes, m = [], 16
    while m + 1 < capacity:
        sizes.append(m + 1)
        m *= 16
    return tuple(sizes) + (capacity,)


def refresh(spec: TreeSpec, table: Table, u_fn, live=None, per_row=()) -> Table:
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


# ---------------------------------------------------------------- the book: regret, checkpoints, trace

class Pull(NamedTuple):
    """The rounds' bookkeeping: the running regret, the curves, error flags and the optional trace."""
    regret: jax.Array
    curve: jax.Array      # (C,) regret written at the first checkpoint of each checkpoint round
    cursor: jax.Array     # () int32 next checkpoint to write; depends on t only (unbatched under vmap)
    flags: jax.Array
    points: jax.Array
    best: checkpoints.Best  # its hits settled once a block of rounds ends (:func:`settle`)
    recent: jax.Array      # (chunk,) best-so-far regret after each round of the current chunk
    best_curve: jax.Array  # (C,) best-so-far regret, written with ``curve``
    goals: jax.Array       # (51,) the fixed targets of the best-so-far regret (checkpoints.targets)
    simple_curve: jax.Array  # (C,) simple regret, written one round late (:func:`record_simple`)
    simple_cursor: jax.Array  # () int32 next checkpoint of ``simple_curve``; depends on t only


def start_pulls(checkpoints_: int, dim: int, trace: int, dtype, scale, chunk: int) -> Pull:
    zeros = jnp.zeros((checkpoints_,), dtype)
    return Pull(regret=jnp.zeros((), dtype), curve=zeros, cursor=jnp.int32(0), flags=jnp.int32(0),
                points=jnp.zeros((trace, dim), dtype), best=checkpoints.best_start(dtype),
                recent=jnp.zeros((chunk,), dtype), best_curve=zeros,
                goals=checkpoints.targets(scale), simple_curve=zeros, simple_cursor=jnp.int32(0))


def record_simple(rounds, book: Pull, t, gap_of_recommendation) -> Pull:
    """Write the simple regret of the recommendation after round t - 1 at its checkpoint, if t - 1 is
    one.  The recommendation after round t - 1 needs round t's selection (``recommend`` reads it, as
    PyXAB's ``get_last_point`` does), so round t writes it, and round T + 1 the last checkpoint.
    ``gap_of_recommendation(hit)`` is evaluated under ``hit``, which depends on t only: a policy whose
    recommendation is not the point it pulls pays one evaluation of the objective per checkpoint."""
    j, hit, position = checkpoints.cursor(rounds, book.simple_cursor, t - 1)
    return book._replace(simple_curve=checkpoints.write(book.simple_curve, j, hit, gap_of_recommendation(hit)),
                         simple_cursor=position)


def pull(static, params, objective, book: Pull, t, x, u, pulling):
    """Evaluate the global objective at ``x`` in round ``t``: the reward (noise.reward of the run's
    noise model, from the round's uniforms ``u``, as noise.observe draws them) is returned with the
    gap f* - f(x) and the bookkeeping of :func:`book_value`.  Nothing is recorded unless ``pulling``
    (round T + 1 only selects)."""
    f = objective.global_value(x).astype(x.dtype)
    kind = static.noise_kind
    scale = params.noise_scale
    r = noise.reward(kind, scale, scale ** 2 if kind == "gaussian" else None, f, u[0], u[1])
    gap, book = book_value(static, book, t, x, f, objective.f_star, pulling)
    return r, gap, book


def book_value(static, book: Pull, t, x, f, f_star, pulling, check_f_star=True):
    """Round t's value f at ``x`` booked: the regret f* - f added, the best-so-far regret updated,
    both recorded at the checkpoints, f's flags raised (against f* unless not ``check_f_star``: told
    noisy means may exceed it).  Returns the gap f* - f and the book."""
    kind = static.noise_kind
    # f may end in a product that XLA would contract with the subtraction below into an FMA in one
    # program (a stepper's tell) and not in another (the round loop): kept apart, both book one number.
    f = no_contraction(f)
    flags = book.flags | jnp.where(pulling, noise.value_flags(kind, f, jnp.bool_(True),
                                                              f_star=f_star if check_f_star else None), 0)
    gap = jnp.asarray(f_star, x.dtype) - f
    regret = jnp.where(pulling, book.regret + gap, book.regret)
    best = book.best._replace(value=jnp.where(pulling, jnp.minimum(book.best.value, gap), book.best.value))
    recent = jax.lax.dynamic_update_index_in_dim(book.recent, best.value, (t - 1) % book.recent.shape[0], 0)
    j, hit, cursor = checkpoints.cursor(static.checkpoint_rounds, book.cursor, t)
    curve, best_curve = checkpoints.write(book.curve, j, hit, regret), checkpoints.write(book.best_curve, j, hit,
                                                                                          best.value)
    points = book.points
    if static.trace:
        points = jnp.where(pulling, jax.lax.dynamic_update_slice(points, x[None], (t - 1, jnp.zeros_like(t))), points)
    return gap, book._replace(regret=regret, curve=curve, cursor=cursor, flags=flags, points=points, best=best,
                              recent=recent, best_curve=best_curve)


def settle(book: Pull, lo, hi, start) -> Pull:
    """``book`` with the targets that rounds start + lo .. start + hi of a chunk reached (the loop
    calls it once a block of rounds ends)."""
    return book._replace(best=book.best._replace(
        hits=checkpoints.settle_hits(book.best.hits, book.recent, lo, hi, start, book.goals)))


# ---------------------------------------------------------------- the driver

@dataclasses.dataclass(frozen=True)
class TreeConfig(BaselineConfig):
    """The fields every tree algorithm's config has beside the horizon, noise and checkpoints: the
    partition's split rule and the precision of its boxes, values and regret."""

    split: str = "random"
    precision: str = "float32"

    def __post_init__(self):
        super().__post_init__()
        check_choice("split", self.split, SPLITS)
        check_choice("precision", self.precision, PRECISIONS)

    @property
    def capacity(self) -> int:
        """Rows of the node table, sized on the host so that no run can outgrow it (each algorithm's)."""
        raise NotImplementedError

    def resolved(self) -> dict:
        out = super().resolved()
        out.update(capacity=self.capacity)
        return out


@dataclasses.dataclass(frozen=True)
class TreeStatic:
    """What decides a tree algorithm's program (algorithms with more static choices subclass it)."""

    horizon: int
    checkpoint_rounds: tuple
    noise_kind: str
    tree: TreeSpec
    real: str
    chunk: int               # rounds per draw of reward uniforms
    trace: bool = False      # tests: also return every pulled point
    instances: int = 1       # > 1: a leading instance axis on the table (see :func:`parallel`)


def make_static(config, objective, capacity: int, height: int, cls: Any = TreeStatic, path: Optional[int] = None,
                **fields) -> Any:
    """The static (a ``cls``, TreeStatic or a subclass) of a config with ``horizon``, ``noise``,
    ``checkpoints``, ``split`` and ``precision``; ``path``: rows of its descents' path buffers
    (:func:`path_of`; default the whole height bound)."""
    return cls(horizon=config.horizon, checkpoint_rounds=tuple(int(r) for r in config.checkpoint_rounds),
               noise_kind=config.noise_kind,
               tree=make_spec(capacity, height, objective, config.split, config.precision, path),
               real=config.precision, chunk=chunk_size(config.horizon), **fields)


def next_selection(static, params, table, extra, last):
    """The default ``recommend`` hook, PyXAB's ``get_last_point``: the point of the next round's
    selection (after the loop, round T + 1's)."""
    return last.point


@dataclasses.dataclass(frozen=True)
class TreePolicy:
    """An algorithm's rules (plain functions, closed over nothing dynamic); see the module docstring."""

    select: Callable
    update: Callable
    init: Callable = lambda static, params, table, key: ()
    refresh: Optional[Callable] = None
    refresh_every: int = 0          # > 0: refresh at rounds k * refresh_every instead of 2^k
    recommend: Callable = next_selection
    root_expanded: bool = True


class Last(NamedTuple):
    """A round's selection, kept for its update in the next loop body."""
    choice: Any           # the policy's choice (e.g. :class:`Descent`)
    reward: jax.Array     # ()
    split_u: jax.Array    # () the round's split uniform
    point: jax.Array      # (D,) the point evaluated (after the loop: round T + 1's selection)


class State(NamedTuple):
    table: Table
    extra: Any
    book: Pull
    last: Last            # this round's selection, updated at the start of the next loop body
    overflow: jax.Array


class Outputs(NamedTuple):
    curve: jax.Array           # (C,) cumulative regret at the checkpoints
    final_regret: jax.Array    # ()
    flags: jax.Array           # () int32 errors.FLAG_* bits
    recommendation: jax.Array  # (D,) the policy's recommendation (default: PyXAB's get_last_point)
    nodes: jax.Array           # () int32 rows of the node table in use
    depth: jax.Array           # () int32 deepest node
    best_curve: jax.Array      # (C,) best-so-far regret at the checkpoints
    hits: jax.Array            # (51,) int32 first round the best-so-far regret reached each target, 0: not
    target_scale: jax.Array    # () the targets' scale (checkpoints.target_scale)
    simple_curve: jax.Array    # (C,) simple regret f* - f(recommendation) at the checkpoints
    points: jax.Array          # (T, D) the pulled points when the static asks for a trace, else (0, D)


METRICS = ("recommendation", "nodes", "depth") + checkpoints.MEASURES

CHUNK = 256


def chunk_size(horizon: int) -> int:
    """Rounds per draw of uniforms: CHUNK, or T + 1 when shorter (round T + 1 selects the
    recommendation)."""
    return min(CHUNK, horizon + 1)


def _chunk_uniforms(key, c, chunk: int, dtype):
    """(chunk, 3) uniforms in [0, 1) of chunk ``c``: counter-mode threefry of the run key on the
    counter pairs (c, j), j < 3 chunk (one hash call per chunk; a fold_in per chunk would be a second
    one, and each costs about half a second of compile time), converted as jax.random.uniform does
    (23 random mantissa bits in float32, 52 in float64)."""
    return _uniforms(key, c, jnp.arange(3 * chunk, dtype=jnp.uint32), dtype).reshape(chunk, 3)


def round_uniforms(key, t, chunk: int, dtype):
    """(3,) the uniforms of round t alone, equal to its row of :func:`_chunk_uniforms` (the hash is
    counter-based, so one round's three pairs are hashed without the rest of its chunk): a stepper
    draws a round at a time."""
    c, i = (t - 1) // chunk, (t - 1) % chunk
    return _uniforms(key, c, (3 * i + jnp.arange(3, dtype=jnp.int32)).astype(jnp.uint32), dtype)


def _uniforms(key, c, j, dtype):
    words = jax.extend.random.threefry_2x32(key_words(key), jnp.concatenate(
        [jnp.full(j.shape, c, jnp.uint32), j]))
    n = j.shape[0]
    return unit_floats_52(words[:n], words[n:]) if jnp.dtype(dtype) == jnp.float64 else unit_floats(words[:n])


def run_rounds(horizon: int, chunk: int, key, dtype, update, select, state, refresh=None, every: int = 0,
               settle=None):
    """Rounds t = 1..T of a tree algorithm, and the selection of round T + 1 (the recommendation).

    The loop body is ``update(t - 1, state, active=t > 1)`` and then ``select(t, u_t, state,
    pulling=t <= T)``: a round's selection comes before its update, and ``refresh(k, state)``
    (HCT's recomputation of every U and B at t = 2^k) goes between the selection and the update of
    round 2^k, or of round k * ``every`` when ``every`` > 0 (SOO's rebuild of its lists).  Shifting the body by half a round puts every refresh between two loop bodies, so the
    loop is split at the powers of two (their indices are the same in every run, so nothing is
    selected per run) and no round pays for a branch that passes the node table through.

    ``u_t``: the round's three uniforms (noise.reward's u_noise and u_gauss, and the split uniform).
    Rounds come in chunks that share one draw (:func:`_chunk_uniforms`): a run's numbers depend on
    its key alone, and the round loop holds no PRNG code (a draw per round would dominate the
    compile time and much of the per-round cost).  ``settle(state, lo, hi, start)``, when given, runs
    after each block of a chunk's rounds, start + lo .. start + hi."""
    last_round = horizon + 1
    if every:
        # Epoch e is rounds e * every + 1 .. (e + 1) * every; the refresh after it is k = e + 1.
        top = horizon // every - 1 if refresh is not None else -1
        epochs = -(-last_round // every)
    else:
        top = horizon.bit_length() - 1 if refresh is not None else -1     # refreshes at 2^0 .. 2^top
        epochs = top + 2

    def bounds(e):
        if refresh is None:
            return jnp.int32(1), jnp.int32(last_round)
        if every:
            e = jnp.asarray(e, jnp.int32)         # rounds are int32, also with 64-bit types enabled
            return e * every + 1, jnp.minimum((e + 1) * every, last_round)
        lo = jnp.right_shift(jnp.left_shift(jnp.int32(1), e), 1) + 1
        hi = jnp.where(e <= top, jnp.left_shift(jnp.int32(1), e), last_round)
        return lo, hi

    def body(t, u, state):
        state = update(t - 1, state, t > 1)
        return select(t, u, state, t <= horizon)

    def epoch(e, state):
        lo, hi = bounds(e)

        def one_chunk(c, state):
            start = c * chunk + 1
            u = _chunk_uniforms(key, c, chunk, dtype)
            first, stop = jnp.maximum(lo, start), jnp.minimum(hi, start + chunk - 1)
            state = jax.lax.fori_loop(first, stop + 1, lambda t, s: body(t, u[t - start], s), state)
            return state if settle is None else settle(state, first - start, stop - start, start)

        state = jax.lax.fori_loop((lo - 1) // chunk, (hi - 1) // chunk + 1, one_chunk, state)
        if refresh is None:
            return state
        # Once per epoch, so passing the table through the branch costs nothing per round.
        return jax.lax.cond(e <= top, lambda s: refresh(e + 1 if every else e, s), lambda s: s, state)

    if refresh is None:
        return epoch(0, state)
    return jax.lax.fori_loop(0, epochs, epoch, state)


def run_split_dims(key, horizon: int, chunk: int, dim: int, real: str = "float32") -> np.ndarray:
    """(T + 1,) split dimensions of one run under split='random': entry 0 for the root, entry t for
    the node expanded in round t (host-side, for tests and inspection)."""
    with jax.enable_x64(real == "float64"):
        dtype = jnp.dtype(real)
        u = jnp.concatenate([_chunk_uniforms(key, c, chunk, dtype) for c in range(-(-horizon // chunk))])
        dims = jnp.concatenate([root_dim(key, dim)[None], random_dim(u[:horizon, 2], dim)])
        return np.asarray(dims)


def start(static: TreeStatic, params, lo, hi, key, policy: TreePolicy, scale) -> State:
    """A run's state before round 1: the table over the box [lo, hi] (one per instance), the policy's
    ``extra``, an empty book whose targets are scaled by ``scale``."""
    spec = static.tree
    if static.instances == 1:
        keys = key
        table = init(spec, lo, hi, key, policy.root_expanded)
    else:
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(static.instances))
        table = jax.vmap(lambda k: init(spec, lo, hi, k, policy.root_expanded))(keys)
    extra = policy.init(static, params, table, keys)
    # The first loop body updates nothing (active=False) but needs a choice of the right shape.
    shape = jax.eval_shape(lambda p, tb, ex: policy.select(static, p, tb, ex, jnp.int32(1))[0], params, table, extra)
    zero = lambda s: jnp.zeros(s.shape, s.dtype)
    last = Last(jax.tree.map(zero, shape), jnp.zeros((), spec.dtype), jnp.zeros((), spec.dtype),
                jnp.zeros((spec.dim,), spec.dtype))
    book = start_pulls(len(static.checkpoint_rounds), spec.dim, static.horizon if static.trace else 0, spec.dtype,
                       scale, static.chunk)
    return State(table, extra, book, last, jnp.bool_(False))


def apply_update(static, params, policy: TreePolicy, t, s: State, active) -> State:
    """Round t's update: its reward (in ``s.last``) credited and the expansion rule applied."""
    table, extra, overflow = policy.update(static, params, s.table, s.extra, s.last, t, active)
    return s._replace(table=table, extra=extra, overflow=s.overflow | overflow)


def apply_refresh(static, params, policy: TreePolicy, k, s: State) -> State:
    assert policy.refresh is not None
    table, extra = policy.refresh(static, params, k, s.table, s.extra)
    return s._replace(table=table, extra=extra)


def record_recommendation(static, params, policy: TreePolicy, s: State, last: Last, t, gap, f_star, value_at) -> Pull:
    """``s.book`` with the simple regret of the recommendation after round t - 1 written at its
    checkpoint (round t's selection is ``last``; ``gap`` its f* - f; ``value_at(x)`` the global
    value a recommendation other than the selection is booked at)."""
    def simple(hit):
        if policy.recommend is next_selection:
            return gap
        point = lambda: policy.recommend(static, params, s.table, s.extra, last)
        star = jnp.asarray(f_star, gap.dtype)
        return jax.lax.cond(hit, lambda: star - no_contraction(value_at(point()).astype(gap.dtype)),
                            lambda: jnp.zeros((), gap.dtype))
    return record_simple(static.checkpoint_rounds, s.book, t, simple)


def finish(static, params, policy: TreePolicy, state: State, scale) -> Outputs:
    """A run's Outputs from its state after round T + 1's selection (in ``state.last``)."""
    flags = state.book.flags | jnp.where(state.overflow, FLAG_CAPACITY, 0).astype(jnp.int32)
    size, height = state.table.size, state.table.height
    if static.instances > 1:
        size, height = jnp.sum(size), jnp.max(height)
    rounds, book = static.checkpoint_rounds, state.book
    return Outputs(curve=checkpoints.filled(rounds, book.curve), final_regret=book.regret,
                   flags=flags, recommendation=policy.recommend(static, params, state.table, state.extra, state.last),
                   nodes=size, depth=height, best_curve=checkpoints.filled(rounds, book.best_curve), hits=book.best.hits,
                   target_scale=scale, simple_curve=checkpoints.filled(rounds, book.simple_curve), points=book.points)


def run(static: TreeStatic, params, objective, key, policy: TreePolicy) -> Outputs:
    """One run of ``policy``: rounds 1..T, each one evaluation of the global objective (a tree
    algorithm's ``run_single`` is this with its policy)."""
    spec = static.tree
    scale = checkpoints.target_scale(objective, spec.dtype)
    state = start(static, params, objective.lo, objective.hi, key, policy, scale)
    value_at = objective.global_value

    def update(t, s: State, active) -> State:
        return apply_update(static, params, policy, t, s, active)

    def select(t, u, s: State, pulling) -> State:
        choice, x = policy.select(static, params, s.table, s.extra, t)
        r, gap, book = pull(static, params, objective, s.book, t, x, u, pulling)
        last = Last(choice, r, u[2], x)
        book = record_recommendation(static, params, policy, s._replace(book=book), last, t, gap, objective.f_star,
                                     value_at)
        return s._replace(book=book, last=last)

    hook = policy.refresh
    state = run_rounds(static.horizon, static.chunk, key, spec.dtype, update, select, state,
                       refresh=None if hook is None else lambda k, s: apply_refresh(static, params, policy, k, s),
                       every=policy.refresh_every,
                       settle=lambda s, lo, hi, start: s._replace(book=settle(s.book, lo, hi, start)))
    return finish(static, params, policy, state, scale)


def parallel(policy: TreePolicy, schedule: Callable) -> TreePolicy:
    """N instances of ``policy`` side by side (POO, GPO), for a static with ``instances`` = N: the
    table, ``extra`` and ``params.instances`` (the instances' own params, stacked) carry a leading
    (N,) axis, and every hook of ``policy`` is vmapped over it.  Round t evaluates the point of
    instance ``schedule(static, params, t)``; the other instances select too (a vmapped selection
    costs what N do) but update with active=False, so they write nothing.  The recommendation is
    round T + 1's scheduled point."""
    def init(static, params, tables, keys):
        return jax.vmap(lambda p, tb, k: policy.init(static, p, tb, k))(params.instances, tables, keys)

    def select(static, params, tables, extras, t):
        choices, points = jax.vmap(lambda p, tb, ex: policy.select(static, p, tb, ex, t))(params.instances, tables,
                                                                                         extras)
        i = schedule(static, params, t)
        return (i, choices), points[i]

    def update(static, params, tables, extras, last, t, active):
        i, choices = last.choice

        def one(j, p, tb, ex, choice):
            return policy.update(static, p, tb, ex, last._replace(choice=choice), t, active & (j == i))

        n = static.instances
        tables, extras, overflow = jax.vmap(one)(jnp.arange(n), params.instances, tables, extras, choices)
        return tables, extras, jnp.any(overflow)

    def refresh(static, params, k, tables, extras):
        return jax.vmap(lambda p, tb, ex: policy.refresh(static, p, k, tb, ex))(params.instances, tables, extras)

    return TreePolicy(select=select, update=update, init=init, refresh=None if policy.refresh is None else refresh,
                      refresh_every=policy.refresh_every,
                      root_expanded=policy.root_expanded)
