"""VROOM (Gabillon, Tutunov, Valko and Bou Ammar, "Derivative-Free & Order-Robust Optimisation",
2020), with PyXAB 0.3.0's rules (algos/VROOM.py), as one policy of the tree skeleton.

A centralized, fixed-budget baseline that draws a ranked cell of a complete binary tree each round;
parameters PyXAB's: ``h_max`` (100), ``b`` and ``f_max`` (1 and 1 here).  Its random numbers come
from their own stream of the run's key (:func:`draws` returns them for the NumPy reference).  The
rules, the departure of the recommendation from PyXAB's, the heap layout and the cost:
docs/algorithms/trees.md, section "Each algorithm in detail", VROOM.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.trees import family
from fedpne_jax.algorithms.trees.layout import TreeSpec, box_of
from fedpne_jax.algorithms.trees.policy import Last, TreeConfig, TreePolicy, TreeStatic, tree_static
from fedpne_jax.core.algorithm import Style
from fedpne_jax.core.counters import threefry_words, unit_floats, unit_floats_52
from fedpne_jax.core.validation import check_int, check_real
from objectives.ordered import no_contraction

STREAM = 0x56524F4D      # fold_in constant of VROOM's own stream ("VROM")


def levels(horizon: int) -> int:
    """H = floor(log2 n), the deepest ranked depth."""
    return horizon.bit_length() - 1


@dataclasses.dataclass(frozen=True)
class VROOMConfig(TreeConfig):
    """VROOM's parameters (PyXAB's names; PyXAB has no default for b and f_max)."""

    h_max: int = 100
    b: float = 1.0
    f_max: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        if self.horizon < 2:
            raise ValueError(f"horizon (T): VROOM ranks the cells of depths 1..floor(log2 T), so T must be at "
                             f"least 2, got {self.horizon}")
        check_int("h_max", self.h_max, 1)
        check_real("b", self.b, low=0.0, magnitude=1e30)
        check_real("f_max", self.f_max, low=0.0, magnitude=1e30)

    @property
    def capacity(self) -> int:
        """Cells of the complete binary tree of depth H, the root included: VROOM's node table (its
        own arrays; the skeleton's table holds the root alone, whose box the cells halve)."""
        return 2 ** (levels(self.horizon) + 1) - 1

    def resolved(self) -> dict:
        out = super().resolved()
        out.update(ranked_depth=levels(self.horizon))
        return out


@dataclasses.dataclass(frozen=True)
class VROOMStatic(TreeStatic):
    levels: int = 1          # H


class VROOMParams(NamedTuple):
    confidence: np.ndarray   # () log(4 n^3 / delta)
    h_max: np.ndarray        # () int32
    draw_high: np.ndarray    # (2^(H+1) - 2,) uint32: the cell draw's thresholds (:func:`thresholds`)
    draw_low: np.ndarray
    noise_scale: np.ndarray  # ()


def confidence(horizon: int, b: float, f_max: float) -> float:
    """log(4 n^3 / delta), delta = 4 b / (f_max sqrt(n)), in float64 as PyXAB computes it."""
    delta = 4 * b / (f_max * math.sqrt(horizon))
    return math.log(4 * horizon ** 3 / delta)


def slot_ranks(levels_: int) -> tuple[np.ndarray, np.ndarray]:
    """(depth, rank within the depth from 1, in the partition's order) of heap slots 2 .. 2^(H+1) - 1:
    the cells VROOM ranks, and the ranks they start with (all unevaluated, so tied)."""
    slots = np.arange(2, 2 ** (levels_ + 1), dtype=np.int64)
    depth = np.floor(np.log2(slots)).astype(np.int64)
    return depth, slots - 2 ** depth + 1


