"""An independent, plain NumPy/Python VHCT (Li, Wang, Cheng and Song 2021), written from the paper's
rules and PyXAB 0.3.0's algos/VHCT.py, one run at a time: the oracle of
fedpne_jax.algorithms.trees.vhct.  It takes HCT's tree (nodes, partition, B recomputation) from
tests/support/reference_hct.py and shares no code with the JAX module: every node keeps its list of
rewards, and its variance, thresholds and U are recomputed from the formulas whenever they are read.

Rules, round t = 1..T:
  c1 = (rho/(3 nu))^(1/8), t+ = 2^ceil(log2 t), L = log(1/delta~) with delta~ = min(1/2, c1 delta/t+)
  for the thresholds and min(1, c1 delta/t+) for U.  A node's variance V is the mean squared deviation
  of its rewards from its mean (0 with none).
  U = mean + sqrt(2 c^2 V L / count) + 3 b c^2 L / count + nu rho^h (inf if count = 0); B as HCT's.
  tau = ceil(c^2 L rho^(-2h) / nu^2 (V + 3 b nu rho^h + sqrt(V^2 + 6 b nu rho^h V))), the least count
  with sqrt(2 c^2 V L / count) + 3 b c^2 L / count <= nu rho^h; 0 at the root.
  Select: from the root, to the child with the larger B (the upper on ties) while the node has
  children and count >= tau.  Update: at powers of two every U, then every B; credit the pulled node;
  its U; B; expand it if it is a leaf and count >= tau (its variance after the reward).
pyxab=True, PyXAB's code: V = max(np.var(rewards), 1e-3) (1e-3 with no reward); tau is PyXAB's
expression, computed when the selection passes the node (so the expansion test reads the variance
before the reward); the test passes for internal nodes too, whose children are then replaced.
"""
from __future__ import annotations

import math

import numpy as np

from tests.support.reference import FUNCTIONS
from tests.support.reference_hct import Node as _Node
from tests.support.reference_hct import (
    RefRun,
    backward_b,
    best_child,
    checkpoint_rounds,
    longest_dim,
    make_children,
    noisy,
    path_b,
)
from tests.support.reference_hct import all_nodes as _all_nodes

MIN_VARIANCE = 1e-3


class Node(_Node):
    def __init__(self, lo, hi, depth, parent=None, variance=0.0):
        super().__init__(lo, hi, depth, parent)
        self.rewards: list = []
        self.variance = variance    # the variance of the rewards under the run's rule
        self.tau = 0.0              # the threshold computed when the selection last passed the node


def children(node: Node, d: int, variance: float) -> list:
    return [Node(kid.lo, kid.hi, kid.depth, node, variance) for kid in make_children(node, d)]


def vhct(name: str, dim: int, T: int, *, nu=1.0, rho=0.5, c=0.1, delta=0.01, bound=1.0, pyxab=False,
         split="random", split_dim_fn=None, noise="none", sigma=0.0, checkpoints=10, rng=None, full=True,
         noise_fn=None) -> RefRun:
    """``noise_fn(t)``: the noise added to round t's value (instead of drawing it with ``rng``), so that
    a run can be given the rewards of another implementation."""
    f, lo, hi, f_star = FUNCTIONS[name]
    root = Node(np.full(dim, float(lo)), np.full(dim, float(hi)), 0)
    c1 = (rho / (3 * nu)) ** (1 / 8)
    b = bound
    floor = MIN_VARIANCE if pyxab else 0.0

    def split_dim(t, node):
        if dim == 1:
            return 0
        return split_dim_fn(t) if split == "random" else longest_dim(node)

    def tplus(t):
        return 1 << (t - 1).bit_length()

    def log_term(t, cap):
        return math.log(1 / min(cap, c1 * delta / tplus(t)))

    def tau(n, t):
        h = n.depth
        if h == 0:
            return 0
        V, L = n.variance, log_term(t, 0.5)
        if pyxab:
            return np.ceil((V + 3 * b * nu * rho ** h + V * np.sqrt(1 + 6 * b * nu * rho ** h / V))
                           * (c ** 2 * L * rho ** (-2 * h) / nu ** 2))
        r = nu * rho ** h
        return math.ceil(c ** 2 * L / r ** 2 * (V + 3 * b * r + math.sqrt(V ** 2 + 6 * b * r * V)))

    def u_value(n, t):
        if n.count == 0:
            return math.inf
        V, L = n.variance, log_term(t, 1.0)
        ucb = math.sqrt(c ** 2 * 2 * V * L / n.count) + 3 * b * c ** 2 * L / n.count
        return n.mean + ucb + nu * (rho ** n.depth)

    def credit(n, r):
        n.credit(r)
        n.rewards.append(r)
        if pyxab:
            n.variance = max(np.var(np.array(n.rewards)), floor)
        else:
            n.variance = sum((x - n.mean) ** 2 for x in n.rewards) / len(n.rewards)

    def select(t):
        node = root
        node.tau = tau(node, t)
        while node.children is not None and node.count >= node.tau:
            node = best_child(node)
            node.tau = tau(node, t)
        return node

    root.children = children(root, split_dim(0, root), floor)
    created, reexpansions, depth, pending = 3, 0, 1, None
    regret, curve_at = 0.0, {}
    points = []
    for t in range(1, T + 1):
        node = select(t)
        x = node.centre
        value = float(f(x))
        points.append(x)
        regret += f_star - value
        curve_at[t] = regret
        r = value + noise_fn(t) if noise_fn is not None else noisy(value, noise, sigma, rng)
        if t == tplus(t):
            for n in _all_nodes(root):
                n.u = u_value(n, t)
            backward_b(root)
            pending = None
        credit(node, r)
        node.u = u_value(node, t)
        if full:
            backward_b(root)
        else:
            if pending is not None:
                path_b(pending)
            path_b(node)
        pending = None
        threshold = node.tau if pyxab else tau(node, t)
        if node.count >= threshold and (node.children is None or pyxab):
            if node.children is not None:
                reexpansions += 1
                pending = node
            node.children = children(node, split_dim(t, node), floor)
            created += 2
            depth = max(depth, node.depth + 1)
    rec = select(T + 1)
    rounds = checkpoint_rounds(T, checkpoints)
    return RefRun(points=np.array(points), curve=np.array([curve_at[r] for r in rounds]), final_regret=regret,
                  recommendation=rec.centre, nodes=created - 2 * reexpansions, depth=depth,
                  reexpansions=reexpansions)
