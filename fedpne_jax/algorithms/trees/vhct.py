"""VHCT, the Variance High Confidence Tree of Li, Wang, Cheng and Song ("Optimum-statistical
collaboration towards general and efficient black-box optimization", 2021), as one policy of the tree
skeleton; ``pyxab=True`` is PyXAB 0.3.0's VHCT (algos/VHCT.py) instead.

HCT (hct.py, whose schedule it reuses) with a variance-adaptive, Bernstein-type statistical error and
per-node thresholds; parameters and defaults as PyXAB's constructor (nu = 1, rho = 0.5, c = 0.1,
delta = 0.01, bound = 1).  The rules, the departures of ``pyxab=True``, the running variance, the cost
and the table's capacity: docs/algorithms/trees.md, section "Each algorithm in detail", VHCT.
"""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.trees import family, hct
from fedpne_jax.algorithms.trees.descent import descend, path_of, update_path
from fedpne_jax.algorithms.trees.layout import CHILD, COUNT, MEAN, as_float, centre, check_height
from fedpne_jax.algorithms.trees.policy import Last, TreeConfig, TreePolicy, TreeStatic, tree_static
from fedpne_jax.algorithms.trees.refresh import refresh_all, rows_after_updates
from fedpne_jax.core.algorithm import Style
from fedpne_jax.core.validation import check_real
from objectives.ordered import exact_sqrt, no_contraction

MIN_VARIANCE = 1e-3        # PyXAB's VHCT_node.minvariance
SLACK = 1e-6               # relative rounding allowed for the device's thresholds in the host bounds


@dataclasses.dataclass(frozen=True)
class VHCTConfig(hct.Schedule, TreeConfig):
    """VHCT's parameters (PyXAB's defaults; ``bound``: b, the range of the noise; ``pyxab``: PyXAB's
    rules, see the module docstring)."""

    nu: float = 1.0
    rho: float = 0.5
    c: float = 0.1
    delta: float = 0.01
    bound: float = 1.0
    pyxab: bool = False

    def __post_init__(self):
        super().__post_init__()
        check_real("nu", self.nu, low=0.0, magnitude=1e30)
        check_real("rho", self.rho, low=0.0, high=1.0)
        check_real("c", self.c, low=0.0, magnitude=1e30)
        check_real("delta", self.delta, low=0.0, high=1.0, high_open=False)
        check_real("bound", self.bound, low=0.0, magnitude=1e30)
        if not isinstance(self.pyxab, bool):
            raise ValueError(f"pyxab must be True or False, got {self.pyxab!r}")
        capacity, height = bounds(self)
        check_height(height, f"c={self.c}, rho={self.rho}, bound={self.bound}, horizon={self.horizon}")
        if capacity > hct.MAX_ROWS:
            raise ValueError(f"horizon: VHCT's node table would need {capacity} rows for T={self.horizon} with "
                             f"c={self.c}, rho={self.rho}, bound={self.bound}, pyxab={self.pyxab} (at most "
                             f"{hct.MAX_ROWS}); raise c or bound, or lower the horizon")
        real = np.dtype(self.precision)
        with np.errstate(over="ignore"):
            values = [np.asarray(v, real) for v in host_tables(self, height)]
        if not all(np.all(np.isfinite(v)) for v in values) or not np.all(values[1][1:] > 0):
            raise ValueError(f"c, nu, rho, bound and delta must keep VHCT's widths and thresholds within "
                             f"{self.precision} range down to depth {height}, got c={self.c}, nu={self.nu}, "
                             f"rho={self.rho}, bound={self.bound}, delta={self.delta}")

    @property
    def floor(self) -> float:
        """The least variance a node takes: PyXAB's 1e-3, or 0."""
        return MIN_VARIANCE if self.pyxab else 0.0

    def log_term(self, k: int, cap: float) -> float:
        """L = log(1/delta~) at t+ = 2^k (PyXAB's math.log of its delta~)."""
        return math.log(1 / self.delta_tilde(k, cap))

    def least_tau(self, h: int) -> int:
        """tau_h^-: a lower bound on every tau_{h,i} (V >= 0, t+ >= 1) less the device's rounding, at
        least 1 (an expansion follows a pull), capped at T + 1; in log space (rho^-h may overflow)."""
        log_x = math.log(3 * self.bound) + 2 * math.log(self.c) + math.log(self.log_term(0, 0.5)) \
            - math.log(self.nu) - h * math.log(self.rho)
        if log_x > math.log(self.horizon + 1) + 1:
            return self.horizon + 1
        return max(1, math.ceil(math.exp(log_x) * (1 - SLACK)))

    def bounds(self) -> tuple[int, int]:
        return bounds(self)