def thresholds(levels_: int) -> tuple[np.ndarray, np.ndarray]:
    """The draw of a cell as integers: entry e (heap slot e + 2, so depth h = floor(log2(e + 2)) and
    rank e + 3 - 2^h) is drawn when the 64-bit word w satisfies c_(e-1) <= w < c_e, c_e = floor(2^64
    F_e) for F the cumulative probabilities 1 / (h rank K) in slot order.  Returns the high and low
    32 bits of every c_e (the last is 2^64 - 1: every word draws a cell)."""
    depth, rank = slot_ranks(levels_)
    weight = math.fsum(1.0 / (h * r) for h in range(1, levels_ + 1) for r in range(1, 2 ** h + 1))
    cumulative = np.cumsum(1.0 / (depth * rank * weight))
    scaled = cumulative * 2.0 ** 32
    high = np.floor(scaled)
    low = np.floor((scaled - high) * 2.0 ** 32)
    high[-1], low[-1] = 2.0 ** 32 - 1, 2.0 ** 32 - 1
    full = high >= 2.0 ** 32
    high[full], low[full] = 2.0 ** 32 - 1, 2.0 ** 32 - 1
    return high.astype(np.uint32), low.astype(np.uint32)


def make_static(config: VROOMConfig, objective, tables=None) -> VROOMStatic:
    return tree_static(config, objective, 1, levels(config.horizon), cls=VROOMStatic,
                       levels=levels(config.horizon))


def make_params(config: VROOMConfig, tables=None) -> VROOMParams:
    real = np.dtype(config.precision)
    high, low = thresholds(levels(config.horizon))
    return VROOMParams(confidence=np.asarray(confidence(config.horizon, config.b, config.f_max), real),
                       h_max=np.asarray(config.h_max, np.int32), draw_high=high, draw_low=low,
                       noise_scale=np.asarray(config.noise_scale, real))


class Cells(NamedTuple):
    evals: jax.Array     # (N,) int32 evaluations credited to heap cell k (N = 2^(H+1))
    total: jax.Array     # (N,) their reward sum
    score: jax.Array     # (N,) the ranking statistic, -inf before the first evaluation
    rank: jax.Array      # (N,) int32 rank within the cell's depth, 1 the best
    dims: jax.Array      # (2^H,) int32 split dimension of the cells above depth H (split='random')
    key: Any             # VROOM's stream of the run's key


class Choice(NamedTuple):
    node: jax.Array      # () int32 heap index of the drawn cell
    depth: jax.Array     # () int32
    lo: jax.Array        # (D,) its box
    hi: jax.Array


def _depths(size: int):
    """floor(log2 k) of heap slots k = 0..size-1 (-1 for the unused slot 0)."""
    return 31 - jax.lax.clz(jnp.arange(size, dtype=jnp.int32))


