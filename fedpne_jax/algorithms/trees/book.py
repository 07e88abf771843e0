"""The regret book of a tree run: what each round's evaluation adds to the run's record.

:class:`Pull` holds the cumulative regret f* - f(x_t) and its curve at the checkpoints, the
best-so-far regret and the first round it reached each fixed target, the simple regret of the
recommendation, the error flags and, for tests, the trace of pulled points.  :func:`pull` evaluates
the global objective and draws the round's reward; :func:`book_value` books a value (also a value
told to an ask/tell run); :func:`record_simple` writes the simple regret one round late, when the
next selection (the recommendation) is known; :func:`settle_book` settles the targets a block of
rounds reached.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from fedpne_jax.core import checkpoints, noise
from objectives.ordered import no_contraction


class Pull(NamedTuple):
    """The rounds' bookkeeping: the running regret, the curves, error flags and the optional trace."""
    regret: jax.Array
    curve: jax.Array      # (C,) regret written at the first checkpoint of each checkpoint round
    cursor: jax.Array     # () int32 next checkpoint to write; depends on t only (unbatched under vmap)
    flags: jax.Array
    points: jax.Array
    best: checkpoints.Best  # its hits settled once a block of rounds ends (:func:`settle_book`)
    recent: jax.Array      # (chunk,) best-so-far regret after each round of the current chunk
    best_curve: jax.Array  # (C,) best-so-far regret, written with ``curve``
    goals: jax.Array       # (51,) the fixed targets of the best-so-far regret (checkpoints.targets)
    simple_curve: jax.Array  # (C,) simple regret, written one round late (:func:`record_simple`)
    simple_cursor: jax.Array  # () int32 next checkpoint of ``simple_curve``; depends on t only


def start_pulls(checkpoints_: int, dim: int, trace: int, dtype, scale, chunk: int) -> Pull:
    zeros = jnp.zeros((checkpoints_,), dtype)
    return Pull(regret=jnp.zeros((), dtype), curve=zeros, cursor=jnp.int32(0), flags=jnp.int32(0),
                points=jnp.zeros((trace, dim), dtype), best=checkpoints.best_start(dtype),
                recent=jnp.zeros((chunk,), dtype), best_curve=zeros,
                goals=checkpoints.targets(scale), simple_curve=zeros, simple_cursor=jnp.int32(0))


def record_simple(rounds, book: Pull, t, gap_of_recommendation) -> Pull:
    """Write the simple regret of the recommendation after round t - 1 at its checkpoint, if t - 1 is
    one.  The recommendation after round t - 1 needs round t's selection (``recommend`` reads it, as
    PyXAB's ``get_last_point`` does), so round t writes it, and round T + 1 the last checkpoint.
    ``gap_of_recommendation(hit)`` is evaluated under ``hit``, which depends on t only: a policy whose
    recommendation is not the point it pulls pays one evaluation of the objective per checkpoint."""
    j, hit, position = checkpoints.cursor(rounds, book.simple_cursor, t - 1)
    return book._replace(simple_curve=checkpoints.write(book.simple_curve, j, hit, gap_of_recommendation(hit)),
                         simple_cursor=position)


def pull(static, params, objective, book: Pull, t, x, u, pulling):
    """Evaluate the global objective at ``x`` in round ``t``: the reward (noise.reward of the run's
    noise model, from the round's uniforms ``u``, as noise.observe draws them) is returned with the
    gap f* - f(x) and the bookkeeping of :func:`book_value`.  Nothing is recorded unless ``pulling``
    (round T + 1 only selects)."""
    f = objective.global_value(x).astype(x.dtype)
    kind = static.noise_kind
    scale = params.noise_scale
    r = noise.reward(kind, scale, scale ** 2 if kind == "gaussian" else None, f, u[0], u[1])
    gap, book = book_value(static, book, t, x, f, objective.f_star, pulling)
    return r, gap, book


def book_value(static, book: Pull, t, x, f, f_star, pulling, check_f_star=True):
    """Round t's value f at ``x`` booked: the regret f* - f added, the best-so-far regret updated,
    both recorded at the checkpoints, f's flags raised (against f* unless not ``check_f_star``: told
    noisy means may exceed it).  Returns the gap f* - f and the book."""
    kind = static.noise_kind
    # f may end in a product that XLA would contract with the subtraction below into an FMA in one
    # program (a stepper's tell) and not in another (the round loop): kept apart, both book one number.
    f = no_contraction(f)
    flags = book.flags | jnp.where(pulling, noise.value_flags(kind, f, jnp.bool_(True),
                                                              f_star=f_star if check_f_star else None), 0)
    gap = jnp.asarray(f_star, x.dtype) - f
    regret = jnp.where(pulling, book.regret + gap, book.regret)
    best = book.best._replace(value=jnp.where(pulling, jnp.minimum(book.best.value, gap), book.best.value))
    recent = jax.lax.dynamic_update_index_in_dim(book.recent, best.value, (t - 1) % book.recent.shape[0], 0)
    j, hit, cursor = checkpoints.cursor(static.checkpoint_rounds, book.cursor, t)
    curve, best_curve = checkpoints.write(book.curve, j, hit, regret), checkpoints.write(book.best_curve, j, hit,
                                                                                          best.value)
    points = book.points
    if static.trace:
        points = jnp.where(pulling, jax.lax.dynamic_update_slice(points, x[None], (t - 1, jnp.zeros_like(t))), points)
    return gap, book._replace(regret=regret, curve=curve, cursor=cursor, flags=flags, points=points, best=best,
                              recent=recent, best_curve=best_curve)


def settle_book(book: Pull, lo, hi, start) -> Pull:
    """``book`` with the targets that rounds start + lo .. start + hi of a chunk reached (the loop
    calls it once a block of rounds ends)."""
    return book._replace(best=book.best._replace(
        hits=checkpoints.settle_hits(book.best.hits, book.recent, lo, hi, start, book.goals)))
