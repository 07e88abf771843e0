"""The objective protocol shared by every algorithm of fedpne-jax.

An objective is a frozen pytree: its name, box, optimum and functions are static (they decide the
compiled program), its ``data`` (client shifts, datasets, ...) are leaves, so a batch of objectives
can be vmapped and data never forces a recompilation.

The federated problem has M local objectives f_1..f_M and the global objective
f = (1/M) * sum_m f_m.  ``global_fn(data, x)`` must return exactly that mean (the engine samples the
server's aggregate from it when that is exact in distribution), and ``local_fn(data, x, m)`` returns
f_m(x) for one client.  Both take a single point x of shape (D,) and are plain JAX functions; the
methods below vectorise them over any batch shape.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np


def _static(**kw):
    return dataclasses.field(metadata=dict(static=True), **kw)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Objective:
    """A federated objective.  Build one with :func:`objectives.make_objective` or directly.

    Attributes:
      name: used in results and error messages.
      lo, hi: the box X = prod_d [lo_d, hi_d] (tuples of floats, length D).
      f_star: sup of the global objective over the box (used for regret).
      num_clients: M.
      global_fn: ``(data, x) -> f(x)``, x of shape (D,).
      local_fn: ``(data, x, m) -> f_m(x)`` for client index m (an int32 scalar, possibly traced).
      data: any pytree of arrays the functions read.
    """

    name: str = _static()
    lo: tuple = _static()
    hi: tuple = _static()
    f_star: float = _static()
    num_clients: int = _static()
    global_fn: Callable[[Any, jax.Array], jax.Array] = _static()
    local_fn: Callable[[Any, jax.Array, jax.Array], jax.Array] = _static()
    data: Any = None

    def __post_init__(self):
        if len(self.lo) != len(self.hi) or len(self.lo) == 0:
            raise ValueError(f"objective {self.name!r}: lo and hi must be non-empty and of equal length, "
                             f"got lo={self.lo}, hi={self.hi}")
        for d, (a, b) in enumerate(zip(self.lo, self.hi)):
            if not (np.isfinite(a) and np.isfinite(b) and a < b):
                raise ValueError(f"objective {self.name!r}: lo must be < hi in every dimension "
                                 f"(dimension {d}: lo={a}, hi={b})")
        if not (isinstance(self.f_star, (int, float)) and np.isfinite(self.f_star)):
            raise ValueError(f"objective {self.name!r}: f_star must be a finite number, got {self.f_star!r}")
        if not isinstance(self.num_clients, (int, np.integer)) or self.num_clients < 1:
            raise ValueError(f"objective {self.name!r}: num_clients must be an integer >= 1, "
                             f"got {self.num_clients!r}")

    @property
    def dim(self) -> int:
        return len(self.lo)

    def _check_points(self, x) -> jax.Array:
        x = jnp.asarray(x, dtype=jnp.result_type(float))   # float64 under jax.enable_x64
        if x.ndim == 0 or x.shape[-1] != self.dim:
            raise ValueError(f"objective {self.name!r}: points must have last dimension D={self.dim}, "
                             f"got shape {tuple(x.shape)}")
        return x

    def value(self, x) -> jax.Array:
        """Global objective f at points of shape (..., D); returns shape (...)."""
        x = self._check_points(x)
        flat = x.reshape(-1, self.dim)
        out = jax.vmap(lambda p: self.global_fn(self.data, p))(flat)
        return out.reshape(x.shape[:-1])

    def local_values(self, x) -> jax.Array:
        """All clients' local objectives at points of shape (..., D); returns shape (..., M)."""
        x = self._check_points(x)
        flat = x.reshape(-1, self.dim)
        clients = jnp.arange(self.num_clients, dtype=jnp.int32)
        per_point = lambda p: jax.vmap(lambda m: self.local_fn(self.data, p, m))(clients)
        out = jax.vmap(per_point)(flat)
        return out.reshape(x.shape[:-1] + (self.num_clients,))

    def local(self, x, m) -> jax.Array:
        """Client m's local objective at one point x of shape (D,) (traceable; used by the engine)."""
        return self.local_fn(self.data, x, m)

    def global_value(self, x) -> jax.Array:
        """The global objective at one point x of shape (D,) (traceable; used by the engine)."""
        return self.global_fn(self.data, x)
