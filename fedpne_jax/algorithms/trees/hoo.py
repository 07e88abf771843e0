"""T-HOO, the truncated Hierarchical Optimistic Optimization of Bubeck, Munos, Stoltz and Szepesvari
(JMLR 2011), with PyXAB's rules (algos/HOO.py, class T_HOO), as one policy of the tree skeleton.

A centralized baseline like HCT; the horizon T is T-HOO's n, and leaves are expanded down to
``depth_limit`` (PyXAB's default).  The rules, the cost, the node table's size and the
simplifications: docs/algorithms/trees.md, section "Each algorithm in detail", T-HOO.
"""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple, Optional

import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.trees import family
from fedpne_jax.algorithms.trees.descent import descent, path_of, update_path
from fedpne_jax.algorithms.trees.layout import check_height
from fedpne_jax.algorithms.trees.policy import Last, TreeConfig, TreePolicy, TreeStatic, tree_static
from fedpne_jax.core.algorithm import Style
from fedpne_jax.core.validation import check_int, check_real


@dataclasses.dataclass(frozen=True)
class HOOConfig(TreeConfig):
    """T-HOO's parameters (PyXAB's defaults)."""

    nu: float = 1.0
    rho: float = 0.5
    depth_limit: Optional[int] = None

    def __post_init__(self):
        super().__post_init__()
        check_real("nu", self.nu, low=0.0, high=1e30)
        check_real("rho", self.rho, low=0.0, high=1.0)
        if self.depth_limit is not None:
            check_int("depth_limit (None for PyXAB's default)", self.depth_limit, 0)
        check_height(self.height, f"depth_limit={self.limit}")

    @property
    def limit(self) -> int:
        """Leaves at depth <= limit are expanded; PyXAB's default when depth_limit is None."""
        if self.depth_limit is not None:
            return self.depth_limit
        value = math.ceil((math.log(self.horizon) / 2 - math.log(1 / self.nu)) / math.log(1 / self.rho))
        return max(0, value)

    @property
    def height(self) -> int:
        """Deepest depth a node reaches: limit + 1, and at most T + 1 (one expansion per round)."""
        return min(self.limit, self.horizon) + 1

    @property
    def capacity(self) -> int:
        return min(2 ** (self.height + 1) - 1, 3 + 2 * self.horizon)

    def resolved(self) -> dict:
        out = super().resolved()
        out.update(depth_limit=self.limit)
        return out


class HOOParams(NamedTuple):
    explore: np.ndarray      # () 2 ln n
    smooth: np.ndarray       # (H+1,) nu rho^h
    limit: np.ndarray        # () int32 deepest depth that is expanded
    noise_scale: np.ndarray  # ()


def make_static(config: HOOConfig, objective, tables=None) -> TreeStatic:
    return tree_static(config, objective, config.capacity, config.height,
                       path=path_of(tables, config.height))


def make_params(config: HOOConfig, tables=None) -> HOOParams:
    real = np.dtype(config.precision)
    return HOOParams(explore=np.asarray(2 * math.log(config.horizon), real),
                     smooth=np.asarray([config.nu * config.rho ** h for h in range(config.height + 1)], real),
                     limit=np.asarray(min(config.limit, config.horizon), np.int32),
                     noise_scale=np.asarray(config.noise_scale, real))


def _update(static, params: HOOParams, table, extra, last: Last, t, active):
    spec = static.tree
    choice = last.choice

    def u_fn(mean, count, depth):
        # PyXAB's order: mean + sqrt(2 ln n / T_node) + nu rho^h.
        return mean + jnp.sqrt(params.explore / count.astype(mean.dtype)) + params.smooth[depth]

    credited = jnp.arange(spec.path_rows) < choice.length
    table, overflow, _ = update_path(spec, table, choice.path, choice.length, credited, last.reward, u_fn,
                                     lambda count, depth, child: depth <= params.limit, last.split_u,
                                     active=active)
    return table, extra, overflow


POLICY = TreePolicy(select=descent(), update=_update)


ALGORITHM = family.algorithm("hoo", HOOConfig, make_static, make_params, POLICY,
                           Style("T-HOO", "#17becf", "v"), descends=True)
run_single = ALGORITHM.run_single
