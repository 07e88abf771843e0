"""An independent, plain Python SOO (Munos, "Optimistic optimization of a deterministic function
without the knowledge of its smoothness", NIPS 2011), one run at a time: the oracle of
fedpne_jax.algorithms.trees.soo.  Two rules, sharing no code with the JAX policy:

* :func:`soo` ('paper'): the paper's loop as printed, a sweep over depths 0 .. min(depth(T),
  h_max) with v_max, where expanding a node evaluates its two children at once; each evaluation is
  one round, and the run stops at the T-th (after it, the next expansion is still made, as the
  selection of round T + 1 makes it).  The bound of a sweep is read when it starts.
* ``pyxab=True``: a line-by-line transcription of PyXAB 0.3.0's ``SOO.pull`` (algos/SOO.py): the
  scan restarts at depth 0 in every round, returns the first unevaluated leaf it meets, and expands
  the best evaluated leaf of a depth (``>=``) when it is >= v_max.

Nodes are reference_hct's (float64 boxes, a box halved along one dimension, lower child first,
centre evaluated); an expansion's dimension is ``split_dim_fn(r)`` when its children are the r-th and
(r+1)-th nodes created, counting from 0 ('random': the JAX run draws it in round r, the round that
needs its first child), or the longest side.  The recommendation is the evaluated node with the
largest value, the last created on ties.
"""
from __future__ import annotations

import math

import numpy as np

from tests.support.reference import FUNCTIONS
from tests.support.reference_hct import Node, RefRun, checkpoint_rounds, longest_dim, make_children, noisy


class _Done(Exception):
    pass


def soo(name: str, dim: int, T: int, *, h_max=100, pyxab=False, split="random", split_dim_fn=None, noise="none",
        sigma=0.0, checkpoints=10, rng=None) -> RefRun:
    f, lo, hi, f_star = FUNCTIONS[name]
    root = Node(np.full(dim, float(lo)), np.full(dim, float(hi)), 0)
    created = [root]                      # creation order
    value = {}                            # id(node) -> observed value
    state = {"t": 0, "regret": 0.0}
    points, curve_at = [], {}

    def evaluate(node):
        if state["t"] == T:
            raise _Done
        state["t"] += 1
        x = node.centre
        y = float(f(x))
        points.append(x)
        state["regret"] += f_star - y
        curve_at[state["t"]] = state["regret"]
        value[id(node)] = noisy(y, noise, sigma, rng)

    def expand(node):
        d = 0 if dim == 1 else split_dim_fn(len(created)) if split == "random" else longest_dim(node)
        node.children = make_children(node, d)
        created.extend(node.children)

    def leaves_at(h):
        return [n for n in created if n.depth == h and n.children is None]

    def best_of(nodes):
        best = None
        for n in nodes:                   # creation order: the last of equal values wins
            if best is None or value[id(n)] >= value[id(best)]:
                best = n
        return best

    if pyxab:
        layers = [[root]]                 # PyXAB's node_list: a list per depth, in creation order
        visited = set()

        def pull():
            while True:
                h, v_max = 0, -math.inf
                while h <= min(len(layers) - 1, h_max):
                    max_value, max_node = -math.inf, None
                    for node in layers[h]:
                        if node.children is None:
                            if id(node) not in visited:
                                visited.add(id(node))
                                return node
                            if value[id(node)] >= max_value:
                                max_value, max_node = value[id(node)], node
                    if max_value >= v_max and max_node is not None:
                        expand(max_node)
                        if h + 1 >= len(layers):
                            layers.append([])
                        layers[h + 1].extend(max_node.children)
                        v_max = max_value
                    h += 1

        for _ in range(T):
            evaluate(pull())
        pull()                            # round T + 1's selection, and its expansion if any
    else:
        try:
            evaluate(root)
            expanded = True
            while expanded:               # a sweep that expands nothing: every depth <= h_max is full
                expanded, v_max = False, -math.inf
                bound = min(max(n.depth for n in created), h_max)
                for h in range(bound + 1):
                    leaves = leaves_at(h)
                    if not leaves:
                        continue
                    best = best_of(leaves)
                    if value[id(best)] >= v_max:
                        expand(best)
                        expanded = True
                        for child in best.children:
                            evaluate(child)
                        v_max = value[id(best)]
        except _Done:
            pass

    best = best_of([n for n in created if id(n) in value])
    rounds = checkpoint_rounds(T, checkpoints)
    return RefRun(points=np.array(points), curve=np.array([curve_at[r] for r in rounds]),
                  final_regret=state["regret"], recommendation=best.centre, nodes=len(created),
                  depth=max(n.depth for n in created))
