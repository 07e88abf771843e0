"""One phase of Fed-PNE (Algorithms 1-2), shared by Fed-PNE and DP-Fed-PNE.

DP-Fed-PNE differs only in the rewards (extra Gaussian noise, see sampling.py) and in the
confidence constant c (resolved on the host), so the same phase function serves both.

Semantics, with the paper's typos resolved:
* before a phase, while |K| tau_h <= M or tau_h <= 1, K is replaced by all k children of its nodes;
* every client pulls each node of K n_h = ceil(tau_h / M) times, node after node in table order;
* the server averages the client means, and eliminates node i when
  mu_i + b_h + nu1 rho^h < max_j mu_j - b_h, b_h = c sqrt(L / (M n_h));
* K becomes the children of the survivors, parents in order, each parent's children in order;
* a phase that would pass round T is cut at T (clients follow its schedule) and eliminates nothing.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from fedpne_jax.algorithms.fedpne import partition
from fedpne_jax.algorithms.fedpne import sampling as rewards
from fedpne_jax.algorithms.fedpne.plan import Params, Static
from fedpne_jax.core import checkpoints
from fedpne_jax.core.errors import FLAG_CAPACITY, FLAG_DEPTH
from objectives.ordered import prefix_min, prefix_sum

# Targets compared with a phase's rows at a time (_best_so_far): a phase rarely reaches more.
HIT_WINDOW = 8


class RunState(NamedTuple):
    table: partition.NodeTable
    depth: jax.Array           # depth of the nodes in the table
    survivors: jax.Array       # (cap,) rows whose children form the next K (after a completed phase)
    pending: jax.Array         # () bool: the table still holds the last phase's nodes
    t: jax.Array               # rounds completed
    regret: jax.Array          # per-client average cumulative regret R(t) / M
    curve: jax.Array           # (C,) R / M at the checkpoint rounds
    best: checkpoints.Best     # best-so-far regret (over every client's pulls) and its target rounds
    best_curve: jax.Array      # (C,) best-so-far regret at the checkpoint rounds
    goals: jax.Array           # (51,) the targets (checkpoints.targets)
    phases: jax.Array          # phases whose estimates were uploaded
    uploads: jax.Array         # sum over uploaded phases of |K^p| (scalars per client)
    depth_pulled: jax.Array    # depth of the last phase that pulled
    recommendation: jax.Array  # (D,) centre of the best node of the last completed phase
    simple: jax.Array          # () f* - f(recommendation) on the global objective
    simple_curve: jax.Array    # (C,) ``simple`` at the checkpoint rounds
    max_active: jax.Array      # largest |K| seen or asked for (how much capacity a run needs)
    flags: jax.Array           # FLAG_* bits; any set bit stops the run
    evaluations: jax.Array     # (4,) int32 objective evaluations so far (see evaluation.py)
    span: Span                 # the last phase, whose checkpoints write_span writes


class Span(NamedTuple):
    """A phase's checkpoints, located in its schedule, and what their curves read (write_span): the
    next trip of the phase loop writes them, and the run writes the last phase's after the loop.

    Written in the phase itself, the location of every checkpoint (the phase's schedule, then a
    division) was fused again into each curve's update, element by element: at M = 100, T = 10^6,
    C = 100 the checkpoints took about 0.16 s of a 0.35 s run of 10^4 seeds.  Carried across the
    trip, the located checkpoints and the rows' values arrive computed once (0.08 s)."""
    inside: jax.Array          # (C,) bool: the checkpoint's round is one of the phase's
    jc: jax.Array              # (C,) the row it falls in (_locate)
    part: jax.Array            # (C,) that row's pulls by then (0 outside the phase)
    last: jax.Array            # (C,) bool: the checkpoint's round is the phase's last
    regret: jax.Array          # () R / M before it
    prefix: jax.Array          # (cap + 1,) R / M paid by rows 0 .. j - 1
    gap: jax.Array             # (cap,) f* - f at each row's centre, inf where not pulled
    partial: jax.Array | None  # (C,) uniform points: regret of the first part_c pulls of row jc_c
    best: jax.Array            # () best-so-far regret before the phase
    firsts: jax.Array          # (cap,) best-so-far regret within the phase by row (running min of gap)
    simple: jax.Array          # () simple regret during the phase
    simple_after: jax.Array    # () at its last round (its recommendation, when it completes)


def best_recorded(static: Static) -> bool:
    """Whether runs record the best-so-far regret: with uniform points in the cells every pull has its
    own value, which the per-block sums of the explicit sampler do not keep in order."""
    return static.pull != "uniform"


