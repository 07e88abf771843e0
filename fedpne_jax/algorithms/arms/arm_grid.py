"""The finite arm set of the multi-armed baselines (Fed1-UCB, FN-UCB): a grid with a random start.

Paper, App. E (Fed1-UCB, reused for FN-UCB), read literally: per dimension, arm 0 is drawn in the
first of K cells (:func:`start_offsets`) and arms 1..K-1 are ``numpy.linspace(lo + w, hi, K - 1)``
(:func:`axis_points`); in D dimensions the K^D arms are the Cartesian product.  ``arms`` is K per
dimension (default: the largest K with K^D <= 100).  :func:`run_arms` evaluates every arm once per
run.  The full reading, the order of the arms and the alternative reading:
docs/algorithms/arms.md, section "The grid of arms".
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.core import blocks
from fedpne_jax.core.noise import reward, value_flags
from fedpne_jax.core.validation import check_int
from objectives.ordered import no_contraction, pairwise_mean

DEFAULT_TOTAL = 100       # default arm count: the largest K^D not above this
MAX_ARMS = 2**16          # K^D above this would make the per-run tables (K x M floats) unreasonably big
ARMS_STREAM = 0x41524D    # fold_in tag of the key that draws the start offsets


def default_per_dim(dim: int) -> int:
    """The largest K >= 2 with K^dim <= DEFAULT_TOTAL (2 when even 2^dim exceeds it)."""
    k = 2
    while (k + 1) ** dim <= DEFAULT_TOTAL:
        k += 1
    return k


def check_field(arms) -> None:
    """Validate the ``arms`` config field (K per dimension, or None for the default)."""
    if arms is None:
        return
    check_int("arms (grid points per dimension, or None)", arms, 1, MAX_ARMS)


def check_noise_scale(scale: float, noise: str) -> None:
    """The noise scale's square must be a float32 (as FedPNEConfig requires)."""
    if scale > 1e18:
        raise ValueError(f"noise scale must be <= 1e18 (its square must be a float32), got {noise!r}")


def per_dim(arms, dim: int) -> int:
    return default_per_dim(dim) if arms is None else int(arms)


def check_total(arms, dim: int) -> int:
    """K^D for this objective's dimension; ValueError naming ``arms`` if it exceeds MAX_ARMS."""
    k = per_dim(arms, dim)
    total = k ** dim
    if total > MAX_ARMS:
        raise ValueError(f"arms: {k} grid points per dimension in D={dim} make {total} arms, more than "
                         f"{MAX_ARMS}; choose fewer points per dimension")
    return total


def start_offsets(key, dim: int):
    """The run's start offsets u in [0, 1)^D (float32): arm 0 of dimension d is lo_d + w_d u_d.

    ``key`` is the run's key (``fedpne_jax.core.executor.seed_key(base_seed, seed)``); tests hand these
    offsets to the NumPy references so that both build the same grid."""
    return jax.random.uniform(jax.random.fold_in(key, ARMS_STREAM), (dim,), jnp.float32)


def axis_points(u, lo: float, hi: float, k: int):
    """The k points of one dimension (float32): the random start, then linspace(lo + w, hi, k - 1)."""
    w = (hi - lo) / k
    # The mesh does not depend on the run, so it is computed on the host: traced, XLA may fold it at
    # compile time in one program and fuse it into an FMA at run time in another (seen: 1 ulp apart
    # between a seed alone and in a batch).
    mesh = np.concatenate([[lo], np.linspace(lo + w, hi, k - 1)]).astype(np.float32)
    return jnp.asarray(mesh).at[0].set(jnp.float32(lo) + jnp.float32(w) * u)


def grid(u, lo, hi, k: int):
    """(k^D, D) arms, first coordinate slowest, from the start offsets u (D,)."""
    dim = len(lo)
    idx = jnp.arange(k ** dim, dtype=jnp.int32)
    cols = []
    for d in range(dim):          # D is static and small: one gather per coordinate
        digit = (idx // (k ** (dim - 1 - d))) % k
        cols.append(axis_points(u[d], lo[d], hi[d], k)[digit])
    return jnp.stack(cols, axis=-1)


def unit(points, lo, hi):
    """Arms rescaled to [0, 1]^D (FN-UCB's network input)."""
    lo_, hi_ = jnp.asarray(lo, jnp.float32), jnp.asarray(hi, jnp.float32)
    return (points - lo_) / (hi_ - lo_)


def arms(key, lo, hi, k: int):
    """(K, D) the run's arms: they depend on its key and the box only, so an ask/tell run that has no
    objective builds the same ones."""
    return grid(start_offsets(key, len(lo)), lo, hi, k)


def every_value(objective, points):
    """(global values (K,), local values (K, M)) at every arm, the tables ``fp.run``'s rules read
    (see :func:`no_contraction`)."""
    g, local = blocks.every_point(objective, objective.values_and_locals, points)
    return no_contraction(g), no_contraction(local)


def run_arms(key, objective, k: int):
    """(arms (K, D), global values (K,), local values (K, M)) of one run (see :func:`no_contraction`)."""
    points = arms(key, objective.lo, objective.hi, k)
    return (points,) + every_value(objective, points)


def booked(objective, points, told):
    """The values an ask/tell run books at arms ``points`` (B, D) whose clients told means ``told``
    (M, B): the objective's noise-free global values when it has an Objective (``fp.run`` books
    those), else the clients' average of the told means (the global objective is their average)."""
    if objective is None:
        return pairwise_mean(told.T)
    return no_contraction(jax.vmap(objective.global_value)(points).astype(told.dtype))


def flags(noise_kind: str, global_values, local_values, pulled, f_star: float | None = None):
    """FLAG_NONFINITE / FLAG_RANGE from the values of the arms that were pulled (``pulled`` (K,)),
    and FLAG_ABOVE_F_STAR from their global values when ``f_star`` is given (every run passes it)."""
    return (value_flags(noise_kind, local_values, pulled[:, None])
            | value_flags(noise_kind, global_values, pulled, rewards=False, f_star=f_star))


def observe_flat(key, kind: str, scale, values):
    """One noisy reward per entry of ``values``: ``noise.reward``'s model (what ``noise.observe``
    draws: gaussian N(0, scale^2), uniform U[-scale, scale], Bernoulli(value), or none), from one
    flat draw of only the uniforms the kind uses.

    ``noise.observe`` draws two uniforms per value, shaped (2,) + values.shape: XLA compiles the
    random bits of a 3-D shape about ten times slower than those of a flat one (seconds per program),
    and half of the numbers go unused whatever the kind (random bits dominate a Fed1-UCB phase)."""
    if kind == "none":
        return values
    u = jax.random.uniform(key, (values.size,), values.dtype).reshape(values.shape)
    if kind == "gaussian":
        return reward(kind, scale, scale ** 2, values, None, u)
    return reward(kind, scale, None, values, u, None)
