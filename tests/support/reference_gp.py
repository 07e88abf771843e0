"""Plain NumPy references of the GP baselines (KernelTS, GP-UCB, BO, BBO), written from the papers'
formulas and sharing no code with fedpne_jax.algorithms: float64, one run at a time, and the
posterior recomputed from the whole history with a fresh matrix inverse every round (O(t^3)),

    mu_t(x) = k_t(x)^T (K_t + lam I)^{-1} y_t,   sigma_t^2(x) = k(x, x) - k_t(x)^T (K_t + lam I)^{-1} k_t(x).

The information gain is computed as (1/2) ln det(I + K_t / lam) (not as a running sum).

A test hands in what belongs to the problem instance or to the run's random stream: the candidates
(unit-box coordinates and objective values), and, for KernelTS and BO, the run's standard-normal
draws and initial random indices (functions of the round).  They are rebuilt here from the run's
stream as fedpne_jax.algorithms.gp.gp states it (Threefry-2x32 in counter mode, Salmon et al. 2011, the
block cipher jax.random uses), so a test needs no compiled JAX program for them.  Observation noise,
when asked for, is Gaussian and drawn here with NumPy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def kernel(kind: str, a, b, lengthscale: float):
    """k(a_i, b_j) for points (P, D), (Q, D) in unit-box coordinates; k(x, x) = 1."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    r2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1) / lengthscale ** 2
    r = np.sqrt(r2)
    if kind == "exponential":
        return np.exp(-r)
    if kind == "rbf":
        return np.exp(-0.5 * r2)
    if kind == "matern52":
        return (1 + math.sqrt(5) * r + 5 * r2 / 3) * np.exp(-math.sqrt(5) * r)
    raise ValueError(kind)


def posterior(kind, lengthscale, lam, cand, X, y):
    """(mean, variance) on the candidates given observations at points X with values y."""
    cand = np.asarray(cand, np.float64)
    if len(X) == 0:
        return np.zeros(len(cand)), np.ones(len(cand))
    X = np.asarray(X, np.float64)
    inv = np.linalg.inv(kernel(kind, X, X, lengthscale) + lam * np.eye(len(X)))
    k = kernel(kind, cand, X, lengthscale)
    mean = k @ (inv @ np.asarray(y, np.float64))
    var = 1.0 - ((k @ inv) * k).sum(axis=1)
    return mean, var


def information_gain(kind, lengthscale, lam, X) -> float:
    if len(X) == 0:
        return 0.0
    X = np.asarray(X, np.float64)
    sign, logdet = np.linalg.slogdet(np.eye(len(X)) + kernel(kind, X, X, lengthscale) / lam)
    return 0.5 * logdet


# ---------------------------------------------------------------- the run's random stream

_MASK = 0xFFFFFFFF
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def threefry2x32(key, x0, x1):
    """Threefry-2x32 (20 rounds) of the blocks (x0[i], x1[i]) under key = (k0, k1)."""
    k = [np.uint64(key[0]), np.uint64(key[1])]
    k.append(k[0] ^ k[1] ^ np.uint64(0x1BD11BDA))
    x = [np.asarray(x0, np.uint64) & _MASK, np.asarray(x1, np.uint64) & _MASK]
    x = [(x[0] + k[0]) & _MASK, (x[1] + k[1]) & _MASK]
    for block in range(5):
        for r in _ROTATIONS[block % 2]:
            x[0] = (x[0] + x[1]) & _MASK
            x[1] = (((x[1] << np.uint64(r)) | (x[1] >> np.uint64(32 - r))) & _MASK) ^ x[0]
        x = [(x[0] + k[(block + 1) % 3]) & _MASK, (x[1] + k[(block + 2) % 3] + np.uint64(block + 1)) & _MASK]
    return x[0].astype(np.uint32), x[1].astype(np.uint32)


def seed_key(base_seed: int, seed: int):
    """The key of seed index ``seed``: fold_in(key(base_seed), seed) = threefry((0, base), (0, seed))."""
    y0, y1 = threefry2x32((0, base_seed), [0], [seed])
    return int(y0[0]), int(y1[0])


