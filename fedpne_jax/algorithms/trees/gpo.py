"""GPO, the General Parallel Optimization of Shang, Kaufmann and Valko (ALT 2019, Algorithm 5), over a
base tree algorithm (``base``: T-HOO, HCT or VHCT; PCT is GPO over HCT, pct.py, and VPCT over VHCT,
vpct.py); ``pyxab=True`` is PyXAB 0.3.0's GPO (algos/GPO.py) instead.

A centralized baseline: parameters as PyXAB's, numax = 1, rhomax = 0.9, ``base`` ('hoo'); the budget
n is the horizon T.  The schedule is a closed form of the round, so its resets are branches.  The
paper's rule, the departures of ``pyxab=True`` and the cost: docs/algorithms/trees.md, section "Each algorithm in detail", GPO.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.trees import family, meta
from fedpne_jax.algorithms.trees.layout import B0, B1, CHILD, COUNT, GEN, MEAN, B, Table, TreeSpec, U, as_bits
from fedpne_jax.algorithms.trees.partition import expand
from fedpne_jax.algorithms.trees.policy import Last, TreeConfig, TreePolicy, TreeStatic, tree_static
from fedpne_jax.core.algorithm import Style
from fedpne_jax.core.validation import check_choice, check_real
from objectives.ordered import no_contraction

RUN, EVAL, FEED, HOLD, FROZEN, BEST = range(6)     # what a round does (see _round)


def phases(horizon: int, rhomax: float) -> tuple:
    """(N, L) in PyXAB's numpy arithmetic (N a float64, possibly not finite)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        half = horizon / 2
        n = np.ceil(0.5 * meta.dmax(rhomax) * np.log(half / np.log(half)))
        return n, np.floor(horizon / (2 * n)) if np.isfinite(n) and n >= 1 else 0.0


@dataclasses.dataclass(frozen=True)
class WrapperConfig(TreeConfig):
    """The fields of GPO over a base (GPOConfig names the base, PCTConfig fixes it)."""

    numax: float = 1.0
    rhomax: float = 0.9
    pyxab: bool = False

    def __post_init__(self):
        super().__post_init__()
        check_real("numax", self.numax, low=0.0, high=1e30)
        check_real("rhomax", self.rhomax, low=0.0, high=1.0)
        meta.check_bool("pyxab", self.pyxab)
        plan(self)

    @property
    def base_name(self) -> str:
        raise NotImplementedError

    @property
    def capacity(self) -> int:
        p = plan(self)
        return meta.capacity(p.configs, p.budgets)

    def resolved(self) -> dict:
        out = super().resolved()
        p = plan(self)
        out.update(base=self.base_name, instances=p.slots, phase_length=p.half)
        return out


@dataclasses.dataclass(frozen=True)
class GPOConfig(WrapperConfig):
    """GPO's parameters (PyXAB's names and defaults; ``base``: 'hoo' (T-HOO), 'hct' or 'vhct'; ``pyxab``:
    PyXAB's GPO)."""

    base: str = "hoo"

    def __post_init__(self):
        check_choice("base", self.base, tuple(meta.BASES))
        super().__post_init__()

    @property
    def base_name(self) -> str:
        return self.base


def pyxab_updates(horizon: int, n: int, half: int) -> int:
    """The updates of PyXAB's one instance within T rounds: its pulls and the rewards it receives
    at the end of phases 1 .. N - 2.  Round (p - 1) 2L + 1 + c is phase p's counter c."""
    at = lambda p, c: (p - 1) * 2 * half + 1 + c
    out = 0
    for p in range(1, n):
        out += max(0, min(at(p, half - 1), horizon) - at(p, 0 if p == 1 else 1) + 1)
        out += int(p + 1 < n and at(p, 2 * half) <= horizon)
    return out


@dataclasses.dataclass(frozen=True)
class Plan:
    slots: int           # N: cross-validated points
    half: int            # L: rounds of a half phase
    rhos: tuple          # per instance (N, or 1 under pyxab)
    budgets: tuple       # updates per instance
    configs: tuple       # the instances' base configs


