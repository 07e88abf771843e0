"""An independent, plain Python/NumPy StroquOOL (Bartlett, Gabillon and Valko, "A simple parameter-free and
adaptive approach to optimization under a minimal local smoothness assumption", ALT 2019), one run at a time:
the oracle of fedpne_jax.algorithms.trees.stroquool, a round-by-round transcription of PyXAB 0.3.0's
algos/StroquOOL.py with n = T (``pull(t)`` then ``receive_reward`` in every round t = 1..T).

* h_max = floor(T / (2 (H_T + 1)^2)), H_T = sum_{i=1..T} 1/i (a float64 loop in increasing i, as PyXAB sums
  it); p_max = floor(log2 h_max).  h_max < 1 is undefined (PyXAB raises): ValueError, see :func:`min_horizon`.
* Depth 0: the root's two children are made; rounds 1..h_max evaluate child 0, h_max+1..2h_max child 1.
* Sweep, curr_depth = 1..h_max, p = floor(log2(h_max / curr_depth)) down to 0, one step per p: at its first
  round max_node = among the depth's nodes (creation order) not opened with visits >= 2^p, the largest mean
  (``np.sum(np.array(rewards)) / len(rewards)``, stored on the node; ``>=``: the last on ties); its children
  are made if it has none; child 0 is evaluated 2^p rounds, then child 1 2^p rounds; then max_node is opened.
* Cross-validation: candidates, for p = 0..p_max, the node of ``chosen`` (every node made but the root, in
  creation order) with visits >= 2^p and the largest STORED mean (-inf if never computed; ``>=``); every
  candidate's reward list is cleared (visits kept); then each candidate in turn is evaluated h_max rounds.
* After that the run has ended: every round evaluates get_last_point (rewards ignored), the candidate with the
  largest mean of its current rewards (``>=``, recomputed and stored); it is also the recommendation, None when
  T ends before the cross-validation does (PyXAB's get_last_point would fail there).

PyXAB quirks kept: when no node of the depth qualifies, max_node stays the previous step's (an opened node),
whose children are evaluated again; such events are counted in ``stale`` (depth 1 has 2 nodes but
floor(log2 h_max) + 1 steps, so this happens whenever h_max >= 4; deeper depths add more).  A node that is a
candidate for several p accumulates the rewards of all its occurrences.  The nodes made by the last expansions are
never scored (stored mean -inf, which ``-inf >= -inf`` would let win), but the root's children come first in
``chosen`` with finite means and >= h_max >= 2^p_max visits, so no candidate is such a node, nor None.  The
cross-validation ends early (round 793 of T = 10^4) and within T (checked for every 7th T from 68 to 30000).

Rewards are f(centre) plus ``noisy``'s noise, drawn in every round (also after the end, when they are
ignored); regret is f_star - f(point pulled), noise-free.  ``nodes`` = 1 + 2 per expansion (counted when made),
``depth`` = the deepest node made.  Nodes are reference_hct's (float64 boxes, a box halved along one dimension,
lower child first, centre evaluated).  As in reference_sequool, an expansion's dimension is ``split_dim_fn(r)``
when its children are the r-th and (r+1)-th nodes created, counting from 0 with the root as node 0 (the root's
expansion: r = 1); 'longest' splits the longest side; dim == 1 always splits dimension 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tests.support.reference import FUNCTIONS
from tests.support.reference_hct import Node, RefRun, checkpoint_rounds, longest_dim, make_children, noisy


@dataclass
class StroquoolRun(RefRun):
    stale: int = 0              # sweep steps where no node qualified and max_node stayed the previous one


def h_max_of(n: int) -> int:
    harmonic = 0
    for i in range(1, n + 1):
        harmonic += 1 / i
    return math.floor(n / (2 * (harmonic + 1) ** 2))


def min_horizon() -> int:
    T = 1
    while h_max_of(T) < 1:
        T += 1
    return T


def _p_of(h_max: int, depth: int) -> int:
    return math.floor(np.log2(h_max / depth))


def schedule(T: int) -> dict:
    """The rounds of the run from the rules alone: steps = [(depth, p, first round)] of the sweep (the depth-0
    phase, rounds 1..2h_max, is not a step); cv_start = first cross-validation round; end = the round after the
    last one (rounds may exceed T: nothing is truncated here)."""
    h_max = h_max_of(T)
    steps, t = [], 2 * h_max + 1
    for depth in range(1, h_max + 1):
        for p in range(_p_of(h_max, depth), -1, -1):
            steps.append((depth, p, t))
            t += 2 ** (p + 1)
    p_max = math.floor(np.log2(h_max)) if h_max >= 1 else -1
    return {"h_max": h_max, "p_max": p_max, "steps": steps, "cv_start": t, "end": t + (p_max + 1) * h_max}


def _mean(node) -> None:          # StroquOOL_node.compute_mean_reward
    if node.visits > 0:
        node.stored = np.sum(np.array(node.rewards)) / len(node.rewards)


def stroquool(name: str, dim: int, T: int, *, split="random", split_dim_fn=None, noise="none", sigma=0.0,
              checkpoints=10, rng=None) -> StroquoolRun:
    f, lo, hi, f_star = FUNCTIONS[name]
    h_max = h_max_of(T)
    if h_max < 1:
        raise ValueError(f"StroquOOL needs h_max >= 1: T >= {min_horizon()} (got T = {T}, h_max = {h_max})")
    p_max = math.floor(np.log2(h_max))
    root = Node(np.full(dim, float(lo)), np.full(dim, float(hi)), 0)
    created = [root]                  # creation order
    layers = {0: [root]}              # PyXAB's node_list: depth -> its nodes, in creation order
    chosen, candidates = [], []
    s = {"depth": 0, "p": None, "ts": 0, "eval": True, "max": None, "loc": 0, "end": False, "stale": 0}

    def fresh(node):
        node.visits, node.rewards, node.opened, node.stored = 0, [], False, -math.inf
        return node

    def expand(node):
        d = 0 if dim == 1 else split_dim_fn(len(created)) if split == "random" else longest_dim(node)
        node.children = [fresh(c) for c in make_children(node, d)]
        created.extend(node.children)
        chosen.extend(node.children)
        layers.setdefault(node.depth + 1, []).extend(node.children)

    def last_point():                 # get_last_point
        best_value, best = -math.inf, None
        for node in candidates:
            _mean(node)
            if node.stored >= best_value:
                best_value, best = node.stored, node
        return best

    def pull(t):
        if s["depth"] <= h_max:
            if s["depth"] == 0:
                if root.children is None:
                    expand(root)
                if t <= h_max:
                    return root.children[0]
                if t == 2 * h_max:
                    s["ts"], s["depth"], s["p"] = 2 * h_max, 1, _p_of(h_max, 1)
                return root.children[1]
            p = s["p"]                # >= 0 while depth <= h_max
            if s["eval"]:
                best_value, found = -math.inf, False
                for node in layers[s["depth"]]:
                    if not node.opened and node.visits >= 2 ** p:
                        _mean(node)
                        if node.stored >= best_value:
                            best_value, s["max"], found = node.stored, node, True
                s["stale"] += not found
                s["eval"] = False
                if s["max"].children is None:
                    expand(s["max"])
            node = s["max"]
            if t <= s["ts"] + 2 ** p:
                return node.children[0]
            if t == s["ts"] + 2 ** (p + 1):
                s["ts"] += 2 ** (p + 1)
                s["p"] = p - 1
                node.opened, s["eval"] = True, True
                if s["p"] < 0:
                    s["depth"] += 1
                    s["p"] = _p_of(h_max, s["depth"])
            return node.children[1]
        if not candidates:            # cross-validation
            for p in range(p_max + 1):
                best_value, best = -math.inf, None
                for node in chosen:
                    if node.visits >= 2 ** p and node.stored >= best_value:
                        best_value, best = node.stored, node
                candidates.append(best)
            for node in candidates:
                node.rewards = []
        if s["loc"] < len(candidates):
            node = candidates[s["loc"]]
            if t == s["ts"] + h_max:
                s["ts"] += h_max
                s["loc"] += 1
            return node
        s["end"] = True
        return last_point()

    fresh(root)
    regret, points, curve_at = 0.0, [], {}
    for t in range(1, T + 1):
        node = pull(t)
        x = node.centre
        y = float(f(x))
        points.append(x)
        regret += f_star - y
        curve_at[t] = regret
        reward = noisy(y, noise, sigma, rng)
        if not s["end"]:
            node.visits += 1
            node.rewards.append(reward)

    done = bool(candidates) and s["loc"] == len(candidates)
    best = last_point() if done else None
    rounds = checkpoint_rounds(T, checkpoints)
    return StroquoolRun(points=np.array(points), curve=np.array([curve_at[r] for r in rounds]),
                        final_regret=regret, recommendation=None if best is None else best.centre,
                        nodes=len(created), depth=max(n.depth for n in created), stale=s["stale"])