def words(key, t: int, n: int):
    """The n words of round t: the two outputs of blocks (t, 0..ceil(n/2)-1), concatenated."""
    half = (n + 1) // 2
    y0, y1 = threefry2x32(key, np.full(half, t), np.arange(half))
    return np.concatenate([y0, y1])[:n]


def unit_floats(w):
    """Uniform [0, 1) float32 from words: the top 23 bits as a mantissa of [1, 2), minus 1."""
    return ((np.asarray(w, np.uint32) >> 9) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1.0)


def unit_candidates(kind: str, K: int, dim: int, per_dim: int, key):
    """(K, D) float32 candidates in [0, 1)^D: 'random' uniform; 'grid' / 'shifted' the row-major
    mesh (i + offset) / n with offset 1/2 or uniform per dimension."""
    if kind == "random":
        return unit_floats(words(key, 0, K * dim)).reshape(K, dim)
    offset = np.full(dim, 0.5, np.float32) if kind == "grid" else unit_floats(words(key, 0, dim))
    idx = np.stack(np.unravel_index(np.arange(K), (per_dim,) * dim), axis=-1).astype(np.float32)
    return (idx + offset) * np.float32(1.0 / per_dim)


def standard_normal(u):
    """Phi^{-1}(u) in float64 (Acklam's rational approximation, refined by one Halley step)."""
    u = np.asarray(u, np.float64)
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
         -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
         -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
         4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
    p = np.clip(u, 1e-300, 1 - 1e-16)
    q = np.sqrt(-2 * np.log(np.minimum(p, 1 - p)))
    tail = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    r = (p - 0.5) ** 2
    centre = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * (p - 0.5) / \
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    x = np.where(p < 0.02425, tail, np.where(p > 1 - 0.02425, -tail, centre))
    e = 0.5 * np.array([math.erfc(-v / math.sqrt(2)) for v in x]) - p
    step = e * math.sqrt(2 * math.pi) * np.exp(x * x / 2)
    return x - step / (1 + x * step / 2)


@dataclass
class Run:
    chosen: np.ndarray           # (T,) candidate indices, or (T, M) for BBO
    regret: np.ndarray           # (T,) cumulative regret after each round (per-client average for BBO)


def _noise(rng, sd):
    return 0.0 if rng is None or sd == 0 else sd * rng.standard_normal()


def default_lam(observations: int) -> float:
    """IGP-UCB's regulariser lam = 1 + eta with eta = 2 / T (Chowdhury & Gopalan 2017, Theorem 3), T the
    number of observations of the whole run."""
    return 1 + 2 / observations


def gpucb(cand, f, f_star, T, *, kernel_kind="exponential", lengthscale=1.0, lam=None, B=1.0, R=None,
          delta=0.1, noise_sd=0.0, rng=None) -> Run:
    """IGP-UCB (Chowdhury & Gopalan 2017, Alg. 1) on candidates ``cand`` with values ``f``:
    x_t = argmax mu_{t-1} + beta_t sigma_{t-1}, beta_t = B + R sqrt(2 (gamma_{t-1} + 1 + ln(1/delta))),
    lam = default_lam(T) unless given, R the Gaussian noise's sd (its sub-Gaussian scale) unless given."""
    lam = default_lam(T) if lam is None else lam
    R = noise_sd if R is None else R
    X, y, chosen, regret, total = [], [], [], [], 0.0
    for _ in range(T):
        mean, var = posterior(kernel_kind, lengthscale, lam, cand, X, y)
        gamma = information_gain(kernel_kind, lengthscale, lam, X)
        beta = B + R * math.sqrt(2 * (gamma + 1 + math.log(1 / delta)))
        j = int(np.argmax(mean + beta * np.sqrt(np.maximum(var, 0))))
        X.append(cand[j])
        y.append(f[j] + _noise(rng, noise_sd))
        total += f_star - f[j]
        chosen.append(j)
        regret.append(total)
    return Run(np.array(chosen), np.array(regret))


