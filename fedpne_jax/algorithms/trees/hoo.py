"""T-HOO, the truncated Hierarchical Optimistic Optimization of Bubeck, Munos, Stoltz and Szepesvari
(JMLR 2011), with PyXAB's rules (algos/HOO.py, class T_HOO).

A centralized baseline like HCT: one noisy evaluation of the *global* objective per round, regret
per evaluation.  Rules, for round t = 1..T with n = T the horizon (known to the truncated version):

* U = mean + sqrt(2 ln n / T_node) + nu rho^h, +inf while T_node = 0; B = U at a leaf,
  min(U, max of the children's B) above.
* Select: from the root, go to the child with the larger B (the upper child on ties) down to a
  leaf; pull its centre.
* Update: credit the reward to every node of the path (root included), recompute their U, expand
  the leaf when its depth h <= depth_limit, and recompute B.
* depth_limit defaults to PyXAB's ceil((ln n / 2 - ln(1/nu)) / ln(1/rho)); the root and its two
  children exist from the start.  The recommendation is the centre of the leaf the next selection
  would reach (PyXAB's get_last_point).

Exactness and cost: U depends on n, not on t, so only the path's U change in a round and
recomputing B bottom-up along the path equals PyXAB's pass over the whole tree (the expanded leaf's
new children have B = +inf, which leaves its B = U).  A round costs O(depth): a descent and one
vectorised update of the path (one gather, one scatter).  The node table holds the full binary tree
down to depth_limit + 1 or 3 + 2T rows, whichever is smaller, so it cannot overflow.  Noise-free
runs equal PyXAB 0.3.0's own T_HOO pull for pull (tests/test_hoo.py: 300 rounds of Garland in
float64; 2,000 checked by hand) and tests/support/reference_hoo.py.

Simplifications: means are running means, mean += (r - mean) / T_node, in the run's precision
(PyXAB re-sums a float64 list of rewards for every node every round, which is what makes it slow);
precision='float32' (default) keeps values and boxes in float32.
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
