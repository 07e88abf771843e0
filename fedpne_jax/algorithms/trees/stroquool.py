"""StroquOOL, the stochastic version of SequOOL (Bartlett, Gabillon and Valko, ALT 2019), with PyXAB
0.3.0's rules (algos/StroquOOL.py), as one policy of the tree skeleton.

A parameter-free centralized baseline (PyXAB's budget n is the horizon T): openings, then a
cross-validation of the candidates, all scheduled on the host from T (:func:`schedule`); means are
numpy's pairwise sums (:func:`numpy_sum`).  The rules and the cost: docs/algorithms/trees.md, section "Each algorithm in detail", StroquOOL.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.trees import family
from fedpne_jax.algorithms.trees.layout import CHILD, COUNT, DEPTH, MEAN, as_bits, as_float, centre
from fedpne_jax.algorithms.trees.partition import expand
from fedpne_jax.algorithms.trees.policy import Last, TreeConfig, TreePolicy, TreeStatic, tree_static
from fedpne_jax.algorithms.trees.sequool import check_horizon, harmonic
from fedpne_jax.core.algorithm import Style

PAIRWISE_BLOCK = 128     # numpy's PW_BLOCKSIZE: longer sums split in two (at a multiple of 8)
MAX_HORIZON = 10**7      # the schedule is built on the host and held in the program (31,929 steps here)


def _leaves(n: int, start: int = 0) -> list:
    """numpy's pairwise split of n values: (start, length) of its blocks of at most PAIRWISE_BLOCK."""
    if n <= PAIRWISE_BLOCK:
        return [(start, n)]
    half = n // 2
    half -= half % 8
    return _leaves(half, start) + _leaves(n - half, start + half)


def _combine(n: int, sums, at: int = 0):
    """The blocks' sums added as numpy's recursion adds them; returns (sum, blocks used)."""
    if n <= PAIRWISE_BLOCK:
        return sums[at], at + 1
    half = n // 2
    half -= half % 8
    left, at = _combine(half, sums, at)
    right, at = _combine(n - half, sums, at)
    return left + right, at


