"""Ask/tell for every tree algorithm: :func:`driver.run`'s round cut at the evaluation.

A step is a round: ``ask`` is the policy's selection of round t = step + 1 (one point, M = B = 1),
``tell`` books the told reward, refreshes where the round loop refreshes (between round t's
selection and its update, at t = 2^k or k * ``refresh_every``), and applies the update.  The
selection, update, refresh, expansion, recommendation and bookkeeping are the driver's own functions,
and round t's split uniform is its row of the run's chunked draw (:func:`rounds.round_uniforms`), so a
run told the objective's noise-free values is ``fp.run``'s run of the same key, bit for bit.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from fedpne_jax.algorithms.trees.book import book_value, settle_book
from fedpne_jax.algorithms.trees.driver import State, apply_refresh, apply_update, finish, record_recommendation, start
from fedpne_jax.algorithms.trees.policy import Last, TreePolicy, TreeStatic
from fedpne_jax.algorithms.trees.rounds import round_uniforms
from fedpne_jax.core.stepper import Space, Steps
from objectives.ordered import no_contraction


class Run(NamedTuple):
    state: State      # the round loop's state; ``last`` holds the asked round's selection
    key: jax.Array         # the run's key (round uniforms)
    scale: jax.Array       # the best-so-far targets' scale
    space: Any             # the space's Objective as data (None for a box), as fp.run passes it


def _refresh_index(policy: TreePolicy, t):
    """(due, k): whether the round loop refreshes after round t's selection, and the refresh's k."""
    if policy.refresh_every:
        return t % policy.refresh_every == 0, t // policy.refresh_every
    return (t & (t - 1)) == 0, 31 - jax.lax.clz(t)


def steps(static: TreeStatic, params, space: Space, policy: TreePolicy) -> Steps:
    spec = static.tree
    dtype = spec.dtype
    f_star = space.f_star_as(dtype)

    def value_at(run, x):
        if run.space is None:
            return jnp.asarray(jnp.nan, dtype)
        return run.space.global_value(x)

    def selection(t, s: State, key) -> Last:
        choice, x = policy.select(static, params, s.table, s.extra, t)
        return Last(choice, jnp.zeros((), dtype), round_uniforms(key, t, static.chunk, dtype)[2], x)

    def init(key):
        scale = space.target_scale(dtype)
        lo, hi = jnp.asarray(space.lo, dtype), jnp.asarray(space.hi, dtype)
        return Run(start(static, params, lo, hi, key, policy, scale), key, scale, space.objective)

    def ask(step, run: Run):
        last = selection(step + 1, run.state, run.key)
        return last.point[None, None], jnp.ones((1, 1), jnp.int32), run._replace(state=run.state._replace(last=last))

    def tell(step, run: Run, points, counts, values, valid):
        t = step + 1
        s = run.state
        x, told = s.last.point, values[0, 0]
        pulling = valid & (t <= static.horizon)
        f = told if run.space is None else value_at(run, x).astype(dtype)
        gap, book = book_value(static, s.book, t, x, f, f_star, pulling,
                               check_f_star=space.objective is not None)
        last = s.last._replace(reward=told)
        book = record_recommendation(static, params, policy, s._replace(book=book), last, t, gap, f_star,
                                     lambda x: value_at(run, x))
        # The best-so-far values of a chunk's rounds are kept (book.recent) and settled into the
        # targets' hits once the chunk is full, as the round loop settles a block: a binary search per
        # target each step would cost more than the round.  after() settles a partial last chunk.
        i = (t - 1) % static.chunk
        book = jax.lax.cond(i == static.chunk - 1, lambda b: settle_book(b, 0, i, t - i), lambda b: b, book)
        # A stale tell writes nothing: the book is kept whole, the update is gated by ``active``.
        s = s._replace(book=jax.tree.map(lambda new, old: jnp.where(pulling, new, old), book, s.book), last=last)
        if policy.refresh is not None:
            due, k = _refresh_index(policy, t)
            s = jax.lax.cond(due & pulling, lambda v: apply_refresh(static, params, policy, k, v),
                             lambda v: v, s)
        s = apply_update(static, params, policy, t, s, pulling)
        return run._replace(state=s)

    def after(step, run: Run) -> State:
        """The state after the next round's selection (round T + 1's once done), with the simple
        regret that selection writes, as the round loop ends."""
        t = step + 1
        s = run.state
        i = (t - 2) % static.chunk              # the last told round's place in its chunk
        s = s._replace(book=jax.lax.cond((t > 1) & (i < static.chunk - 1),
                                         lambda b: settle_book(b, 0, i, t - 1 - i), lambda b: b, s.book))
        last = selection(t, s, run.key)
        gap = f_star - no_contraction(value_at(run, last.point).astype(dtype))
        book = record_recommendation(static, params, policy, s, last, t, gap, f_star, lambda x: value_at(run, x))
        return s._replace(book=book, last=last)

    def recommend(step, run: Run):
        s = after(step, run)
        return policy.recommend(static, params, s.table, s.extra, s.last)

    def done(step, run: Run):
        return step >= static.horizon

    def outputs(step, run: Run):
        return finish(static, params, policy, after(step, run), run.scale)

    def failed(run: Run):
        return run.state.overflow

    return Steps(init, ask, tell, recommend, done, outputs, failed, (1, 1))


def hook(policy: TreePolicy):
    """The ``steps`` hook of a tree algorithm with ``policy``."""
    def make(static, params, space):
        return steps(static, params, space, policy)
    return make

