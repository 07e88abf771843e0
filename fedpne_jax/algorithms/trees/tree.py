"""The node table shared by HCT and T-HOO: a binary partition of the box grown one node pair at a time.

PyXAB's ``BinaryPartition``: a node is a box; expanding it halves the box along one dimension into a
lower child (row ``child``) and an upper child (row ``child + 1``), and the point a node stands for
is its box's centre ``(lo + hi) / 2``.  The dimension is ``random`` (PyXAB draws one per expansion)
or ``longest`` (the longest side, lowest index on ties; every node of one depth then has the same
shape, so the dimension is a per-depth table decided on the host in exact arithmetic).

Random dimensions are drawn in expansion order, as PyXAB's np.random draws them: the node expanded
in round t splits along floor(u_t D) for u_t a uniform of that round's draw (the draw that also
gives the round's reward noise, see :func:`run_rounds`), and the root, expanded before round 1,
along the top bits of the run key's data.  :func:`run_split_dims` recomputes them on the host (tests
give them to the NumPy references).

Layout.  One padded (capacity, 10 + 2D) integer array, a node per row, rows [0, size) live, so that
reading or writing a node is one gather or scatter (XLA's CPU gathers cost about the same for a row
as for a scalar): child (lower child's row, upper = child + 1; -1 for a leaf), count (T_node), the two
children's B (kept in the parent, so that a descent step reads one short slice and a sibling's B
comes with the parent's row), generation (times expanded), mean, U, B, then the columns fixed when
the node is created: depth, parent (-1 for the root) and the box's lower and upper corners.  Floats
are stored as their bits: int32 rows with float32 values, int64 with float64 (bit casts of equal
width, so every value is stored exactly).

The descent carries a row index, the current row's head and a (height + 1,) path buffer, never the
table (under vmap a while loop whose condition differs between runs selects its whole carry every
iteration); a path's rows are root-first, so a row's depth is its index.  A round updates the table
with one scatter of the path's changing columns (and one of the two new rows when it expands), and
the bottom-up B recomputation along the path is an elementwise chain, not a loop.

Precision: boxes are float endpoints (as PyXAB's float64 lists are).  Halving is exact while a side's
endpoints fit the mantissa: about 24 halvings per dimension on [0, 1] in float32, 53 in float64.
Deeper splits would give children equal to their parent; precision='float64' matches PyXAB's own
arithmetic.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.core import noise
from fedpne_jax.core.counters import threefry_words, unit_floats, unit_floats_52
from fedpne_jax.core.errors import FLAG_CAPACITY
from fedpne_jax.core.split import longest_dims

SPLITS = ("random", "longest")
PRECISIONS = ("float32", "float64")
MAX_RANDOM_DIM = 1 << 16
MAX_HEIGHT = 2048          # deepest tree a run may need (path buffers hold height + 1 rows)
UNROLL_HEIGHT = 64         # B chains over longer paths are a loop (bounded compile time)

# Columns of a row.  A descent step reads the first DESCENT columns; a round's update of a path
# writes the first DYNAMIC (the rest is written once, when the node is created).
CHILD, COUNT, B0, B1, GEN, MEAN, U, B, DEPTH, PARENT = range(10)
DESCENT, DYNAMIC = 4, 8
BOX = 10          # lower corner BOX .. BOX + D - 1, upper corner BOX + D .. BOX + 2D - 1


@dataclasses.dataclass(frozen=True)
class TreeSpec:
    """Host-decided shape of a run's tree (part of an algorithm's static key)."""

    capacity: int          # rows; sized by the algorithm so that it cannot overflow
    height: int            # deepest depth a node can reach (path buffers hold height + 1 rows)
    dim: int
    split: str
    longest_dims: tuple    # split='longest': dimension per depth 0..height (empty otherwise)
    real: str              # 'float32' or 'float64'

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


def make_spec(capacity: int, height: int, objective, split: str, real: str) -> TreeSpec:
    dims = longest_dims(objective.lo, objective.hi, 2, height) if split == "longest" and objective.dim > 1 else ()
    return TreeSpec(capacity=int(capacity), height=int(height), dim=objective.dim, split=split, longest_dims=dims,
                    real=real)


def check_height(height: int, what: str) -> None:
    if height > MAX_HEIGHT:
        raise ValueError(f"{what}: the tree could reach depth {height} (at most {MAX_HEIGHT})")


def check_objective(split: str, objective) -> None:
    if split == "random" and objective.dim >= MAX_RANDOM_DIM:
        raise ValueError(f"split 'random' supports dimensions below {MAX_RANDOM_DIM}, objective "
                         f"{objective.name!r} has {objective.dim}; use split 'longest'")


def _split(spec: TreeSpec, depth, u):
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


def _children(spec: TreeSpec, row, me, d):
    """(2, width) rows of the lower and upper half of node row ``row`` (at table row ``me``) along
    ``d``; the cut is (lo + hi) / 2, PyXAB's midpoint."""
    box = box_of(spec, row)
    lo, hi = box[0], box[1]
    on_d = jnp.arange(spec.dim) == d
    mid = (lo[d] + hi[d]) / 2
    boxes = jnp.stack([jnp.concatenate([lo, jnp.where(on_d, mid, hi)]),
                       jnp.concatenate([jnp.where(on_d, mid, lo), hi])])
    inf = jnp.inf
    return jax.vmap(lambda box: _row(spec, -1, 0, row[DEPTH] + 1, me, 0, 0.0, inf, inf, inf, inf, box))(boxes)


