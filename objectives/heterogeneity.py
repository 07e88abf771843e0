"""Client heterogeneity: how the M local objectives differ from the global one.

``none``: every client sees f.  ``shift`` (the paper's experiments, App. E): client m sees
f + s_m with s_m ~ N(0, 1) drawn from the objective's key and centred, so sum_m s_m = 0 (up to the
float32 rounding of the shifts) and the global objective (1/M) sum_m f_m is the original function,
which the engine evaluates directly; only the local optima's values move.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp

HETEROGENEITIES = ("none", "shift")


# Frozen dataclasses rather than closures: they compare equal when they wrap the same function, so
# two objectives built alike share one compiled program instead of recompiling.
@dataclasses.dataclass(frozen=True)
class GlobalOnly:
    f: Callable

    def __call__(self, data, x):
        return self.f(x)


@dataclasses.dataclass(frozen=True)
class SameForAll:
    f: Callable

    def __call__(self, data, x, m):
        return self.f(x)


@dataclasses.dataclass(frozen=True)
class Shifted:
    f: Callable

    def __call__(self, data, x, m):
        return self.f(x) + data["shift"][m]


def client_shifts(key, num_clients: int) -> jax.Array:
    """Centred N(0, 1) shifts; a single client gets 0 (its local objective is the global one)."""
    s = jax.random.normal(key, (num_clients,), dtype=jnp.float32)
    return s - jnp.mean(s)


def heterogeneous_parts(kind: str, f, num_clients: int, key):
    """(global_fn, local_fn, data) for base function f under the given heterogeneity."""
    if kind == "none":
        return GlobalOnly(f), SameForAll(f), {}
    if kind == "shift":
        return GlobalOnly(f), Shifted(f), {"shift": client_shifts(key, num_clients)}
    raise ValueError(f"heterogeneity must be one of {HETEROGENEITIES}, got {kind!r}")