def init_state(static: Static, objective, partition_key, scale, centre_gap) -> RunState:
    """The state before phase 1; ``centre_gap``: f* - f(centre of the box), the first recommendation's."""
    table = partition.root(static, partition_key)
    dt = static.float_dtype
    centre = 0.5 * (jnp.asarray(objective.lo, dt) + jnp.asarray(objective.hi, dt))
    zero = jnp.int32(0)
    best = checkpoints.best_start(dt)
    if not best_recorded(static):
        best = checkpoints.Best(jnp.asarray(jnp.nan, dt), jnp.full_like(best.hits, -1))
    return RunState(table=table, depth=zero, survivors=jnp.zeros((static.capacity,), bool),
                    pending=jnp.array(False), t=zero, regret=jnp.zeros((), dt),
                    curve=jnp.zeros((static.checkpoints,), dt), best=best,
                    best_curve=jnp.full((static.checkpoints,), jnp.nan if not best_recorded(static) else 0.0, dt),
                    goals=checkpoints.targets(scale), phases=zero, uploads=zero,
                    depth_pulled=zero, recommendation=centre,
                    simple=centre_gap.astype(dt),
                    simple_curve=jnp.zeros((static.checkpoints,), dt), max_active=jnp.int32(1), flags=zero,
                    evaluations=jnp.zeros((4,), jnp.int32), span=_empty_span(static))


def _empty_span(static: Static) -> Span:
    """A span of no rounds: writes nothing."""
    dt, cap = static.float_dtype, static.capacity
    inf = jnp.full((cap,), jnp.inf, dt)
    partial = None if best_recorded(static) else jnp.zeros((static.checkpoints,), dt)
    no = jnp.zeros((static.checkpoints,), bool)
    count = jnp.zeros((static.checkpoints,), jnp.int32)
    return Span(inside=no, jc=count, part=count, last=no, regret=jnp.zeros((), dt), prefix=jnp.zeros((cap + 1,), dt),
                gap=inf, partial=partial, best=jnp.zeros((), dt), firsts=inf, simple=jnp.zeros((), dt),
                simple_after=jnp.zeros((), dt))


def runs(params: Params, state: RunState):
    """Whether the run goes on from ``state``: rounds are left and no flag stopped it (a phase whose
    expansion flagged is not run)."""
    return (state.t < params.horizon) & (state.flags == 0)


