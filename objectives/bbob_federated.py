"""The heterogeneity 'instances' of the BBOB objectives: client m sees COCO's instance i + m, its own
reward -(f_{i+m}(x) - f_opt,{i+m}) (:class:`InstanceLocal`), and the global objective is the
clients' mean reward (:class:`InstanceMean`), read from the clients' instance arrays stacked along
a leading axis (:func:`stacked_arrays`).

The other heterogeneities, 'none', 'shift' and 'fourier', are those of the synthetic functions
(heterogeneity.py; the global objective is exactly the BBOB reward, f* = 0).  The global objective
of 'instances' has f* != 0 (the clients' optima differ) and no closed form; bbob_search finds it.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from objectives.bbob_functions import Reward, device_arrays
from objectives.ordered import pairwise_mean

# What a BBOB objective accepts: the synthetic functions' three (objectives.heterogeneity) and its own.
HETEROGENEITIES = ("none", "shift", "fourier", "instances")


@dataclasses.dataclass(frozen=True)
class InstanceLocal:
    """heterogeneity 'instances': client m's reward on its own instance (row m of the stacked arrays)."""
    reward: Reward

    def __call__(self, data, x, m):
        return self.reward(jax.tree_util.tree_map(lambda a: a[m], data["base"]), x)


@dataclasses.dataclass(frozen=True)
class InstanceMean:
    """heterogeneity 'instances': the global objective, the clients' mean reward (fixed-order mean)."""
    reward: Reward

    def __call__(self, data, x):
        return pairwise_mean(jax.vmap(lambda d: self.reward(d, x))(data["base"]))


def stacked_arrays(instances) -> dict:
    """The device arrays of several instances of one (function, dim), stacked along a leading axis."""
    per = [device_arrays(i) for i in instances]
    return {k: jnp.stack([p[k] for p in per]) for k in per[0]}