def numpy_sum(a, n: int):
    """np.sum(a[:n]) in numpy's pairwise order (n static, a 1-D float array): fewer than 8 values
    added in turn from 0; a block of 8..128 in eight interleaved partial sums combined as ((r0 + r1)
    + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then its last n % 8 values in turn; longer sums split in
    two halves (the first a multiple of 8), recursively.  The blocks are summed side by side (zero
    padding adds exactly), then combined in numpy's order."""
    if n < 8:
        total = jnp.zeros((), a.dtype)
        for i in range(n):
            total = total + a[i]
        return total
    blocks = _leaves(n)
    whole = np.zeros((len(blocks), PAIRWISE_BLOCK), np.int32)
    whole_ok = np.zeros(whole.shape, bool)
    tail = np.zeros((len(blocks), 7), np.int32)
    tail_ok = np.zeros(tail.shape, bool)
    for i, (start, length) in enumerate(blocks):
        w = length - length % 8
        whole[i, :w], whole_ok[i, :w] = start + np.arange(w), True
        tail[i, :length % 8], tail_ok[i, :length % 8] = start + w + np.arange(length % 8), True
    values = jnp.where(whole_ok, a[whole], 0).reshape(len(blocks), PAIRWISE_BLOCK // 8, 8)
    r = values[:, 0]
    for j in range(1, PAIRWISE_BLOCK // 8):
        r = r + values[:, j]
    sums = ((r[:, 0] + r[:, 1]) + (r[:, 2] + r[:, 3])) + ((r[:, 4] + r[:, 5]) + (r[:, 6] + r[:, 7]))
    rest = jnp.where(tail_ok, a[tail], 0)
    for j in range(7):
        sums = sums + rest[:, j]
    return _combine(n, sums)[0]


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Steps of the sweep, (depth, p, first round), and the rounds of the cross-validation."""

    h_max: int
    p_max: int
    depth: tuple             # per step
    p: tuple                 # per step
    first: tuple             # per step: its first round (its lower child's; the upper's from first + 2^p)
    cv_start: int            # the first cross-validation round
    end: int                 # the first round after the cross-validation
    depth_first: tuple       # per depth 1..h_max: the row of its first node (1; step k's children: 3 + 2k)
    depth_count: tuple       # per depth: its nodes
    offset: tuple            # per step: rewards its children already have (0 unless the step repeats one)
    sizes: tuple             # the reward counts whose mean a block end takes (h_max: the root's children)
    size_index: tuple        # per step: its children's count after it, as an index into ``sizes``

    @property
    def steps(self) -> int:
        return len(self.depth)

    @property
    def window(self) -> int:
        """The most nodes a depth has."""
        return max(self.depth_count)

    @property
    def openings(self) -> int:
        return sum(o == 0 for o in self.offset)


def _h_max(n: int) -> int:
    return math.floor(n / (2 * (harmonic(n) + 1) ** 2))


@functools.lru_cache(maxsize=64)
def schedule(horizon: int) -> Schedule:
    h_max = _h_max(horizon)
    if h_max < 1:
        raise ValueError(f"horizon: StroquOOL needs h_max = floor(T / (2 (H_T + 1)^2)) >= 1, i.e. "
                         f"T >= {min_horizon()}, got horizon={horizon}")
    depth, p, first = [], [], []
    stamp = 2 * h_max
    for h in range(1, h_max + 1):
        for q in range(math.floor(np.log2(h_max / h)), -1, -1):     # PyXAB's float64 log2
            depth.append(h)
            p.append(q)
            first.append(stamp + 1)
            stamp += 2 ** (q + 1)
    p_max = math.floor(np.log2(h_max))
    offset = _repeats(h_max, depth, p)
    totals = [o + 2 ** q for o, q in zip(offset, p)]
    sizes = tuple(sorted({h_max, *totals}))
    # Rows: 1, 2 the root's children, then two per opening (a repeating step makes none).
    opens = np.array([o == 0 for o in offset], bool)
    made = np.concatenate([[0], np.cumsum(opens)])                    # openings before each step
    firsts = {h: k for k, h in reversed(list(enumerate(depth)))}      # each depth's first step
    depth_first = [1] + [3 + 2 * int(made[firsts[h - 1]]) for h in range(2, h_max + 1)]
    opened_at = np.bincount(depth, weights=opens, minlength=h_max + 1)  # openings per depth
    depth_count = [2] + [2 * int(opened_at[h - 1]) for h in range(2, h_max + 1)]
    return Schedule(h_max=h_max, p_max=p_max, depth=tuple(depth), p=tuple(p), first=tuple(first),
                    cv_start=stamp + 1, end=stamp + 1 + (p_max + 1) * h_max, depth_first=tuple(depth_first),
                    depth_count=tuple(depth_count), offset=tuple(offset), sizes=sizes,
                    size_index=tuple(sizes.index(n) for n in totals))


def _repeats(h_max: int, depth: list, p: list) -> list:
    """Per step, the rewards its children already have: 0 when it opens a node; when no node of its
    depth qualifies, it evaluates the previous step's children again, which then have the previous
    steps' rewards.  Which steps repeat does not depend on the values: an opened node always had at
    least 2^p evaluations for every later p of its depth, so the count of nodes that qualify is the
    count with enough evaluations less those opened."""
    visits = {1: [h_max, h_max]}
    opened: dict = {}
    out, last, prev = [], 0, 0
    for h, q in zip(depth, p):
        need = 2 ** q
        free = sum(v >= need for v in visits.get(h, [])) - opened.get(h, 0)
        if free > 0:
            opened[h] = opened.get(h, 0) + 1
            visits.setdefault(h + 1, []).extend([need, need])
            out.append(0)
        else:
            kids = visits[h + 1]
            kids[-2] += need
            kids[-1] += need
            out.append(last + 2 ** prev)
        last, prev = out[-1], q
    return out


@functools.lru_cache(maxsize=1)
def min_horizon() -> int:
    n = 1
    while _h_max(n) < 1:
        n += 1
    return n


@dataclasses.dataclass(frozen=True)
class StroquOOLConfig(TreeConfig):
    """StroquOOL has no parameter beside the tree's: PyXAB's budget n is the horizon."""

    def __post_init__(self):
        super().__post_init__()
        check_horizon("StroquOOL", self.horizon, MAX_HORIZON)
        plan = schedule(self.horizon)
        if plan.end > self.horizon + 1:
            raise ValueError(f"horizon: StroquOOL's cross-validation ends in round {plan.end - 1}, after "
                             f"horizon={self.horizon}")

    @property
    def capacity(self) -> int:
        return 3 + 2 * schedule(self.horizon).openings


@dataclasses.dataclass(frozen=True, kw_only=True)     # kw_only: a field without default after TreeStatic's
class StroquOOLStatic(TreeStatic):
    schedule: Schedule


class StroquOOLParams(NamedTuple):
    noise_scale: np.ndarray  # ()


def make_static(config: StroquOOLConfig, objective, tables=None) -> StroquOOLStatic:
    plan = schedule(config.horizon)
    return tree_static(config, objective, config.capacity, plan.h_max + 1, cls=StroquOOLStatic, schedule=plan)


def make_params(config: StroquOOLConfig, tables=None) -> StroquOOLParams:
    return StroquOOLParams(noise_scale=np.asarray(config.noise_scale, np.dtype(config.precision)))


class State(NamedTuple):
    block: jax.Array         # (2, most sizes) the rewards of the lower and upper child being evaluated
    cv: jax.Array            # (p_max + 1, h_max) the candidates' cross-validation rewards
    opened: jax.Array        # () int32 the row the current step opened
    kids: jax.Array          # () int32 its lower child's row
    candidates: jax.Array    # (p_max + 1,) int32 rows
    best: jax.Array          # () int32 the recommendation's row


class Choice(NamedTuple):
    node: jax.Array          # () int32 the row evaluated


class Where(NamedTuple):
    """Round t's place in the schedule: functions of t alone, the same in every run."""
    phase: jax.Array         # () 0: the root's children, 1: the sweep, 2: cross-validation, 3: done
    step: jax.Array          # () int32 the sweep's step
    upper: jax.Array         # () bool the step's upper child (root phase: the root's)
    position: jax.Array      # () int32 the reward's index among its node's (cross-validation: in its turn)
    turn: jax.Array          # () int32 the cross-validation candidate
    block_end: jax.Array     # () int32 0, else 1 + the index in Schedule.sizes of the node's reward count


def _where(plan: Schedule, t) -> Where:
    h = plan.h_max
    first = jnp.asarray(plan.first, jnp.int32)
    p = jnp.asarray(plan.p, jnp.int32)
    step = jnp.clip(jnp.searchsorted(first, t, side="right").astype(jnp.int32) - 1, 0, plan.steps - 1)
    size = jnp.left_shift(jnp.int32(1), p[step])
    into = t - first[step]
    phase = jnp.where(t <= 2 * h, 0, jnp.where(t < plan.cv_start, 1, jnp.where(t < plan.end, 2, 3)))
    upper = jnp.where(phase == 0, t > h, into >= size)
    offset = jnp.asarray(plan.offset, jnp.int32)[step]
    in_block = jnp.where(phase == 0, (t - 1) % h, into % size)
    position = jnp.where(phase == 2, (t - plan.cv_start) % h, jnp.where(phase == 1, offset + in_block, in_block))
    last = in_block == jnp.where(phase == 0, h, size) - 1
    index = jnp.where(phase == 0, plan.sizes.index(h), jnp.asarray(plan.size_index, jnp.int32)[step])
    ends = jnp.where((phase <= 1) & last, 1 + index, 0)
    return Where(phase=phase, step=step, upper=upper, position=position,
                 turn=jnp.clip((t - plan.cv_start) // h, 0, plan.p_max), block_end=ends.astype(jnp.int32))


def _select(static: StroquOOLStatic, params, table, state: State, t):
    spec, plan = static.tree, static.schedule
    at = _where(plan, t)
    node = jnp.select([at.phase == 0, at.phase == 1, at.phase == 2],
                      [1 + at.upper.astype(jnp.int32), state.kids + at.upper.astype(jnp.int32),
                       state.candidates[at.turn]], state.best)
    return Choice(node), centre(spec, table.rows[node])


def _best(values, where):
    """The last index with the largest value where ``where`` (PyXAB's ``>=`` scan), and whether any."""
    n = values.shape[0]
    v = jnp.where(where, values, -jnp.inf)
    top = jnp.max(v)
    return jnp.max(jnp.where(where & (v == top), jnp.arange(n, dtype=jnp.int32), -1)), jnp.any(where)


def _candidates(static: StroquOOLStatic, rows):
    """For p = 0..p_max, the row with at least 2^p evaluations and the largest mean (depths up to
    h_max), the last created on ties."""
    spec, plan = static.tree, static.schedule
    index = jnp.arange(spec.capacity, dtype=jnp.int32)
    count = rows[:, COUNT].astype(jnp.int32)
    live = (index >= 1) & (count > 0)
    mean = jnp.where(rows[:, DEPTH] <= plan.h_max, as_float(spec, rows[:, MEAN]), -jnp.inf)
    return jnp.stack([_best(mean, live & (count >= (1 << p)))[0] for p in range(plan.p_max + 1)])


def _recommendation(static: StroquOOLStatic, state: State):
    """The candidate with the largest mean of its cross-validation rewards (all its turns', in turn
    order, summed as np.sum sums them), the last in order on ties."""
    plan = static.schedule
    K, h = plan.p_max + 1, plan.h_max
    turns = jnp.arange(K, dtype=jnp.int32)

    def mean_of(c):
        mine = state.candidates == state.candidates[c]
        order = jnp.argsort(jnp.where(mine, turns, K + turns))           # its turns first, in order
        rewards = state.cv[order].reshape(-1)
        sums = jnp.stack([numpy_sum(rewards, m * h) / (m * h) for m in range(1, K + 1)])
        return sums[jnp.sum(mine) - 1]

    means = jnp.stack([mean_of(c) for c in range(K)])
    return state.candidates[_best(means, jnp.ones((K,), bool))[0]]


def _update(static: StroquOOLStatic, params, table, state: State, last: Last, t, active):
    """Credit round t's reward; when its block ends, the node's mean; when round t + 1 starts a step,
    open the step's node; when it starts the cross-validation, the candidates; when it ends it, the
    recommendation."""
    spec, plan = static.tree, static.schedule
    at = _where(plan, t)
    node = last.choice.node
    credit = active & (at.phase < 3)
    in_cv = at.phase == 2
    child = at.upper.astype(jnp.int32)
    block = state.block.at[child, at.position].set(
        jnp.where(credit & ~in_cv, last.reward, state.block[child, at.position]))
    cv = state.cv.at[at.turn, at.position].set(jnp.where(credit & in_cv, last.reward, state.cv[at.turn, at.position]))
    row = table.rows[node]
    row = row.at[COUNT].set(row[COUNT] + jnp.where(credit, 1, 0).astype(spec.itype))
    keep = lambda: as_float(spec, row[MEAN])
    mine = block[child]
    mean = jax.lax.switch(jnp.where(active, at.block_end, 0),
                          [keep] + [functools.partial(lambda n: numpy_sum(mine, n) / n, n) for n in plan.sizes])
    row = row.at[MEAN].set(as_bits(spec, mean))

    nxt = _where(plan, t + 1)
    starts = active & (nxt.phase == 1) & (nxt.position == 0) & ~nxt.upper & (t < static.horizon)
    depth = jnp.asarray(plan.depth, jnp.int32)[nxt.step]
    firsts = jnp.asarray(plan.depth_first, jnp.int32)
    counts = jnp.asarray(plan.depth_count, jnp.int32)
    W = plan.window
    rows_at = firsts[depth - 1] + jnp.arange(W, dtype=jnp.int32)
    window = table.rows[jnp.minimum(rows_at, spec.capacity - 1)]
    window = jnp.where((rows_at == node)[:, None], row[None], window)
    ok = (jnp.arange(W) < counts[depth - 1]) & (window[:, CHILD] < 0) \
        & (window[:, COUNT].astype(jnp.int32) >= jnp.left_shift(1, jnp.asarray(plan.p, jnp.int32)[nxt.step]))
    pick, found = _best(as_float(spec, window[:, MEAN]), ok)
    target = jnp.where(found, rows_at[jnp.maximum(pick, 0)], state.opened)
    grow = starts & found
    target_row = jnp.where(target == node, row, table.rows[target])
    kids = jnp.where(grow, table.size, jnp.where(starts, target_row[CHILD].astype(jnp.int32), state.kids))
    table, overflow = expand(spec, table, target, grow, last.split_u, node_row=target_row,
                             also=(node, row, credit))
    state = state._replace(block=block, cv=cv, opened=jnp.where(starts, target, state.opened), kids=kids)
    # The candidates are chosen from the table as round t leaves it (written just above).
    candidates = jax.lax.cond(active & (t + 1 == plan.cv_start), lambda: _candidates(static, table.rows),
                              lambda: state.candidates)
    state = state._replace(candidates=candidates)
    best = jax.lax.cond(active & (t + 1 == plan.end), lambda: _recommendation(static, state), lambda: state.best)
    return table, state._replace(best=best), overflow


def _init(static: StroquOOLStatic, params, table, key) -> State:
    plan, dtype = static.schedule, static.tree.dtype
    K = plan.p_max + 1
    return State(block=jnp.zeros((2, max(plan.sizes)), dtype), cv=jnp.zeros((K, plan.h_max), dtype), opened=jnp.int32(0),
                 kids=jnp.int32(3), candidates=jnp.ones((K,), jnp.int32), best=jnp.int32(1))


def _recommend(static, params, table, state: State, last):
    return centre(static.tree, table.rows[state.best])


POLICY = TreePolicy(select=_select, update=_update, init=_init, recommend=_recommend, root_expanded=True)


ALGORITHM = family.algorithm("stroquool", StroquOOLConfig, make_static, make_params, POLICY,
                           Style("StroquOOL", "#d6616b", "4"))
run_single = ALGORITHM.run_single