def init(spec: TreeSpec, lo, hi, key) -> Table:
    """The root (row 0) and its two children (rows 1, 2): both PyXAB algorithms expand the root when
    they are created.  Unused rows are leaves with B = +inf (capacity >= 3)."""
    n = spec.capacity
    box = jnp.concatenate([jnp.asarray(lo, spec.dtype), jnp.asarray(hi, spec.dtype)])
    inf = jnp.inf
    root = _row(spec, 1, 0, 0, -1, 1, 0.0, inf, inf, inf, inf, box)
    d = root_dim(key, spec.dim) if spec.split == "random" and spec.dim > 1 else _split(spec, jnp.int32(0), None)
    kids = _children(spec, root, 0, d)
    blank = root.at[CHILD].set(-1).at[GEN].set(0)
    rows = jnp.concatenate([root[None], kids, jnp.broadcast_to(blank, (n - 3, spec.width))])
    return Table(rows=rows, size=jnp.int32(3), height=jnp.int32(1))


def descend(spec: TreeSpec, table: Table, go_on):
    """Follow the child with the larger B from the root while the node has children and
    ``go_on(count, depth)`` holds; the upper child wins ties (PyXAB keeps the last child whose B is >=
    the best so far).  Returns (node, its row, path, length): path[0:length] are the rows root..node,
    so a path row's depth is its index."""
    rows = table.rows

    def cond(state):
        _, i, _, row = state
        return (row[CHILD] >= 0) & go_on(row[COUNT], i)

    def head(v):
        return jax.lax.dynamic_slice(rows, (v, jnp.zeros_like(v)), (1, DESCENT))[0]

    def body(state):
        _, i, path, row = state
        b = as_float(spec, row[B0:B1 + 1])
        w = (row[CHILD] + (b[1] >= b[0])).astype(jnp.int32)
        return w, i + 1, path.at[i + 1].set(w, mode="drop"), head(w)

    init = (jnp.int32(0), jnp.int32(0), jnp.zeros((spec.height + 1,), jnp.int32), head(0))
    v, i, path, _ = jax.lax.while_loop(cond, body, init)
    return v, rows[v], path, i + 1