@functools.lru_cache(maxsize=256)
def plan(config: WrapperConfig) -> Plan:
    n, half = phases(config.horizon, config.rhomax)
    least = 2 if config.pyxab else 1
    if not (np.isfinite(n) and least <= n <= meta.MAX_INSTANCES):
        rule = "PyXAB's GPO" if config.pyxab else "GPO"
        raise ValueError(f"horizon, rhomax: {rule} needs {least} to {meta.MAX_INSTANCES} instances, "
                         f"N = ceil(D_max/2 ln((T/2) / ln(T/2))) = {n} for horizon={config.horizon}, "
                         f"rhomax={config.rhomax}")
    if half < 1:
        raise ValueError(f"horizon: GPO's N = {int(n)} instances need a horizon of at least 2N = {2 * int(n)} "
                         f"rounds, got horizon={config.horizon}")
    count = int(n)
    if config.pyxab:
        rhos: tuple = (config.rhomax ** (2 * n / 3),)
        spent: tuple = (pyxab_updates(config.horizon, count, int(half)),)
    else:
        rhos = tuple(config.rhomax ** (2 * n / (2 * i + 1)) for i in range(1, count + 1))
        spent = (int(half),) * count
    configs = meta.base_configs(config, meta.BASES[config.base_name], rhos, spent)
    return Plan(count, int(half), tuple(float(r) for r in rhos), spent, configs)


@dataclasses.dataclass(frozen=True)
class GPOStatic(TreeStatic):
    base: Any = None            # the base's static, with the instances' common tree spec
    base_name: str = "hoo"
    pyxab: bool = False
    slots: int = 1              # N
    half: int = 1               # L


class GPOParams(NamedTuple):
    instances: Any              # the base's params, stacked (instances, ...)
    noise_scale: np.ndarray     # ()


def make_static(config: WrapperConfig, objective, tables=None) -> GPOStatic:
    p = plan(config)
    base, capacity, height = meta.instance_static(meta.BASES[config.base_name], p.configs, p.budgets, objective,
                                                  config, tables)
    return tree_static(config, objective, capacity, height, cls=GPOStatic, base=base,
                       base_name=config.base_name, pyxab=config.pyxab, slots=p.slots, half=p.half)


def make_params(config: WrapperConfig, tables=None) -> GPOParams:
    base = meta.BASES[config.base_name]
    return GPOParams(instances=meta.stack([base.module.make_params(c) for c in plan(config).configs]),
                     noise_scale=np.asarray(config.noise_scale, np.dtype(config.precision)))


class State(NamedTuple):
    base: Any                # the base's extra
    clock: jax.Array         # () int32 updates of the current instance
    saved: Any               # the base's choice of its last pull (PyXAB's path, which its rewards credit)
    held: jax.Array          # (D,) the point being cross-validated (PyXAB's goodx)
    points: jax.Array        # (N, D) the cross-validated points (PyXAB's V_x)
    value: jax.Array         # (N,) their average rewards (V)
    listed: jax.Array        # (N,) bool: in the list yet
    key: Any                 # the run's key, which every instance's init is given


def _round(static: GPOStatic, t):
    """(what round t does, its slot, its weight: the slot's rewards before it, PyXAB's duplicate)."""
    n, half = static.slots, static.half
    q = t - 1
    if not static.pyxab:
        p, off = q // (2 * half), q % (2 * half)
        kind = jnp.where(p >= n, BEST, jnp.where(off < half, RUN, EVAL))
        return kind, jnp.minimum(p, n - 1), off - half, jnp.bool_(False)
    p = jnp.where(q == 0, 1, (q - 1) // (2 * half) + 1)       # PyXAB's phase and counter
    c = jnp.where(q == 0, 0, (q - 1) % (2 * half) + 1)
    inner = jnp.where(c < half, RUN, jnp.where(c < 2 * half, EVAL, jnp.where(p + 1 < n, FEED, HOLD)))
    kind = jnp.where(p < n, inner, jnp.where((p == n) & (c < half), FROZEN, BEST))
    return kind, jnp.minimum(p - 1, n - 1), c - half, (p == n) & (c == half)


def _instance(static: GPOStatic, slot):
    return 0 if static.pyxab else slot


def _base(static: GPOStatic) -> meta.Base:
    return meta.BASES[static.base_name]


def _init(static: GPOStatic, params: GPOParams, table, key) -> State:
    policy = _base(static).policy
    first = meta.pick(params.instances, 0)
    extra = policy.init(static.base, first, table, key)
    shape = jax.eval_shape(lambda: policy.select(static.base, first, table, extra, jnp.int32(1))[0])
    n, dim, dtype = static.slots, static.tree.dim, static.tree.dtype
    return State(extra, jnp.int32(0), jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shape),
                 jnp.zeros((dim,), dtype), jnp.zeros((n, dim), dtype), jnp.zeros((n,), dtype), jnp.zeros((n,), bool), key)


def _best(state: State):
    return state.points[meta.first_best(state.value, state.listed)]


