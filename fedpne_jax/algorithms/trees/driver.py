"""The driver of a tree run: a policy's state through the rounds, booked, and its outputs.

:func:`run` is every tree algorithm's ``run_single``: :func:`start` (the table, the policy's own
state, an empty book), then :func:`rounds.run_rounds` with the policy's selection, its update
(:func:`apply_update`) and its refresh (:func:`apply_refresh`), each round's evaluation booked and
the simple regret of its recommendation recorded (:func:`record_recommendation`), and :func:`finish`
(the :class:`Outputs`).  An ask/tell run (steps.py) calls the same functions, cut at the evaluation,
so a run told the objective's noise-free values is this run, bit for bit.
"""
from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from fedpne_jax.algorithms.trees.book import Pull, pull, record_simple, settle_book, start_pulls
from fedpne_jax.algorithms.trees.layout import Table
from fedpne_jax.algorithms.trees.partition import new_table
from fedpne_jax.algorithms.trees.policy import Last, TreePolicy, TreeStatic, next_selection
from fedpne_jax.algorithms.trees.rounds import run_rounds
from fedpne_jax.core import checkpoints, measures
from fedpne_jax.core.errors import FLAG_CAPACITY
from fedpne_jax.core.measures import Measures
from objectives.ordered import no_contraction


class State(NamedTuple):
    table: Table
    extra: Any
    book: Pull
    last: Last            # this round's selection, updated at the start of the next loop body
    overflow: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Outputs(Measures):
    recommendation: jax.Array  # (D,) the policy's recommendation (default: PyXAB's get_last_point)
    nodes: jax.Array           # () int32 rows of the node table in use
    depth: jax.Array           # () int32 deepest node
    points: jax.Array          # (T, D) the pulled points when the static asks for a trace, else (0, D)


METRICS = measures.metrics(("recommendation", "nodes", "depth"))


def start(static: TreeStatic, params, lo, hi, key, policy: TreePolicy, scale) -> State:
    """A run's state before round 1: the table over the box [lo, hi] (one per instance), the policy's
    ``extra``, an empty book whose targets are scaled by ``scale``."""
    spec = static.tree
    if static.instances == 1:
        keys = key
        table = new_table(spec, lo, hi, key, policy.root_expanded)
    else:
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(static.instances))
        table = jax.vmap(lambda k: new_table(spec, lo, hi, k, policy.root_expanded))(keys)
    extra = policy.init(static, params, table, keys)
    # The first loop body updates nothing (active=False) but needs a choice of the right shape.
    shape = jax.eval_shape(lambda p, tb, ex: policy.select(static, p, tb, ex, jnp.int32(1))[0], params, table, extra)
    zero = lambda s: jnp.zeros(s.shape, s.dtype)
    last = Last(jax.tree.map(zero, shape), jnp.zeros((), spec.dtype), jnp.zeros((), spec.dtype),
                jnp.zeros((spec.dim,), spec.dtype))
    book = start_pulls(len(static.checkpoint_rounds), spec.dim, static.horizon if static.trace else 0, spec.dtype,
                       scale, static.chunk)
    return State(table, extra, book, last, jnp.bool_(False))


def apply_update(static, params, policy: TreePolicy, t, s: State, active) -> State:
    """Round t's update: its reward (in ``s.last``) credited and the expansion rule applied."""
    table, extra, overflow = policy.update(static, params, s.table, s.extra, s.last, t, active)
    return s._replace(table=table, extra=extra, overflow=s.overflow | overflow)


def apply_refresh(static, params, policy: TreePolicy, k, s: State) -> State:
    assert policy.refresh is not None
    table, extra = policy.refresh(static, params, k, s.table, s.extra)
    return s._replace(table=table, extra=extra)


def record_recommendation(static, params, policy: TreePolicy, s: State, last: Last, t, gap, f_star, value_at) -> Pull:
    """``s.book`` with the simple regret of the recommendation after round t - 1 written at its
    checkpoint (round t's selection is ``last``; ``gap`` its f* - f; ``value_at(x)`` the global
    value a recommendation other than the selection is booked at)."""
    def simple(hit):
        if policy.recommend is next_selection:
            return gap
        point = lambda: policy.recommend(static, params, s.table, s.extra, last)
        star = jnp.asarray(f_star, gap.dtype)
        return jax.lax.cond(hit, lambda: star - no_contraction(value_at(point()).astype(gap.dtype)),
                            lambda: jnp.zeros((), gap.dtype))
    return record_simple(static.checkpoint_rounds, s.book, t, simple)


def finish(static, params, policy: TreePolicy, state: State, scale) -> Outputs:
    """A run's Outputs from its state after round T + 1's selection (in ``state.last``)."""
    flags = state.book.flags | jnp.where(state.overflow, FLAG_CAPACITY, 0).astype(jnp.int32)
    size, height = state.table.size, state.table.height
    if static.instances > 1:
        size, height = jnp.sum(size), jnp.max(height)
    rounds, book = static.checkpoint_rounds, state.book
    return Outputs(curve=checkpoints.filled(rounds, book.curve), final_regret=book.regret,
                   flags=flags, recommendation=policy.recommend(static, params, state.table, state.extra, state.last),
                   nodes=size, depth=height, best_curve=checkpoints.filled(rounds, book.best_curve), hits=book.best.hits,
                   target_scale=scale, simple_curve=checkpoints.filled(rounds, book.simple_curve), points=book.points)


def run(static: TreeStatic, params, objective, key, policy: TreePolicy) -> Outputs:
    """One run of ``policy``: rounds 1..T, each one evaluation of the global objective (a tree
    algorithm's ``run_single`` is this with its policy)."""
    spec = static.tree
    scale = checkpoints.target_scale(objective, spec.dtype)
    state = start(static, params, objective.lo, objective.hi, key, policy, scale)
    value_at = objective.global_value

    def update(t, s: State, active) -> State:
        return apply_update(static, params, policy, t, s, active)

    def select(t, u, s: State, pulling) -> State:
        choice, x = policy.select(static, params, s.table, s.extra, t)
        r, gap, book = pull(static, params, objective, s.book, t, x, u, pulling)
        last = Last(choice, r, u[2], x)
        book = record_recommendation(static, params, policy, s._replace(book=book), last, t, gap, objective.f_star,
                                     value_at)
        return s._replace(book=book, last=last)

    hook = policy.refresh
    state = run_rounds(static.horizon, static.chunk, key, spec.dtype, update, select, state,
                       refresh=None if hook is None else lambda k, s: apply_refresh(static, params, policy, k, s),
                       every=policy.refresh_every,
                       settle=lambda s, lo, hi, start: s._replace(book=settle_book(s.book, lo, hi, start)))
    return finish(static, params, policy, state, scale)
