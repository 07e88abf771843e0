"""An independent, plain Python SequOOL (Bartlett, Gabillon and Valko, "A simple parameter-free and adaptive
approach to optimization under a minimal local smoothness assumption", ALT 2019), one run at a time: the oracle
of fedpne_jax.algorithms.trees.sequool, with PyXAB 0.3.0's rules (algos/SequOOL.py, n = T).

* h_max = floor(T / H_T), H_T = sum_{i=1..T} 1/i (a float64 loop in increasing i, as PyXAB sums it).
* One evaluation per round.  Rounds 1-2: the root's two children (lower first).  Then the sweep, curr_depth =
  1, 2, .. h_max with budget floor(h_max / curr_depth): an opening takes the unopened node of curr_depth with
  the largest value (the last created on ties: PyXAB's ``>=`` scan), makes its children and evaluates child 0,
  then child 1 in the next round; after that round the node is opened, budget -= 1, and when the budget is
  spent or the node was its depth's last unopened one (``num == 1``) the sweep moves to the next depth.  A
  depth's nodes are all created and evaluated before its sweep starts, so its openings are simply its nodes
  in decreasing (value, creation index) order.  After depth h_max every round evaluates the root's centre
  (regret counted, not a recommendation candidate).  The run stops after round T, mid-opening included; an
  expansion counts (in ``nodes``, ``depth``) once its first child has been evaluated.
* A value is the node's first reward, f(centre) plus the noise; regret uses the noise-free f.
* Recommendation: the evaluated node with the largest value, the last evaluated on ties (get_last_point).

Nodes are reference_hct's (float64 boxes, a box halved along one dimension, lower child first, centre
evaluated).  As in reference_soo, an expansion's dimension is ``split_dim_fn(r)`` when its children are the
r-th and (r+1)-th nodes created, counting from 0 with the root as node 0 (the root's expansion: r = 1); here
node r is evaluated in round r, so r is also the round of its first child.  'longest' splits the longest
side; dim == 1 always splits dimension 0.
"""
from __future__ import annotations

import math

import numpy as np

from tests.support.reference import FUNCTIONS
from tests.support.reference_hct import Node, RefRun, checkpoint_rounds, longest_dim, make_children, noisy


class _Done(Exception):
    pass


def h_max_of(T: int) -> int:
    harmonic = 0.0
    for i in range(1, T + 1):
        harmonic += 1 / i
    return math.floor(T / harmonic)


def pyxab_schedule(T: int) -> list[tuple[int, int]]:
    """(d, openings at depth d) for every depth d >= 1 the sweep reaches within T rounds: openings =
    min(floor(h_max / d), nodes of depth d), 2 nodes at depth 1, 2 x openings at depth d + 1; an opening
    counts when its first child's round is <= T (2 rounds each, after the root's children's 2)."""
    h_max = h_max_of(T)
    out, nodes, rounds = [], 2, 2
    for d in range(1, h_max + 1):
        if rounds >= T:
            break
        k = min(h_max // d, nodes, -(-(T - rounds) // 2))
        out.append((d, k))
        rounds += 2 * k
        nodes = 2 * k
    return out


def sequool(name: str, dim: int, T: int, *, split="random", split_dim_fn=None, noise="none", sigma=0.0,
            checkpoints=10, rng=None) -> RefRun:
    f, lo, hi, f_star = FUNCTIONS[name]
    h_max = h_max_of(T)
    root = Node(np.full(dim, float(lo)), np.full(dim, float(hi)), 0)
    created = [root]                      # creation order
    index = {id(root): 0}
    layers = {}                           # depth -> its nodes, in creation order
    value = {}                            # id(node) -> observed value (first reward)
    evaluated = []                        # recommendation candidates, in evaluation order
    state = {"t": 0, "regret": 0.0}
    points, curve_at = [], {}

    def evaluate(node, candidate=True):
        state["t"] += 1
        x = node.centre
        y = float(f(x))
        points.append(x)
        state["regret"] += f_star - y
        curve_at[state["t"]] = state["regret"]
        if candidate:
            value[id(node)] = noisy(y, noise, sigma, rng)
            evaluated.append(node)
        if state["t"] == T:
            raise _Done

    def open_node(node):
        d = 0 if dim == 1 else split_dim_fn(len(created)) if split == "random" else longest_dim(node)
        node.children = make_children(node, d)
        for child in node.children:
            index[id(child)] = len(created)
            created.append(child)
            layers.setdefault(child.depth, []).append(child)
        for child in node.children:
            evaluate(child)

    try:
        if T <= 0:
            raise _Done
        open_node(root)
        for depth in range(1, h_max + 1):
            budget = h_max // depth
            # The >= scan over unopened nodes, repeated: decreasing value, the last created first on ties.
            order = sorted(layers[depth], key=lambda n: (value[id(n)], index[id(n)]), reverse=True)
            for node in order[:budget]:
                open_node(node)
        while True:
            evaluate(root, candidate=False)
    except _Done:
        pass

    best = None
    for n in evaluated:                   # evaluation order: the last of equal values wins
        if best is None or value[id(n)] >= value[id(best)]:
            best = n
    rounds = checkpoint_rounds(T, checkpoints)
    return RefRun(points=np.array(points), curve=np.array([curve_at[r] for r in rounds]),
                  final_regret=state["regret"], recommendation=best.centre, nodes=len(created),
                  depth=max(n.depth for n in created))
