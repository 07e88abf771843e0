"""Regret checkpoints: the C evenly spaced rounds at which every algorithm records its regret, the
best-so-far regret with the first rounds at which it reaches fixed targets, and the simple regret
f* - f(x_hat_t) of the recommendation x_hat_t the algorithm would return after round t."""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


def rounds(horizon: int, count: int) -> np.ndarray:
    """ceil(c T / C) for c = 1..C (int32); the last is T.  Computed in int64 so c T cannot overflow."""
    c = np.arange(1, count + 1, dtype=np.int64)
    return ((c * horizon + count - 1) // count).astype(np.int32)


def schedule(config) -> dict:
    """A config's horizon and checkpoint rounds as Params fields (``horizon``, ``checkpoint_rounds``):
    data, so that configurations differing only in T share one program."""
    return dict(horizon=np.int32(config.horizon), checkpoint_rounds=np.asarray(config.checkpoint_rounds, np.int32))


# Three ways to write a curve at its checkpoints, by how an algorithm's loop advances:
# * record: a round at a time, a where over the C checkpoints (rounds may be data, as in a grid);
# * cursor / write / filled: a round at a time in O(1), for static rounds (the tree skeleton);
# * within / record_span / record_located: a span of rounds at a time (a phase), every checkpoint
#   inside it at once.

def record(curve, checkpoint_rounds, t, regret):
    """``curve`` with ``regret`` written at the checkpoints equal to round t (one-round-at-a-time
    algorithms call this once per round; several checkpoints can share a round when C > T)."""
    return jnp.where(jnp.asarray(checkpoint_rounds) == t, regret, curve)


def _tables(rounds):
    """(next, first) per checkpoint of static ``rounds``: the index of the next checkpoint with a later
    round, and of the first checkpoint with the same round (several share a round when C > T)."""
    rounds = np.asarray(rounds)
    return (np.searchsorted(rounds, rounds, side="right").astype(np.int32),
            np.searchsorted(rounds, rounds, side="left").astype(np.int32))


def cursor(rounds, position, t):
    """(j, hit, next position) of a cursor over static ``rounds``: checkpoint j = ``position`` is due
    when its round is t, and the cursor then skips the checkpoints sharing that round (:func:`filled`
    copies them).  O(1) a round: a where over all C checkpoints every round costs more than the rest of
    a tree round's bookkeeping.  ``position`` depends on t only, so it stays unbatched under vmap."""
    nxt, _ = _tables(rounds)
    c = len(rounds)
    j = jnp.minimum(position, c - 1)
    hit = (position < c) & (jnp.asarray(rounds, jnp.int32)[j] == t)
    return j, hit, jnp.where(hit, jnp.asarray(nxt)[j], position)


def write(curve, j, hit, value):
    """``curve`` with ``value`` at checkpoint j when ``hit`` (:func:`cursor`)."""
    return jax.lax.dynamic_update_slice(curve, jnp.where(hit, value, curve[j])[None], (j,))


def filled(rounds, curve):
    """A cursor-written ``curve`` with every checkpoint filled (those sharing a round copy the first)."""
    return curve[jnp.asarray(_tables(rounds)[1])]


def within(rounds, start, end):
    """(C,) bool: the checkpoints in rounds start + 1 .. end (a phase's span)."""
    return (rounds > start) & (rounds <= end)


def record_span(curve, rounds, start, end, during, after):
    """``curve`` with the checkpoints of rounds start + 1 .. end written: ``after`` at round ``end``, when
    a phase's outcome (a recommendation) takes effect, ``during`` before it."""
    return record_located(curve, within(rounds, start, end), rounds == end, during, after)


def record_located(curve, inside, last, during, after):
    """:func:`record_span` for checkpoints already located: ``inside`` the span, and whether each is
    at its ``last`` round."""
    return jnp.where(inside, jnp.where(last, after, during), curve)


# ---------------------------------------------------------------- best-so-far regret and fixed targets

# COCO's default targets: 10^2 .. 10^-8, five per decade (51), times the objective's scale.
TARGET_EXPONENTS = np.linspace(2.0, -8.0, 51)
NOT_REACHED = 0               # a hit round of 0: the target was not reached within T (rounds start at 1)


class Best(NamedTuple):
    """Best-so-far regret, f* - max_{s <= t} f(x_s) over every point evaluated so far on the global
    objective, and the first round at which it reached each target."""

    value: jax.Array      # () inf before the first evaluation
    hits: jax.Array       # (len(TARGET_EXPONENTS),) int32 round, NOT_REACHED until reached


def best_start(dtype) -> Best:
    return Best(value=jnp.asarray(jnp.inf, dtype), hits=jnp.zeros(TARGET_EXPONENTS.shape, jnp.int32))


def _centre_value(objective, dtype) -> jax.Array:
    centre = (jnp.asarray(objective.lo, dtype) + jnp.asarray(objective.hi, dtype)) / 2
    return objective.global_value(centre).astype(dtype)


# One program per objective structure and precision, shared by every algorithm's runs on it.
_centre_program = jax.jit(_centre_value, static_argnums=1)


def with_centre(objective, real: str):
    """``objective`` carrying f(centre of the box) in the precision ``real`` ("float32" or "float64",
    under that precision's x64 setting), computed in a program of its own: the engine gives every
    run this, so that no algorithm's program compiles an evaluation of the objective for it.  A
    Python objective's failure there is raised as its runs' would be."""
    with objective.host_errors():
        value = _centre_program(objective.with_centre_value(None), jnp.dtype(real))
    return objective.with_centre_value(value)


def centre_gap(objective, dtype) -> jax.Array:
    """f* - f(centre of the box): the value :func:`with_centre` stored where it is of ``dtype``,
    else one evaluation of the global objective here."""
    stored = objective.centre_value
    value = stored if stored is not None and stored.dtype == jnp.dtype(dtype) else _centre_value(objective, dtype)
    return jnp.asarray(objective.f_star, dtype) - value


def target_scale(objective, dtype, gap=None) -> jax.Array:
    """The targets' scale: f* - f(centre of the box), the regret of the one point every algorithm
    can name before it starts (1 where that is 0: the centre is optimal, so a run that evaluates it
    reaches every target at once, whatever the scale).  ``gap``: :func:`centre_gap`, where the caller
    needs it too (else one evaluation of the global objective here)."""
    gap = centre_gap(objective, dtype) if gap is None else gap
    return jnp.where(gap > 0, gap, jnp.ones((), dtype))


def targets(scale) -> jax.Array:
    """(51,) targets scale x 10^e, e = 2, 1.8, .., -8, in decreasing order."""
    return scale * jnp.asarray(10.0 ** TARGET_EXPONENTS, scale.dtype)


def best_step(best: Best, t, gap, goals, active=True) -> Best:
    """``best`` after round t evaluated points whose smallest regret f* - f(x) is ``gap`` (nothing
    changes unless ``active``)."""
    value = jnp.where(active, jnp.minimum(best.value, gap), best.value)
    hits = jnp.where((best.hits == NOT_REACHED) & (value <= goals), jnp.asarray(t, jnp.int32), best.hits)
    return Best(value, hits)


def settle_hits(hits, values, lo, hi, t0, goals):
    """``hits`` after the rounds t0 + lo .. t0 + hi (lo <= hi, unbatched), whose best-so-far values
    are ``values[lo .. hi]``: the first of them at or below each target not reached before.  The
    values do not increase (until the objective gives NaN, after which they stay NaN and reach
    nothing, as in :func:`best_step`), so a binary search per target finds it, which is what lets a
    loop keep one value a round and settle a block of rounds at once, in place of :func:`best_step`'s
    51 targets read and written every round.  Equal to a per-round scan (tests/test_measures.py)."""
    n = values.shape[0]
    # First j in lo..hi where the value is at or below the goal, or NaN: true from there on.
    reached = lambda j: (values[j] <= goals) | jnp.isnan(values[j])
    low = jnp.broadcast_to(jnp.asarray(lo, jnp.int32), goals.shape)
    high = jnp.broadcast_to(jnp.asarray(hi, jnp.int32), goals.shape)

    def halve(_, bounds):
        low, high = bounds
        mid = (low + high) // 2
        go = reached(mid)
        return jnp.where(go, low, mid + 1), jnp.where(go, mid, high)

    # A rolled loop: unrolled, its steps were a seventh of a tree program's kernels, each compiled apart.
    low, high = jax.lax.fori_loop(0, max(1, n.bit_length()), halve, (low, high))
    j = jnp.minimum(low, high)             # past a converged search, low may step beyond hi
    hit = reached(j) & ~jnp.isnan(values[j]) & (hits == NOT_REACHED)
    return jnp.where(hit, jnp.asarray(t0, jnp.int32) + j, hits)


def record_best(best: Best, curve, checkpoint_rounds, t, gap, goals):
    """:func:`best_step` for round t, its value written into ``curve`` at the checkpoints equal to t
    (:func:`record`): the per-round bookkeeping of an algorithm that records its regret the same way."""
    best = best_step(best, t, gap, goals)
    return best, record(curve, checkpoint_rounds, t, best.value)
