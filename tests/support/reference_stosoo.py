"""An independent, plain Python StoSOO (Valko, Carpentier and Munos, "Stochastic simultaneous
optimistic optimization", ICML 2013), one run at a time: the oracle of
fedpne_jax.algorithms.trees.stosoo.  Two rules, sharing no code with the JAX policy:

* :func:`stosoo` (default): the paper's loop, sweeps over depths 0 .. min(depth(T), h_max) (the bound
  read when a sweep starts), with v_max = -inf at the start of each; at each depth the leaf with the
  largest b, if its b >= v_max, is evaluated once when it has fewer than k evaluations, or else
  expanded (and v_max becomes its b).  Each evaluation is one round; the run stops at the T-th.  The
  output is the node with the largest mean among the deepest expanded nodes (the root while none is).
* ``pyxab=True``: a line-by-line transcription of PyXAB 0.3.0's ``StoSOO.pull`` (algos/StoSOO.py),
  a fresh sweep per round over depths up to min(depth + 1, h_max) that returns the first node it
  would evaluate, with its ``np.sum`` means and its ``get_last_point`` (largest mean in the deepest
  layer, 0 for a node never evaluated).  Where PyXAB's ``pull`` returns None (its sweep ended on an
  expansion), ``pull`` is called again.

b = mean + sqrt(log(n k / delta) / (2 T)) after T evaluations (+inf before), n the horizon.  Nodes
are reference_hct's (float64 boxes halved along one dimension, lower child first, centre evaluated),
a layer per depth in creation order; ties go to the node created last (PyXAB's ``<=`` and ``>=``).  An
expansion's dimension is ``split_dim_fn(t, j)`` for the j-th expansion made after the t-th evaluation
(split 'random'), or the longest side.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np

from tests.support.reference import FUNCTIONS
from tests.support.reference_hct import Node, RefRun, checkpoint_rounds, longest_dim, make_children, noisy


class _Done(Exception):
    pass


def stosoo(name: str, dim: int, T: int, *, k: int, delta: float, h_max=100, pyxab=False, split="random",
           split_dim_fn=None, noise="none", sigma=0.0, checkpoints=10, rng=None, events=None) -> RefRun:
    """One run; ``events`` (a Counter, when given) counts what the run went through: 'refused' (a
    depth's best leaf below v_max), 'later' (an expansion after another since the last evaluation),
    'top' (an expansion at depth h_max) and 'again' (PyXAB's ``pull`` returned None)."""
    events = Counter() if events is None else events
    f, lo, hi, f_star = FUNCTIONS[name]
    root = Node(np.full(dim, float(lo)), np.full(dim, float(hi)), 0)
    created = [root]                      # creation order
    layers = [[root]]                     # a list per depth, in creation order
    rewards: dict = {id(root): []}
    # PyXAB recomputes a leaf's mean and b in every pull, from its own rewards alone: kept here as
    # they stand after its last reward.
    means, bs = {id(root): 0}, {id(root): math.inf}
    width = np.log(T * k / delta)
    state = {"t": 0, "j": 0, "regret": 0.0}
    points, curve_at = [], {}

    def mean(node):
        return means[id(node)]

    def b(node):
        return bs[id(node)]

    def evaluate(node):
        state["t"] += 1
        state["j"] = 0
        x = node.centre
        y = float(f(x))
        points.append(x)
        state["regret"] += f_star - y
        curve_at[state["t"]] = state["regret"]
        r = rewards[id(node)]
        r.append(noisy(y, noise, sigma, rng))
        means[id(node)] = np.sum(np.array(r)) / len(r) if pyxab else sum(r) / len(r)
        bs[id(node)] = means[id(node)] + math.sqrt(width / (2 * len(r)))
        if state["t"] == T:
            raise _Done

    def expand(node):
        events["later"] += state["j"] > 0
        events["top"] += node.depth == h_max
        d = 0 if dim == 1 else split_dim_fn(state["t"], state["j"]) if split == "random" else longest_dim(node)
        state["j"] += 1
        node.children = make_children(node, d)
        if node.depth + 1 == len(layers):
            layers.append([])
        layers[node.depth + 1].extend(node.children)
        created.extend(node.children)
        for child in node.children:
            rewards[id(child)], means[id(child)], bs[id(child)] = [], 0, math.inf

    try:
        if pyxab:
            def pull():
                b_max = -math.inf
                h = 0
                while h <= min(len(layers) - 1 + 1, h_max):
                    max_node = None
                    for node in layers[h]:
                        if node.children is None:
                            if max_node is None or b(max_node) <= b(node):
                                max_node = node
                    if max_node is not None:
                        events["refused"] += b(max_node) < b_max
                        if b(max_node) >= b_max:
                            if len(rewards[id(max_node)]) < k:
                                return max_node
                            expand(max_node)
                            b_max = b(max_node)
                    h += 1
                return None

            while True:
                node = pull()
                while node is None:
                    events["again"] += 1
                    before = len(created)
                    node = pull()
                    if node is None and len(created) == before:
                        raise RuntimeError("no node of depth <= h_max is left to evaluate")
                evaluate(node)
        else:
            while True:
                v_max, acted = -math.inf, False
                for h in range(min(len(layers) - 1, h_max) + 1):
                    leaves = [n for n in layers[h] if n.children is None]
                    if not leaves:
                        continue
                    best = leaves[0]
                    for n in leaves:
                        if b(n) >= b(best):
                            best = n
                    events["refused"] += b(best) < v_max
                    if b(best) >= v_max:
                        acted = True
                        if len(rewards[id(best)]) < k:
                            evaluate(best)
                        else:
                            expand(best)
                            v_max = b(best)
                if not acted:
                    raise RuntimeError("no node of depth <= h_max is left to evaluate")
    except _Done:
        pass

    if pyxab:
        rec, top = None, -math.inf
        for node in layers[-1]:
            if mean(node) >= top:
                top, rec = mean(node), node
    else:
        expanded = [n for n in created if n.children is not None]
        h = max((n.depth for n in expanded), default=0)
        deepest = [n for n in expanded if n.depth == h] or [root]
        rec = deepest[0]
        for n in deepest:
            if mean(n) >= mean(rec):
                rec = n
    assert rec is not None
    rounds = checkpoint_rounds(T, checkpoints)
    return RefRun(points=np.array(points), curve=np.array([curve_at[r] for r in rounds]),
                  final_regret=state["regret"], recommendation=rec.centre, nodes=len(created),
                  depth=len(layers) - 1)
