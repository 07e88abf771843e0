"""Distances and kernels over a GP baseline's candidates.

Kernels act on the candidates rescaled to the unit box [0, 1]^D; the signal variance k(x, x) = 1.
The kernels (``kernel``, length-scale l, r = ||u - u'|| in unit-box coordinates):
'exponential' exp(-r / l) (the public KernelTS code's exp(-||x - y||), l = 1); 'rbf'
exp(-r^2 / (2 l^2)); 'matern52' (1 + sqrt5 r/l + 5 r^2 / (3 l^2)) exp(-sqrt5 r / l) (GPyOpt's default).

On a mesh of candidates (``grid`` or ``shifted``) the distances come from exact integers
(:func:`squared_distances`), so every run of a mesh has the same kernel matrix, bit for bit.
"""
from __future__ import annotations

import jax.numpy as jnp

from objectives.ordered import pairwise_sum


def mesh_indices(static):
    """(K, D) int32 mesh coordinates of the candidates, row-major (the last coordinate fastest)."""
    K, D, n = static.num_candidates, static.dim, static.per_dim
    idx = jnp.arange(K, dtype=jnp.int32)
    return jnp.stack([(idx // n ** (D - 1 - d)) % n for d in range(D)], axis=-1)


def squared_distances(static, unit):
    """||u_i - u_j||^2 between the candidates (unit box), (K, K).

    On a mesh (grid or shifted) the offset cancels: the distance is sqrt(sum_d (i_d - j_d)^2) / n,
    computed from exact integers, so every run of a mesh has the same kernel matrix.  (Computed
    from the float coordinates, XLA's CPU backend fused (i + offset) / n into u_i - u_j as an FMA
    for one seed but not for a batch, so a seed's kernel matrix differed in its last bits.)
    """
    if static.candidates == "random":
        diff = unit[:, None, :] - unit[None, :, :]
        return pairwise_sum(diff * diff)
    idx = mesh_indices(static)
    steps = idx[:, None, :] - idx[None, :, :]
    return pairwise_sum(steps * steps).astype(jnp.float32) * jnp.float32(1.0 / static.per_dim ** 2)


def kernel(kind: str, r2, lengthscale):
    """k as a function of the squared distance r2 (unit box); k(x, x) = 1."""
    r2 = r2 * (1.0 / (lengthscale * lengthscale))
    if kind == "rbf":
        return jnp.exp(-0.5 * r2)
    r = jnp.sqrt(r2)
    if kind == "exponential":
        return jnp.exp(-r)
    s = jnp.sqrt(jnp.float32(5.0)) * r
    return (1.0 + s + s * s * jnp.float32(1.0 / 3.0)) * jnp.exp(-s)


def kernel_matrix(kind: str, a, b, lengthscale):
    """k(a_i, b_j) for unit-box points a (P, D), b (Q, D)."""
    diff = a[:, None, :] - b[None, :, :]
    return kernel(kind, pairwise_sum(diff * diff), lengthscale)
