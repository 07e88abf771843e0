"""An independent, plain NumPy/Python HCT (Azar, Lazaric and Brunskill 2014) with PyXAB's rules, one
run at a time: the oracle of fedpne_jax.algorithms.trees.hct.  It shares no code with it: nodes are Python
objects holding float64 boxes, thresholds are recomputed from the formulas every round, and by
default B is recomputed over the whole tree after every update, as PyXAB does (the JAX code updates
only the changed path; ``full=False`` does the same here, for speed in statistical tests).

Rules (PyXAB 0.3.0 algos/HCT.py), round t = 1..T:
  c1 = (rho/(3 nu))^(1/8), t+ = 2^ceil(log2 t), delta~ = min(1/2, c1 delta/t+) for the thresholds and
  min(1, c1 delta/t+) for U; tau_h = ceil(c^2 log(1/delta~) rho^(-2h) / nu^2), tau_0 = 0;
  U = mean + nu rho^h + sqrt(c^2 log(1/delta~) / count) (inf if count = 0); B = U at a leaf,
  min(U, max children's B) above.  Select: from the root, to the child with the larger B (the upper,
  second child on ties) while the node has children and count >= tau_h.  Update: at powers of two
  recompute every U then every B; credit the pulled node (running mean); its U; B; expand it when
  count >= tau_h (only a leaf, or under 'pyxab' also an internal node, whose children are replaced).

The partition: a node's box is halved along one dimension, lower child first; the point pulled is the
box's centre.  The split dimension is injected (``split_dim_fn(t)``: the dimension of the expansion
made in round t, 0 for the root's before round 1) or 'longest' (longest side, lowest index on ties).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from tests.support.reference import FUNCTIONS


class Node:
    def __init__(self, lo, hi, depth, parent=None):
        self.lo, self.hi, self.depth, self.parent = lo, hi, depth, parent
        self.children = None
        self.count = 0
        self.mean = 0.0
        self.u = math.inf
        self.b = math.inf

    @property
    def centre(self):
        return (self.lo + self.hi) / 2

    def credit(self, reward):
        self.count += 1
        self.mean += (reward - self.mean) / self.count


def longest_dim(node: Node) -> int:
    widths = [Fraction(float(b)) - Fraction(float(a)) for a, b in zip(node.lo, node.hi)]
    return max(range(len(widths)), key=lambda i: (widths[i], -i))


def make_children(node: Node, d: int) -> list:
    mid = (node.lo[d] + node.hi[d]) / 2
    lo1, hi0 = node.lo.copy(), node.hi.copy()
    hi0[d] = mid
    lo1[d] = mid
    return [Node(node.lo.copy(), hi0, node.depth + 1, node), Node(lo1, node.hi.copy(), node.depth + 1, node)]


def all_nodes(root: Node) -> list:
    out, stack = [], [root]
    while stack:
        n = stack.pop()
        out.append(n)
        if n.children:
            stack.extend(n.children)
    return out


def backward_b(root: Node) -> None:
    """B of every node, children before parents."""
    for n in sorted(all_nodes(root), key=lambda n: -n.depth):
        n.b = n.u if n.children is None else min(n.u, max(c.b for c in n.children))


def path_b(node: Node) -> None:
    while node is not None:
        node.b = node.u if node.children is None else min(node.u, max(c.b for c in node.children))
        node = node.parent


def best_child(node: Node) -> Node:
    best = node.children[0]
    for c in node.children[1:]:
        if c.b >= best.b:
            best = c
    return best


@dataclass
class RefRun:
    points: np.ndarray          # (T, D) pulled points
    curve: np.ndarray           # (C,) cumulative regret at the checkpoints
    final_regret: float
    recommendation: np.ndarray
    nodes: int                  # nodes created, less the two of every re-expansion (whose children
                                # take their predecessors' rows in the JAX table)
    depth: int                  # deepest node created
    reexpansions: int = 0


def checkpoint_rounds(T: int, C: int) -> np.ndarray:
    return np.array([-(-c * T // C) for c in range(1, C + 1)])


def noisy(f, noise: str, sigma: float, rng):
    if noise == "none":
        return f
    if noise == "gaussian":
        return f + sigma * rng.standard_normal()
    if noise == "uniform":
        return f + rng.uniform(-sigma, sigma)
    if noise == "bernoulli":
        return float(rng.random() < f)
    raise ValueError(noise)


def hct(name: str, dim: int, T: int, *, nu=1.0, rho=0.5, c=0.1, delta=0.01, expand="leaf", split="random",
        split_dim_fn=None, noise="none", sigma=0.0, checkpoints=10, rng=None, full=True) -> RefRun:
    f, lo, hi, f_star = FUNCTIONS[name]
    root = Node(np.full(dim, float(lo)), np.full(dim, float(hi)), 0)
    c1 = (rho / (3 * nu)) ** (1 / 8)

    def split_dim(t, node):
        if dim == 1:
            return 0
        return split_dim_fn(t) if split == "random" else longest_dim(node)

    def tplus(t):
        return 1 << (t - 1).bit_length()

    def tau(h, t):
        if h == 0:
            return 0
        dt = min(0.5, c1 * delta / tplus(t))
        return math.ceil(c ** 2 * math.log(1 / dt) * rho ** (-2 * h) / nu ** 2)

    def conf(t):
        return c ** 2 * math.log(1 / min(1.0, c1 * delta / tplus(t)))

    def u_value(n, t):
        return math.inf if n.count == 0 else n.mean + nu * rho ** n.depth + math.sqrt(conf(t) / n.count)

    def select(t):
        node = root
        while node.children is not None and node.count >= tau(node.depth, t):
            node = best_child(node)
        return node

    root.children = make_children(root, split_dim(0, root))
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
        r = noisy(value, noise, sigma, rng)
        if t == tplus(t):
            for n in all_nodes(root):
                n.u = u_value(n, t)
            backward_b(root)
            pending = None
        node.credit(r)
        node.u = u_value(node, t)
        if full:
            backward_b(root)
        else:
            # A replaced subtree changes its node's B at the update after its replacement.
            if pending is not None:
                path_b(pending)
            path_b(node)
        pending = None
        if node.count >= tau(node.depth, t) and (node.children is None or expand == "pyxab"):
            if node.children is not None:
                reexpansions += 1
                pending = node
            node.children = make_children(node, split_dim(t, node))
            created += 2
            depth = max(depth, node.depth + 1)
    rec = select(T + 1)
    rounds = checkpoint_rounds(T, checkpoints)
    return RefRun(points=np.array(points), curve=np.array([curve_at[r] for r in rounds]), final_regret=regret,
                  recommendation=rec.centre, nodes=created - 2 * reexpansions, depth=depth,
                  reexpansions=reexpansions)