def _chain(is_last, at_node, u, sib, dtype):
    """B along the path, bottom-up: -inf below the node, at_node at it, min(U, max(B below, sibling's
    B)) above.  Unrolled for short paths (XLA fuses the steps into one kernel), a loop for long ones."""
    h = u.shape[0]

    def step(cur, j):
        return jnp.where(is_last[j], at_node[j], jnp.minimum(u[j], jnp.maximum(cur, sib[j])))

    if h <= UNROLL_HEIGHT:
        cur, out = jnp.asarray(-jnp.inf, dtype), [None] * h
        for j in reversed(range(h)):
            cur = out[j] = step(cur, j)
        return jnp.stack(out)

    def body(i, state):
        cur, out = state
        j = h - 1 - i
        cur = step(cur, j)
        return cur, out.at[j].set(cur)

    return jax.lax.fori_loop(0, h, body, (jnp.asarray(-jnp.inf, dtype), jnp.zeros((h,), dtype)))[1]


def _recompute_b(spec: TreeSpec, rows, path, length, u):
    """(B, lower child's B, upper child's B) of path rows root..node given their U: B = U at a leaf,
    min(U, max of the children's B) at the node, and above it B_j = min(U_j, max(B_{j+1}, B of the
    sibling of path[j+1])), an elementwise chain over the (height + 1) rows; each row's children's B
    then take the new B of path[j+1]."""
    idx = jnp.arange(spec.height + 1)
    last = length - 1
    values = as_float(spec, rows)
    child, b0, b1 = rows[:, CHILD], values[:, B0], values[:, B1]
    at_node = jnp.where(child >= 0, jnp.minimum(u, jnp.maximum(b0, b1)), u)
    upper = jnp.roll(path, -1) != child                       # path[j+1] is the upper child
    sib = jnp.where(upper, b0, b1)
    b = _chain(idx == last, at_node, u, sib, spec.dtype)
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
    with the split uniform
    ``split_u``: two children in new rows at the end of the table, or, when the node already has
    children (PyXAB's HCT re-expanding an internal node; ``regrown``), fresh nodes in its children's
    rows (the old subtree below them is dropped, as PyXAB drops it).  Its B keeps the value just
    computed: a new leaf's children have B = +inf, which leaves min(U, max) = U, and a re-expanded
    node's B changes only at PyXAB's next update.  ``overflow``: the table had no room (nothing
    written for the children)."""
    n, h = spec.capacity, spec.height + 1
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
        do = jnp.any(is_last & grow_fn(count, idx, child)) & active
        again = node_row[CHILD] >= 0
        row = jnp.where(again, node_row[CHILD], table.size).astype(jnp.int32)
        fits = again | (table.size + 2 <= n)
        overflow = do & ~fits
        do = do & fits
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
        return Table(rows=rows, size=table.size, height=table.height), jnp.bool_(False), jnp.bool_(False)
    kids = _children(spec, node_row, path[last], _split(spec, last, split_u))
    rows = rows.at[jnp.where(do, row + jnp.arange(2, dtype=jnp.int32), n)].set(kids, mode="drop")
    return (Table(rows=rows, size=jnp.where(do & ~again, table.size + 2, table.size),
                  height=jnp.where(do, jnp.maximum(table.height, length), table.height)), overflow, do & again)


def refresh(spec: TreeSpec, table: Table, u_fn) -> Table:
    """U = u_fn(mean, count, depth) of every credited node (+inf for the others) and then B of every
    node bottom-up (PyXAB's updateUvalueTree and updateBackwardTree): one sweep over all rows per
    level, ``height`` sweeps."""
    rows = table.rows
    count = rows[:, COUNT]
    u = jnp.where(count > 0, u_fn(as_float(spec, rows[:, MEAN]), jnp.maximum(count, 1), rows[:, DEPTH]), jnp.inf)
    u = u.astype(spec.dtype)
    has = rows[:, CHILD] >= 0
    c = jnp.maximum(rows[:, CHILD], 0)

    def sweep(_, b):
        return jnp.where(has, jnp.minimum(u, jnp.maximum(b[c], b[c + 1])), u)

    b = jax.lax.fori_loop(0, table.height, sweep, u)
    pair = jnp.where(has[:, None], jnp.stack([b[c], b[c + 1]], 1), jnp.inf)
    return table._replace(rows=rows.at[:, U:B + 1].set(as_bits(spec, jnp.stack([u, b], 1)))
                          .at[:, B0:B1 + 1].set(as_bits(spec, pair)))


# ---------------------------------------------------------------- what the two tree baselines share

class Output(NamedTuple):
    curve: jax.Array           # (C,) cumulative regret at the checkpoints
    final_regret: jax.Array    # ()
    flags: jax.Array           # () int32 errors.FLAG_* bits
    recommendation: jax.Array  # (D,) centre of the node the algorithm would pull next (PyXAB's get_last_point)
    nodes: jax.Array           # () int32 rows of the node table in use
    depth: jax.Array           # () int32 deepest node
    points: jax.Array          # (T, D) the pulled points when the static asks for a trace, else (0, D)


METRICS = ("recommendation", "nodes", "depth")


def check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


class Pull(NamedTuple):
    """The rounds' bookkeeping: the running regret, the curve, error flags and the optional trace."""
    regret: jax.Array
    curve: jax.Array      # (C,) regret written at the first checkpoint of each checkpoint round
    cursor: jax.Array     # () int32 next checkpoint to write; depends on t only (unbatched under vmap)
    flags: jax.Array
    points: jax.Array


def start_pulls(checkpoints: int, dim: int, trace: int, dtype) -> Pull:
    return Pull(regret=jnp.zeros((), dtype), curve=jnp.zeros((checkpoints,), dtype), cursor=jnp.int32(0),
                flags=jnp.int32(0), points=jnp.zeros((trace, dim), dtype))


def _checkpoint_tables(rounds):
    """(next, first) per checkpoint: the index of the next checkpoint with a later round, and of the
    first checkpoint with the same round (several share a round when C > T)."""
    rounds = np.asarray(rounds)
    nxt = np.searchsorted(rounds, rounds, side="right").astype(np.int32)
    first = np.searchsorted(rounds, rounds, side="left").astype(np.int32)
    return nxt, first


def _record(rounds, book: Pull, t, regret):
    """Write ``regret`` at the next checkpoint when its round is t: O(1) per round (a where over all
    C checkpoints every round would cost more than the rest of a round's bookkeeping)."""
    nxt, _ = _checkpoint_tables(rounds)
    c = len(rounds)
    j = jnp.minimum(book.cursor, c - 1)
    hit = (book.cursor < c) & (jnp.asarray(rounds, jnp.int32)[j] == t)
    curve = jax.lax.dynamic_update_slice(book.curve, jnp.where(hit, regret, book.curve[j])[None], (j,))
    return curve, jnp.where(hit, jnp.asarray(nxt)[j], book.cursor)


def output(checkpoint_rounds, state) -> "Output":
    """A run's outputs from the round loop's final state (its table, book, last selection and
    overflow flag), the same for HCT and T-HOO."""
    flags = state.book.flags | jnp.where(state.overflow, FLAG_CAPACITY, 0).astype(jnp.int32)
    return Output(curve=final_curve(checkpoint_rounds, state.book), final_regret=state.book.regret, flags=flags,
                  recommendation=state.last.point, nodes=state.table.size, depth=state.table.height,
                  points=state.book.points)


def final_curve(rounds, book: Pull):
    """The curve with every checkpoint filled (checkpoints sharing a round copy the first one's)."""
    _, first = _checkpoint_tables(rounds)
    return book.curve[jnp.asarray(first)]


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
    n = 3 * chunk
    words = threefry_words(key, c, n)
    u = unit_floats_52(words[:n], words[n:]) if jnp.dtype(dtype) == jnp.float64 else unit_floats(words[:n])
    return u.reshape(chunk, 3)


def run_rounds(horizon: int, chunk: int, key, dtype, update, select, state, refresh=None):
    """Rounds t = 1..T of a tree algorithm, and the selection of round T + 1 (the recommendation).

    The loop body is ``update(t - 1, state, active=t > 1)`` and then ``select(t, u_t, state,
    pulling=t <= T)``: a round's selection comes before its update, and ``refresh(k, state)``
    (HCT's recomputation of every U and B at t = 2^k) goes between the selection and the update of
    round 2^k.  Shifting the body by half a round puts every refresh between two loop bodies, so the
    loop is split at the powers of two (their indices are the same in every run, so nothing is
    selected per run) and no round pays for a branch that passes the node table through.

    ``u_t``: the round's three uniforms (noise.reward's u_noise and u_gauss, and the split uniform).
    Rounds come in chunks that share one draw (:func:`_chunk_uniforms`): a run's numbers depend on
    its key alone, and the round loop holds no PRNG code (a draw per round would dominate the
    compile time and much of the per-round cost)."""
    last_round = horizon + 1
    top = horizon.bit_length() - 1 if refresh is not None else -1     # refreshes at 2^0 .. 2^top
    epochs = top + 2

    def bounds(e):
        if refresh is None:
            return jnp.int32(1), jnp.int32(last_round)
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
            return jax.lax.fori_loop(first, stop + 1, lambda t, s: body(t, u[t - start], s), state)

        state = jax.lax.fori_loop((lo - 1) // chunk, (hi - 1) // chunk + 1, one_chunk, state)
        if refresh is None:
            return state
        # Once per epoch, so passing the table through the branch costs nothing per round.
        return jax.lax.cond(e <= top, lambda s: refresh(e, s), lambda s: s, state)

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


def pull(static, params, objective, book: Pull, t, x, u, pulling):
    """Evaluate the global objective at ``x`` in round ``t``: the regret f* - f(x) is added and
    recorded at the checkpoints, and the reward (noise.reward of the run's noise model, from the
    round's uniforms ``u``, as noise.observe draws them) is returned with the updated bookkeeping.
    Nothing is recorded unless ``pulling`` (round T + 1 only selects)."""
    f = objective.global_value(x).astype(x.dtype)
    kind = static.noise_kind
    scale = params.noise_scale
    r = noise.reward(kind, scale, scale ** 2 if kind == "gaussian" else None, f, u[0], u[1])
    flags = book.flags | jnp.where(pulling, noise.value_flags(kind, f, jnp.bool_(True), f_star=objective.f_star), 0)
    regret = jnp.where(pulling, book.regret + (jnp.asarray(objective.f_star, x.dtype) - f), book.regret)
    curve, cursor = _record(static.checkpoint_rounds, book, t, regret)
    points = book.points
    if static.trace:
        points = jnp.where(pulling, jax.lax.dynamic_update_slice(points, x[None], (t - 1, jnp.zeros_like(t))), points)
    return r, Pull(regret, curve, cursor, flags, points)


class Last(NamedTuple):
    """A round's selection, kept for its update in the next loop body."""
    node: jax.Array       # () int32
    path: jax.Array       # (height + 1,) int32 rows root..node
    length: jax.Array     # () int32
    reward: jax.Array     # ()
    split_u: jax.Array    # () the round's split uniform
    point: jax.Array      # (D,) the node's centre (after the loop: the recommendation)


def no_selection(spec: TreeSpec) -> Last:
    return Last(node=jnp.int32(0), path=jnp.zeros((spec.height + 1,), jnp.int32), length=jnp.int32(0),
                reward=jnp.zeros((), spec.dtype), split_u=jnp.zeros((), spec.dtype),
                point=jnp.zeros((spec.dim,), spec.dtype))
