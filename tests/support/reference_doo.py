"""An independent, plain NumPy/Python DOO (Munos, "Optimistic optimization of a deterministic function
without the knowledge of its smoothness", NIPS 2011) with PyXAB's rules, one run at a time: the oracle
of fedpne_jax.algorithms.trees.doo.  Written from the paper and PyXAB 0.3.0's algos/DOO.py, sharing no
code with the JAX policy: nodes are Python objects holding float64 boxes, kept in PyXAB's layers (a
list per expansion, as its ``make_children(newlayer=True)`` builds them), and b is recomputed for
every leaf whenever a node is chosen.

Rules (PyXAB's ``pull``), round t = 1..T: scan the layers in order; the first leaf not yet evaluated
is evaluated; if every leaf has been evaluated, the one with the largest b = value + delta(layer)
(``>=``: the last scanned wins ties) is expanded and the scan restarts, so its lower child is
evaluated.  delta: 'pyxab' is PyXAB's ``delta_init``, the max over the layer's nodes of
max((lo_0 - c_0)^2, (hi_0 - c_0)^2); 'geometric' is the paper's c gamma^h.  The recommendation is
the evaluated node with the largest value (``>=`` in scan order).

The partition is reference_hct's: a box halved along one dimension, lower child first, centre
pulled; the dimension is ``split_dim_fn(t)`` for the expansion made in round t ('random') or the
longest side (lowest index on ties).
"""
from __future__ import annotations

import numpy as np

from tests.support.reference import FUNCTIONS
from tests.support.reference_hct import Node, RefRun, checkpoint_rounds, longest_dim, make_children, noisy


def doo(name: str, dim: int, T: int, *, delta="pyxab", c=1.0, gamma=0.5, split="random", split_dim_fn=None,
        noise="none", sigma=0.0, checkpoints=10, rng=None) -> RefRun:
    f, lo, hi, f_star = FUNCTIONS[name]
    layers = [[Node(np.full(dim, float(lo)), np.full(dim, float(hi)), 0)]]
    evaluated = {}                      # id(node) -> value

    def layer_delta(layer):
        if delta == "geometric":
            return c * gamma ** layer[0].depth
        return max(max((float(n.lo[0]) - float(n.centre[0])) ** 2, (float(n.hi[0]) - float(n.centre[0])) ** 2)
                   for n in layer)

    deltas = [layer_delta(layers[0])]   # a layer's delta depends on its boxes alone

    def choose(t):
        while True:
            best, best_b = None, -np.inf
            for h, layer in enumerate(layers):
                for n in layer:
                    if n.children is not None:
                        continue
                    if id(n) not in evaluated:
                        return n
                    b = evaluated[id(n)] + deltas[h]
                    if b >= best_b:
                        best, best_b = n, b
            d = 0 if dim == 1 else split_dim_fn(t) if split == "random" else longest_dim(best)
            best.children = make_children(best, d)
            layers.append(best.children)
            deltas.append(layer_delta(best.children))

    regret, curve_at, points = 0.0, {}, []
    for t in range(1, T + 1):
        # PyXAB expands inside pull; the expansion belongs to the round whose value completed the tree.
        node = choose(t - 1)
        x = node.centre
        value = float(f(x))
        points.append(x)
        regret += f_star - value
        curve_at[t] = regret
        evaluated[id(node)] = noisy(value, noise, sigma, rng)
    choose(T)                           # the selection of round T + 1 (its expansion, if any)
    best, best_value = None, -np.inf
    for layer in layers:
        for n in layer:
            if id(n) in evaluated and evaluated[id(n)] >= best_value:
                best, best_value = n, evaluated[id(n)]
    rounds = checkpoint_rounds(T, checkpoints)
    return RefRun(points=np.array(points), curve=np.array([curve_at[r] for r in rounds]), final_regret=regret,
                  recommendation=best.centre, nodes=sum(len(layer) for layer in layers),
                  depth=max(layer[0].depth for layer in layers))
