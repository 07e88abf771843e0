"""SOO, the Simultaneous Optimistic Optimization of Munos (NIPS 2011), as one policy of the tree
skeleton; ``pyxab=True`` is PyXAB 0.3.0's SOO (algos/SOO.py) instead.

A centralized baseline: every node evaluated once at its centre, sweeps over the depths expanding
each depth's best leaf (the paper), or PyXAB's ``pull``, which amounts to a breadth-first search.
The two rules, the ties, the recommendation and the per-depth candidates and rebuilds that bound a
round's cost: docs/algorithms/trees.md, section "Each algorithm in detail", SOO.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.trees import family
from fedpne_jax.algorithms.trees.layout import COUNT, DEPTH, MAX_HEIGHT, MEAN, as_bits, centre
from fedpne_jax.algorithms.trees.partition import expand
from fedpne_jax.algorithms.trees.policy import Last, TreeConfig, TreePolicy, TreeStatic, tree_static
from fedpne_jax.algorithms.trees.ranking import RunningBest, running_best, running_best_point, running_best_step
from fedpne_jax.core.algorithm import Style
from fedpne_jax.core.validation import check_int
from objectives.ordered import prefix_sum

REBUILD = 128                 # rounds between rebuilds of the sorted leaves


@dataclasses.dataclass(frozen=True)
class SOOConfig(TreeConfig):
    """SOO's parameters (PyXAB's h_max, the deepest depth a sweep expands; ``pyxab``: PyXAB's rule)."""

    h_max: int = 100
    pyxab: bool = False

    def __post_init__(self):
        super().__post_init__()
        check_int("h_max", self.h_max, 0, MAX_HEIGHT - 2)
        if not isinstance(self.pyxab, bool):
            raise ValueError(f"pyxab must be True or False, got {self.pyxab!r}")
        if self.horizon > self.most_evaluations:
            rule = "PyXAB's SOO" if self.pyxab else "SOO"
            raise ValueError(f"horizon: {rule} with h_max={self.h_max} evaluates at most {self.most_evaluations} "
                             f"nodes, got horizon={self.horizon}; raise h_max")

    @property
    def most_evaluations(self) -> int:
        """Every node of depth <= h_max + 1 (paper), or <= h_max (PyXAB)."""
        return (1 << (self.h_max + (1 if self.pyxab else 2))) - 1

    @property
    def capacity(self) -> int:
        """Rows: the root and two children per expansion, made only once every row is evaluated."""
        return self.horizon + 2

    @property
    def height(self) -> int:
        """The deepest node a run can create: h_max + 1, or fewer when the rounds run out first (one
        depth per expansion for the paper's rule, full levels for PyXAB's)."""
        rounds_allow = (self.horizon + 1).bit_length() if self.pyxab else (self.horizon + 1) // 2 + 1
        return min(self.h_max + 1, rounds_allow)



@dataclasses.dataclass(frozen=True)
class SOOStatic(TreeStatic):
    h_max: int = 100
    pyxab: bool = False


class SOOParams(NamedTuple):
    noise_scale: np.ndarray  # ()


def make_static(config: SOOConfig, objective, tables=None) -> SOOStatic:
    return tree_static(config, objective, config.capacity, config.height, cls=SOOStatic, h_max=config.h_max,
                       pyxab=config.pyxab)


def make_params(config: SOOConfig, tables=None) -> SOOParams:
    return SOOParams(noise_scale=np.asarray(config.noise_scale, np.dtype(config.precision)))


