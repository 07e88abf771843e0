"""StoSOO, the Stochastic Simultaneous Optimistic Optimization of Valko, Carpentier and Munos (ICML
2013), as one policy of the tree skeleton; ``pyxab=True`` is PyXAB 0.3.0's StoSOO (algos/StoSOO.py)
instead.

SOO for noisy evaluations: a node is evaluated up to k times and ranked by an upper bound.  The rule
is data, so both rules share one compiled program.  The paper's sweeps and PyXAB's ``pull``, the
departures, the defaults (PyXAB's k, h_max, delta), the split dimensions and the cost:
docs/algorithms/trees.md, section "Each algorithm in detail", StoSOO.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.trees import family
from fedpne_jax.algorithms.trees.layout import (
    CHILD,
    COUNT,
    DEPTH,
    MAX_HEIGHT,
    MEAN,
    B,
    Table,
    U,
    as_bits,
    as_float,
    centre,
)
from fedpne_jax.algorithms.trees.partition import expand, random_dim
from fedpne_jax.algorithms.trees.policy import Last, TreeConfig, TreePolicy, TreeStatic, tree_static
from fedpne_jax.algorithms.trees.ranking import best_row
from fedpne_jax.algorithms.trees.rounds import chunk_uniforms
from fedpne_jax.core.algorithm import Style
from fedpne_jax.core.validation import check_int, check_real
from objectives.ordered import exact_sqrt

MAX_K = 2 ** 31 - 1           # k is an int32 parameter
NOT_LEAF = 1 << 30            # the depth key of a row that is not a live leaf


@dataclasses.dataclass(frozen=True)
class StoSOOConfig(TreeConfig):
    """StoSOO's parameters (PyXAB's k, h_max and delta: None derives k and delta from the horizon as
    PyXAB does; ``pyxab``: PyXAB's rule)."""

    k: Optional[int] = None
    h_max: int = 100
    delta: Optional[float] = None
    pyxab: bool = False

    def __post_init__(self):
        super().__post_init__()
        if self.k is not None:
            check_int("k (None for PyXAB's default)", self.k, 1, MAX_K)
        check_int("h_max", self.h_max, 0, MAX_HEIGHT - 2)
        if self.delta is not None:
            check_real("delta (None for PyXAB's default)", self.delta, low=0.0, high=1.0, high_open=False)
        if not isinstance(self.pyxab, bool):
            raise ValueError(f"pyxab must be True or False, got {self.pyxab!r}")
        if not math.isfinite(self.log_term):
            raise ValueError(f"delta: log(n k / delta) must be finite, got delta={self.delta_value}")
        if self.horizon > self.most_evaluations:
            rule = "PyXAB's StoSOO" if self.pyxab else "StoSOO"
            raise ValueError(f"horizon: {rule} with k={self.k_value}, h_max={self.h_max} evaluates at most "
                             f"{self.most_evaluations} times, got horizon={self.horizon}; raise h_max or k")

    @property
    def k_value(self) -> int:
        """Evaluations of a node before it may be expanded; PyXAB's ceil(n / ln(n)^3) when None."""
        if self.k is not None:
            return int(self.k)
        if self.horizon == 1:
            return 1
        return int(np.ceil(self.horizon / np.log(self.horizon) ** 3))

    @property
    def delta_value(self) -> float:
        """The confidence parameter; PyXAB's 1 / sqrt(n) when None."""
        return float(self.delta) if self.delta is not None else float(1 / np.sqrt(self.horizon))

    @property
    def log_term(self) -> float:
        """log(n k / delta), the numerator of the b-values' width, in PyXAB's arithmetic."""
        with np.errstate(over="ignore", divide="ignore"):
            return float(np.log(self.horizon * self.k_value / self.delta_value))

    @property
    def most_evaluations(self) -> int:
        """k evaluations of every node of depth <= h_max."""
        return self.k_value * ((1 << (self.h_max + 1)) - 1)

    @property
    def capacity(self) -> int:
        """Rows: the root and two children per expansion, made only of nodes evaluated k times."""
        return 1 + 2 * min(self.horizon // self.k_value, (1 << (self.h_max + 1)) - 1)

    @property
    def height(self) -> int:
        """The deepest node a run can create: h_max + 1, or one depth per expansion."""
        return min(self.h_max + 1, self.horizon // self.k_value)

    def resolved(self) -> dict:
        out = super().resolved()
        out.update(k=self.k_value, delta=self.delta_value)
        return out


@dataclasses.dataclass(frozen=True)
class StoSOOStatic(TreeStatic):
    h_max: int = 100


class StoSOOParams(NamedTuple):
    k: np.ndarray            # () int32 evaluations of a node before it may be expanded
    log_term: np.ndarray     # () log(n k / delta)
    pyxab: np.ndarray        # () bool PyXAB's rule (data: both rules share one program)
    noise_scale: np.ndarray  # ()


def make_static(config: StoSOOConfig, objective, tables=None) -> StoSOOStatic:
    return tree_static(config, objective, config.capacity, config.height, cls=StoSOOStatic,
                       h_max=config.h_max)


def make_params(config: StoSOOConfig, tables=None) -> StoSOOParams:
    real = np.dtype(config.precision)
    return StoSOOParams(k=np.asarray(config.k_value, np.int32), log_term=np.asarray(config.log_term, real),
                        pyxab=np.asarray(config.pyxab), noise_scale=np.asarray(config.noise_scale, real))


def split_uniform(u, j):
    """The split uniform of the j-th expansion made after a round's evaluation: the round's own ``u``
    for j = 0, then murmur3's finaliser of u's top 23 bits mixed with j (exact integer arithmetic, so
    the same on every processor), as a float with 24 random bits."""
    x = (u * (1 << 23)).astype(jnp.uint32) ^ (jnp.asarray(j, jnp.uint32) * jnp.uint32(0x9E3779B9))
    x = (x ^ (x >> 16)) * jnp.uint32(0x85EBCA6B)
    x = (x ^ (x >> 13)) * jnp.uint32(0xC2B2AE35)
    x = x ^ (x >> 16)
    return jnp.where(j == 0, u, (x >> 8).astype(u.dtype) * (2.0 ** -24))


def run_split_dims(key, horizon: int, chunk: int, dim: int, real: str = "float32"):
    """``dims(t, j)``: the split dimension of the j-th expansion made after round t's evaluation of
    one run under split='random' (host-side, for tests and inspection)."""
    with jax.enable_x64(real == "float64"):
        dtype = jnp.dtype(real)
        u = np.asarray(jnp.concatenate([chunk_uniforms(key, c, chunk, dtype)[:, 2]
                                        for c in range(-(-horizon // chunk))]))

    @functools.lru_cache(maxsize=None)
    def dims(t: int, j: int) -> int:
        with jax.enable_x64(real == "float64"):
            return int(random_dim(split_uniform(jnp.asarray(u[t - 1], dtype), jnp.int32(j)), dim))
    return dims


class Sweep(NamedTuple):
    """The leaves' keys and the sweep (``extra``)."""
    leaf_depth: jax.Array    # (capacity,) int32 depth of each live leaf, NOT_LEAF for the other rows
    b: jax.Array             # (capacity,) b-value of each row (+inf until it is evaluated)
    target: jax.Array        # () int32 the row evaluated next
    h: jax.Array             # () int32 the sweep's next depth
    v_max: jax.Array         # ()
    bound: jax.Array         # () int32 the sweep's last depth, read when it starts (paper)


def _init(static: StoSOOStatic, params, table, key) -> Sweep:
    spec = static.tree
    n = spec.capacity
    # Round 1 evaluates the root: the first step of the first sweep, whose last depth is 0.
    return Sweep(leaf_depth=jnp.full((n,), NOT_LEAF, jnp.int32).at[0].set(0), b=jnp.full((n,), jnp.inf, spec.dtype),
                 target=jnp.int32(0), h=jnp.int32(1), v_max=jnp.asarray(-jnp.inf, spec.dtype), bound=jnp.int32(0))


class Search(NamedTuple):
    """A round's search for its next evaluation."""
    table: Table
    sweep: Sweep
    j: jax.Array             # () int32 expansions made in this search
    done: jax.Array          # () bool
    overflow: jax.Array      # () bool


def _step(static: StoSOOStatic, params: StoSOOParams, split_u, s: Search) -> Search:
    """One step of the sweep (nothing once ``done``): the first depth from h on whose best leaf reaches
    v_max, or, when there is none, the first depth with a leaf of a new sweep; its best leaf is
    evaluated next (done) or expanded.  An expansion below the sweep's last depth ends the search too:
    the next step would take the new upper child (b = +inf, the last row), which is evaluated next."""
    spec = static.tree
    sweep, table = s.sweep, s.table
    key, b = sweep.leaf_depth, sweep.b
    live, pyxab = ~s.done, params.pyxab
    fresh = jnp.minimum(table.height + jnp.where(pyxab, 1, 0), static.h_max)
    bound = jnp.where(pyxab, fresh, sweep.bound)
    on = jnp.min(jnp.where((key >= sweep.h) & (key <= bound) & (b >= sweep.v_max), key, NOT_LEAF))
    anew = jnp.min(jnp.where(key <= fresh, key, NOT_LEAF))
    restart = on == NOT_LEAF
    depth = jnp.where(restart, anew, on)
    found = live & (depth < NOT_LEAF)
    v_max = jnp.where(restart, -jnp.inf, sweep.v_max).astype(spec.dtype)
    bound = jnp.where(restart, fresh, bound)
    at = key == depth
    top = jnp.max(jnp.where(at, b, -jnp.inf))
    pick = jnp.maximum(jnp.max(jnp.where(at & (b == top), jnp.arange(spec.capacity, dtype=jnp.int32), -1)), 0)
    row = table.rows[pick]
    evaluate = found & (row[COUNT] < params.k)
    grow = found & ~evaluate
    size = table.size
    table, overflow = expand(spec, table, pick, grow, split_uniform(split_u, s.j), node_row=row)
    grown = grow & ~overflow
    upper = grown & (depth < jnp.where(pyxab, static.h_max, bound))
    kids = jnp.where(grown, size + jnp.arange(2, dtype=jnp.int32), spec.capacity)
    key = key.at[jnp.where(grown, pick, spec.capacity)].set(NOT_LEAF, mode="drop").at[kids].set(depth + 1, mode="drop")
    keep = ~found
    sweep = Sweep(leaf_depth=key, b=b,
                  target=jnp.where(evaluate, pick, jnp.where(upper, size + 1, sweep.target)),
                  h=jnp.where(keep, sweep.h, depth + jnp.where(upper, 2, 1)),
                  v_max=jnp.where(keep, sweep.v_max, jnp.where(grow, top, v_max)),
                  bound=jnp.where(keep, sweep.bound, bound))
    # A search that finds no leaf at all is over: no node of depth <= h_max is left to evaluate (the
    # config's horizon never gets there).
    done = s.done | evaluate | upper | (live & ~found)
    return Search(table, sweep, s.j + grow, done, s.overflow | overflow)


class Choice(NamedTuple):
    node: jax.Array          # () int32 the row evaluated


def _select(static: StoSOOStatic, params, table, sweep: Sweep, t):
    return Choice(sweep.target), centre(static.tree, table.rows[sweep.target])


def _update(static: StoSOOStatic, params: StoSOOParams, table, sweep: Sweep, last: Last, t, active):
    """Credit round t's reward to its node (count, sum, mean, b), then, unless it was the last round,
    search for the next evaluation."""
    spec = static.tree
    node, reward = last.choice.node, last.reward
    row = table.rows[node]
    count = row[COUNT] + 1
    total = jnp.where(row[COUNT] == 0, reward, as_float(spec, row[U]) + reward)
    mean = total / count.astype(spec.dtype)
    b = mean + exact_sqrt(params.log_term / (2 * count.astype(spec.dtype)))
    # The sum of the rewards is kept in the U column.
    row = row.at[COUNT].set(count).at[U].set(as_bits(spec, total)) \
        .at[MEAN].set(as_bits(spec, mean)).at[B].set(as_bits(spec, b))
    at = jnp.where(active, node, spec.capacity)
    table = table._replace(rows=table.rows.at[at].set(row, mode="drop"))
    sweep = sweep._replace(b=sweep.b.at[at].set(b, mode="drop"))
    # PyXAB's pull starts a new sweep every round.
    sweep = sweep._replace(h=jnp.where(params.pyxab, 0, sweep.h),
                           v_max=jnp.where(params.pyxab, -jnp.inf, sweep.v_max).astype(spec.dtype))
    search = Search(table, sweep, jnp.int32(0), ~(active & (t < static.horizon)), jnp.bool_(False))
    step = functools.partial(_step, static, params, last.split_u)
    # Most searches end in one step, which every run takes; under vmap a loop whose condition differs
    # between runs selects its whole carry (the table) every iteration, so only the rest is a loop.
    # Every expansion leaves the leaves, so a search makes fewer than capacity of them.
    search = jax.lax.while_loop(lambda s: ~s.done & (s.j < spec.capacity), step, step(search))
    return search.table, search.sweep, search.overflow


def _recommend(static: StoSOOStatic, params: StoSOOParams, table: Table, sweep, last):
    """PyXAB's ``get_last_point`` (the deepest depth's nodes), or the paper's output (the deepest
    expanded nodes; the root while none is)."""
    spec = static.tree
    rows = table.rows
    depth = rows[:, DEPTH]
    mean = as_float(spec, rows[:, MEAN])
    expanded = (rows[:, CHILD] >= 0) & (jnp.arange(spec.capacity) < table.size)
    deepest = jnp.where(params.pyxab, table.height, jnp.max(jnp.where(expanded, depth, -1)))
    best, _ = best_row(spec, table, mean, (depth == deepest) & (params.pyxab | expanded))
    return centre(spec, rows[jnp.maximum(best, 0)])


POLICY = TreePolicy(select=_select, update=_update, recommend=_recommend, root_expanded=False, init=_init)


ALGORITHM = family.algorithm("stosoo", StoSOOConfig, make_static, make_params, POLICY,
                           Style("StoSOO", "#8c6d31", "H"))
run_single = ALGORITHM.run_single