def bounds(config: VHCTConfig) -> tuple[int, int]:
    """(capacity, height): the most rows and the deepest depth any run can reach (module docstring)."""
    T = config.horizon
    cost = config.least_tau
    if config.pyxab:
        first = min(2, T // cost(1))
        budget = T - first * cost(1)
        natural = min(2 * first, budget // cost(2))
        budget -= natural * cost(2)
        # Every other expansion into new rows costs tau_3^-, or tau_2^- and half a re-expansion.
        total = 1 + first + natural + max(budget // cost(3), 2 * budget // (2 * cost(2) + 1))
    else:
        budget, total, prev, h = T, 1, 1, 0
        while True:
            h += 1
            e = min(2 * prev, budget // cost(h))
            if e == 0:
                break
            budget -= e * cost(h)
            total += e
            prev = e
    spent, height = 0, 1
    while spent + cost(height) <= T:
        spent += cost(height)
        height += 1
    return 1 + 2 * total, height


def _power(x: float, p: int) -> float:
    try:
        return x ** p
    except OverflowError:
        return math.inf


def host_tables(config: VHCTConfig, height: int) -> tuple:
    """(w, a, e, smooth, bern, two_c2) in float64, each as PyXAB's expressions compute it:
    w[k, h] = c^2 L rho^(-2h) / nu^2 (traversal delta~ at t+ = 2^k; 0 at h = 0, where tau is 0),
    a[h] = 3 b nu rho^h, e[h] = 6 b nu rho^h, smooth[h] = nu rho^h, bern[k] = 3 b c^2 L (update delta~),
    two_c2 = 2 c^2."""
    c, nu, rho, b = config.c, config.nu, config.rho, config.bound
    depths = range(height + 1)
    ks = range(config.epochs + 1)
    w = [[0.0] + [c ** 2 * config.log_term(k, 0.5) * _power(rho, -2 * h) / nu ** 2 for h in depths[1:]] for k in ks]
    return (np.asarray(w), np.asarray([3 * b * nu * rho ** h for h in depths]),
            np.asarray([6 * b * nu * rho ** h for h in depths]), np.asarray([nu * (rho ** h) for h in depths]),
            np.asarray([3 * b * c ** 2 * config.log_term(k, 1.0) for k in ks]), np.asarray(c ** 2 * 2))


@dataclasses.dataclass(frozen=True)
class VHCTStatic(TreeStatic):
    pyxab: bool = False


class VHCTParams(NamedTuple):
    w: np.ndarray            # (K+1, H+1) c^2 L rho^(-2h) / nu^2 at t+ = 2^k (traversal delta~)
    a: np.ndarray            # (H+1,) 3 b nu rho^h
    e: np.ndarray            # (H+1,) 6 b nu rho^h
    smooth: np.ndarray       # (H+1,) nu rho^h
    log_u: np.ndarray        # (K+1,) L at t+ = 2^k (update delta~)
    bern: np.ndarray         # (K+1,) 3 b c^2 L (update delta~)
    two_c2: np.ndarray       # () 2 c^2
    floor: np.ndarray        # () the least variance (PyXAB's 1e-3, or 0)
    noise_scale: np.ndarray  # ()


def make_static(config: VHCTConfig, objective, tables=None) -> VHCTStatic:
    capacity, height = bounds(config)
    return tree_static(config, objective, capacity, height, cls=VHCTStatic, path=path_of(tables, height),
                       pyxab=config.pyxab)


def make_params(config: VHCTConfig, tables=None) -> VHCTParams:
    real = np.dtype(config.precision)
    w, a, e, smooth, bern, two_c2 = host_tables(config, bounds(config)[1])
    return VHCTParams(w=w.astype(real), a=a.astype(real), e=e.astype(real), smooth=smooth.astype(real),
                      log_u=np.asarray([config.log_term(k, 1.0) for k in range(config.epochs + 1)], real),
                      bern=bern.astype(real), two_c2=two_c2.astype(real), floor=np.asarray(config.floor, real),
                      noise_scale=np.asarray(config.noise_scale, real))


class Stats(NamedTuple):
    """The policy's ``extra``: every row's M2, and HCT's pending path (``pyxab`` only)."""
    m2: jax.Array            # (capacity,) sum of squared deviations of the row's rewards
    pending: hct.Pending


class Choice(NamedTuple):
    """A descent's choice (Descent's fields), the node's row as the selection read it (its
    count, mean and children do not change before the update), and the tau the selection computed
    for it, which PyXAB's expansion test reads (``pyxab``; 0 otherwise)."""
    node: jax.Array          # () int32
    path: jax.Array          # (path rows,) int32 rows root..node
    length: jax.Array        # () int32
    row: jax.Array           # (width,) the node's row
    tau: jax.Array           # () int32


def _init(static: VHCTStatic, params, table, key) -> Stats:
    spec = static.tree
    return Stats(jnp.zeros((spec.capacity,), spec.dtype),
                 hct.Pending(jnp.zeros((spec.path_rows,), jnp.int32), jnp.int32(0)))


def _variance(params: VHCTParams, m2, count):
    """V = M2 / T_node (0 for a node with no reward), at least the floor."""
    return jnp.maximum(m2 / jnp.maximum(count, 1).astype(m2.dtype), params.floor)


def _tau(static: VHCTStatic, params: VHCTParams, k, var, depth):
    """tau_{h,i} (int32) at ``depth`` for variance ``var`` at t+ = 2^k, capped at T + 1, which no count
    reaches (also when the product overflows: inf becomes NaN, which fails x < cap)."""
    e = params.e[depth]
    # PyXAB's V sqrt(1 + e / V) needs V > 0 (its floor); the paper's sqrt(V^2 + e V), taken as
    # sqrt(V) sqrt(V + e), is exact at V = 0 and cannot overflow where V^2 would.
    spread = var * exact_sqrt(1 + e / var) if static.pyxab else exact_sqrt(var) * exact_sqrt(var + e)
    x = (var + params.a[depth] + no_contraction(spread)) * params.w[k, depth]
    cap = static.horizon + 1
    return jnp.where(depth == 0, 0, jnp.where(x < cap, jnp.ceil(x), cap)).astype(jnp.int32)


def _u_fn(params: VHCTParams, k, var):
    """U of rows with variance ``var`` (as update_path and refresh_all call it), PyXAB's order:
    (mean + (sqrt(2 c^2 V L / T) + 3 b c^2 L / T)) + nu rho^h."""
    def u(mean, count, depth):
        n = count.astype(mean.dtype)
        width = exact_sqrt(params.two_c2 * var * params.log_u[k] / n) + params.bern[k] / n
        return mean + width + params.smooth[depth]
    return u


def _select(static: VHCTStatic, params: VHCTParams, table, stats: Stats, t):
    spec = static.tree
    k = hct._epoch(t)

    def tau(count, v, depth):
        return _tau(static, params, k, _variance(params, stats.m2[v], count), depth)

    node, row, path, length = descend(spec, table, lambda count, v, depth: count >= tau(count, v, depth))
    stop = tau(row[COUNT], node, length - 1) if static.pyxab else jnp.int32(0)
    return Choice(node, path, length, row, stop), centre(spec, row)


def _update(static: VHCTStatic, params: VHCTParams, table, stats: Stats, last: Last, t, active):
    """Round t's update after its selection (and the refresh when t is a power of two)."""
    spec = static.tree
    k = hct._epoch(t)
    choice, r = last.choice, last.reward
    node, depth = choice.node, choice.length - 1
    # The row as the selection read it (one gather fewer): only U and B change in between.
    old = choice.row
    count = old[COUNT] + 1
    mean = as_float(spec, old[MEAN])
    # update_path's running mean, bit for bit.
    new_mean = mean + (r - mean) / count.astype(spec.dtype)
    m2 = stats.m2[node] + no_contraction((r - mean) * (r - new_mean))
    var = _variance(params, m2, count)
    if static.pyxab:
        def grow(count, _depth, child):
            return count >= choice.tau
    else:
        tau = _tau(static, params, k, var, depth)

        def grow(count, _depth, child):
            return (count >= tau) & (child < 0)

    credited = jnp.arange(spec.path_rows) == depth
    table, overflow, regrown = update_path(spec, table, choice.path, choice.length, credited, r,
                                           _u_fn(params, k, var), grow, last.split_u, active=active,
                                           pending=tuple(stats.pending) if static.pyxab else None)
    n = spec.capacity
    if static.pyxab:
        # The replaced children's rows hold fresh nodes: no rewards yet.
        kid = old[CHILD].astype(jnp.int32)
        at = jnp.stack([jnp.where(active, node, n), jnp.where(regrown, kid, n), jnp.where(regrown, kid + 1, n)])
        values = jnp.stack([m2, jnp.zeros_like(m2), jnp.zeros_like(m2)])
        pending = hct.Pending(choice.path, jnp.where(active & regrown, choice.length,
                                                     jnp.where(active, 0, stats.pending.length)))
    else:
        at, values, pending = jnp.where(active, node, n)[None], m2[None], stats.pending
    return table, Stats(stats.m2.at[at].set(values, mode="drop"), pending), overflow


def _refresh(static: VHCTStatic, params: VHCTParams, k, table, stats: Stats):
    """Round 2^k, between its selection and its update: every U with t+ = 2^k and each row's own
    variance, then every B (this also settles a re-expanded node's ancestors)."""
    def u(mean, count, depth, m2):
        return _u_fn(params, k, _variance(params, m2, count))(mean, count, depth)

    table = refresh_all(static.tree, table, u, live=rows_after_updates(k), per_row=(stats.m2,))
    return table, stats._replace(pending=stats.pending._replace(length=jnp.int32(0)))


POLICY = TreePolicy(select=_select, update=_update, refresh=_refresh, init=_init)


ALGORITHM = family.algorithm("vhct", VHCTConfig, make_static, make_params, POLICY,
                           Style("VHCT", "#7b4173", ">"), descends=True)
run_single = ALGORITHM.run_single
