"""Objectives for fedpne-jax: the :class:`Objective` protocol and the built-in test functions.

``make_objective(name, num_clients, heterogeneity, seed, dim)`` builds a registered objective;
write your own by constructing :class:`Objective` with plain JAX functions (see objective.py).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import jax

from objectives.heterogeneity import HETEROGENEITIES, client_shifts, heterogeneous_parts
from objectives.objective import Objective
from objectives import synthetic


@dataclasses.dataclass(frozen=True)
class Spec:
    fn: Callable
    lo: float
    hi: float
    f_star: float
    default_dim: int
    fixed_dim: bool
    source: str


REGISTRY = {
    "garland": Spec(synthetic.garland, 0.0, 1.0, synthetic.GARLAND_F_STAR, 1, True,
                    "x(1-x)(4-sqrt|sin 60x|); Azar et al. 2014, PyXAB"),
    "doublesine": Spec(synthetic.double_sine, 0.0, 1.0, 0.0, 1, True,
                       "DoubleSine rho1=0.3, rho2=0.8, tmax=0.5; Grill et al. 2015, PyXAB"),
    "himmelblau": Spec(synthetic.himmelblau, -5.0, 5.0, 0.0, 2, True,
                       "Himmelblau / 890 (PyXAB's normalisation)"),
    "ackley": Spec(synthetic.ackley, -1.0, 1.0, 0.0, 2, False, "negated Ackley function"),
    "rastrigin": Spec(synthetic.rastrigin, -1.0, 1.0, 0.0, 2, False, "negated Rastrigin function"),
}


def make_objective(name: str, num_clients: int = 1, heterogeneity: str = "shift", seed: int = 0,
                   dim: int | None = None) -> Objective:
    """A registered objective for ``num_clients`` clients.

    ``seed`` keys the heterogeneity (the client shifts): it is part of the problem instance, so
    every run of a batch sees the same local objectives, as in the paper's experiments.
    """
    if name not in REGISTRY:
        raise ValueError(f"objective must be one of {sorted(REGISTRY)}, got {name!r}")
    spec = REGISTRY[name]
    if dim is None:
        dim = spec.default_dim
    if not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    if spec.fixed_dim and dim != spec.default_dim:
        raise ValueError(f"dim: objective {name!r} is defined in dimension {spec.default_dim} only, got {dim}")
    if not isinstance(num_clients, int) or num_clients < 1:
        raise ValueError(f"num_clients must be an integer >= 1, got {num_clients!r}")
    key = jax.random.fold_in(jax.random.key(seed), 0)
    global_fn, local_fn, data = heterogeneous_parts(heterogeneity, spec.fn, num_clients, key)
    return Objective(name=name, lo=(float(spec.lo),) * dim, hi=(float(spec.hi),) * dim,
                     f_star=float(spec.f_star), num_clients=num_clients,
                     global_fn=global_fn, local_fn=local_fn, data=data)


__all__ = ["Objective", "make_objective", "REGISTRY", "HETEROGENEITIES", "client_shifts"]
