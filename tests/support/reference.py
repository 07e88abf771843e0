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
    # Centre pulls only (None with uniform points): f* - f(box centre), the best-so-far regret at the
    # checkpoints, and the first round it reaches each target scale x 10^e, e = 2, 1.8, .., -8 (0: never).
    target_scale: float | None = None
    best_curve: np.ndarray | None = None
    hits: np.ndarray | None = None
    gaps: np.ndarray | None = None          # every pulled node's gap, in pull order
    # (round from which it is recommended, point): the box centre until the first phase completes,
    # then the centre of the best node of each completed phase (Algorithm 2's output so far).
    recommendations: list | None = None
    simple: np.ndarray | None = None        # f* - f(recommendation) at the checkpoints (simple_curve)


def _client_means_per_pull(local, n, noise, sigma, var, rng):
    """The naive simulation: every round, every client pulls and observes one reward (centre pulls)."""
    total = np.zeros_like(local)
    for _ in range(n):
        if noise == "bernoulli":
            r = (rng.random(local.shape) < local).astype(float)
        elif noise == "uniform":
            r = local + rng.uniform(-sigma, sigma, local.shape)
        else:
            r = local.copy()
        if var > 0:
            r = r + rng.normal(0.0, math.sqrt(var), local.shape)
        total += r
    return total / n


def _client_means_exact(local, n, noise, sigma, var, rng):
    """Each client's mean of n rewards at the node centres (centre pulls): exact draws of the mean,
    or n explicit draws for uniform noise."""
    if noise == "bernoulli":
        means = rng.binomial(n, local) / n
    elif noise == "uniform":
        means = local + rng.uniform(-sigma, sigma, local.shape + (n,)).mean(axis=-1)
    else:
        means = local.copy()
    if var > 0:
        means = means + rng.normal(0.0, math.sqrt(var / n), size=local.shape)
    return means


def _pulls_uniform(prob, node, pulls, noise, sigma, dp_sigma2, rng):
    """Every pull of one node by every client at a uniform point: (client mean rewards, mean gap per round)."""
    M, D = prob.shifts.size, prob.lo.size
    x = node.lo + rng.random((M, pulls, D)) * (node.hi - node.lo)
    values = prob.f(x) + prob.shifts[:, None]
    if noise == "bernoulli":
        rewards = (rng.random(values.shape) < values).astype(float)
    elif noise == "uniform":
        rewards = values + rng.uniform(-sigma, sigma, values.shape)
    elif noise == "gaussian":
        rewards = values + rng.normal(0.0, sigma, values.shape)
    else:
        rewards = values
    if dp_sigma2 > 0:
        rewards = rewards + rng.normal(0.0, math.sqrt(dp_sigma2), values.shape)
    gaps = (prob.f_star - prob.f(x)).mean(axis=0)
    return rewards.mean(axis=1), gaps


def dp_sigma2(epsilon, delta) -> float:
    """The variance of DP-Fed-PNE's Gaussian noise per reward, sigma^2 = 2 log(1.25 / delta) / eps^2
    (Appendix D, Theorem D.1); 0 without DP (epsilon None)."""
    return 0.0 if epsilon is None else 2.0 * math.log(1.25 / delta) / epsilon ** 2


def default_c(dp_sigma2: float = 0.0) -> float:
    """The confidence constant when none is given: the experiments' c = 0.1 (Appendix E, Fed-PNE's
    hyper-parameters).  Under DP the good event's constant grows from c = 2 (Lemma 3) to
    sqrt(4 + 16 sigma^2) (Appendix D's lemma), and the default grows in the same ratio."""
    return 0.1 * math.sqrt(4.0 + 16.0 * dp_sigma2) / 2.0


def parse_noise(spec: str) -> tuple[str, float]:
    """'gaussian:0.5' -> ('gaussian', 0.5): the README's noise strings (scale 0.1 when none is given;
    Bernoulli rewards and no noise take none)."""
    kind, _, scale = spec.partition(":")
    return kind, (0.0 if kind in ("bernoulli", "none") else float(scale) if scale else 0.1)


