"""HCT, the High Confidence Tree of Azar, Lazaric and Brunskill (ICML 2014), with PyXAB's rules.

The paper's centralized baseline (App. E.1), as one policy of the tree skeleton: PyXAB 0.3.0's HCT
(algos/HCT.py) with its defaults (nu = 1, rho = 0.5, c = 0.1, delta = 0.01); ``expand='leaf'`` is
Azar et al.'s expansion rule, ``expand='pyxab'`` PyXAB's re-expansion of an internal node.

The rules round by round, why B along the pulled path equals PyXAB's whole-tree pass, the
refreshes at t = 2^k, the cost and the simplifications: docs/algorithms/trees.md, section "Each algorithm in detail", HCT.
"""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.trees import family
from fedpne_jax.algorithms.trees.descent import descent, path_of, update_path
from fedpne_jax.algorithms.trees.layout import check_height
from fedpne_jax.algorithms.trees.policy import Last, TreeConfig, TreePolicy, TreeStatic, tree_static
from fedpne_jax.algorithms.trees.refresh import refresh_all, rows_after_updates
from fedpne_jax.core.algorithm import Style
from fedpne_jax.core.validation import check_choice, check_real

EXPANDS = ("leaf", "pyxab")
MAX_ROWS = 1 << 24


class Schedule:
    """HCT's confidence schedule, from a config's nu, rho, delta and horizon (VHCT's too), and the
    table its module's ``bounds`` sizes.  Listed before TreeConfig among a config's bases, so
    that its ``capacity`` and ``resolved`` come first."""

    nu: float
    rho: float
    delta: float
    horizon: int

    @property
    def c1(self) -> float:
        return (self.rho / (3 * self.nu)) ** (1.0 / 8)

    @property
    def epochs(self) -> int:
        """K: t+ = 2^k for k = 0..K covers rounds 1..T+1 (T+1: the recommendation)."""
        return self.horizon.bit_length()

    def delta_tilde(self, k: int, cap: float) -> float:
        return min(cap, self.c1 * self.delta / 2.0 ** k)

    def bounds(self) -> tuple[int, int]:
        """(capacity, height): the most rows and the deepest depth any run can reach."""
        raise NotImplementedError

    @property
    def capacity(self) -> int:
        return self.bounds()[0]

    def resolved(self) -> dict:
        out = super().resolved()  # type: ignore[misc]  # TreeConfig's, next in a config's bases
        out.update(c1=self.c1, max_depth=self.bounds()[1])
        return out


@dataclasses.dataclass(frozen=True)
class HCTConfig(Schedule, TreeConfig):
    """HCT's parameters (PyXAB's defaults; the paper's runs used rho = 0.75)."""

    nu: float = 1.0
    rho: float = 0.5
    c: float = 0.1
    delta: float = 0.01
    expand: str = "leaf"

    def __post_init__(self):
        super().__post_init__()
        check_real("nu", self.nu, low=0.0)
        check_real("rho", self.rho, low=0.0, high=1.0)
        check_real("c", self.c, low=0.0)
        check_real("delta", self.delta, low=0.0)
        if self.delta > 1:
            raise ValueError(f"delta must be in (0, 1], got {self.delta!r}")
        check_choice("expand", self.expand, EXPANDS)
        top = max(self.conf_terms()) / self.nu ** 2
        if not (self.nu < 1e30 and 0 < self.c ** 2 and top < 1e30):
            raise ValueError(f"c and nu must keep c^2 log(1/delta~) / nu^2 within float32 range, got c={self.c}, "
                             f"nu={self.nu}")
        capacity, height = bounds(self)
        check_height(height, f"c={self.c}, rho={self.rho}, horizon={self.horizon}")
        if capacity > MAX_ROWS:
            raise ValueError(f"horizon: HCT's node table would need {capacity} rows for T={self.horizon} with "
                             f"c={self.c}, rho={self.rho} (at most {MAX_ROWS}); raise c or lower the horizon")

    def conf_terms(self) -> list:
        """c^2 log(1/delta~) of the updates, per k."""
        return [self.c ** 2 * math.log(1 / self.delta_tilde(k, 1.0)) for k in range(self.epochs + 1)]

    def tau(self, k: int, h: int) -> int:
        """tau_h at t+ = 2^k (PyXAB's expression), capped at T + 1 (no node count reaches it)."""
        if h == 0:
            return 0
        log_term = math.log(1 / self.delta_tilde(k, 0.5))
        cap = self.horizon + 1
        if 2 * math.log(self.c) + math.log(log_term) - 2 * h * math.log(self.rho) - 2 * math.log(self.nu) \
                > math.log(cap) + 1:
            return cap
        return int(min(cap, math.ceil(self.c ** 2 * log_term * self.rho ** (-2 * h) / self.nu ** 2)))

    def bounds(self) -> tuple[int, int]:
        return bounds(self)


