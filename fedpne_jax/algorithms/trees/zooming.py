"""Zooming, the adaptive-discretisation bandit of Kleinberg, Slivkins and Upfal (STOC 2008), with
PyXAB 0.3.0's rules (algos/Zooming.py), as one policy of the tree skeleton.

A centralized baseline: one evaluation of the *global* objective per round (noisy if the run's noise
says so), regret per evaluation.  Parameters PyXAB's: ``nu`` (1), ``rho`` (0.9).

* Arms are points, each with a cell of the binary partition.  At the start the root is split once
  and its children's centres are the two arms.  Phase i covers rounds 2^i - 1 .. 2^(i+1) - 2
  (after t rewards the phase is floor(log2(t + 2))).
* Each round pulls the arm with the largest index mean + 2 sqrt(8 i / (2 + n)) (n its pulls, mean 0
  before its first; the last made on ties, PyXAB's ``>=`` in insertion order).
* After its reward, the mean (mean n + r) / (n + 1) and the phase are updated; if then
  sqrt(8 i / (2 + n)) <= nu rho^h (h its cell's depth), the cell is split: the arm moves to the
  child that holds its point (the upper one when the point is on the cut, as PyXAB's loop leaves
  it), and the other child's centre becomes a new arm when the point lies outside it.
* The recommendation is the arm the next round would pull (PyXAB's ``get_last_point``).

Each round recomputes every arm's index (A of them, elementwise) and takes the last largest with
:func:`tree.last_max`: at A = 64 that is a quarter of the cost of keeping a tournament up to date for
the two leaves a round changes, and it needs no branch for the phase changes.  The node table is
the partition (its size and depth are the run's ``nodes`` and ``depth``); the arms are arrays beside
it.  Both start small (START_ARMS arms, START_CELLS cells) and grow fourfold for the runs that
outgrow them (their numbers do not depend on the sizes), up to what the host's bound allows: a
split at depth h needs n >= 8 / (nu^2 rho^(2h)) - 2 pulls of its arm (the phase is at least 1), so
at most T / max(1, that) splits happen at depth h.  (Garland, T = 10^4: 22 arms and 75 cells, where
that bound is 5,836 arms.)

Noise-free float64 runs equal tests/support/reference_zooming.py and PyXAB's own Zooming point for
point (tests/test_zooming.py).
"""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.trees import tree
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
class ZoomingConfig(tree.TreeConfig):
    """Zooming's parameters (PyXAB's names and defaults)."""

    nu: float = 1.0
    rho: float = 0.9

    def __post_init__(self):
        super().__post_init__()
        check_real("nu", self.nu, low=0.0, high=1e30)
        check_real("rho", self.rho, low=0.0, high=1.0)
        tree.check_height(self.height, f"nu={self.nu}, rho={self.rho}, horizon={self.horizon}")

    @property
    def arms(self) -> int:
        return 2 + bounds(self.horizon, self.nu, self.rho)[0]

    @property
    def capacity(self) -> int:
        """Cells: the root, its children, and two per split."""
        return 3 + 2 * bounds(self.horizon, self.nu, self.rho)[0]

    @property
    def height(self) -> int:
        return bounds(self.horizon, self.nu, self.rho)[1]


START_ARMS = 64
START_CELLS = 256


class Tables(NamedTuple):
    arms: int
    cells: int


def initial_tables(configs, objective=None) -> Tables:
    return Tables(arms=min(START_ARMS, max(c.arms for c in configs)),
                  cells=min(START_CELLS, max(c.capacity for c in configs)))


def grow(tables: Tables, failed, allowed: bool, seeds) -> Tables:
    """Four times the arms and cells for the runs ``failed`` that outgrew ``tables``."""
    if not allowed:
        raise CapacityError(f"Zooming's tables ({tables.arms} arms, {tables.cells} cells) overflowed in {len(seeds)} "
                            f"seed(s) (e.g. seed {int(seeds[0])}); rerun with grow=True")
    return Tables(arms=4 * tables.arms, cells=4 * tables.cells)


@dataclasses.dataclass(frozen=True)
class ZoomingStatic(tree.TreeStatic):
    arms: int = 2


class ZoomingParams(NamedTuple):
    smooth: np.ndarray       # (height + 1,) nu rho^h
    noise_scale: np.ndarray  # ()


def make_static(config: ZoomingConfig, objective, tables: Tables | None = None) -> ZoomingStatic:
    tables = tables or initial_tables([config])
    return tree.make_static(config, objective, min(tables.cells, config.capacity), config.height, cls=ZoomingStatic,
                            arms=min(tables.arms, config.arms))


