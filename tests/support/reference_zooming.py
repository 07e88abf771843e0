"""An independent, plain Python Zooming (Kleinberg, Slivkins and Upfal, "Multi-armed bandits in metric spaces",
STOC 2008), one run at a time: the oracle of fedpne_jax.algorithms.trees.zooming, transcribing PyXAB 0.3.0's
rules (algos/Zooming.py with partition/BinaryPartition.py) line by line.

* An arm is a point (the centre of the cell it was made from, never moved afterwards) that refers to one cell.
  At creation the root is split once (PyXAB's ``partition.deepen()``) and its two children's centres become
  the active arms, lower first, 0 pulls, average 0; phase = 1, next_end_time = 2, time = 0.
* Pull: for each arm in insertion order, index = average + 2 sqrt(8 phase / (2 + pulls)); the largest wins,
  the last one on ties (PyXAB's ``>=`` scan); its point is pulled.
* Update with reward r: average = (average pulls + r) / (pulls + 1); pulls += 1; time += 1; if time >=
  next_end_time: phase += 1, next_end_time += 2^phase.  Then, if sqrt(8 phase / (2 + pulls)) <= nu rho^depth
  (depth of the arm's cell), the cell is split in two; for each child in order (lower, upper): when the arm's
  point lies outside the child's box in some dimension (strictly), the child's centre becomes a new active
  arm, appended at the end; otherwise the arm now refers to that child.
* PyXAB's quirks, kept: an arm's point is its cell's centre only until the first split, which halves the cell
  through that very point, so the point lies on both children's boundary: the arm ends up referring to the
  upper child and no arm is made (the lower child is orphaned).  Later splits of that arm's cells do make arms.
  The split test uses the phase just updated; the phase counts rounds (time), not the arm's pulls.
* Regret of round t: f_star - f(point), noise-free; the reward is f(point) plus the noise (``noisy``).  The
  recommendation is ``get_last_point()``: the point the next pull would return, after round T.
  ``nodes`` = 1 + 2 x (splits, the root's included), ``depth`` the deepest cell made, ``arms`` the active arms
  at the end, ``splits`` the splits made after the root's.

Cells are reference_hct's (float64 boxes halved at (lo + hi) / 2 along one dimension, lower child first, as
BinaryPartition does).  Split dimensions: ``split_dim_fn(s, t)`` for the s-th split, counting the root's as s = 0
and the later ones 1, 2, ... in the order they are made, made after round t's reward (t = 0 for the root's)
('random'), or the longest side ('longest'); dim == 1 always splits dimension 0.  PyXAB draws
``np.random.randint(len(domain))`` in every make_children, the root's first, so replaying its global-RNG draws
in order (by s) reproduces a PyXAB run in any dimension; a JAX run draws by round (by t).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tests.support.reference import FUNCTIONS
from tests.support.reference_hct import Node, RefRun, checkpoint_rounds, longest_dim, make_children, noisy


@dataclass
class ZoomingRun(RefRun):
    arms: int = 0               # active arms at the end
    splits: int = 0             # splits made after the root's


def zooming(name: str, dim: int, T: int, *, nu=1.0, rho=0.9, split="random", split_dim_fn=None, noise="none",
            sigma=0.0, checkpoints=10, rng=None) -> ZoomingRun:
    f, lo, hi, f_star = FUNCTIONS[name]
    root = Node(np.full(dim, float(lo)), np.full(dim, float(hi)), 0)
    state = {"splits": 0, "depth": 0, "t": 0}

    def split_cell(cell):
        s = state["splits"]
        d = 0 if dim == 1 else split_dim_fn(s, state["t"]) if split == "random" else longest_dim(cell)
        cell.children = make_children(cell, d)
        state["splits"] = s + 1
        state["depth"] = max(state["depth"], cell.depth + 1)
        return cell.children

    # Parallel lists, one entry per active arm in insertion order.
    arm_point, arm_cell, arm_pulls, arm_avg = [], [], [], []

    def make_active(cell):
        arm_point.append(cell.centre)
        arm_cell.append(cell)
        arm_pulls.append(0)
        arm_avg.append(0.0)

    for child in split_cell(root):
        make_active(child)
    phase, next_end_time, time = 1, 2, 0

    def pull():
        best, best_index = None, -np.inf
        for a in range(len(arm_point)):
            index = arm_avg[a] + 2 * np.sqrt(8 * phase / (2 + arm_pulls[a]))
            if index >= best_index:
                best, best_index = a, index
        return best

    regret, curve_at, points = 0.0, {}, []
    for t in range(1, T + 1):
        state["t"] = t
        a = pull()
        x = arm_point[a]
        value = float(f(x))
        points.append(x.copy())
        regret += f_star - value
        curve_at[t] = regret
        r = noisy(value, noise, sigma, rng)

        arm_avg[a] = (arm_avg[a] * arm_pulls[a] + r) / (arm_pulls[a] + 1)
        arm_pulls[a] += 1
        time += 1
        if time >= next_end_time:
            phase += 1
            next_end_time += 2 ** phase
        parent = arm_cell[a]
        if np.sqrt(8 * phase / (2 + arm_pulls[a])) <= nu * rho ** parent.depth:
            for child in split_cell(parent):
                if np.any((x < child.lo) | (x > child.hi)):
                    make_active(child)
                else:
                    arm_cell[a] = child

    rec = arm_point[pull()]
    rounds = checkpoint_rounds(T, checkpoints)
    return ZoomingRun(points=np.array(points).reshape(T, dim), curve=np.array([curve_at[r] for r in rounds]),
                      final_regret=regret, recommendation=rec.copy(), nodes=1 + 2 * state["splits"],
                      depth=state["depth"], arms=len(arm_point), splits=state["splits"] - 1)
