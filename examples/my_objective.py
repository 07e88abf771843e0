"""A federated objective as a fedpne-jax plugin: a paraboloid whose clients see it shifted.

    f(x) = 1 - sum_d (x_d - c_d)^2 on [0, 1]^D,  f* = 1 at x = c,
    f_m(x) = f(x) + s_m with sum_m s_m = 0, so the mean of the local objectives is f.

    fedpne run --plugin examples/my_objective.py --objective paraboloid --dim 3
    objectives.make_objective("paraboloid", num_clients=10, dim=3)

Importing this file registers the objective; from then on make_objective, sweeps and the command
line build it like a built-in one.  The mean of f over the box is 1 - sum_d (1/3 - c_d + c_d^2).
"""
import jax.numpy as jnp
import numpy as np

import objectives
from objectives.ordered import pairwise_sum

CENTRE = 0.3


def global_fn(data, x):
    # Module-level functions are hashable: objectives differing only in data share one program.
    return 1.0 - pairwise_sum((x - data["centre"]) ** 2)


def local_fn(data, x, m):
    return global_fn(data, x) + data["shift"][m]


def paraboloid(num_clients, dim=2, seed=0):
    """The objective for ``num_clients`` clients in dimension ``dim``; ``seed`` draws the shifts."""
    if not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    shift = np.random.default_rng(seed).normal(0.0, 0.1, num_clients)
    shift = shift - shift.mean() if num_clients > 1 else np.zeros(1)
    data = {"centre": jnp.full((dim,), CENTRE, jnp.float32), "shift": jnp.asarray(shift, jnp.float32)}
    return objectives.Objective(name="paraboloid", lo=(0.0,) * dim, hi=(1.0,) * dim, f_star=1.0,
                                num_clients=num_clients, global_fn=global_fn, local_fn=local_fn, data=data)


def mean_value(dim: int) -> float:
    """The mean of f over the box (what uniform random search earns per round on average)."""
    return 1.0 - dim * (1.0 / 3.0 - CENTRE + CENTRE ** 2)


objectives.register("paraboloid", paraboloid, default_dim=2, default_clients=10, default_horizon=10_000,
                    source="examples/my_objective.py: a shifted paraboloid")
