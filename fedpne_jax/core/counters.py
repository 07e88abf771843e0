"""Counter-based random words and the uniforms made from them, for every algorithm of the package.

Two standard counter-based generators: JAX's threefry2x32 (the baselines' per-round words, in counter
mode on (round, index) pairs) and Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as
1, 2, 3", SC 2011), here in jnp, for the per-pull block sampler; the implementation is checked
against Random123's published known-answer vectors (tests/test_pulls.py).

Why a second generator, and how its widening multiply is traced: docs/concepts/semantics.md,
section "Semantics" (per-pull randomness and sums).
"""
from __future__ import annotations

import jax
import jax.extend.random
import jax.numpy as jnp

ROUNDS = 10
_M0, _M1 = 0xD2511F53, 0xCD9E8D57       # multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85       # Weyl key increments (golden ratio, sqrt(3) - 1)


def _mulhilo(a, m: int):
    """(high, low) 32-bit words of the 64-bit product a * m, for uint32 ``a``."""
    with jax.enable_x64(True):
        p = a.astype(jnp.uint64) * jnp.uint64(m)
        return (p >> jnp.uint64(32)).astype(jnp.uint32), p.astype(jnp.uint32)


def philox4x32(counter, key):
    """The four uint32 output words of Philox4x32-10 for ``counter`` (four uint32 arrays, broadcast
    together) under ``key`` (two uint32 words, e.g. :func:`key_words`)."""
    c0, c1, c2, c3 = (jnp.asarray(c, jnp.uint32) for c in counter)
    k0, k1 = jnp.asarray(key[0], jnp.uint32), jnp.asarray(key[1], jnp.uint32)
    for r in range(ROUNDS):
        if r:
            k0, k1 = k0 + jnp.uint32(_W0), k1 + jnp.uint32(_W1)
        hi0, lo0 = _mulhilo(c0, _M0)
        hi1, lo1 = _mulhilo(c2, _M1)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


def key_words(key):
    """The (2,) uint32 words of a threefry2x32 key (JAX's default): the key of counter-based draws."""
    data = jax.random.key_data(key)
    if data.shape != (2,):
        raise ValueError(f"counter-based sampling needs the threefry2x32 PRNG (jax's default), got a key "
                         f"with data of shape {data.shape}")
    return data


def unit_floats(words, dtype=jnp.float32):
    """Uniform [0, 1) floats from uint32 words.  float32: the top 23 bits, as jax.random.uniform;
    float64: all 32 bits (k / 2^32), a resolution far below any noise or node width a run meets."""
    if jnp.dtype(dtype) == jnp.float64:
        return words.astype(jnp.float64) * (2.0 ** -32)
    return jax.lax.bitcast_convert_type((words >> 9) | jnp.uint32(0x3F800000), jnp.float32) - 1.0


def threefry_words(key, t, pairs: int):
    """2 * ``pairs`` uint32 words of threefry2x32 under the run's key on the counter pairs (t, j),
    j < pairs (one hash call for all of them): the first words of every pair, then the second ones."""
    count = jnp.concatenate([jnp.full((pairs,), t, jnp.uint32), jnp.arange(pairs, dtype=jnp.uint32)])
    return jax.extend.random.threefry_2x32(key_words(key), count)


def unit_floats_52(high, low):
    """Uniform [0, 1) float64 from two uint32 words: 52 random mantissa bits, as jax.random.uniform."""
    w = (high.astype(jnp.uint64) << 32) | low.astype(jnp.uint64)
    return jax.lax.bitcast_convert_type((w >> 12) | jnp.uint64(0x3FF0000000000000), jnp.float64) - 1.0
