"""An independent, plain NumPy, one-run-at-a-time Fed-PNE, written from the paper (Algorithms 1-2,
Appendix D) and the semantics stated in the README.  It is the correctness oracle of the JAX engine
and shares no code with it: nodes are explicit float64 boxes in Python lists, phases are a Python
loop, regret is kept as a list of (start, length, gap) blocks.

The only thing a test may inject is the partition's random split dimension (``split_dim_fn``), which
is part of the problem instance rather than of the algorithm.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


# ---------------------------------------------------------------- objectives (NumPy, float64)

def garland(x):
    x = x[..., 0]
    return x * (1 - x) * (4 - np.sqrt(np.abs(np.sin(60 * x))))


def double_sine(x):
    ep1, ep2 = -math.log2(0.3), -math.log2(0.8)
    u = 2 * np.abs(x[..., 0] - 0.5)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = (np.sin(np.log2(u) / 2 * 2 * np.pi) + 1) / 2
        v = s * (u ** ep2 - u ** ep1) - u ** ep2
    return np.where(u == 0, 0.0, v)


def himmelblau(x):
    return -((x[..., 0] ** 2 + x[..., 1] - 11) ** 2 + (x[..., 0] + x[..., 1] ** 2 - 7) ** 2) / 890


def ackley(x):
    return (20 * np.exp(-0.2 * np.sqrt(np.mean(x ** 2, axis=-1)))
            + np.exp(np.mean(np.cos(2 * np.pi * x), axis=-1)) - math.e - 20)


def rastrigin(x):
    return -(10 * x.shape[-1] + np.sum(x ** 2 - 10 * np.cos(2 * np.pi * x), axis=-1))


FUNCTIONS = {
    "garland": (garland, 0.0, 1.0, 4 * (math.pi / 6) * (1 - math.pi / 6)),
    "doublesine": (double_sine, 0.0, 1.0, 0.0),
    "himmelblau": (himmelblau, -5.0, 5.0, 0.0),
    "ackley": (ackley, -1.0, 1.0, 0.0),
    "rastrigin": (rastrigin, -1.0, 1.0, 0.0),
}


@dataclass
class RefProblem:
    f: object                    # global objective, (..., D) -> (...)
    lo: np.ndarray
    hi: np.ndarray
    f_star: float
    shifts: np.ndarray           # (M,) client shifts: f_m = f + shifts[m]

    def local(self, x):
        return self.f(x)[..., None] + self.shifts


def problem(name: str, num_clients: int, dim: int = 1, shifts=None) -> RefProblem:
    f, lo, hi, f_star = FUNCTIONS[name]
    s = np.zeros(num_clients) if shifts is None else np.asarray(shifts, np.float64)
    return RefProblem(f, np.full(dim, lo), np.full(dim, hi), f_star, s)


# ---------------------------------------------------------------- Fed-PNE

@dataclass
class Node:
    lo: np.ndarray
    hi: np.ndarray
    levels: np.ndarray
    path: tuple = field(default=())

    @property
    def centre(self):
        return (self.lo + self.hi) / 2


def children(node: Node, k: int, d: int) -> list[Node]:
    out = []
    step = (node.hi[d] - node.lo[d]) / k
    for j in range(k):
        lo, hi = node.lo.copy(), node.hi.copy()
        lo[d] = node.lo[d] + j * step
        hi[d] = node.hi[d] if j == k - 1 else node.lo[d] + (j + 1) * step
        levels = node.levels.copy()
        levels[d] += 1
        out.append(Node(lo, hi, levels, node.path + (j,)))
    return out


@dataclass
class RefResult:
    final_regret: float
    curve: np.ndarray
    phases: int
    uploads: int
    depth: int
    recommendation: np.ndarray


def fedpne(prob: RefProblem, T: int, *, k=2, split="longest", nu=1.0, rho=0.5, c=0.1, c1=1.0, delta=None,
           noise="none", sigma=0.0, dp_sigma2=0.0, checkpoints=100, rng=None, split_dim_fn=None) -> RefResult:
    M = prob.shifts.size
    delta = 1.0 / M if delta is None else delta
    L = math.log(c1 * T / delta)
    root_width = prob.hi - prob.lo
    rng = np.random.default_rng(0) if rng is None else rng

    def tau(h):
        return math.ceil(c * c * L * rho ** (-2 * h) / nu ** 2)

    def split_dim(node):
        if split_dim_fn is not None:
            return int(split_dim_fn(node.path))
        sides = root_width * float(k) ** (-node.levels.astype(np.float64))
        return int(np.argmax(sides))          # first maximum: lowest index on ties

    def expand(nodes):
        return [ch for nd in nodes for ch in children(nd, k, split_dim(nd))]

    K = [Node(prob.lo.astype(np.float64), prob.hi.astype(np.float64), np.zeros(prob.lo.size, int))]
    h, t, phases, uploads, depth = 0, 0, 0, 0, 0
    rec = K[0].centre
    blocks = []                               # (first round - 1, number of rounds, gap per round)
    while t < T:
        while len(K) * tau(h) <= M or tau(h) <= 1:
            K, h = expand(K), h + 1
        n = math.ceil(tau(h) / M)
        x = np.array([nd.centre for nd in K])
        gaps = prob.f_star - prob.f(x)
        for j in range(len(K)):
            start = t + j * n
            if start < T:
                blocks.append((start, min(n, T - start), gaps[j]))
        depth = h
        phase_len = len(K) * n
        if t + phase_len > T:                # cut at T: no upload, no elimination
            t = T
            break
        local = prob.local(x)                 # (|K|, M)
        if noise == "gaussian" or dp_sigma2 > 0:
            var = (sigma ** 2 if noise == "gaussian" else 0.0) + dp_sigma2
        else:
            var = 0.0
        if noise == "bernoulli":
            client_means = rng.binomial(n, local) / n
        else:
            client_means = local.copy()
        if var > 0:
            client_means = client_means + rng.normal(0.0, math.sqrt(var / n), size=local.shape)
        mu = client_means.mean(axis=1)
        b = c * math.sqrt(L / (M * n))
        best = int(np.argmax(mu))
        eliminate = mu + b + nu * rho ** h < mu[best] - b
        rec = K[best].centre
        phases += 1
        uploads += M * len(K)
        K = expand([nd for nd, e in zip(K, eliminate) if not e])
        h += 1
        t += phase_len
    rounds = np.array([-(-(i * T) // checkpoints) for i in range(1, checkpoints + 1)])
    curve = np.zeros(checkpoints)
    for start, length, gap in blocks:
        curve += gap * np.clip(rounds - start, 0, length)
    final = sum(gap * length for _, length, gap in blocks)
    return RefResult(float(final), curve, phases, uploads, depth, np.asarray(rec))