class Lists(NamedTuple):
    """The candidates for expansion, per depth 0 .. height (H of them), and the sweep."""
    sorted_value: jax.Array  # (capacity,) the leaves at the last rebuild by (depth, -value, -row)
    sorted_row: jax.Array    # (capacity,) int32 their rows
    sorted_depth: jax.Array  # (capacity,) int32 their depths (H past the leaves)
    start: jax.Array         # (H + 1,) int32 where each depth starts in them (start[H]: the leaves' count)
    head: jax.Array          # (H,) int32 sorted leaves of each depth expanded since (always the first ones)
    kept_value: jax.Array    # (H,) each depth's first sorted leaf not expanded (its value: any when none)
    kept_row: jax.Array      # (H,) int32 its row (-1: none)
    new_value: jax.Array     # (REBUILD,) leaves evaluated since the rebuild, slot t % REBUILD
    new_row: jax.Array       # (REBUILD,) int32 (-1: none, or expanded)
    new_depth: jax.Array     # (REBUILD,) int32
    new_best: jax.Array      # (H,) int32 slot of each depth's best new leaf (-1: none)
    h: jax.Array             # () int32 paper: the sweep's next depth; pyxab: the depth being expanded
    v_max: jax.Array         # () the sweep's v_max (paper)
    bound: jax.Array         # () int32 the sweep's last depth (paper)
    best: RunningBest   # the recommendation: every node is evaluated once, in row order


def _init(static: SOOStatic, params, table, key) -> Lists:
    spec = static.tree
    H, dt = spec.height + 1, spec.dtype
    return Lists(sorted_value=jnp.full((spec.capacity,), -jnp.inf, dt),
                 sorted_row=jnp.full((spec.capacity,), -1, jnp.int32),
                 sorted_depth=jnp.full((spec.capacity,), H, jnp.int32), start=jnp.zeros((H + 1,), jnp.int32),
                 head=jnp.zeros((H,), jnp.int32), kept_value=jnp.full((H,), -jnp.inf, dt),
                 kept_row=jnp.full((H,), -1, jnp.int32), new_value=jnp.full((REBUILD,), -jnp.inf, dt),
                 new_row=jnp.full((REBUILD,), -1, jnp.int32), new_depth=jnp.zeros((REBUILD,), jnp.int32),
                 new_best=jnp.full((H,), -1, jnp.int32), h=jnp.int32(0), v_max=jnp.asarray(-jnp.inf, dt),
                 bound=jnp.int32(-1), best=running_best(dt))


def _better(value_a, row_a, value_b, row_b):
    """(value, row) a beats b: a larger value, or the same value and a later row (row -1: nothing)."""
    return (row_a >= 0) & ((row_b < 0) | (value_a > value_b) | ((value_a == value_b) & (row_a > row_b)))


def _best_new_slot(lists: Lists, depth):
    """The slot of the best new leaf of ``depth`` (-1: none), over every slot.  Round t writes slot
    t - k REBUILD after rebuild k, and its row is t - 1, so the later row of a tie is the later slot."""
    slots = jnp.arange(REBUILD, dtype=jnp.int32)
    mine = (lists.new_row >= 0) & (lists.new_depth == depth)
    value = jnp.where(mine, lists.new_value, -jnp.inf)
    return jnp.max(jnp.where(mine & (value == jnp.max(value)), slots, -1))


def _windows(capacity: int) -> tuple:
    """The sizes a rebuild reads and writes: 8 REBUILD x 4^i up to the table's.  Rebuild k merges the
    leaves among rows 0 .. k REBUILD - 2, at most k REBUILD / 2 of them, so the smallest size above
    that is enough.  Each size is a branch of the program: at T = 10^4, sizes from REBUILD on, or a
    factor of 2, compiled 0.5-1.5 s longer and ran no faster; a table of at most 8 REBUILD rows (the
    tests') has one size."""
    sizes = [min(8 * REBUILD, capacity)]
    while sizes[-1] < capacity:
        sizes.append(min(4 * sizes[-1], capacity))
    return tuple(sizes)


def _before(depth_a, value_a, row_a, depth_b, value_b, row_b):
    """Leaf a comes before leaf b in the lists' order: by depth, then as :func:`_better` (rows are
    distinct, so two leaves are never equal)."""
    return (depth_a < depth_b) | ((depth_a == depth_b) & _better(value_a, row_a, value_b, row_b))


