"""The round loop of a tree run and the uniforms its rounds draw.

A round is one evaluation of the global objective: :func:`run_rounds` runs rounds 1..T and round
T + 1's selection (the recommendation), a round's selection before its update, with a policy's
refresh placed between two loop bodies so that no round pays for it.  Rounds come in chunks of
:data:`CHUNK` that share one counter-mode draw of three uniforms a round (the reward noise's two and
the split uniform): a run's numbers depend on its key alone, and :func:`round_uniforms` gives one
round's row of that draw without the rest of its chunk (what an ask/tell run draws).
:func:`run_split_dims` recomputes a run's random split dimensions on the host, for tests.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.trees.partition import random_dim, root_dim
from fedpne_jax.core.counters import key_words, unit_floats, unit_floats_52

CHUNK = 256


def chunk_size(horizon: int) -> int:
    """Rounds per draw of uniforms: CHUNK, or T + 1 when shorter (round T + 1 selects the
    recommendation)."""
    return min(CHUNK, horizon + 1)


def chunk_uniforms(key, c, chunk: int, dtype):
    """(chunk, 3) uniforms in [0, 1) of chunk ``c``: counter-mode threefry of the run key on the
    counter pairs (c, j), j < 3 chunk (one hash call per chunk; a fold_in per chunk would be a second
    one, and each costs about half a second of compile time), converted as jax.random.uniform does
    (23 random mantissa bits in float32, 52 in float64)."""
    return _uniforms(key, c, jnp.arange(3 * chunk, dtype=jnp.uint32), dtype).reshape(chunk, 3)


def round_uniforms(key, t, chunk: int, dtype):
    """(3,) the uniforms of round t alone, equal to its row of :func:`chunk_uniforms` (the hash is
    counter-based, so one round's three pairs are hashed without the rest of its chunk): a stepper
    draws a round at a time."""
    c, i = (t - 1) // chunk, (t - 1) % chunk
    return _uniforms(key, c, (3 * i + jnp.arange(3, dtype=jnp.int32)).astype(jnp.uint32), dtype)


def _uniforms(key, c, j, dtype):
    words = jax.extend.random.threefry_2x32(key_words(key), jnp.concatenate(
        [jnp.full(j.shape, c, jnp.uint32), j]))
    n = j.shape[0]
    return unit_floats_52(words[:n], words[n:]) if jnp.dtype(dtype) == jnp.float64 else unit_floats(words[:n])


def run_rounds(horizon: int, chunk: int, key, dtype, update, select, state, refresh=None, every: int = 0,
               settle=None):
    """Rounds t = 1..T of a tree algorithm, and the selection of round T + 1 (the recommendation).

    The loop body is ``update(t - 1, state, active=t > 1)`` and then ``select(t, u_t, state,
    pulling=t <= T)``: a round's selection comes before its update, and ``refresh(k, state)``
    (HCT's recomputation of every U and B at t = 2^k) goes between the selection and the update of
    round 2^k, or of round k * ``every`` when ``every`` > 0 (SOO's rebuild of its lists).  Shifting the body by half a round puts every refresh between two loop bodies, so the
    loop is split at the powers of two (their indices are the same in every run, so nothing is
    selected per run) and no round pays for a branch that passes the node table through.

    ``u_t``: the round's three uniforms (noise.reward's u_noise and u_gauss, and the split uniform).
    Rounds come in chunks that share one draw (:func:`chunk_uniforms`): a run's numbers depend on
    its key alone, and the round loop holds no PRNG code (a draw per round would dominate the
    compile time and much of the per-round cost).  ``settle(state, lo, hi, start)``, when given, runs
    after each block of a chunk's rounds, start + lo .. start + hi."""
    last_round = horizon + 1
    if every:
        # Epoch e is rounds e * every + 1 .. (e + 1) * every; the refresh after it is k = e + 1.
        top = horizon // every - 1 if refresh is not None else -1
        epochs = -(-last_round // every)
    else:
        top = horizon.bit_length() - 1 if refresh is not None else -1     # refreshes at 2^0 .. 2^top
        epochs = top + 2

    def bounds(e):
        if refresh is None:
            return jnp.int32(1), jnp.int32(last_round)
        if every:
            e = jnp.asarray(e, jnp.int32)         # rounds are int32, also with 64-bit types enabled
            return e * every + 1, jnp.minimum((e + 1) * every, last_round)
        lo = jnp.right_shift(jnp.left_shift(jnp.int32(1), e), 1) + 1
        hi = jnp.where(e <= top, jnp.left_shift(jnp.int32(1), e), last_round)
        return lo, hi

    def body(t, u, state):
        state = update(t - 1, state, t > 1)
        return select(t, u, state, t <= horizon)

    def epoch(e, state):
        lo, hi = bounds(e)

        def one_chunk(c, state):
            start = c * chunk + 1
            u = chunk_uniforms(key, c, chunk, dtype)
            first, stop = jnp.maximum(lo, start), jnp.minimum(hi, start + chunk - 1)
            state = jax.lax.fori_loop(first, stop + 1, lambda t, s: body(t, u[t - start], s), state)
            return state if settle is None else settle(state, first - start, stop - start, start)

        state = jax.lax.fori_loop((lo - 1) // chunk, (hi - 1) // chunk + 1, one_chunk, state)
        if refresh is None:
            return state
        # Once per epoch, so passing the table through the branch costs nothing per round.
        return jax.lax.cond(e <= top, lambda s: refresh(e + 1 if every else e, s), lambda s: s, state)

    if refresh is None:
        return epoch(0, state)
    return jax.lax.fori_loop(0, epochs, epoch, state)


def run_split_dims(key, horizon: int, chunk: int, dim: int, real: str = "float32") -> np.ndarray:
    """(T + 1,) split dimensions of one run under split='random': entry 0 for the root, entry t for
    the node expanded in round t (host-side, for tests and inspection)."""
    with jax.enable_x64(real == "float64"):
        dtype = jnp.dtype(real)
        u = jnp.concatenate([chunk_uniforms(key, c, chunk, dtype) for c in range(-(-horizon // chunk))])
        dims = jnp.concatenate([root_dim(key, dim)[None], random_dim(u[:horizon, 2], dim)])
        return np.asarray(dims)
