"""An independent, plain Python VROOM (Gabillon, Tutunov, Valko and Bou Ammar, "Derivative-Free &
Order-Robust Optimisation", 2020), one run at a time: the oracle of fedpne_jax.algorithms.trees.vroom,
transcribing PyXAB 0.3.0's rules (algos/VROOM.py with partition/BinaryPartition.py).

* n = T; H = floor(log2 n); delta = 4 b / (f_max sqrt(n)); the partition is deepened to depth H before
  round 1 (every cell of depths 0..H - 1 split once, in layer order, lower child first).
* K = sum_{h=1..H} sum_{l=1..2^h} 1 / (h l), summed in that order as PyXAB does.
* Round t: every depth h = 1..H is sorted by mean - sqrt(log(4 n^3 / delta) / (2 m)) (-inf for a cell
  never credited) in decreasing order, Python's stable ``sorted`` (ties keep the layer's order); a cell
  at depth h and rank l has probability 1 / (h l K).  The cell is drawn from round t's 64-bit word w:
  the first cell, in (depth, rank) order, whose cumulative probability F satisfies w < floor(2^64 F)
  (the last cell when none does).  PyXAB draws with ``np.random.choice`` over the same probabilities in
  (depth, layer) order: the same distribution, another map from its random numbers.
* The point is lo + u (hi - lo) in the drawn cell's box (u: round t's uniforms); the reward (plus the
  noise) is credited, running sum and count, to the drawn cell and to every cell below it holding the
  point (upper child when the coordinate is at or above the cut) down to depth min(H, max(h, h_max)).
* Regret f* - f(point) per round.  The recommendation: the centre of the depth-H cell ranked first after
  round T (PyXAB returns a random point of a cell below depth H: see the module under test).

Arithmetic in ``dtype`` (float64: PyXAB's).  The mean is the running sum over the count (PyXAB's
``np.mean`` of the reward list rounds differently: its runs agree statistically).
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from tests.support.reference import FUNCTIONS
from tests.support.reference_hct import checkpoint_rounds, noisy


@dataclass
class VroomRun:
    points: np.ndarray
    curve: np.ndarray
    final_regret: float
    recommendation: np.ndarray
    nodes: int               # the root and every cell credited at least once
    depth: int               # deepest cell credited


def _longest(lo, hi) -> int:
    widths = [float(b) - float(a) for a, b in zip(lo, hi)]
    return max(range(len(widths)), key=lambda i: (widths[i], -i))


def vroom(name: str, dim: int, T: int, words, uniforms, *, split_dims=None, split="random", h_max=100, b=1.0,
          f_max=1.0, noise="none", sigma=0.0, rng=None, checkpoints=10, dtype=np.float64) -> VroomRun:
    f, lo, hi, f_star = FUNCTIONS[name]
    real = np.dtype(dtype).type
    H = int(math.floor(math.log2(T)))
    n_slots = 2 ** (H + 1)
    boxes = {1: (np.full(dim, lo, dtype), np.full(dim, hi, dtype))}
    cut = {}
    for k in range(1, 2 ** H):
        a, z = boxes[k]
        d = 0 if dim == 1 else int(split_dims[k]) if split == "random" else _longest(a, z)
        mid = (a[d] + z[d]) / real(2)
        cut[k] = (d, mid)
        lower_hi, upper_lo = z.copy(), a.copy()
        lower_hi[d], upper_lo[d] = mid, mid
        boxes[2 * k], boxes[2 * k + 1] = (a, lower_hi), (upper_lo, z)

    delta = 4 * b / (f_max * np.sqrt(T))
    conf = real(np.log(4 * T ** 3 / delta))
    K = 0.0
    for h in range(1, H + 1):
        for l in range(1, 2 ** h + 1):
            K += 1 / (h * l)
    order = [(h, l) for h in range(1, H + 1) for l in range(1, 2 ** h + 1)]
    F = np.cumsum([1.0 / (h * l * K) for h, l in order])
    limits = [int(x * 2.0 ** 64) for x in F]
    limits[-1] = 2 ** 64 - 1

    count = np.zeros(n_slots, np.int64)
    total = np.zeros(n_slots, dtype)

    def score(k):
        if count[k] == 0:
            return -math.inf
        m = real(count[k])
        return total[k] / m - np.sqrt(conf / (real(2) * m))

    def ranked(h):
        return sorted(range(2 ** h, 2 ** (h + 1)), key=score, reverse=True)

    rounds = checkpoint_rounds(T, checkpoints)
    points, curve, regret, deepest = [], [], 0.0, 0
    for t in range(1, T + 1):
        w = (int(words[t - 1][0]) << 32) | int(words[t - 1][1])
        e = min(bisect.bisect_right(limits, w), len(order) - 1)
        h, l = order[e]
        cell = ranked(h)[l - 1]
        a, z = boxes[cell]
        x = a + np.asarray(uniforms[t - 1], dtype) * (z - a)
        value = float(f(x))
        reward = real(noisy(value, noise, sigma, rng))
        regret += f_star - value
        bottom = min(H, max(h, h_max))
        k = cell
        while True:
            count[k] += 1
            total[k] = total[k] + reward
            deepest = max(deepest, k.bit_length() - 1)
            if k.bit_length() - 1 >= bottom:
                break
            d, mid = cut[k]
            k = 2 * k + (1 if x[d] >= mid else 0)
        points.append(x)
        while len(curve) < len(rounds) and rounds[len(curve)] == t:
            curve.append(regret)
    best = ranked(H)[0]
    a, z = boxes[best]
    return VroomRun(points=np.asarray(points), curve=np.asarray(curve), final_regret=regret,
                    recommendation=(a + z) / real(2), nodes=1 + int(np.count_nonzero(count[2:])), depth=deepest)
