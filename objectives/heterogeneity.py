"""Client heterogeneity: how the M local objectives differ from the global one.

``none``: every client sees f.  ``shift`` (the paper's experiments, App. E): client m sees f + s_m,
centred shifts.  ``fourier`` (beyond the paper): client m sees f + p_m, a smooth random perturbation
of ``FOURIER_FEATURES`` random Fourier features (``FOURIER_BANDWIDTH``) whose client weights sum to
zero.  In both, the global objective is exactly f, evaluated directly.

The formulas and what each does to the clients' optima: docs/concepts/semantics.md, "Heterogeneity".
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from objectives.ordered import pairwise_sum

HETEROGENEITIES = ("none", "shift", "fourier")
FOURIER_FEATURES = 16
FOURIER_BANDWIDTH = 1.0
DEFAULT_AMPLITUDE = 0.1


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

    @staticmethod
    def outside_unit_interval(data) -> str | None:
        if np.any(np.asarray(data["shift"]) != 0):
            return "has 'shift' heterogeneity (N(0, 1) client shifts); use heterogeneity 'none'"
        return None


@dataclasses.dataclass(frozen=True)
class FourierPerturbed:
    f: Callable

    def __call__(self, data, x, m):
        return self.f(x) + fourier_perturbation(data, x, m)


def fourier_perturbation(data, x, m):
    """p_m(x) for one point (sums over coordinates and features in a fixed order)."""
    z = (x - data["lo"].astype(x.dtype)) * data["inv_width"].astype(x.dtype)
    angle = 2.0 * jnp.pi * pairwise_sum(data["freq"].astype(x.dtype) * z[None, :]) + data["phase"].astype(x.dtype)
    return pairwise_sum(data["weight"][m].astype(x.dtype) * jnp.cos(angle))


def fourier_data(key, num_clients: int, lo, hi, amplitude: float) -> dict:
    """Shared features and zero-sum client weights of the ``fourier`` heterogeneity (float32)."""
    lo = np.asarray(lo, np.float64)
    hi = np.asarray(hi, np.float64)
    k_freq, k_phase, k_weight = jax.random.split(key, 3)
    D = lo.shape[0]
    freq = FOURIER_BANDWIDTH * jax.random.normal(k_freq, (FOURIER_FEATURES, D), jnp.float32)
    phase = jax.random.uniform(k_phase, (FOURIER_FEATURES,), jnp.float32, 0.0, 2.0 * np.pi)
    g = np.asarray(jax.random.normal(k_weight, (num_clients, FOURIER_FEATURES), jnp.float32), np.float64)
    weight = amplitude * np.sqrt(2.0 / FOURIER_FEATURES) * (g - g.mean(axis=0, keepdims=True))
    return {"freq": freq, "phase": phase, "weight": jnp.asarray(weight, jnp.float32),
            "lo": jnp.asarray(lo, jnp.float32), "inv_width": jnp.asarray(1.0 / (hi - lo), jnp.float32)}


# A larger amplitude makes the client weights, or their sum over the features, inf in float32: every
# local value NaN, without a word where the run never evaluates a local objective on its own.
MAX_AMPLITUDE = 1e30


def check_amplitude(amplitude) -> float:
    if isinstance(amplitude, bool) or not isinstance(amplitude, (int, float, np.integer, np.floating)) \
            or not np.isfinite(amplitude) or not 0 <= amplitude <= MAX_AMPLITUDE:
        raise ValueError(f"amplitude must be a finite number in [0, {MAX_AMPLITUDE:g}], got {amplitude!r}")
    return float(amplitude)


def client_shifts(key, num_clients: int) -> jax.Array:
    """Centred N(0, 1) shifts; a single client gets 0 (its local objective is the global one)."""
    s = jax.random.normal(key, (num_clients,), dtype=jnp.float32)
    return s - jnp.mean(s)


def heterogeneity_data(kind: str, num_clients: int, key, lo=None, hi=None, amplitude=None) -> dict:
    """The data of heterogeneity ``kind``: {} for 'none', the centred shifts for 'shift', the shared
    features and client weights for 'fourier' (``lo``, ``hi``: the box; ``amplitude`` default
    ``DEFAULT_AMPLITUDE``).  An amplitude with another heterogeneity is refused."""
    if kind not in HETEROGENEITIES:
        raise ValueError(f"heterogeneity must be one of {HETEROGENEITIES}, got {kind!r}")
    if kind != "fourier" and amplitude is not None:
        raise ValueError(f"amplitude applies to heterogeneity 'fourier' only, got heterogeneity {kind!r}")
    if kind == "none":
        return {}
    if kind == "shift":
        return {"shift": client_shifts(key, num_clients)}
    amplitude = DEFAULT_AMPLITUDE if amplitude is None else check_amplitude(amplitude)
    if lo is None or hi is None:
        raise ValueError("heterogeneity 'fourier' needs the box (lo, hi)")
    return fourier_data(key, num_clients, lo, hi, amplitude)


def heterogeneous_parts(kind: str, f, num_clients: int, key, lo=None, hi=None, amplitude=None):
    """(global_fn, local_fn, data) for base function f under the given heterogeneity.

    ``lo``, ``hi`` (the box) and ``amplitude`` are used by ``fourier`` only (amplitude default
    ``DEFAULT_AMPLITUDE``); an amplitude with another heterogeneity is refused.
    """
    data = heterogeneity_data(kind, num_clients, key, lo=lo, hi=hi, amplitude=amplitude)
    local = {"none": SameForAll, "shift": Shifted, "fourier": FourierPerturbed}[kind]
    return GlobalOnly(f), local(f), data


# Base functions that read data of their own (an instance's arrays, under data["base"]).
@dataclasses.dataclass(frozen=True)
class GlobalOnBase:
    f: Callable

    def __call__(self, data, x):
        return self.f(data["base"], x)


@dataclasses.dataclass(frozen=True)
class LocalOnBase:
    f: Callable
    kind: str

    def __call__(self, data, x, m):
        value = self.f(data["base"], x)
        if self.kind == "shift":
            return value + data["shift"][m]
        if self.kind == "fourier":
            return value + fourier_perturbation(data, x, m)
        return value


def heterogeneous_parts_on_base(kind: str, f, base, num_clients: int, key, lo=None, hi=None, amplitude=None):
    """As :func:`heterogeneous_parts` for a base function ``f(base, x)`` that reads its own data
    ``base``: the objective's data is {"base": base} plus the heterogeneity's data, and the global
    objective stays exactly f(base, x)."""
    data = heterogeneity_data(kind, num_clients, key, lo=lo, hi=hi, amplitude=amplitude)
    return GlobalOnBase(f), LocalOnBase(f, kind), {"base": base, **data}