def make_params(config: ZoomingConfig, tables=None) -> ZoomingParams:
    real = np.dtype(config.precision)
    return ZoomingParams(smooth=np.asarray(_thresholds(config.nu, config.rho, config.height), real),
                         noise_scale=np.asarray(config.noise_scale, real))


class Arms(NamedTuple):
    point: jax.Array         # (A, D)
    cell: jax.Array          # (A,) int32 the row of its cell
    pulls: jax.Array         # (A,) int32
    mean: jax.Array          # (A,)
    count: jax.Array         # () int32 arms made


class Choice(NamedTuple):
    arm: jax.Array           # () int32


def _phase(t):
    """The phase after t rewards: floor(log2(t + 2))."""
    return 31 - jax.lax.clz(jnp.asarray(t, jnp.int32) + 2)


def _index(mean, pulls, phase):
    bonus = jnp.sqrt((8 * phase).astype(mean.dtype) / (2 + pulls).astype(mean.dtype))
    return mean + 2 * bonus, bonus


def _init(static: ZoomingStatic, params, table, key) -> Arms:
    spec = static.tree
    A = static.arms
    point = jnp.zeros((A, spec.dim), spec.dtype).at[:2].set(tree.centre(spec, table.rows[1:3]))
    pulls = jnp.zeros((A,), jnp.int32)
    mean = jnp.zeros((A,), spec.dtype)
    return Arms(point=point, cell=jnp.zeros((A,), jnp.int32).at[:2].set(jnp.arange(1, 3, dtype=jnp.int32)),
                pulls=pulls, mean=mean, count=jnp.int32(2))


def _select(static: ZoomingStatic, params, table, arms: Arms, t):
    """The arm of largest index after t - 1 rewards."""
    index = _index(arms.mean, arms.pulls, _phase(t - 1))[0]
    arm = tree.last_max(index, jnp.arange(static.arms, dtype=jnp.int32) < arms.count)[0]
    return Choice(arm), arms.point[arm]


def _update(static: ZoomingStatic, params: ZoomingParams, table, arms: Arms, last: tree.Last, t, active):
    """Credit round t's reward to its arm, split its cell if its confidence is below the cell's
    smoothness."""
    spec = static.tree
    a = last.choice.arm
    n = arms.pulls[a]
    mean = (no_contraction(arms.mean[a] * n.astype(spec.dtype)) + last.reward) / (n + 1).astype(spec.dtype)
    n = n + 1
    phase = _phase(t)
    bonus = _index(mean, n, phase)[1]
    cell = arms.cell[a]
    cell_row = table.rows[cell]
    split = active & (bonus <= params.smooth[jnp.minimum(cell_row[tree.DEPTH].astype(jnp.int32),
                                                        params.smooth.shape[0] - 1)])
    kids = table.size
    table, overflow = tree.expand(spec, table, cell, split, last.split_u, node_row=cell_row)
    boxes = tree.box_of(spec, table.rows[jnp.minimum(kids + jnp.arange(2), spec.capacity - 1)])   # (2, 2, D)
    x = arms.point[a]
    outside = jnp.any((x < boxes[:, 0]) | (x > boxes[:, 1]), axis=1)                              # (2,)
    # PyXAB's loop over the children: the arm moves to each child that holds its point (the upper
    # one last), and a child that does not hold it becomes a new arm.
    moved = jnp.where(~outside[1], kids + 1, jnp.where(~outside[0], kids, cell))
    new = split & jnp.any(outside)
    at = jnp.minimum(arms.count, static.arms - 1)
    new_cell = jnp.where(outside[0], kids, kids + 1)
    new_point = tree.centre(spec, table.rows[jnp.minimum(new_cell, spec.capacity - 1)])
    arms = arms._replace(
        pulls=arms.pulls.at[a].set(jnp.where(active, n, arms.pulls[a])),
        mean=arms.mean.at[a].set(jnp.where(active, mean, arms.mean[a])),
        cell=arms.cell.at[a].set(jnp.where(split, moved, cell)).at[at].set(
            jnp.where(new, new_cell, arms.cell[at])),
        point=arms.point.at[at].set(jnp.where(new, new_point, arms.point[at])),
        count=arms.count + new.astype(jnp.int32))
    overflow = overflow | (new & (arms.count > static.arms))      # the new arm had no row
    return table, arms, overflow


POLICY = tree.TreePolicy(select=_select, update=_update, init=_init, root_expanded=True)


ALGORITHM = dataclasses.replace(tree.algorithm("zooming", ZoomingConfig, make_static, make_params, POLICY,
                                               Style("Zooming", "#6baed6", "2")), tables=initial_tables, grow=grow)
run_single = ALGORITHM.run_single