def kernelts(cand, f, f_star, T, normals, *, kernel_kind="exponential", lengthscale=1.0, lam=1.0, nu=1.0,
             noise_sd=0.0, rng=None) -> Run:
    """GP-TS as in the public KernelTS code: r(x) = mu(x) + nu sigma(x) z_t(x) with independent
    standard normals z_t = normals(t), t = 1..T; pull argmax r."""
    X, y, chosen, regret, total = [], [], [], [], 0.0
    for t in range(1, T + 1):
        mean, var = posterior(kernel_kind, lengthscale, lam, cand, X, y)
        j = int(np.argmax(mean + nu * np.sqrt(np.maximum(var, 0)) * np.asarray(normals(t), np.float64)))
        X.append(cand[j])
        y.append(f[j] + _noise(rng, noise_sd))
        total += f_star - f[j]
        chosen.append(j)
        regret.append(total)
    return Run(np.array(chosen), np.array(regret))


def _normal_cdf(u):
    return np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in u])


def expected_improvement(mean, sd, best, xi):
    """EI for maximisation: sd (u Phi(u) + phi(u)), u = (mean - best - xi) / sd."""
    u = (mean - best - xi) / sd
    return sd * (u * _normal_cdf(u) + np.exp(-0.5 * u * u) / math.sqrt(2 * math.pi))


def bo(cand, f, f_star, T, initial_index, *, kernel_kind="matern52", lengthscale=0.2, noise_var=0.01,
       xi=0.01, initial=5, noise_sd=0.0, rng=None) -> Run:
    """GPyOpt-style BO: ``initial`` random candidates (initial_index(t)), then argmax EI of a GP fitted
    to the standardised observations (z = (y - mean) / std, std with ddof 0, taken as 1 if 0); the
    incumbent is the best posterior mean at an observed point; EI's sd is clipped at sqrt(1e-10)."""
    X, y, chosen, regret, total = [], [], [], [], 0.0
    for t in range(1, T + 1):
        if t <= initial:
            j = int(initial_index(t))
        else:
            ya = np.asarray(y)
            sd = ya.std()
            z = (ya - ya.mean()) / (sd if sd > 0 else 1.0)
            mean, var = posterior(kernel_kind, lengthscale, noise_var, cand, X, z)
            seen = sorted(set(chosen))
            best = mean[seen].max()
            j = int(np.argmax(expected_improvement(mean, np.sqrt(np.maximum(var, 1e-10)), best, xi)))
        X.append(cand[j])
        y.append(f[j] + _noise(rng, noise_sd))
        total += f_star - f[j]
        chosen.append(j)
        regret.append(total)
    return Run(np.array(chosen), np.array(regret))


def bbo(cand, f_global, f_local, f_star, T, *, kernel_kind="exponential", lengthscale=1.0, lam=None, B=1.0,
        R=None, delta=0.1, noise_sd=0.0, rng=None) -> Run:
    """GP-BUCB (Desautels et al. 2014) with IGP-UCB's beta: pick m of round t maximises
    mu_fb + beta sigma, mu_fb from the observations of rounds < t, sigma and gamma from those points
    plus the picks 1..m-1 of round t (hallucinated); client m observes f_local[:, m].
    Regret: per-client average of f* - f_global."""
    M = f_local.shape[1]
    lam = default_lam(T * M) if lam is None else lam
    R = noise_sd if R is None else R
    X, y, chosen, regret, total = [], [], [], [], 0.0
    for _ in range(T):
        mean_fb, _ = posterior(kernel_kind, lengthscale, lam, cand, X, y)
        picks = []
        for _m in range(M):
            H = X + [cand[j] for j in picks]
            _, var = posterior(kernel_kind, lengthscale, lam, cand, H, np.zeros(len(H)))
            gamma = information_gain(kernel_kind, lengthscale, lam, H)
            beta = B + R * math.sqrt(2 * (gamma + 1 + math.log(1 / delta)))
            picks.append(int(np.argmax(mean_fb + beta * np.sqrt(np.maximum(var, 0)))))
        for m, j in enumerate(picks):
            X.append(cand[j])
            y.append(f_local[j, m] + _noise(rng, noise_sd))
        total += float(np.mean([f_star - f_global[j] for j in picks]))
        chosen.append(picks)
        regret.append(total)
    return Run(np.array(chosen), np.array(regret))
