"""POO, the Parallel Optimistic Optimization of Grill, Valko and Munos (NIPS 2015), over a base tree
algorithm (``base``: T-HOO, the paper's, HCT, as Shang, Kaufmann and Valko 2019 run it, or VHCT);
``pyxab=True`` is PyXAB 0.3.0's POO (algos/POO.py) instead.

A centralized baseline: every round is one evaluation by the instance the schedule picks.
Parameters as PyXAB's: numax = 1, rhomax = 0.9, ``base`` ('hoo').  Both schedules are decided on the
host as O(log T) segments; instances are meta.py's.  The paper's Algorithm 1 and how its loop is
read, the departures of ``pyxab=True``, the recommendation and the cost: docs/algorithms/trees.md, section "Each algorithm in detail", POO.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.trees import family, meta
from fedpne_jax.algorithms.trees.layout import centre
from fedpne_jax.algorithms.trees.partition import root_dim
from fedpne_jax.algorithms.trees.policy import Last, TreeConfig, TreePolicy, TreeStatic, tree_static
from fedpne_jax.algorithms.trees.rounds import chunk_uniforms
from fedpne_jax.core.algorithm import Style
from fedpne_jax.core.validation import check_choice, check_real
from objectives.ordered import no_contraction, prefix_sum


@dataclasses.dataclass(frozen=True)
class POOConfig(TreeConfig):
    """POO's parameters (PyXAB's names and defaults; ``base``: the algorithm every instance runs,
    'hoo' (T-HOO, the paper's), 'hct' or 'vhct'; ``pyxab``: PyXAB's schedule and statistics)."""

    numax: float = 1.0
    rhomax: float = 0.9
    base: str = "hoo"
    pyxab: bool = False

    def __post_init__(self):
        super().__post_init__()
        check_real("numax", self.numax, low=0.0, high=1e30)
        check_real("rhomax", self.rhomax, low=0.0, high=1.0)
        check_choice("base", self.base, tuple(meta.BASES))
        meta.check_bool("pyxab", self.pyxab)
        plan(self)

    @property
    def capacity(self) -> int:
        p = plan(self)
        return meta.capacity(p.configs, p.budgets)

    def resolved(self) -> dict:
        out = super().resolved()
        p = plan(self)
        out.update(instances=p.started, rho_lowest=min(p.rhos[:p.started]), rho_highest=max(p.rhos[:p.started]))
        return out


class Segment(NamedTuple):
    """Rounds start .. (the next segment's start - 1) of a schedule."""
    start: int      # its first round
    first: int      # a creation segment's first instance (a round robin's: 0)
    per: int        # a creation segment's rounds per instance
    cycle: int      # a round robin's instances (0: a creation segment)
    weight: int     # a round robin's ceil(n / N) in its first cycle (PyXAB's weight of a reward)


def _cycles(ready, n: int, step: int, cap: int) -> int:
    """The least c >= 1 with ready(n + c step), or ``cap`` when larger (ready is monotone from n = 3
    on: n / ln n grows)."""
    if cap <= 1 or ready(n + step):
        return 1
    lo, hi = 1, 2
    while hi < cap and not ready(n + hi * step):
        lo, hi = hi, 2 * hi
    if hi >= cap:
        if not ready(n + cap * step):
            return cap
        hi = cap
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ready(n + mid * step) else (mid, hi)
    return hi


def _too_many(count: int, rhomax: float) -> None:
    if count > meta.MAX_INSTANCES:
        raise ValueError(f"rhomax: POO with rhomax={rhomax} would run more than {meta.MAX_INSTANCES} instances "
                         f"within the horizon; lower rhomax or the horizon")


def paper_schedule(horizon: int, rhomax: float) -> tuple:
    """(segments covering rounds 1..T+1, exponent e of every instance: rho = rhomax ** e) of
    Algorithm 1."""
    d = meta.dmax(rhomax)
    short = lambda n, N: N < 0.5 * d * meta.log_ratio(n)
    last = horizon + 1
    segments, exponents = [], [1.0]
    n, N, t = 0, 1, 1
    while t <= last:
        while t <= last and short(n, N):
            _too_many(2 * N, rhomax)
            segments.append(Segment(t, N, n // N, 0, 0))
            exponents += [2 * N / (2 * i + 1) for i in range(1, N + 1)]
            t += n
            n, N = 2 * n, 2 * N
        if t > last:
            break
        c = _cycles(lambda m, N=N: short(m, N), n, N, -(-(last - t + 1) // N))
        segments.append(Segment(t, 0, 1, N, n // N))
        t, n = t + c * N, n + c * N
    return tuple(segments), tuple(exponents)


def pyxab_schedule(horizon: int, rhomax: float) -> tuple:
    """(segments covering rounds 1..T+1, exponent of every instance) of PyXAB's POO (the state of
    its ``pull`` and ``receive_reward``: N, n, phase, its instances, ``algo_counter``)."""
    d = meta.dmax(rhomax)
    create = lambda n, N: N <= 0.5 * d * meta.log_ratio(n)
    last = horizon + 1
    segments: list = []
    exponents: list = []
    N, n, phase, made, t = 2, 2, 1, 0, 1
    while t <= last:
        if create(n, N):
            _too_many(made + N - phase, rhomax)
            per = -(-n // N)
            segments.append(Segment(t, made, per, 0, 0))
            exponents += [2 * N / (2 * p + 1) for p in range(phase, N)]
            t += (N - phase) * per
            made += N - phase
            n, N, phase = 2 * n, 2 * N, 0
        else:
            if made == 0:
                raise ValueError(f"rhomax: PyXAB's POO starts its round robin before any instance exists when "
                                 f"N = 2 > (1/2) D_max ln(2 / ln 2) (rhomax below about 0.832), and fails there; "
                                 f"got rhomax={rhomax}")
            c = _cycles(lambda m, N=N: create(m, N), n, N, -(-(last - t + 1) // made))
            segments.append(Segment(t, 0, 1, made, n // N))
            t, n = t + c * made, n + c * N
    return tuple(segments), tuple(exponents)


def budgets(segments, horizon: int, count: int) -> list:
    """Evaluations of each of ``count`` instances within rounds 1..T."""
    out = [0] * count
    ends = [s.start for s in segments[1:]] + [horizon + 2]
    for s, end in zip(segments, ends):
        length = max(0, min(end, horizon + 1) - s.start)
        if s.cycle:
            for k in range(s.cycle):
                out[k] += length // s.cycle + (k < length % s.cycle)
        else:
            for j in range(-(-length // s.per)):
                out[s.first + j] += min(s.per, length - j * s.per)
    return out


@dataclasses.dataclass(frozen=True)
class Plan:
    segments: tuple
    rhos: tuple          # per instance of the static (at least 2)
    budgets: tuple       # evaluations within T per instance
    started: int         # instances evaluated within T
    configs: tuple       # the instances' base configs


@functools.lru_cache(maxsize=256)
def plan(config: POOConfig) -> Plan:
    schedule = pyxab_schedule if config.pyxab else paper_schedule
    segments, exponents = schedule(config.horizon, config.rhomax)
    counts = budgets(segments, config.horizon, len(exponents))
    started = sum(1 for b in counts if b > 0)
    n = max(2, started)
    # A second instance that never runs keeps the leading axis when only one does (T = 1).
    rhos = tuple(config.rhomax ** e for e in exponents[:n]) + (config.rhomax,) * (n - len(exponents))
    spent = tuple(counts[:n]) + (0,) * (n - len(counts))
    configs = meta.base_configs(config, meta.BASES[config.base], rhos, spent)
    return Plan(segments, rhos, spent, started, configs)


@dataclasses.dataclass(frozen=True)
class POOStatic(TreeStatic):
    base: Any = None            # the base's static, with the instances' common tree spec
    base_name: str = "hoo"
    pyxab: bool = False
    segments: tuple = ()


class POOParams(NamedTuple):
    instances: Any           # the base's params, stacked (N, ...)
    noise_scale: np.ndarray  # ()


def make_static(config: POOConfig, objective, tables=None) -> POOStatic:
    p = plan(config)
    base, capacity, height = meta.instance_static(meta.BASES[config.base], p.configs, p.budgets, objective, config,
                                                  tables)
    return tree_static(config, objective, capacity, height, cls=POOStatic, instances=len(p.rhos), base=base,
                       base_name=config.base, pyxab=config.pyxab, segments=p.segments)


def make_params(config: POOConfig, tables=None) -> POOParams:
    base = meta.BASES[config.base]
    return POOParams(instances=meta.stack([base.module.make_params(c) for c in plan(config).configs]),
                     noise_scale=np.asarray(config.noise_scale, np.dtype(config.precision)))


class State(NamedTuple):
    base: Any                # (N, ...) every instance's extra
    clock: jax.Array         # (N,) int32 updates of each instance
    value: jax.Array         # (N,) mu (PyXAB's V_reward)


def _slot(static: POOStatic, t):
    """(instance, in a round robin, PyXAB's round-robin weight) of round t (or of an array of rounds),
    from the static alone."""
    table = jnp.asarray(np.asarray(static.segments, np.int32))
    t = jnp.asarray(t, jnp.int32)
    g = jnp.sum((table[:, 0] <= t[..., None]).astype(jnp.int32), axis=-1) - 1
    start, first, per, cycle, weight = (table[g, j] for j in range(5))
    off = t - start
    robin = cycle > 0
    i = jnp.where(robin, off % jnp.maximum(cycle, 1), first + off // jnp.maximum(per, 1))
    return jnp.minimum(i, static.instances - 1), robin, weight + off // jnp.maximum(cycle, 1)


def _base(static: POOStatic) -> meta.Base:
    return meta.BASES[static.base_name]


def _init(static: POOStatic, params: POOParams, tables, keys) -> State:
    policy = _base(static).policy
    extras = jax.vmap(lambda p, tb, k: policy.init(static.base, p, tb, k))(params.instances, tables, keys)
    n = static.instances
    return State(extras, jnp.zeros((n,), jnp.int32), jnp.zeros((n,), static.tree.dtype))


def _select(static: POOStatic, params: POOParams, tables, state: State, t):
    """The acting instance's selection at its own next round (on a copy of its rows, as its update);
    under PyXAB's rule round T + 1 selects with the best instance, whose point it recommends."""
    i, _, _ = _slot(static, t)
    if static.pyxab:
        i = jnp.where(t > static.horizon, meta.first_best(state.value, state.clock > 0), i)
    return _base(static).policy.select(static.base, meta.pick(params.instances, i), meta.pick(tables, i),
                                       meta.pick(state.base, i), state.clock[i] + 1)


def _update(static: POOStatic, params: POOParams, tables, state: State, last: Last, t, active):
    policy = _base(static).policy
    i, robin, weight = _slot(static, t)
    s = state.clock[i] + 1
    # The acting instance alone, on a copy of its rows: a vmapped update of every instance scatters
    # N paths into the tables every round, most of them dropped (17x slower at N = 32, T = 3000).
    p, table, extra = meta.pick(params.instances, i), meta.pick(tables, i), meta.pick(state.base, i)
    table, extra = meta.refresh(policy, static.base, p, table, extra, s, active)
    table, new, overflow = policy.update(static.base, p, table, extra, last, s, active)
    extra = meta.keep(active, new, extra)
    put = lambda a, b: a.at[i].set(b)
    tables, extras = jax.tree.map(put, tables, table), jax.tree.map(put, state.base, extra)
    dtype = static.tree.dtype
    v, r = state.value[i], last.reward
    if static.pyxab:
        w = jnp.where(robin, weight, state.clock[i]).astype(dtype)
        mu = (no_contraction(v * w) + r) / (w + 1)
    else:
        mu = v + (r - v) / s.astype(dtype)
    value = state.value.at[i].set(jnp.where(active, mu, v))
    return tables, State(extras, state.clock.at[i].add(active), value), overflow


def _recommend(static: POOStatic, params: POOParams, tables, state: State, last: Last):
    if static.pyxab:
        # PyXAB's get_last_point: the best instance's next selection.  After round T that is round
        # T + 1's point (_select); after an earlier checkpoint round it is not the point pulled next.
        i = meta.first_best(state.value, state.clock > 0)
        return _base(static).policy.select(static.base, meta.pick(params.instances, i), meta.pick(tables, i),
                                           meta.pick(state.base, i), state.clock[i] + 1)[1]
    best = meta.first_best(state.value, state.clock > 0)
    spec = static.tree
    rows = tables.rows[best]
    live = jnp.arange(spec.capacity) < tables.size[best]
    evaluated = jnp.where(live, _base(static).evaluations(spec, rows), 0)
    n = state.clock[best]
    j = jnp.minimum(jnp.floor(last.split_u * n.astype(spec.dtype)).astype(jnp.int32), n - 1)
    row = jnp.sum((prefix_sum(evaluated) <= j).astype(jnp.int32))
    return centre(spec, rows[jnp.minimum(row, spec.capacity - 1)])


def recommendation_uniform(key, static: TreeStatic) -> float:
    """Round T + 1's split uniform of a run (the paper rule's draw of its recommendation), on the host."""
    t = static.horizon + 1
    with jax.enable_x64(static.real == "float64"):
        u = chunk_uniforms(key, (t - 1) // static.chunk, static.chunk, jnp.dtype(static.real))
        return float(np.asarray(u)[(t - 1) % static.chunk, 2])


def root_dims(key, instances: int, dim: int):
    """The root's split dimension of every instance under split='random' (run folds the
    instance index into the run key)."""
    return [int(root_dim(jax.random.fold_in(key, i), dim)) for i in range(instances)]


POLICY = TreePolicy(select=_select, update=_update, init=_init, recommend=_recommend)


ALGORITHM = family.algorithm("poo", POOConfig, make_static, make_params, POLICY,
                           Style("POO", "#ad494a", "8"), descends=True)
run_single = ALGORITHM.run_single