def _round_words(key, t, spec: TreeSpec):
    """Round t's draw: the cell's 64-bit word (high, low) and the point's D uniforms in [0, 1)."""
    d = spec.dim
    if spec.real == "float64":
        words = threefry_words(key, t, 1 + d)
        return words[0], words[1 + d], unit_floats_52(words[1:1 + d], words[2 + d:])
    words = threefry_words(key, t, (3 + d) // 2)
    return words[0], words[1], unit_floats(words[2:2 + d])


def _split_dims(key, spec: TreeSpec, levels_: int):
    """Split dimension of heap cells 0..2^H - 1: floor(w D / 2^32) of a word each (top 16 bits, as
    the skeleton draws the root's), from counter 0 of VROOM's stream (rounds use t >= 1)."""
    if spec.split != "random" or spec.dim == 1:
        return jnp.zeros((1,), jnp.int32)
    words = threefry_words(key, 0, max(1, 2 ** (levels_ - 1)))[:2 ** levels_]
    return (((words >> 16) * jnp.uint32(spec.dim)) >> 16).astype(jnp.int32)


def draws(key, horizon: int, dim: int, split: str = "random", real: str = "float32"):
    """Host copies of one run's random numbers: (split dimension per heap cell (2^H,), the cell
    words (T + 1, 2) uint32 as (high, low), the point uniforms (T + 1, D)) for rounds 1..T + 1."""
    spec = TreeSpec(capacity=1, height=levels(horizon), dim=dim, split=split, longest_dims=(), real=real)
    with jax.enable_x64(real == "float64"):
        stream = jax.random.fold_in(key, STREAM)
        dims = np.asarray(_split_dims(stream, spec, levels(horizon)))
        rounds = jax.vmap(lambda t: _round_words(stream, t, spec))(jnp.arange(1, horizon + 2, dtype=jnp.uint32))
        return dims, np.stack([np.asarray(rounds[0]), np.asarray(rounds[1])], axis=1), np.asarray(rounds[2])


def _init(static: VROOMStatic, params, table, key) -> Cells:
    spec, h = static.tree, static.levels
    n = 2 ** (h + 1)
    rank = np.concatenate([[0, 1], slot_ranks(h)[1]])       # slot 0 unused, the root unranked
    stream = jax.random.fold_in(key, STREAM)
    return Cells(evals=jnp.zeros((n,), jnp.int32), total=jnp.zeros((n,), spec.dtype),
                 score=jnp.full((n,), -jnp.inf, spec.dtype), rank=jnp.asarray(rank, jnp.int32),
                 dims=_split_dims(stream, spec, h), key=stream)


def _dim(static: VROOMStatic, cells: Cells, cell, depth):
    spec = static.tree
    if spec.dim == 1:
        return jnp.int32(0)
    if spec.split == "random":
        return cells.dims[jnp.minimum(cell, cells.dims.shape[0] - 1)]
    return jnp.asarray(spec.longest_dims, jnp.int32)[jnp.minimum(depth, spec.height)]


def _halve(lo, hi, d, upper, do):
    """The lower or upper half of the box (lo, hi) along d when ``do``; the cut is (lo + hi) / 2."""
    mid = (lo[d] + hi[d]) / 2
    on = (jnp.arange(lo.shape[0]) == d) & do
    return jnp.where(on & upper, mid, lo), jnp.where(on & ~upper, mid, hi)


def _box(static: VROOMStatic, cells: Cells, table, node, depth):
    """The box of heap cell ``node`` at ``depth``: the root's box halved along the path to it."""
    root = box_of(static.tree, table.rows[0])

    def step(level, box):
        shift = jnp.maximum(depth - level - 1, 0)
        upper = ((node >> shift) & 1) == 1
        return _halve(box[0], box[1], _dim(static, cells, node >> (shift + 1), level), upper, level < depth)

    return jax.lax.fori_loop(0, static.levels, step, (root[0], root[1]))


def _cell_of_rank(static: VROOMStatic, cells: Cells, depth, rank):
    slots = jnp.arange(cells.rank.shape[0], dtype=jnp.int32)
    return jnp.max(jnp.where((_depths(slots.shape[0]) == depth) & (cells.rank == rank), slots, 0))


def _drawn(params: VROOMParams, high, low):
    """How many thresholds are at or below the word (high, low): a binary search (the thresholds
    increase), not a comparison with every cell."""
    n = params.draw_high.shape[0]

    def step(_, bounds):
        first, last = bounds
        mid = (first + last) // 2
        c_high, c_low = params.draw_high[mid], params.draw_low[mid]
        at_or_below = (c_high < high) | ((c_high == high) & (c_low <= low))
        narrowing = first < last
        return (jnp.where(narrowing & at_or_below, mid + 1, first),
                jnp.where(narrowing & ~at_or_below, mid, last))

    return jax.lax.fori_loop(0, n.bit_length(), step, (jnp.int32(0), jnp.int32(n)))[0]


def _select(static: VROOMStatic, params: VROOMParams, table, cells: Cells, t):
    spec = static.tree
    high, low, u = _round_words(cells.key, t, spec)
    slot = jnp.minimum(_drawn(params, high, low), params.draw_high.shape[0] - 1) + 2
    depth = 31 - jax.lax.clz(slot)
    node = _cell_of_rank(static, cells, depth, slot - jnp.left_shift(1, depth) + 1)
    lo, hi = _box(static, cells, table, node, depth)
    return Choice(node, depth, lo, hi), lo + no_contraction(u * (hi - lo))


def _score(params: VROOMParams, count, total):
    c = count.astype(total.dtype)
    return jnp.where(count > 0, total / c - jnp.sqrt(params.confidence / (2 * c)), -jnp.inf)


def _better(score_a, a, score_b, b):
    """Whether cell a ranks above cell b: a larger statistic, or an equal one and a earlier."""
    return (score_a > score_b) | ((score_a == score_b) & (a < b))


def _update(static: VROOMStatic, params: VROOMParams, table, cells: Cells, last: Last, t, active):
    """Credit round t's reward to the drawn cell and the cells below it that hold the point, and move
    each of them to its new rank (one cell per depth)."""
    h = static.levels
    n = cells.evals.shape[0]
    node, depth, x = last.choice.node, last.choice.depth, last.point
    deepest = jnp.minimum(h, jnp.maximum(depth, params.h_max))

    def step(level, carry):
        cell, lo, hi, path = carry
        go = (level >= depth) & (level < deepest)
        d = _dim(static, cells, cell, level)
        upper = x[d] >= (lo[d] + hi[d]) / 2
        lo, hi = _halve(lo, hi, d, upper, go)
        child = 2 * cell + upper.astype(jnp.int32)
        return jnp.where(go, child, cell), lo, hi, jnp.where(go, path.at[level + 1].set(child), path)

    path = jnp.zeros((h + 1,), jnp.int32).at[depth].set(node)
    path = jax.lax.fori_loop(0, h, step, (node, last.choice.lo, last.choice.hi, path))[3]
    moved = active & (path > 0)                                  # (H + 1,) one cell per depth
    at = jnp.where(moved, path, n)
    old_count, old_score = cells.evals[path], cells.score[path]
    count, total = old_count + 1, cells.total[path] + last.reward
    new_score = _score(params, count, total)
    score = cells.score.at[at].set(new_score, mode="drop")

    # Every other cell of a moved cell's depth moves by one place when the moved cell passes it; the
    # moved cell's rank is one more than the cells of its depth that beat it.  Depth by depth (static
    # slices): the moved cell's numbers are scalars there, not gathers over the whole array.
    ranks, ahead = [cells.rank[:2]], [jnp.int32(0)]
    for d in range(1, h + 1):
        ids = jnp.arange(2 ** d, 2 ** (d + 1), dtype=jnp.int32)
        s, m = score[2 ** d:2 ** (d + 1)], path[d]
        other = moved[d] & (ids != m)
        passed = _better(new_score[d], m, s, ids).astype(jnp.int32) - _better(old_score[d], m, s, ids).astype(jnp.int32)
        ranks.append(cells.rank[2 ** d:2 ** (d + 1)] + jnp.where(other, passed, 0))
        ahead.append(jnp.sum(other & _better(s, ids, new_score[d], m), dtype=jnp.int32))
    rank = jnp.concatenate(ranks).at[at].set(jnp.stack(ahead) + 1, mode="drop")

    levels_ = jnp.arange(h + 1, dtype=jnp.int32)
    table = table._replace(size=table.size + jnp.sum(moved & (old_count == 0), dtype=jnp.int32),
                           height=jnp.maximum(table.height, jnp.max(jnp.where(moved, levels_, 0))))
    cells = cells._replace(evals=cells.evals.at[at].set(count, mode="drop"),
                           total=cells.total.at[at].set(total, mode="drop"), score=score, rank=rank)
    return table, cells, jnp.bool_(False)


def _recommend(static: VROOMStatic, params, table, cells: Cells, last):
    """The centre of the depth-H cell ranked first."""
    node = _cell_of_rank(static, cells, static.levels, 1)
    lo, hi = _box(static, cells, table, node, static.levels)
    return (lo + hi) / 2


POLICY = TreePolicy(select=_select, update=_update, init=_init, recommend=_recommend, root_expanded=False)

ALGORITHM = family.algorithm("vroom", VROOMConfig, make_static, make_params, POLICY, Style("VROOM", "#e6550d", "|"))
run_single = ALGORITHM.run_single
