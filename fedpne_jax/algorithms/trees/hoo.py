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
runs equal PyXAB 0.3.0's own T_HOO pull for pull (checked over 2,000 rounds of Garland; PyXAB is not
a test dependency) and tests/reference_hoo.py.

Simplifications: means are running means, mean += (r - mean) / T_node, in the run's precision
(PyXAB re-sums a float64 list of rewards for every node every round, which is what makes it slow);
precision='float32' (default) keeps values and boxes in float32.
"""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.core.algorithm import Algorithm, Style
from fedpne_jax.core.validation import check_int, check_real
from fedpne_jax.core.config import BaselineConfig
from fedpne_jax.algorithms.trees import tree


@dataclasses.dataclass(frozen=True)
class HOOConfig(BaselineConfig):
    """T-HOO's parameters (PyXAB's defaults)."""

    nu: float = 1.0
    rho: float = 0.5
    depth_limit: Optional[int] = None
    split: str = "random"
    precision: str = "float32"

    def __post_init__(self):
        super().__post_init__()
        check_real("nu", self.nu, low=0.0)
        check_real("rho", self.rho, low=0.0, high=1.0)
        check_real("nu", self.nu, low=0.0, high=1e30)
        if self.depth_limit is not None:
            check_int("depth_limit (None for PyXAB's default)", self.depth_limit, 0)
        tree.check_choice("split", self.split, tree.SPLITS)
        tree.check_choice("precision", self.precision, tree.PRECISIONS)
        tree.check_height(self.height, f"depth_limit={self.limit}")

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
        out.update(depth_limit=self.limit, capacity=self.capacity)
        return out


@dataclasses.dataclass(frozen=True)
class HOOStatic:
    horizon: int
    checkpoint_rounds: tuple
    noise_kind: str
    tree: tree.TreeSpec
    real: str
    chunk: int               # rounds per draw of reward uniforms
    trace: bool = False      # tests: also return every pulled point


class HOOParams(NamedTuple):
    explore: np.ndarray      # () 2 ln n
    smooth: np.ndarray       # (H+1,) nu rho^h
    limit: np.ndarray        # () int32 deepest depth that is expanded
    noise_scale: np.ndarray  # ()


def make_static(config: HOOConfig, objective, tables=None) -> HOOStatic:
    return HOOStatic(horizon=config.horizon, checkpoint_rounds=tuple(int(r) for r in config.checkpoint_rounds),
                     noise_kind=config.noise_kind,
                     tree=tree.make_spec(config.capacity, config.height, objective, config.split, config.precision),
                     real=config.precision, chunk=tree.chunk_size(config.horizon))


def make_params(config: HOOConfig, tables=None) -> HOOParams:
    real = np.dtype(config.precision)
    return HOOParams(explore=np.asarray(2 * math.log(config.horizon), real),
                     smooth=np.asarray([config.nu * config.rho ** h for h in range(config.height + 1)], real),
                     limit=np.asarray(min(config.limit, config.horizon), np.int32),
                     noise_scale=np.asarray(config.noise_scale, real))


class _State(NamedTuple):
    table: tree.Table
    book: tree.Pull
    last: tree.Last          # this round's selection, updated at the start of the next loop body
    overflow: jax.Array


def _select(static: HOOStatic, params: HOOParams, objective, t, u, state: _State, pulling) -> _State:
    spec = static.tree
    node, row, path, length = tree.descend(spec, state.table, lambda count, depth: jnp.bool_(True))
    x = tree.centre(spec, row)
    r, book = tree.pull(static, params, objective, state.book, t, x, u, pulling)
    return state._replace(book=book, last=tree.Last(node, path, length, r, u[2], x))


def _update(static: HOOStatic, params: HOOParams, state: _State, active) -> _State:
    spec = static.tree
    last = state.last

    def u_fn(mean, count, depth):
        # PyXAB's order: mean + sqrt(2 ln n / T_node) + nu rho^h.
        return mean + jnp.sqrt(params.explore / count.astype(mean.dtype)) + params.smooth[depth]

    credited = jnp.arange(spec.height + 1) < last.length
    table, overflow, _ = tree.update_path(spec, state.table, last.path, last.length, credited, last.reward, u_fn,
                                          lambda count, depth, child: depth <= params.limit, last.split_u,
                                          active=active)
    return state._replace(table=table, overflow=state.overflow | overflow)


def run_single(static: HOOStatic, params: HOOParams, objective, key):
    spec = static.tree
    table = tree.init(spec, objective.lo, objective.hi, key)
    book = tree.start_pulls(len(static.checkpoint_rounds), spec.dim, static.horizon if static.trace else 0,
                            spec.dtype)
    state = tree.run_rounds(static.horizon, static.chunk, key, spec.dtype,
                            lambda t, s, active: _update(static, params, s, active),
                            lambda t, u, s, pulling: _select(static, params, objective, t, u, s, pulling),
                            _State(table, book, tree.no_selection(spec), jnp.bool_(False)))
    return tree.output(static.checkpoint_rounds, state)


ALGORITHM = Algorithm(name="hoo", config_type=HOOConfig, make_static=make_static, make_params=make_params,
                      run_single=run_single, metrics=tree.METRICS,
                      check=lambda config, objective: tree.check_objective(config.split, objective),
                      styles=(("hoo", Style("T-HOO", "#17becf", "v")),))
