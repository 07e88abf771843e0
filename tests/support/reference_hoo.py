"""An independent, plain NumPy/Python T-HOO (Bubeck, Munos, Stoltz and Szepesvari 2011) with PyXAB's
rules, one run at a time: the oracle of fedpne_jax.algorithms.trees.hoo.  Nodes are Python objects (the
partition of reference_hct); by default every U and B of the tree is recomputed after every round,
as PyXAB does (``full=False``: only the path's, for speed in statistical tests).

Rules (PyXAB 0.3.0 algos/HOO.py, class T_HOO), round t = 1..T, n = T:
  U = mean + sqrt(2 ln n / count) + nu rho^h (inf if count = 0); B = U at a leaf, min(U, max children's
  B) above.  Select: from the root to the child with the larger B (the second child on ties) down to
  a leaf; pull its centre.  Update: credit every node of the path (running mean), recompute U, expand
  the leaf if its depth <= ceil((ln n / 2 - ln(1/nu)) / ln(1/rho)) (or a given limit), recompute B.
"""
from __future__ import annotations

import math

import numpy as np

from tests.support.reference import FUNCTIONS
from tests.support.reference_hct import (
    Node,
    RefRun,
    all_nodes,
    backward_b,
    best_child,
    checkpoint_rounds,
    longest_dim,
    make_children,
    noisy,
    path_b,
)


def default_depth_limit(T: int, nu: float, rho: float) -> int:
    return math.ceil((math.log(T) / 2 - math.log(1 / nu)) / math.log(1 / rho))


def hoo(name: str, dim: int, T: int, *, nu=1.0, rho=0.5, depth_limit=None, split="random", split_dim_fn=None,
        noise="none", sigma=0.0, checkpoints=10, rng=None, full=True) -> RefRun:
    f, lo, hi, f_star = FUNCTIONS[name]
    root = Node(np.full(dim, float(lo)), np.full(dim, float(hi)), 0)
    limit = default_depth_limit(T, nu, rho) if depth_limit is None else depth_limit
    explore = 2 * math.log(T)

    def split_dim(t, node):
        if dim == 1:
            return 0
        return split_dim_fn(t) if split == "random" else longest_dim(node)

    def select():
        node, path = root, [root]
        while node.children is not None:
            node = best_child(node)
            path.append(node)
        return node, path

    root.children = make_children(root, split_dim(0, root))
    created, depth = 3, 1
    regret, curve_at, points = 0.0, {}, []
    for t in range(1, T + 1):
        leaf, path = select()
        x = leaf.centre
        value = float(f(x))
        points.append(x)
        regret += f_star - value
        curve_at[t] = regret
        r = noisy(value, noise, sigma, rng)
        for n in path:
            n.credit(r)
        for n in (all_nodes(root) if full else path):
            if n.count > 0:
                n.u = n.mean + math.sqrt(explore / n.count) + nu * rho ** n.depth
        if leaf.depth <= limit:
            leaf.children = make_children(leaf, split_dim(t, leaf))
            created += 2
            depth = max(depth, leaf.depth + 1)
        if full:
            backward_b(root)
        else:
            path_b(leaf)
    rec, _ = select()
    rounds = checkpoint_rounds(T, checkpoints)
    return RefRun(points=np.array(points), curve=np.array([curve_at[r] for r in rounds]), final_regret=regret,
                  recommendation=rec.centre, nodes=created, depth=depth)
