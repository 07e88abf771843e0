"""Zooming, the adaptive-discretisation bandit of Kleinberg, Slivkins and Upfal (STOC 2008), with
PyXAB 0.3.0's rules (algos/Zooming.py), as one policy of the tree skeleton.

A centralized baseline whose arms are points with a cell of the binary partition; parameters PyXAB's,
``nu`` (1) and ``rho`` (0.9).  The rules, the padded arm table (START_ARMS rows, grown fourfold up to
the host's bound) and the cost: docs/algorithms/trees.md, section "Each algorithm in detail", Zooming.
"""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.trees import family
from fedpne_jax.algorithms.trees.layout import TreeSpec, as_bits, as_float, box_of, centre, check_height
from fedpne_jax.algorithms.trees.partition import halves, split_dim
from fedpne_jax.algorithms.trees.policy import Last, TreeConfig, TreePolicy, TreeStatic, tree_static
from fedpne_jax.algorithms.trees.ranking import last_max
from fedpne_jax.core.algorithm import Style
from fedpne_jax.core.errors import CapacityError
from fedpne_jax.core.validation import check_real
from objectives.ordered import no_contraction


def _thresholds(nu: float, rho: float, height: int) -> list:
    """nu rho^h for h = 0..height, as PyXAB's Python floats compute it."""
    return [nu * rho ** h for h in range(height + 1)]


def bounds(horizon: int, nu: float, rho: float) -> tuple[int, int]:
    """(splits, deepest depth) any run can reach: a split at depth h >= 1 needs its arm's pulls n with
    sqrt(8 / (2 + n)) <= nu rho^h (the phase is at least 1), each arm splits once per depth, and a
    round makes at most one split."""
    splits, h = 0, 1
    while h <= horizon:
        smooth = nu * rho ** h
        need = 8.0 / (smooth * smooth) - 2 if smooth > 0 else math.inf
        if need > horizon:
            break
        splits += horizon // max(1, math.ceil(need))
        h += 1
    return min(splits, horizon), h


@dataclasses.dataclass(frozen=True)
class ZoomingConfig(TreeConfig):
    """Zooming's parameters (PyXAB's names and defaults)."""

    nu: float = 1.0
    rho: float = 0.9

    def __post_init__(self):
        super().__post_init__()
        check_real("nu", self.nu, low=0.0, high=1e30)
        check_real("rho", self.rho, low=0.0, high=1.0)
        check_height(self.height, f"nu={self.nu}, rho={self.rho}, horizon={self.horizon}")

    @property
    def arms(self) -> int:
        return 2 + bounds(self.horizon, self.nu, self.rho)[0]

    @property
    def capacity(self) -> int:
        """The cells a run can make (the bound of its ``nodes``): the root, its children, and two per
        split."""
        return 3 + 2 * bounds(self.horizon, self.nu, self.rho)[0]

    @property
    def height(self) -> int:
        return bounds(self.horizon, self.nu, self.rho)[1]


START_ARMS = 64


class Tables(NamedTuple):
    arms: int


def initial_tables(configs, objective=None) -> Tables:
    return Tables(arms=min(START_ARMS, max(c.arms for c in configs)))


def grow(tables: Tables, failed, allowed: bool, seeds) -> Tables:
    """Four times the arms for the runs ``failed`` that outgrew ``tables``."""
    if not allowed:
        raise CapacityError(f"Zooming's arm table ({tables.arms} arms) overflowed in {len(seeds)} seed(s) "
                            f"(e.g. seed {int(seeds[0])}); rerun with grow=True")
    return Tables(arms=4 * tables.arms)


@dataclasses.dataclass(frozen=True)
class ZoomingStatic(TreeStatic):
    arms: int = 2


class ZoomingParams(NamedTuple):
    smooth: np.ndarray       # (height + 1,) nu rho^h
    noise_scale: np.ndarray  # ()


def make_static(config: ZoomingConfig, objective, tables: Tables | None = None) -> ZoomingStatic:
    tables = tables or initial_tables([config])
    # The node table holds the root and its two children, whose boxes the first two arms take; the
    # run's nodes and depth are the table's size and height, counted on each split.
    return tree_static(config, objective, 3, config.height, cls=ZoomingStatic,
                       arms=min(tables.arms, config.arms))


def make_params(config: ZoomingConfig, tables=None) -> ZoomingParams:
    real = np.dtype(config.precision)
    return ZoomingParams(smooth=np.asarray(_thresholds(config.nu, config.rho, config.height), real),
                         noise_scale=np.asarray(config.noise_scale, real))


# Columns of an arm's row: pulls, mean, its cell's depth, then its cell's lower and upper corner and
# its point (floats stored as their bits, as in the node table).
PULLS, MEAN, DEPTH, BOX = range(4)


class Arms(NamedTuple):
    rows: jax.Array          # (A, 3 + 3D) integer rows
    indices: jax.Array       # (A,) mean + 2 sqrt(8 i / (2 + n)) at the phase of the next selection, -inf unmade
    made: jax.Array          # () int32 arms made


class Choice(NamedTuple):
    arm: jax.Array           # () int32


