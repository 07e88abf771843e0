"""An independent, plain NumPy, one-run-at-a-time Fed1-UCB (Shi & Shen, AAAI 2021), written from the
paper's rules as App. E of the Fed-PNE paper applies them (and the README's semantics): float64
arms in Python lists, a Python loop over phases and arms, every reward drawn pull by pull, regret
kept as (start, length, arm) blocks.  It shares no code with fedpne_jax.

The only thing a test may inject is the grid's random start offsets (part of the problem instance,
drawn by the engine from the run's key): ``offsets`` u in [0, 1)^D.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np


def grid(offsets, lo, hi, k: int) -> np.ndarray:
    """(k^D, D) arms: per dimension the random start lo + w u, then linspace(lo + w, hi, k - 1)
    (App. E: start in the first cell, then a uniform mesh); first coordinate slowest."""
    axes = []
    for u, a, b in zip(offsets, lo, hi):
        w = (b - a) / k
        axes.append([a + w * float(u)] + list(np.linspace(a + w, b, k - 1)))
    return np.array(list(itertools.product(*axes)), dtype=np.float64)


@dataclass
class Fed1UCBRun:
    final_regret: float
    curve: np.ndarray          # regret at the checkpoints
    pulled: np.ndarray         # (T,) arm index pulled in every round (all clients pull the same arm)
    phases: int                # completed phases (communication rounds)
    uploads: int               # sum over completed phases of M |active|
    arms_left: int
    eliminated: np.ndarray     # (K,) phase that eliminated each arm, 0 if none
    recommendation: np.ndarray


def rewards(noise: str, scale: float, means: np.ndarray, pulls: int, rng) -> np.ndarray:
    """(M, pulls) rewards of M clients at one arm; ``means`` (M,) their local values."""
    shape = (means.size, pulls)
    m = means[:, None]
    if noise == "gaussian":
        return m + scale * rng.standard_normal(shape)
    if noise == "uniform":
        return m + rng.uniform(-scale, scale, shape)
    if noise == "bernoulli":
        return (rng.random(shape) < m).astype(np.float64)
    return np.broadcast_to(m, shape).astype(np.float64)


def subgaussian_scale(noise: str, noise_scale: float) -> float:
    """The sub-Gaussian scale of one reward's noise: sigma for N(0, sigma^2); a / sqrt(3) for U[-a, a],
    whose variance a^2 / 3 is its best variance proxy (it is strictly sub-Gaussian); 1/2 for a
    Bernoulli reward (Hoeffding); 0 without noise."""
    return {"gaussian": noise_scale, "uniform": noise_scale / math.sqrt(3), "bernoulli": 0.5, "none": 0.0}[noise]


def fed1ucb(f, local, points, f_star: float, horizon: int, num_clients: int, kappa: float, sigma=None,
            noise: str = "none", noise_scale: float = 0.0, checkpoints: int = 100, rng=None) -> Fed1UCBRun:
    """One run.  ``f(points) -> (K,)`` global values, ``local(points) -> (K, M)`` local values;
    ``sigma`` the elimination's sub-Gaussian scale, by default subgaussian_scale of the noise."""
    rng = np.random.default_rng(0) if rng is None else rng
    sigma = subgaussian_scale(noise, noise_scale) if sigma is None else sigma
    T, M = horizon, num_clients
    K = len(points)
    pulls = max(1, math.ceil(kappa * math.log(T)))
    gaps = f_star - f(points)
    loc = local(points)
    active = list(range(K))
    sums = np.zeros((K, M))
    n = 0
    server = np.zeros(K)
    eliminated = np.zeros(K, dtype=int)
    blocks = []                # (start round (0-based), length, arm)
    t = phases = uploads = 0
    while t < T and len(active) > 1:
        if t + len(active) * pulls > T:
            # Cut at T: follow the schedule, upload and eliminate nothing.
            for k in active:
                length = min(pulls, T - t)
                if length > 0:
                    blocks.append((t, length, k))
                    t += length
            break
        for k in active:
            blocks.append((t, pulls, k))
            t += pulls
            sums[k] += rewards(noise, noise_scale, loc[k], pulls, rng).sum(axis=1)
        n += pulls
        phases += 1
        uploads += M * len(active)
        client_means = sums[active] / n                   # (|active|, M): what the clients upload
        mu = client_means.mean(axis=1)
        bound = math.sqrt(4 * sigma ** 2 * math.log(T) / (M * n))
        best = mu.max()
        server[:] = 0.0
        server[active] = mu
        survivors = [k for k, m in zip(active, mu) if not (m + bound < best - bound)]
        for k in active:
            if k not in survivors:
                eliminated[k] = phases
        active = survivors
    if t < T:
        blocks.append((t, T - t, active[0]))               # commitment
    pulled = np.empty(T, dtype=int)
    for start, length, k in blocks:
        pulled[start:start + length] = k
    per_round = gaps[pulled]
    cum = np.cumsum(per_round)
    c = np.arange(1, checkpoints + 1, dtype=np.int64)
    rounds = (c * T + checkpoints - 1) // checkpoints
    if phases:
        rec = max(active, key=lambda k: (server[k], -k))
    else:
        rec = 0
    return Fed1UCBRun(final_regret=float(cum[-1]), curve=cum[rounds - 1], pulled=pulled, phases=phases,
                      uploads=uploads, arms_left=len(active), eliminated=eliminated, recommendation=points[rec])