def bounds(config: HCTConfig) -> tuple[int, int]:
    """(capacity, height): the most rows and the deepest depth any run can reach.

    A node is expanded only after it was pulled tau_h >= tau_h(t+ = 1) times itself (and at least
    once), and each pull is credited to one node.  Rows: with E_h expansions at depth h, E_0 = 1 (the
    root, expanded for free) and E_h <= 2 E_{h-1} (nodes available), sum_h E_h max(1, tau_h(1)) <= T.
    Under ``expand='pyxab'`` a node can be expanded again once per distinct value V_h of tau_h, and
    its children reuse their rows, so only first expansions take rows and E_h <= 2 V_{h-1} E_{h-1}.
    Costs grow with h, so filling depths shallow-first maximises sum E_h (exchange argument);
    rows = 1 + 2 sum_h E_h.  Height: a node at depth H needs an expanded ancestor at every depth
    below, so sum_{h=1}^{H-1} max(1, tau_h(1)) <= T.
    """
    T, K = config.horizon, config.epochs
    budget, total, prev_events, h = T, 1, 1, 0
    while True:
        h += 1
        cost = max(1, config.tau(0, h))
        e = min(2 * prev_events, budget // cost)
        if e == 0:
            break
        budget -= e * cost
        total += e
        distinct = len({config.tau(k, h) for k in range(K + 1)}) if config.expand == "pyxab" else 1
        prev_events = e * distinct
    spent, height = 0, 1
    while spent + max(1, config.tau(0, height)) <= T:
        spent += max(1, config.tau(0, height))
        height += 1
    return 1 + 2 * total, height


@dataclasses.dataclass(frozen=True)
class HCTStatic(TreeStatic):
    expand: str = "leaf"


class HCTParams(NamedTuple):
    tau: np.ndarray          # (K+1, H+1) int32 tau_h at t+ = 2^k (traversal delta~)
    smooth: np.ndarray       # (H+1,) nu rho^h
    conf: np.ndarray         # (K+1,) c^2 log(1/delta~) at t+ = 2^k (update delta~)
    noise_scale: np.ndarray  # ()


def make_static(config: HCTConfig, objective, tables=None) -> HCTStatic:
    capacity, height = bounds(config)
    return tree_static(config, objective, capacity, height, cls=HCTStatic, path=path_of(tables, height),
                       expand=config.expand)


def make_params(config: HCTConfig, tables=None) -> HCTParams:
    _, height = bounds(config)
    real = np.dtype(config.precision)
    K = config.epochs
    return HCTParams(
        tau=np.asarray([[config.tau(k, h) for h in range(height + 1)] for k in range(K + 1)], np.int32),
        smooth=np.asarray([config.nu * config.rho ** h for h in range(height + 1)], real),
        conf=np.asarray(config.conf_terms(), real),
        noise_scale=np.asarray(config.noise_scale, real))


class Pending(NamedTuple):
    """The node re-expanded last round (expand='pyxab'), whose path's B are due."""
    path: jax.Array          # (path rows,) rows root..node
    length: jax.Array        # () its length (0: none)


def _epoch(t):
    """k with t+ = 2^k = 2^ceil(log2 t)."""
    return 32 - jax.lax.clz(jnp.maximum(t, 1) - 1)


def _u_fn(params: HCTParams, k):
    """PyXAB's U: mean + nu rho^h + sqrt(c^2 log(1/delta~) / T_node)."""
    def u(mean, count, depth):
        return mean + params.smooth[depth] + jnp.sqrt(params.conf[k] / count.astype(mean.dtype))
    return u


def _stop_rule(static: HCTStatic, params: HCTParams, t):
    tau = params.tau[_epoch(t)]
    return lambda count, node, depth: count >= tau[depth]


def _update(static: HCTStatic, params: HCTParams, table, pending: Pending, last: Last, t, active):
    """Round t's update after its selection (and the refresh when t is a power of two)."""
    spec = static.tree
    k = _epoch(t)
    choice = last.choice
    tau = params.tau[k]

    def grow(count, depth, child):
        ready = count >= tau[depth]
        return ready if static.expand == "pyxab" else ready & (child < 0)

    credited = jnp.arange(spec.path_rows) == choice.length - 1
    pyxab = static.expand == "pyxab"
    table, overflow, regrown = update_path(spec, table, choice.path, choice.length, credited, last.reward,
                                           _u_fn(params, k), grow, last.split_u, active=active,
                                           pending=tuple(pending) if pyxab else None)
    if pyxab:
        pending = Pending(choice.path, jnp.where(active & regrown, choice.length,
                                                 jnp.where(active, 0, pending.length)))
    return table, pending, overflow


def _refresh(static: HCTStatic, params: HCTParams, k, table, pending: Pending):
    """Round 2^k, between its selection and its update: every U with t+ = 2^k, then every B (this
    also settles a re-expanded node's ancestors)."""
    return (refresh_all(static.tree, table, _u_fn(params, k), live=rows_after_updates(k)),
            pending._replace(length=jnp.int32(0)))


POLICY = TreePolicy(
    select=descent(_stop_rule), update=_update, refresh=_refresh,
    init=lambda static, params, table, key: Pending(jnp.zeros((static.tree.path_rows,), jnp.int32), jnp.int32(0)))


ALGORITHM = family.algorithm("hct", HCTConfig, make_static, make_params, POLICY,
                           Style("HCT", "#1f77b4", "s"), descends=True)
run_single = ALGORITHM.run_single