def _phase(t):
    """The phase after t rewards: floor(log2(t + 2))."""
    return 31 - jax.lax.clz(jnp.asarray(t, jnp.int32) + 2)


def _index(mean, pulls, phase):
    bonus = jnp.sqrt((8 * phase).astype(mean.dtype) / (2 + pulls).astype(mean.dtype))
    return mean + 2 * bonus, bonus


def _arm_row(spec: TreeSpec, pulls, mean, depth, box, point):
    ints = jnp.stack([jnp.asarray(pulls).astype(spec.itype), as_bits(spec, mean),
                      jnp.asarray(depth).astype(spec.itype)])
    return jnp.concatenate([ints, as_bits(spec, box.reshape(-1)), as_bits(spec, point)])


def _point(spec: TreeSpec, rows):
    return as_float(spec, rows[..., BOX + 2 * spec.dim:])


def _indices(spec: TreeSpec, rows, count, phase):
    """Every arm's index at ``phase`` (-inf for the rows no arm has yet)."""
    index = _index(as_float(spec, rows[:, MEAN]), rows[:, PULLS], phase)[0]
    return jnp.where(jnp.arange(rows.shape[0]) < count, index, -jnp.inf)


def _init(static: ZoomingStatic, params, table, key) -> Arms:
    spec = static.tree
    kids = table.rows[1:3]
    first = jax.vmap(lambda box, point: _arm_row(spec, 0, 0.0, 1, box, point))(box_of(spec, kids),
                                                                               centre(spec, kids))
    rows = jnp.zeros((static.arms, BOX + 3 * spec.dim), spec.itype).at[:2].set(first)
    count = jnp.int32(2)
    return Arms(rows=rows, indices=_indices(spec, rows, count, _phase(0)), made=count)


def _select(static: ZoomingStatic, params, table, arms: Arms, t):
    """The arm of largest index after t - 1 rewards."""
    arm = last_max(arms.indices)[0]
    return Choice(arm), _point(static.tree, arms.rows[arm])


def _update(static: ZoomingStatic, params: ZoomingParams, table, arms: Arms, last: Last, t, active):
    """Credit round t's reward to its arm, split its cell if its confidence is below the cell's
    smoothness; the indices follow for the next selection."""
    spec = static.tree
    A = static.arms
    a = last.choice.arm
    row = arms.rows[a]
    n = row[PULLS].astype(jnp.int32)
    mean = (no_contraction(as_float(spec, row[MEAN]) * n.astype(spec.dtype)) + last.reward) \
        / (n + 1).astype(spec.dtype)
    n = n + 1
    phase = _phase(t)
    index, bonus = _index(mean, n, phase)
    depth = row[DEPTH].astype(jnp.int32)
    split = active & (bonus <= params.smooth[jnp.minimum(depth, params.smooth.shape[0] - 1)])
    box = as_float(spec, row[BOX:BOX + 2 * spec.dim]).reshape(2, spec.dim)
    kids = halves(spec, box, split_dim(spec, depth, last.split_u))                     # (2, 2, D)
    x = _point(spec, row)
    outside = jnp.any((x < kids[:, 0]) | (x > kids[:, 1]), axis=1)                              # (2,)
    # PyXAB's loop over the children: the arm moves to each child that holds its point (the upper
    # one last), and a child that does not hold it becomes a new arm.
    holds = ~outside[0] | ~outside[1]
    moved = jnp.where(~outside[1], kids[1], jnp.where(~outside[0], kids[0], box))
    new = split & jnp.any(outside)
    other = jnp.where(outside[0], kids[0], kids[1])
    mine = _arm_row(spec, n, mean, jnp.where(split & holds, depth + 1, depth), jnp.where(split, moved, box), x)
    made = _arm_row(spec, 0, jnp.zeros((), spec.dtype), depth + 1, other, (other[0] + other[1]) / 2)
    at = jnp.minimum(arms.made, A - 1)
    rows_at = jnp.stack([jnp.where(active, a, A), jnp.where(new, at, A)])
    rows = arms.rows.at[rows_at].set(jnp.stack([mine, made]), mode="drop")
    fresh = _index(jnp.zeros((), spec.dtype), jnp.int32(0), phase)[0]
    index = arms.indices.at[rows_at].set(jnp.stack([index, fresh]), mode="drop")
    count = arms.made + new.astype(jnp.int32)
    # Every index moves with the phase (13 times in 10^4 rounds); t is the same in every run of a
    # batch, so this stays a branch under vmap.
    index = jax.lax.cond(phase != _phase(t - 1), lambda: _indices(spec, rows, count, phase), lambda: index)
    table = table._replace(size=jnp.where(split, table.size + 2, table.size),
                           height=jnp.where(split, jnp.maximum(table.height, depth + 1), table.height))
    overflow = new & (count > A)      # the new arm had no row
    return table, Arms(rows=rows, indices=index, made=count), overflow


POLICY = TreePolicy(select=_select, update=_update, init=_init, root_expanded=True)


ALGORITHM = dataclasses.replace(family.algorithm("zooming", ZoomingConfig, make_static, make_params, POLICY,
                                               Style("Zooming", "#6baed6", "2")), tables=initial_tables, grow=grow)
run_single = ALGORITHM.run_single