def _rebuild(static: SOOStatic, params, k, table, lists: Lists):
    """Every evaluated leaf in the lists' order (depth, then value and row, best first), and the new
    list emptied: the skeleton's refresh, between the selection and the update of round t = k REBUILD,
    when rows 0 .. t - 2 hold their values (row t - 1's is the update's, which adds it to the new
    list).

    The leaves are the last rebuild's sorted leaves, less those expanded since (the first ``head`` of
    each depth), merged with the new list's: only the new list (REBUILD entries) is sorted.  Each new
    leaf finds its place among the old ones by binary search, and the old ones shift by a count of
    the new leaves placed before them.  Sorting every leaf again cost about 0.35 us a row, most of a
    run.  The old leaves are read, and the merged ones written, only in the smallest of
    :func:`_windows` that holds every leaf: rows 0 .. t - 2 of a binary tree hold at most t / 2."""
    spec = static.tree
    H = spec.height + 1
    made = k * REBUILD - 1
    sizes = _windows(spec.capacity)
    removed_to = prefix_sum(lists.head)                                   # expanded, through each depth
    removed_below = jnp.concatenate([jnp.zeros((1,), jnp.int32), removed_to])   # (H + 1,) below each depth
    valid = lists.new_row >= 0
    b_depth, b_negative, b_last = jax.lax.sort((jnp.where(valid, lists.new_depth, H), -lists.new_value,
                                                -lists.new_row), num_keys=3)
    b_value, b_row = -b_negative, -b_last
    b_valid = b_depth < H
    b_at = jnp.minimum(b_depth, H - 1)
    news_below = jnp.searchsorted(b_depth, jnp.arange(H + 1, dtype=jnp.int32)).astype(jnp.int32)
    start = lists.start - removed_below + news_below                    # where each depth starts, merged

    def merge(size):
        a_value, a_row, a_depth = lists.sorted_value[:size], lists.sorted_row[:size], lists.sorted_depth[:size]
        # Each new leaf's place among the old ones: how many old ones (kept or not) come before it.
        def halve(_, bounds):
            lo, hi = bounds
            mid = (lo + hi) // 2
            at = jnp.minimum(mid, size - 1)
            first = (lo < hi) & _before(a_depth[at], a_value[at], a_row[at], b_depth, b_value, b_row)
            return jnp.where(first, mid + 1, lo), jnp.where(first | (lo >= hi), hi, mid)

        place, _ = jax.lax.fori_loop(0, size.bit_length(), halve, (jnp.zeros((REBUILD,), jnp.int32),
                                                                   jnp.full((REBUILD,), size, jnp.int32)))
        within = jnp.clip(place - lists.start[b_at], 0, lists.head[b_at])
        news = jnp.arange(REBUILD, dtype=jnp.int32)
        b_to = jnp.where(b_valid, news + place - removed_below[b_at] - within, size)      # increasing
        # Every other merged place p < start[H] reads old leaf p + shift(p).  The shift falls by one after
        # each new leaf and rises by head[d] at the first kept leaf after depth d's expanded ones: a
        # cumulative sum over the window of R + H steps, where placing each old leaf would be a scatter
        # of the whole window (its per-run indices cost more than the rest of the merge).
        after = lists.start[:-1] + lists.head                            # (H,) old index past depth d's expanded
        places = jnp.where(b_valid, place, size + 1)                     # nondecreasing
        rise_at = after - removed_to + jnp.searchsorted(places, after, side="right").astype(jnp.int32)
        steps = jnp.zeros((size + 1,), jnp.int32).at[jnp.where(b_valid, b_to + 1, size)].add(-1)
        steps = steps.at[jnp.minimum(rise_at, size)].add(lists.head)
        index = jnp.arange(size, dtype=jnp.int32)
        old = jnp.clip(index + prefix_sum(steps)[:size], 0, size - 1)
        new = jnp.full((size,), -1, jnp.int32).at[b_to].set(news, mode="drop")
        # Where each merged place reads from: old leaf i, new leaf size + j, or nothing (size + REBUILD).
        source = jnp.where(new >= 0, size + new, jnp.where(index < start[H], old, size + REBUILD))
        pad = spec.capacity - size

        def place_both(a, b, empty):
            merged = jnp.concatenate([a, b, jnp.full((1,), empty, a.dtype)])[source]
            return jnp.concatenate([merged, jnp.full((pad,), empty, a.dtype)])

        return (place_both(a_depth, b_depth, H), place_both(a_value, b_value, -jnp.inf),
                place_both(a_row, b_row, -1))

    # The branch is a function of k alone: the same in every run of a batch.
    branch = jnp.searchsorted(jnp.asarray(sizes, jnp.int32), made // 2 + 1).astype(jnp.int32)
    depth, value, row = jax.lax.switch(jnp.minimum(branch, len(sizes) - 1), [lambda s=s: merge(s) for s in sizes])
    lists = lists._replace(sorted_value=value, sorted_row=row, sorted_depth=depth, start=start,
                           head=jnp.zeros_like(lists.head), new_row=jnp.full_like(lists.new_row, -1),
                           new_best=jnp.full_like(lists.new_best, -1))
    return table, _kept(spec, lists, jnp.arange(H, dtype=jnp.int32))


def _kept(spec, lists: Lists, depths) -> Lists:
    """``lists`` with the kept candidates of ``depths`` read again from the sorted leaves.  A round
    reads every depth's candidate; kept apart, it is read from these (H,) arrays, not gathered
    from the sorted leaves (a cache miss per depth and run: half of a round's time at 1,000 runs)."""
    at = lists.start[depths] + lists.head[depths]
    inside = at < lists.start[depths + 1]
    at = jnp.minimum(at, spec.capacity - 1)
    return lists._replace(kept_value=lists.kept_value.at[depths].set(lists.sorted_value[at]),
                          kept_row=lists.kept_row.at[depths].set(jnp.where(inside, lists.sorted_row[at], -1)))


def _choose(static: SOOStatic, lists: Lists, height):
    """The depth to expand at and the sweep that follows, from every depth's best leaf."""
    H = static.tree.height + 1
    depths = jnp.arange(H, dtype=jnp.int32)
    kept_value, kept_row = lists.kept_value, lists.kept_row
    slot = lists.new_best
    new_value, new_row = lists.new_value[jnp.maximum(slot, 0)], jnp.where(slot >= 0, lists.new_row[slot], -1)
    newer = _better(new_value, new_row, kept_value, kept_row)
    value, row = jnp.where(newer, new_value, kept_value), jnp.where(newer, new_row, kept_row)
    has = row >= 0
    if static.pyxab:
        level = jnp.where(has[jnp.minimum(lists.h, H - 1)], lists.h, lists.h + 1)
        target = jnp.minimum(level, H - 1)
        ok = (level <= static.h_max) & has[target]
        return target, value, row, newer, ok, lists._replace(h=level)
    in_sweep = (depths >= lists.h) & (depths <= lists.bound) & has & (value >= lists.v_max)
    on = jnp.min(jnp.where(in_sweep, depths, H))
    bound = jnp.minimum(height, static.h_max)
    fresh = jnp.min(jnp.where((depths <= bound) & has, depths, H))
    restart = on == H
    target = jnp.minimum(jnp.where(restart, fresh, on), H - 1)
    ok = jnp.where(restart, fresh, on) < H
    return target, value, row, newer, ok, lists._replace(h=target + 1, v_max=value[target],
                                                           bound=jnp.where(restart, bound, lists.bound))


def _expansion_fields(lists: Lists) -> dict:
    """The fields of the lists an expansion changes (all small: per depth, or the new list's rows)."""
    return dict(h=lists.h, v_max=lists.v_max, bound=lists.bound, head=lists.head, new_row=lists.new_row,
                kept_value=lists.kept_value, kept_row=lists.kept_row, new_best=lists.new_best)


class Choice(NamedTuple):
    node: jax.Array          # () int32 the row evaluated
    depth: jax.Array         # () int32 its depth, read when it is selected


def _select(static: SOOStatic, params, table, lists, t):
    spec = static.tree
    node = jnp.minimum(t - 1, spec.capacity - 1)
    row = table.rows[node]
    return Choice(node, row[DEPTH].astype(jnp.int32)), centre(spec, row)


def _update(static: SOOStatic, params, table, lists: Lists, last: Last, t, active):
    """Keep round t's value, add its node to the new list, and, once every node is evaluated, expand
    the leaf the rule picks."""
    spec = static.tree
    # The depth was read in the selection, so that every read of the table here feeds its one write
    # (XLA copies the whole table for a read it cannot order before the in-place update).
    node, depth, value = last.choice.node, last.choice.depth, last.reward
    row = table.rows[node]
    row = row.at[COUNT].set(1).at[MEAN].set(as_bits(spec, value))
    slot = t % REBUILD
    best = lists.new_best[depth]
    lists = lists._replace(new_value=lists.new_value.at[slot].set(value),
                           new_row=lists.new_row.at[slot].set(jnp.where(active, node, -1)),
                           new_depth=lists.new_depth.at[slot].set(depth),
                           best=running_best_step(lists.best, node, value, active),
                           new_best=lists.new_best.at[depth].set(
                               jnp.where(active & _better(value, node, lists.new_value[jnp.maximum(best, 0)],
                                                          jnp.where(best >= 0, lists.new_row[best], -1)),
                                         slot, best)))
    # Only a round with every node evaluated expands, and the table always holds an odd number of
    # nodes (the root and two per expansion), so no even round expands: the paper's rule skips its
    # choice of the leaf in those, by a branch on the round, which is the same in every run of a
    # batch (half of the rounds no longer pay for the sweep over the depths and the new list's
    # scans: 3-15 % more pulls/s at 1,000 seeds, T = 10^4, in four alternating pairs of runs).  Only
    # the small lists it changes leave the branch; the sorted leaves are read in it, never copied.
    # PyXAB's rule, whose choice is a lookup, ran 0-6 % slower with the branch, and keeps none.
    def expansion(_):
        grow = active & (t == table.size)
        target, values, rows, newer, ok, after = _choose(static, lists, table.height)
        grow = grow & ok
        chosen = rows[target]
        # The expanded leaf leaves its list: its depth's head in the sorted leaves moves on, or its new
        # slot empties.
        from_new = newer[target]
        head = lists.head.at[target].add(jnp.where(grow & ~from_new, 1, 0))
        new_row = jnp.where(grow & from_new & (lists.new_row == chosen), -1, lists.new_row)
        changed = lists._replace(h=jnp.where(grow, after.h, lists.h),
                                 v_max=jnp.where(grow, after.v_max, lists.v_max),
                                 bound=jnp.where(grow, after.bound, lists.bound), head=head, new_row=new_row)
        changed = _kept(spec, changed, target)
        changed = changed._replace(new_best=changed.new_best.at[target].set(
            jnp.where(grow & from_new, _best_new_slot(changed, target), changed.new_best[target])))
        return _expansion_fields(changed), grow, jnp.maximum(chosen, 0)

    def no_expansion(_):
        return _expansion_fields(lists), jnp.bool_(False), jnp.int32(0)

    moved, grow, chosen = expansion(None) if static.pyxab else jax.lax.cond(t % 2 == 1, expansion, no_expansion,
                                                                             None)
    lists = lists._replace(**moved)
    chosen_row = jnp.where(chosen == node, row, table.rows[chosen])
    table, overflow = expand(spec, table, chosen, grow, last.split_u, node_row=chosen_row,
                             also=(node, row, active))
    return table, lists, overflow


POLICY = TreePolicy(select=_select, update=_update, recommend=running_best_point, root_expanded=False, init=_init,
                    refresh=_rebuild, refresh_every=REBUILD)


ALGORITHM = family.algorithm("soo", SOOConfig, make_static, make_params, POLICY,
                           Style("SOO", "#000000", "p"))
run_single = ALGORITHM.run_single