def expand_until_ready(static: Static, params: Params, state: RunState) -> RunState:
    """Form K for the next phase: the children of the last phase's survivors (server line 16), then
    all children of all nodes while |K| tau_h <= M or tau_h <= 1 (server lines 5-7).

    Both are one expansion step, so the partition code is traced once.
    """
    M = static.num_clients

    def needs_expansion(s: RunState):
        tau = params.tau[s.depth]
        small = (tau <= 1) | (s.table.used <= M // tau)
        # A run that is over expands no more (a stepper asked after done comes here).
        return (s.pending | small) & runs(params, s)

    def expand_once(s: RunState):
        active = jnp.arange(static.capacity) < s.table.used
        table, demand = partition.expand(static, s.table, jnp.where(s.pending, s.survivors, active), s.depth)
        # The tables end at static.depth: flag instead of indexing past them.
        flags = s.flags | jnp.where(demand > static.capacity, FLAG_CAPACITY, 0) \
            | jnp.where(s.depth >= static.depth, FLAG_DEPTH, 0)
        return s._replace(table=table, depth=jnp.minimum(s.depth + 1, static.depth), pending=jnp.array(False),
                          flags=flags, max_active=jnp.maximum(s.max_active, demand))

    return jax.lax.while_loop(needs_expansion, expand_once, state)


def row_quotient(offset, n):
    """offset // n, exactly, for 0 <= offset < 2^31, 1 <= n < 2^31 and a quotient of at most 2^22 (a
    row of the node table: offset <= |K| n).

    Every phase locates all C checkpoints in its schedule.  Integer division has no vector
    instruction on CPUs, and with it XLA kept the checkpoints' gathers fused with their producers;
    with this quotient a cheap run at C = 100 cost about 30 % less.  The float32 quotient is within
    3 ulp of offset / n, i.e. less than 1 below 2^22; one step in exact uint32 arithmetic
    ((q + 1) n <= offset + n < 2^32) corrects its floor."""
    q = jnp.floor(offset.astype(jnp.float32) / n.astype(jnp.float32)).astype(jnp.int32)
    a, m = offset.astype(jnp.uint32), n.astype(jnp.uint32)
    below = q.astype(jnp.uint32) * m
    return jnp.where(below > a, q - 1, jnp.where(a - below >= m, q + 1, q))


class Schedule(NamedTuple):
    """A phase as the server broadcasts it (Algorithm 2, lines 8-9): row j of the table is pulled
    ``pulls[j]`` times by every client, in rounds t + j n + 1 .. t + (j + 1) n, cut at T."""
    active: jax.Array          # (cap,) bool: rows of K
    n: jax.Array               # () pulls of a node per client, n_h
    pulls: jax.Array           # (cap,) int32 pulls of each row, cut at T (0 past |K|)
    complete: jax.Array        # () bool: the phase ends by T (its estimates are uploaded)
    t_end: jax.Array           # () its last round
    inside: jax.Array          # (C,) the checkpoints it holds, located (_locate)
    jc: jax.Array
    part: jax.Array
    centre: jax.Array          # (cap, D) the rows' centres, the points pulled


def schedule(static: Static, params: Params, lo, hi, state: RunState) -> Schedule:
    """The phase of ``state`` (after expand_until_ready) in the box [lo, hi]."""
    table, h, t, T = state.table, state.depth, state.t, params.horizon
    rows = jnp.arange(static.capacity, dtype=jnp.int32)
    active = rows < table.used
    n = params.n_pulls[h]

    # Products j * n are formed only where they cannot exceed T (int32).
    remaining = T - t
    full = remaining // n
    pulls = jnp.where(rows < full, n, jnp.where(rows == full, remaining - jnp.minimum(full, rows) * n, 0))
    pulls = jnp.where(active, pulls, 0)
    complete = table.used <= full
    t_end = jnp.where(complete, t + jnp.minimum(table.used, full) * n, T)

    inside, jc, part = _locate(params.checkpoint_rounds, t, t_end, n)
    centre = partition.centres(static, table, lo, hi)
    return Schedule(active, n, pulls, complete, t_end, inside, jc, part, centre)


def run_phase(static: Static, params: Params, objective, sample_key, state: RunState) -> RunState:
    """Pull, upload, aggregate and eliminate: one phase (after expand_until_ready), its rewards drawn
    by the configuration's sampler."""
    sched = schedule(static, params, objective.lo, objective.hi, state)
    phase_key = jax.random.fold_in(sample_key, state.phases)
    est = rewards.estimate(static, params, objective, state.table, sched.centre, sched.pulls, sched.n, phase_key,
                           sched.jc, sched.part, sched.complete)
    return conclude(static, params, objective, state, sched, est)


def conclude(static: Static, params: Params, objective, state: RunState, sched: Schedule,
             est: rewards.Estimate) -> RunState:
    """Everything a phase does once its rewards are estimated, whoever drew them (a sampler in
    run_phase, the clients of ask/tell in steps.py): the regret booked, the server's aggregation and
    elimination (Algorithm 2, lines 11-16), the recommendation and the checkpoints' span.
    ``objective`` is read only with uniform points in the cells (the recommendation's gap)."""
    h, t = state.depth, state.t
    active, n, pulls, complete = sched.active, sched.n, sched.pulls, sched.complete

    prefix = jnp.concatenate([jnp.zeros((1,), static.float_dtype), prefix_sum(est.regret)])
    firsts = prefix_min(est.gap)                                               # inf past the pulled rows
    so_far = _best_so_far(static, state, firsts, pulls, n, t) if best_recorded(static) else state.best

    # Server (Algorithm 2, lines 11-15).  A cut phase uploads nothing and eliminates nothing; the run
    # ends with it.
    mu = jnp.where(active, est.mean, -jnp.inf)
    best = jnp.argmax(mu)
    b, smooth = params.conf[h], params.smooth[h]
    eliminated = est.mean + b + smooth < mu[best] - b
    # The recommendation changes when the phase completes, after its last round.  Its gap is the
    # pulled centre's (est.gap), or, with uniform points in the cells, one evaluation of the global
    # objective at the centre a phase.
    new = (est.gap[best] if best_recorded(static)
           else jnp.asarray(objective.f_star, static.float_dtype) - objective.global_value(sched.centre[best]))
    simple = jnp.where(complete, new.astype(static.float_dtype), state.simple)
    span = Span(inside=sched.inside, jc=sched.jc, part=sched.part, last=params.checkpoint_rounds == sched.t_end,
                regret=state.regret, prefix=prefix, gap=est.gap, partial=est.partial, best=state.best.value,
                firsts=firsts, simple=state.simple, simple_after=simple)
    return state._replace(
        survivors=active & ~eliminated,
        pending=complete,
        t=sched.t_end,
        regret=state.regret + prefix[-1],
        best=so_far,
        phases=state.phases + complete.astype(jnp.int32),
        uploads=state.uploads + jnp.where(complete, state.table.used, 0),
        depth_pulled=h,
        recommendation=jnp.where(complete, sched.centre[best], state.recommendation),
        simple=simple,
        flags=state.flags | est.flags,
        evaluations=state.evaluations + est.evaluated,
        span=span,
    )


def _locate(rounds, t, t_end, n):
    """(inside, jc, part) of the checkpoints at ``rounds`` in a phase of rounds t + 1 .. t_end whose
    row j is pulled in rounds t + j n + 1 .. t + (j + 1) n: checkpoint c is one of the phase's rounds
    and falls after part_c pulls of row jc_c (part_c = 0 outside the phase)."""
    inside = checkpoints.within(rounds, t, t_end)
    offset = jnp.clip(rounds - t, 0, t_end - t)
    jc = row_quotient(offset, n)
    return inside, jc, jnp.where(inside, offset - jc * n, 0)


def write_span(static: Static, state: RunState) -> RunState:
    """``state`` with the checkpoints of its last phase (``state.span``) written into its three
    curves: the regret paid by the rows before each checkpoint's row and by the first pulls of its
    own, the best gap among the rows begun by then, and the recommendation (the phase's new one
    from its last round on).  Writing a span twice writes the same numbers."""
    span, cap = state.span, static.capacity
    inside, jc, part = span.inside, span.jc, span.part
    partial = span.partial if span.partial is not None else \
        jnp.where(part > 0, span.gap[jnp.minimum(jc, cap - 1)] * part.astype(span.gap.dtype), 0.0)
    curve = jnp.where(inside, span.regret + span.prefix[jc] + partial, state.curve)
    best_curve = state.best_curve
    if best_recorded(static):
        # checkpoint c falls in row jc_c, or at the end of row jc_c - 1 when part_c = 0
        at = jnp.clip(jnp.where(part > 0, jc, jc - 1), 0, cap - 1)
        best_curve = jnp.where(inside, jnp.minimum(span.best, span.firsts[at]), best_curve)
    simple_curve = checkpoints.record_located(state.simple_curve, inside, span.last, span.simple, span.simple_after)
    return state._replace(curve=curve, best_curve=best_curve, simple_curve=simple_curve)


def _best_so_far(static: Static, state: RunState, firsts, pulls, n, t) -> checkpoints.Best:
    """The best-so-far state after a phase whose row j is pulled at its centre in rounds
    t + j n + 1 .. t + (j + 1) n, ``firsts[j]`` the smallest gap among rows 0 .. j: by round r the
    rows begun are 0 .. (r - t - 1) // n.  The first row reaching a target is the count of rows
    whose running min is above it (it never increases).

    The targets decrease, so those reached so far are a prefix and a phase can reach only targets
    from the first unreached one on: they are compared with the rows HIT_WINDOW at a time, the window
    moving on while it is reached whole (usually once a phase).  Comparing all 51 targets with every
    row each phase took a third of a run at M = 100, T = 10^6."""
    # rows above each target: one fused compare for the usual tables, a bisection for huge ones
    method = "compare_all" if static.capacity <= 4096 else "scan"
    begun = jnp.sum(pulls > 0, dtype=jnp.int32)
    count = state.goals.shape[0]
    goals = jnp.concatenate([state.goals, jnp.full((HIT_WINDOW,), -jnp.inf, state.goals.dtype)])
    hits = jnp.concatenate([state.best.hits, jnp.full((HIT_WINDOW,), checkpoints.NOT_REACHED, jnp.int32)])

    def window(carry):
        start, hits, _ = carry
        first = jnp.searchsorted(-firsts, -jax.lax.dynamic_slice(goals, (start,), (HIT_WINDOW,)), side="left",
                                 method=method).astype(jnp.int32)
        old = jax.lax.dynamic_slice(hits, (start,), (HIT_WINDOW,))
        reached = first < begun
        new = jnp.where((old == checkpoints.NOT_REACHED) & reached, t + first * n + 1, old)
        return start + HIT_WINDOW, jax.lax.dynamic_update_slice(hits, new, (start,)), reached[-1]

    start = jnp.sum(state.best.hits != checkpoints.NOT_REACHED, dtype=jnp.int32)
    _, hits, _ = jax.lax.while_loop(lambda c: c[2] & (c[0] < count), window, (start, hits, jnp.bool_(True)))
    return checkpoints.Best(jnp.minimum(state.best.value, firsts[-1]), hits[:count])