def fedpne(prob: RefProblem, T: int, *, k=2, split="longest", nu=1.0, rho=0.5, c=None, c1=1.0, delta=None,
           noise="none", sigma=0.0, dp_sigma2=0.0, pull="centre", checkpoints=100, rng=None,
           split_dim_fn=None, per_pull=False) -> RefResult:
    """One run.  noise: none | gaussian | bernoulli | uniform (sigma is the Gaussian sd or the uniform
    half-width).  Centre pulls draw each client's mean exactly (or, with per_pull=True, simulate every
    round of every node: the slow baseline of scripts/bench.py); pull='uniform' simulates every pull.
    c and delta default to the paper's: default_c(dp_sigma2), and delta = 1/M (Theorem 1)."""
    M = prob.shifts.size
    c = default_c(dp_sigma2) if c is None else c
    delta = 1.0 / M if delta is None else delta
    L = math.log(c1 * T / delta)
    root_width = prob.hi - prob.lo
    rng = np.random.default_rng(0) if rng is None else rng

    def tau(h):
        return math.ceil(c * c * L * rho ** (-2 * h) / nu ** 2)

    if (split == "random") != (split_dim_fn is not None):
        raise ValueError("split='random' needs split_dim_fn (the run's partition); 'longest' takes none")

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
    recs = [(0, rec)]
    blocks = []        # (rounds before it, number of rounds, gap) or (rounds before it, gap of each round)
    while t < T:
        while len(K) * tau(h) <= M or tau(h) <= 1:
            K, h = expand(K), h + 1
        n = math.ceil(tau(h) / M)
        x = np.array([nd.centre for nd in K])
        var = (sigma ** 2 if noise == "gaussian" else 0.0) + dp_sigma2
        depth = h
        phase_len = len(K) * n
        client_means = np.zeros((len(K), M))
        for j in range(len(K)):
            start = t + j * n
            if start >= T:
                break
            pulls = min(n, T - start)
            if pull == "uniform":
                client_means[j], per_round = _pulls_uniform(prob, K[j], pulls, noise, sigma, dp_sigma2, rng)
                blocks.append((start, per_round))
            else:
                blocks.append((start, pulls, prob.f_star - prob.f(x[j])))
        if t + phase_len > T:                 # cut at T: no upload, no elimination
            t = T
            break
        if pull == "centre":
            sampler = _client_means_per_pull if per_pull else _client_means_exact
            client_means = sampler(prob.local(x), n, noise, sigma, var, rng)
        mu = client_means.mean(axis=1)
        b = c * math.sqrt(L / (M * n))
        best = int(np.argmax(mu))
        eliminate = mu + b + nu * rho ** h < mu[best] - b
        rec = K[best].centre
        recs.append((t + phase_len, rec))
        phases += 1
        uploads += M * len(K)
        K = expand([nd for nd, e in zip(K, eliminate) if not e])
        h += 1
        t += phase_len
    rounds = np.array([-(-(i * T) // checkpoints) for i in range(1, checkpoints + 1)])
    curve = np.zeros(checkpoints)
    final = 0.0
    for block in blocks:
        if len(block) == 3:
            start, length, gap = block
            curve += gap * np.clip(rounds - start, 0, length)
            final += gap * length
        else:
            start, per_round = block
            cum = np.concatenate([[0.0], np.cumsum(per_round)])
            curve += cum[np.clip(rounds - start, 0, per_round.size)]
            final += cum[-1]
    scale = best_curve = hits = gaps = None
    if pull == "centre":
        gaps = np.array([g for _, _, g in blocks])
        gap0 = prob.f_star - float(prob.f((prob.lo + prob.hi) / 2))
        scale = gap0 if gap0 > 0 else 1.0
        goals = scale * 10.0 ** np.linspace(2.0, -8.0, 51)
        best_curve = np.array([min((g for s, _, g in blocks if s < r), default=np.inf) for r in rounds])
        hits = np.array([min((s + 1 for s, _, g in blocks if g <= goal), default=0) for goal in goals])
    return RefResult(float(final), curve, phases, uploads, depth, np.asarray(rec), scale, best_curve, hits,
                     gaps, recs)


def simple_curve(prob: RefProblem, result: RefResult, horizon: int, checkpoints: int) -> np.ndarray:
    """f* - f(recommendation) at the checkpoints of a run (f is evaluated here, after the run, so that
    a caller counting the run's evaluations of f sees only the algorithm's)."""
    rounds = np.array([-(-(i * horizon) // checkpoints) for i in range(1, checkpoints + 1)])
    return np.array([prob.f_star - float(prob.f([p for start, p in result.recommendations if start <= r][-1]))
                     for r in rounds])
