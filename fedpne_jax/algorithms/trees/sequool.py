"""SequOOL, the sequential Optimistic Optimization with a Lipschitz-free rule of Bartlett, Gabillon and
Valko (ALT 2019), with PyXAB 0.3.0's rules (algos/SequOOL.py), as one policy of the tree skeleton.

A parameter-free centralized baseline (PyXAB's budget n is the horizon T) whose schedule does not
depend on the values, so it is decided on the host (:func:`schedule`).  The rules, PyXAB's count in
evaluations, the depth of its trees and the cost: docs/algorithms/trees.md, section "Each algorithm in detail", SequOOL.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.trees import family
from fedpne_jax.algorithms.trees.layout import COUNT, MEAN, as_bits, as_float, centre
from fedpne_jax.algorithms.trees.partition import expand
from fedpne_jax.algorithms.trees.policy import Last, TreeConfig, TreePolicy, TreeStatic, tree_static
from fedpne_jax.algorithms.trees.ranking import RunningBest, running_best, running_best_point, running_best_step
from fedpne_jax.core.algorithm import Style


def check_horizon(name: str, horizon: int, most: int) -> None:
    """A schedule decided on the host is bounded by what the host builds in a moment."""
    if horizon > most:
        raise ValueError(f"horizon: {name}'s schedule is built on the host and held in the program, for at most "
                         f"{most:,} rounds, got horizon={horizon}")


MAX_HORIZON = 10**7      # the schedule is built on the host and held in the program (61,758 depths here)


@functools.lru_cache(maxsize=64)
def harmonic(n: int) -> float:
    """H_n = 1 + 1/2 + ... + 1/n, added in increasing order in float64 as PyXAB's loop adds it
    (numpy's cumsum is a sequential sum: the same additions, chunked to bound memory)."""
    total, start, step = 0.0, 1, 1 << 20
    while start <= n:
        stop = min(n + 1, start + step)
        total = float(np.cumsum(np.concatenate([[total], 1.0 / np.arange(start, stop, dtype=np.float64)]))[-1])
        start = stop
    return total


@dataclasses.dataclass(frozen=True)
class Schedule:
    """The sweep of a run of T rounds, per depth h = 1 .. depths reached within T (index h - 1)."""

    h_max: int
    openings: tuple          # o_h
    first_opening: tuple     # openings made before depth h's first (its first round: 3 + 2 x this)
    first_row: tuple         # the row of depth h's first node (its nodes: first_row .. + 2 o_(h-1) - 1)
    sweep_rounds: int        # rounds of the whole sweep (after them the root is evaluated)

    @property
    def window(self) -> int:
        """The most nodes a reached depth has."""
        return max(2, 2 * max(self.openings[:-1], default=1))

    @property
    def sort_sizes(self) -> tuple:
        """The window sizes a depth's sort may take: powers of two up to the widest depth's."""
        return tuple(1 << b for b in range(1, max(2, self.window - 1).bit_length() + 1))

    @property
    def sort_branch(self) -> tuple:
        """Per reached depth, 1 + the index in :attr:`sort_sizes` of the smallest size that holds it."""
        counts = [2 * o for o in (1,) + self.openings[:-1]]
        return tuple(max(1, (c - 1).bit_length()) for c in counts)

    @property
    def height(self) -> int:
        """The deepest node a run of T rounds creates (one below the deepest depth it opens)."""
        return len(self.openings) + 1


@functools.lru_cache(maxsize=64)
def schedule(horizon: int) -> Schedule:
    h_max = int(np.floor(horizon / harmonic(horizon)))
    openings, first_opening, first_row = [], [], []
    done, nodes = 0, 2                  # openings so far, nodes of the current depth
    h = 1
    while h <= h_max and 3 + 2 * done <= horizon:
        o = min(h_max // h, nodes)
        openings.append(o)
        first_opening.append(done)
        first_row.append(1 if h == 1 else 3 + 2 * first_opening[-2])
        done += o
        nodes = 2 * o
        h += 1
    total = sum(min(h_max // d, n) for d, n in _all_depths(h_max))
    return Schedule(h_max=h_max, openings=tuple(openings), first_opening=tuple(first_opening),
                    first_row=tuple(first_row), sweep_rounds=2 + 2 * total)


def _all_depths(h_max: int):
    """(h, nodes of depth h) for h = 1 .. h_max: the whole sweep, T aside."""
    nodes = 2
    for h in range(1, h_max + 1):
        yield h, nodes
        nodes = 2 * min(h_max // h, nodes)


@dataclasses.dataclass(frozen=True)
class SequOOLConfig(TreeConfig):
    """SequOOL has no parameter beside the tree's: PyXAB's budget n is the horizon."""

    def __post_init__(self):
        super().__post_init__()
        check_horizon("SequOOL", self.horizon, MAX_HORIZON)

    @property
    def capacity(self) -> int:
        """Rows: the root and rows 1 .. T (a node's row is the round that evaluates it), and the second
        child of an opening that round T starts."""
        return self.horizon + 2


@dataclasses.dataclass(frozen=True, kw_only=True)     # kw_only: a field without default after TreeStatic's
class SequOOLStatic(TreeStatic):
    schedule: Schedule


class SequOOLParams(NamedTuple):
    noise_scale: np.ndarray  # ()


def make_static(config: SequOOLConfig, objective, tables=None) -> SequOOLStatic:
    plan = schedule(config.horizon)
    return tree_static(config, objective, config.capacity, plan.height, cls=SequOOLStatic, schedule=plan)


def make_params(config: SequOOLConfig, tables=None) -> SequOOLParams:
    return SequOOLParams(noise_scale=np.asarray(config.noise_scale, np.dtype(config.precision)))


class Choice(NamedTuple):
    node: jax.Array          # () int32 the row evaluated (0: the root, after the sweep)


def _select(static: SequOOLStatic, params, table, extra, t):
    spec = static.tree
    node = jnp.where(t <= static.schedule.sweep_rounds, jnp.minimum(t, spec.capacity - 1), 0)
    return Choice(node), centre(spec, table.rows[node])


def _sorted_depth(static: SequOOLStatic, table, depth, node, value, size: int):
    """Rows of depth ``depth``'s nodes, best first (larger value, then later row), in the first
    entries of a (window,) array; ``size`` (static) >= the depth's node count.  Row ``node``'s value
    is ``value`` (credited in this update, not yet in the table)."""
    spec, plan = static.tree, static.schedule
    size = min(size, spec.capacity)                      # a short run's table is smaller than 2^b
    first = jnp.asarray(plan.first_row, jnp.int32)[depth - 1]
    count = 2 * jnp.asarray((1,) + plan.openings, jnp.int32)[depth - 1]
    rows = first + jnp.arange(size, dtype=jnp.int32)
    start = jnp.minimum(first, spec.capacity - size)     # size <= capacity: every window fits
    means = jax.lax.dynamic_slice_in_dim(table.rows, start, size)[rows - start, MEAN]
    values = jnp.where(rows == node, value, as_float(spec, means))
    values = jnp.where(jnp.arange(size) < count, -values, jnp.inf)
    _, negative_row = jax.lax.sort((values, -rows), num_keys=2)
    return jnp.zeros((plan.sort_sizes[-1],), jnp.int32).at[:size].set(-negative_row)


class Extra(NamedTuple):
    order: jax.Array         # the current depth's nodes, best first
    best: RunningBest   # the recommendation (rows are evaluated in row order, once)


def _update(static: SequOOLStatic, params, table, extra: Extra, last: Last, t, active):
    """Keep round t's value, and when round t + 1 starts an opening, expand the node it opens (its
    children are rows t + 1 and t + 2); at a depth's first opening, sort the depth's nodes first."""
    spec, plan = static.tree, static.schedule
    node = last.choice.node
    credit = active & (node > 0)
    row = table.rows[node].at[COUNT].set(1).at[MEAN].set(as_bits(spec, last.reward))
    k = t + 1 - 3                                       # openings' rounds before round t + 1
    opening = k // 2
    starts = (k >= 0) & (k % 2 == 0) & (t + 1 <= plan.sweep_rounds) & (t < static.horizon)
    first = jnp.asarray(plan.first_opening, jnp.int32)
    depth = jnp.searchsorted(first, opening, side="right").astype(jnp.int32)    # 1-based; first[0] = 0
    j = opening - first[jnp.maximum(depth - 1, 0)]
    # The branch index is a function of the round only: a branch in every run of a batch, not a
    # select.  Branch 0 keeps the order; branch b sorts a window of 2^b rows (the depth's count
    # rounded up), so that a run's sorts cost about its node count, not depths x the widest depth.
    sizes = plan.sort_sizes
    branch = jnp.where(starts & (j == 0), jnp.asarray((0,) + plan.sort_branch, jnp.int32)[depth], 0)
    sorts: list[Callable[[], jax.Array]] = [
        functools.partial(_sorted_depth, static, table, depth, node, last.reward, size) for size in sizes]
    order = jax.lax.switch(branch, [lambda: extra.order] + sorts)
    target = order[jnp.clip(j, 0, order.size - 1)]
    grow = active & starts
    target_row = jnp.where(target == node, row, table.rows[target])
    table, overflow = expand(spec, table, target, grow, last.split_u, node_row=target_row,
                             also=(node, row, credit))
    return table, Extra(order, running_best_step(extra.best, node, last.reward, credit)), overflow


def _init(static: SequOOLStatic, params, table, key) -> Extra:
    return Extra(jnp.zeros((static.schedule.sort_sizes[-1],), jnp.int32), running_best(static.tree.dtype))


POLICY = TreePolicy(select=_select, update=_update, init=_init, recommend=running_best_point, root_expanded=True)


ALGORITHM = family.algorithm("sequool", SequOOLConfig, make_static, make_params, POLICY,
                           Style("SequOOL", "#843c39", "1"))
run_single = ALGORITHM.run_single
