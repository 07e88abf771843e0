"""COVID-19 vaccine dosage: an SEIR model with vaccination (the paper's Section 5 / Appendix E.2).

The paper's system (from the coronaSEIR model, github.com/cfculhane/coronaSEIR, with vaccination
added), integrated in fractions of N by fixed-step RK4 (``DT``, ``DAYS``, ``INITIAL_INFECTED``) for
each region (``REGIONS``, one per client); dosage x in [0, 1]; the local reward is 1 minus the share
of people ever infected, the global objective the mean over regions.

The equations, the vaccination rate and its taper (``TAPER``), the effectiveness (``ALPHA_FULL``),
the regions and why the model has no exp and no run-time division: docs/guides/paper-figures.md, section "The objectives in detail", "COVID-19 vaccine dosage".
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from objectives.objective import averages
from objectives.ordered import pairwise_sum

BETA, SIGMA, GAMMA = 0.4, 0.5, 1.0 / 13.0
ALPHA_FULL = 0.9
DAYS, DT, TAPER = 200.0, 0.5, 4.0
STEPS = int(DAYS / DT)
INITIAL_INFECTED = 1000.0
LO, HI = (0.0,), (1.0,)

# name, population (millions), contact multiplier c_r, daily supply v_r (full doses / N / day),
# best local dosage (dense search, float64, documented only).
REGIONS = (
    ("Australia", 23.70, 0.55, 0.010, 0.9379),
    ("Canada", 35.54, 0.65, 0.012, 0.9601),
    ("Spain", 46.51, 0.75, 0.008, 0.8861),
    ("Italy", 60.77, 0.80, 0.014, 0.9784),
    ("United Kingdom", 64.11, 0.70, 0.015, 0.9731),
    ("France", 66.08, 0.95, 0.011, 0.9023),
    ("Germany", 80.78, 0.60, 0.006, 0.8852),
    ("Japan", 127.08, 0.50, 0.004, 0.8660),
)
NUM_REGIONS = len(REGIONS)

# f* is a dense-search maximum of the float64 objective plus this margin, which bounds the float32
# rounding of the integration (measured below 2e-6) and the grid's miss (below 1e-9 after the
# refinement), so f* - f(x) >= 0 in float32 too.
F_STAR_MARGIN = 1e-5


def choose_regions(num_clients: int, key) -> np.ndarray:
    """All regions in the listed order for M = 8, else M distinct regions drawn from the objective's key."""
    if num_clients == NUM_REGIONS:
        return np.arange(NUM_REGIONS)
    return np.sort(np.asarray(jax.random.permutation(key, NUM_REGIONS))[:num_clients])


def make_data(regions) -> dict:
    regions = np.asarray(regions)
    table = np.asarray([r[1:4] for r in REGIONS], np.float64)[regions]
    return dict(beta=jnp.asarray(BETA * table[:, 1], jnp.float32),
                supply=jnp.asarray(table[:, 2], jnp.float32),
                inv_supply=jnp.asarray(1.0 / table[:, 2], jnp.float32),
                i0=jnp.asarray(INITIAL_INFECTED / (table[:, 0] * 1e6), jnp.float32),
                region=jnp.asarray(regions, jnp.int32))


def _rounded(v):
    """Materialise v: XLA cannot fuse the multiplications that made it into a following addition.

    XLA on CPU contracts some multiply-adds into FMAs, and differently in the scalar code of a
    one-point batch than in vector code; rounding every product and every increment keeps the bits
    of a value the same alone and in any batch."""
    return jax.lax.optimization_barrier(v)


def _reciprocal(z):
    """1 / z for z in [1/2, 1] by Newton's iteration from the minimax line 48/17 - 32/17 z (error
    below 1e-9 after three steps), with rounded steps: XLA may divide differently in scalar and in
    vector code, so the model never divides at run time."""
    r = 48.0 / 17.0 - _rounded(32.0 / 17.0 * z)
    for _ in range(3):
        r = _rounded(r * (2.0 - _rounded(z * r)))
    return r