def _select(static: GPOStatic, params: GPOParams, table, state: State, t):
    policy = _base(static).policy
    kind, slot, weight, _ = _round(static, t)
    p = meta.pick(params.instances, _instance(static, slot))
    zero = jnp.zeros((), static.tree.dtype)

    def descend():
        choice, point = policy.select(static.base, p, table, state.base, state.clock + 1)
        if static.pyxab:
            return choice, point, point
        return choice, point, policy.recommend(static.base, p, table, state.base, Last(choice, zero, zero, point))

    def skip():
        # The rounds that evaluate a held point read no selection (their update is skipped too);
        # ``saved`` has a choice's structure (no second trace of the descent to find it).
        nothing = jnp.zeros((static.tree.dim,), static.tree.dtype)
        return jax.tree.map(jnp.zeros_like, state.saved), nothing, nothing

    # The round's kind is the same in every run of a batch, so this is a branch, not a select: the
    # half of the rounds that evaluate a held point pay for no descent.
    needed = (kind == RUN) | (kind == FROZEN) if static.pyxab else (kind == RUN) | ((kind == EVAL) & (weight == 0))
    choice, point, recommended = jax.lax.cond(needed, descend, skip)
    held = state.held
    if not static.pyxab:
        held = jnp.where((kind == EVAL) & (weight == 0), recommended, held)
    # The best point's argmax over the list is needed only after the phases (a branch, as above).
    x = jnp.where((kind == RUN) | (kind == FROZEN), point, jax.lax.cond(kind == BEST, lambda: _best(state),
                                                                       lambda: held))
    if static.pyxab:
        choice = meta.keep(kind == FEED, state.saved, choice)
    return choice, x


def _fresh(spec: TreeSpec, table: Table, split_u) -> Table:
    """A new instance's tree in the table's rows: the root (whose box row 0 keeps) and its two
    children, split as the round's split uniform says; the old rows past them are unreachable."""
    inf, zero = as_bits(spec, jnp.inf), as_bits(spec, 0.0)
    leaf = table.rows[0].at[CHILD].set(-1).at[COUNT].set(0).at[GEN].set(0) \
        .at[B0].set(inf).at[B1].set(inf).at[MEAN].set(zero).at[U].set(inf).at[B].set(inf)
    fresh, _ = expand(spec, Table(table.rows, jnp.int32(1), jnp.int32(0)), 0, jnp.bool_(True), split_u,
                      node_row=leaf)
    return fresh


def _update(static: GPOStatic, params: GPOParams, table, state: State, last: Last, t, active):
    policy = _base(static).policy
    n, half = static.slots, static.half
    kind, slot, weight, duplicate = _round(static, t)
    p = meta.pick(params.instances, _instance(static, slot))
    updating = active & ((kind == RUN) | (kind == FEED))
    s = state.clock + 1
    table, extra = meta.refresh(policy, static.base, p, table, state.base, s, updating)
    # As in _select: ``updating`` is the same in every run of a batch, so a branch.
    table, new, overflow = jax.lax.cond(
        updating, lambda operand: policy.update(static.base, p, *operand, last, s, updating),
        lambda operand: (operand[0], operand[1], jnp.bool_(False)), (table, extra))
    # A skipped update writes nothing to the table but may still rewrite the extra (HCT's pending path).
    extra = meta.keep(updating, new, extra)
    dtype = static.tree.dtype
    evaluating = active & (kind == EVAL)
    listing = evaluating | (active & duplicate)
    v, r, w = state.value[slot], last.reward, weight.astype(dtype)
    mu = (no_contraction(v * w) + r) / (w + 1) if static.pyxab else v + (r - v) / (w + 1)
    state = State(
        base=extra, clock=state.clock + updating,
        saved=meta.keep(active & (kind == RUN), last.choice, state.saved),
        held=jnp.where(active & ((kind == RUN) | (kind == EVAL)), last.point, state.held),
        points=state.points.at[slot].set(jnp.where(listing, last.point, state.points[slot])),
        value=state.value.at[slot].set(jnp.where(evaluating, mu, jnp.where(listing, 0, v))),
        listed=state.listed.at[slot].set(state.listed[slot] | listing), key=state.key)
    if not static.pyxab:
        starting = active & (t % (2 * half) == 0) & (t < 2 * n * half)

        def start(operand):
            table, extra = operand
            table = _fresh(static.tree, table, last.split_u)
            return table, policy.init(static.base, meta.pick(params.instances, jnp.minimum(slot + 1, n - 1)), table,
                                     state.key)

        table, extra = jax.lax.cond(starting, start, lambda operand: operand, (table, state.base))
        state = state._replace(base=extra, clock=jnp.where(starting, 0, state.clock))
    return table, state, overflow


def _recommend(static: GPOStatic, params: GPOParams, table, state: State, last: Last):
    return _best(state)


POLICY = TreePolicy(select=_select, update=_update, init=_init, recommend=_recommend)


ALGORITHM = family.algorithm("gpo", GPOConfig, make_static, make_params, POLICY,
                           Style("GPO", "#637939", "x"), descends=True)
run_single = ALGORITHM.run_single