def effectiveness(x):
    return jnp.where(x > 0.5, ALPHA_FULL * (1.0 - _rounded(4.0 * (1.0 - x) ** 2)), 0.0)


def taper(t, t_end):
    """1 before t_end - TAPER/2, 0 after t_end + TAPER/2, smootherstep in between (symmetric about
    t_end, so the campaign still gives one dose per person)."""
    u = jnp.clip(_rounded((t_end - t) * (1.0 / TAPER)) + 0.5, 0.0, 1.0)
    inner = _rounded(u * (_rounded(6.0 * u) - 15.0)) + 10.0
    return u * u * u * inner


def reward(x, beta, supply, inv_supply, i0):
    """1 - share of the population ever infected by day 200, at dosage x (a scalar)."""
    dt = jnp.result_type(x)
    beta, supply, inv_supply, i0 = (jnp.asarray(v, dt) for v in (beta, supply, inv_supply, i0))
    xe = jnp.maximum(x, 0.5)            # below 1/2 alpha = 0, so the campaign's length is irrelevant
    t_end = xe * inv_supply
    rate = effectiveness(x) * supply * _reciprocal(xe)     # alpha V / N while the campaign runs

    def rhs(t, y):
        s, e, i = y[0], y[1], y[2]
        # flows: infection, vaccination, onset, recovery; then only sums of rounded flows
        new, vac, onset, rec = _rounded(jnp.stack([beta * s * i, rate * taper(t, t_end) * s, SIGMA * e,
                                                   GAMMA * i]))
        return jnp.stack([-new - vac, new - onset, onset - rec, new])

    def step(y, k):
        t = k.astype(dt) * DT
        k1 = rhs(t, y)
        k2 = rhs(t + DT / 2, y + _rounded(DT / 2 * k1))
        k3 = rhs(t + DT / 2, y + _rounded(DT / 2 * k2))
        k4 = rhs(t + DT, y + _rounded(DT * k3))
        return y + _rounded(DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)), None

    # R is not needed: S + E + I + R = 1 and the reward reads the cumulative infections j.
    y0 = jnp.stack([1.0 - i0, jnp.zeros((), dt), i0, i0])
    y, _ = jax.lax.scan(step, y0, jnp.arange(STEPS))
    return 1.0 - y[3]


def local(data, x, m):
    return reward(x[0], data["beta"][m], data["supply"][m], data["inv_supply"][m], data["i0"][m])


def mean_of_clients(data, values):
    """The global value from the M regions' values (fixed-order mean)."""
    return pairwise_sum(_rounded(values)) * (1.0 / values.shape[-1])


@averages(local, combine=mean_of_clients)
def global_(data, x):
    M = data["beta"].shape[0]
    return mean_of_clients(data, jax.vmap(lambda m: local(data, x, m))(jnp.arange(M, dtype=jnp.int32)))


def dense_f_star(regions) -> float:
    """max of the global objective (float64) over a dense grid of [1/2, 1] refined twice, plus the margin.

    Below x = 1/2 the objective is constant (no vaccine effect) and below its values on (1/2, 1]."""
    return _dense_f_star(tuple(int(r) for r in regions))


@functools.lru_cache(maxsize=64)
def _dense_f_star(regions: tuple) -> float:
    with jax.enable_x64(True):
        d = make_data(regions)
        fn = jax.jit(jax.vmap(lambda x: global_(d, x[None])))
        lo, hi, best = 0.5, 1.0, -np.inf
        for _ in range(3):
            xs = np.linspace(lo, hi, 1001)
            vals = np.asarray(fn(jnp.asarray(xs, jnp.float64)))
            k = int(np.argmax(vals))
            best = float(vals[k])
            width = (hi - lo) / 1000
            lo, hi = max(0.5, xs[k] - width), min(1.0, xs[k] + width)
        return best + F_STAR_MARGIN
