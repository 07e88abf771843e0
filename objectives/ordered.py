"""Arithmetic in a fixed order, shared by the objectives and the simulator: sums whose order the
batch cannot change, products XLA may not fuse into an FMA, and square roots and matrix-vector
products that give the same bits on every processor.

They live in the objectives package, the lowest layer (it imports nothing of fedpne_jax; fedpne_jax
builds on it), because the objectives need them too: a point's value must not depend on its batch.

XLA may reduce a small axis in different orders for different batch shapes (seen: the mean over 3
clients differed in its last bit between a seed run alone and in a batch of 12).  A seed's numbers
must not depend on how many seeds run beside it, so reductions that feed results are spelled out
as pairwise sums whose order is fixed by the axis length alone.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def pairwise_sum(x):
    """Sum over the last axis: pad to a power of two with zeros, then add halves until one is left."""
    m = x.shape[-1]
    width = 1 << max(m - 1, 0).bit_length()
    x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, width - m)])
    while x.shape[-1] > 1:
        half = x.shape[-1] // 2
        x = x[..., :half] + x[..., half:]
    return x[..., 0]


def matvec(x, w):
    """x @ w for x (n,) and w (n, k): the n products x_i w_i summed pairwise, in an order fixed by n.

    XLA's CPU backend hands a dot to a library kernel that it picks at run time for the processor,
    and rewrites a long sum over an axis into a tree of its own choosing, so neither fixes the last
    bits of the result (a 64-term sum differed alone and in a batch).  Spelled out, this costs about
    5x a dot at n = k = 64.

    Each level of the tree is one array operation (rows 2i and 2i + 1 added, an odd last row carried),
    not n scalar-times-row terms: the digits objective compiled in about half the time (1.6-2.1 s
    against 0.9-1.1 s for a batch of 32 points), ran no slower, and gave the same bits.  A product is
    only ever used by the sum that adds it, in one expression, as in the spelled-out terms, so that
    XLA fuses the two and contracts them into an FMA wherever it did there: a product that passed
    through a slice or a concatenation first was fused in some shapes and not in others (alone but
    not in a batch, or at n = 7 but not at n = 5), which moved the FMAs and so the last bits.  Hence
    the pairs' products are formed from the pairs' rows, and the last product of an odd n is kept
    apart until the level where it is added."""
    n = x.shape[0]
    even = n - n % 2
    body = x[0:even:2, None] * w[0:even:2] + x[1:even:2, None] * w[1:even:2]     # (n // 2, k)
    tail = x[even] * w[even] if n % 2 else None
    while body.shape[0] + (tail is not None) > 1:
        m = body.shape[0]
        pairs = body[0:m - m % 2:2] + body[1:m - m % 2:2]
        if m % 2 and tail is not None:
            body, tail = jnp.concatenate([pairs, (body[m - 1] + tail)[None]], axis=0), None
        elif m % 2:
            body = jnp.concatenate([pairs, body[m - 1:]], axis=0)
        else:
            body = pairs
    return body[0] if tail is None else tail


def exact_sqrt(x):
    """sqrt(x), kept a correctly rounded square root wherever it is used.

    XLA rewrites a / sqrt(b) as a * rsqrt(b), and its CPU backend lowers rsqrt to the processor's
    approximate reciprocal square root (rsqrtss, a table lookup that differs between Intel and AMD)
    refined by one Newton step, whose last bits then differ between processors too.  The barrier
    hides the square root from that rewrite; sqrt and division are exact IEEE operations."""
    return jax.lax.optimization_barrier(jnp.sqrt(x))


def pairwise_mean(x):
    return pairwise_sum(x) / x.shape[-1]


def _doubling(op, identity, x):
    """Inclusive prefix of ``op`` along the last axis by Hillis-Steele doubling: log2(n) whole-array
    steps, each ``op(x, x shifted right by 2^i)``, in an order fixed by the axis length alone."""
    shift = 1
    while shift < x.shape[-1]:
        x = op(x, jnp.concatenate([jnp.full_like(x[..., :shift], identity), x[..., :-shift]], axis=-1))
        shift *= 2
    return x


def inclusive_scan(x):
    """Prefix sums along the last axis in an order fixed by its length (Hillis-Steele doubling)."""
    return _doubling(jnp.add, 0, x)


# The block of XLA's rewrite of a cumulative reduction (its ReduceWindowRewriter on CPU).
_PREFIX_BLOCK = 16


def _sequential(op, identity, x):
    """Inclusive prefix of ``op`` over a last axis of at most 16, one element after another from
    ``identity``: the order in which XLA's CPU backend computes ``jnp.cumsum`` within a block."""
    first = op(jnp.full_like(x[..., :1], identity), x[..., :1])
    if op is jnp.add and jnp.issubdtype(x.dtype, jnp.floating):
        first = jnp.where(first == 0, jnp.zeros_like(first), first)    # 0 + -0 = +0, which XLA folds to -0
    out = [first[..., 0]]
    for j in range(1, x.shape[-1]):
        out.append(op(out[-1], x[..., j]))
    return jnp.stack(out, axis=-1)


def _blocked(op, identity, x, within=_sequential):
    """Inclusive prefix of ``op`` along the last axis in the order in which XLA's CPU backend computes
    ``jnp.cumsum``: :func:`_sequential` (or ``within``) within blocks of 16, each block then combined
    with the exclusive prefix of the block totals (computed alike, recursively).

    JAX lowers a cumulative reduction on CPU to a reduce-window as wide as the axis, which XLA
    rewrites into that blocked form but still evaluates as sixteen operations per element; written
    out here, it is about a third of the time at 32 to 128 elements (10,000 rows) with the same bits,
    and the order is fixed here rather than by the compiler."""
    n = x.shape[-1]
    if n == 1:
        return x                                                         # as XLA returns a window of one
    if n <= _PREFIX_BLOCK:
        return within(op, identity, x)
    blocks = -(-n // _PREFIX_BLOCK)
    pad = jnp.full(x.shape[:-1] + (blocks * _PREFIX_BLOCK - n,), identity, x.dtype)
    inner = within(op, identity, jnp.concatenate([x, pad], axis=-1).reshape(
        x.shape[:-1] + (blocks, _PREFIX_BLOCK)))
    before = jnp.concatenate([jnp.full_like(inner[..., :1, -1], identity),
                              _blocked(op, identity, inner[..., :-1, -1], within)], axis=-1)
    return op(before[..., None], inner).reshape(x.shape[:-1] + (blocks * _PREFIX_BLOCK,))[..., :n]


def _exact(op, identity, x):
    """The prefix of an ``op`` whose result does not depend on the order of its terms: the blocked
    form, with :func:`_doubling` within each block, four steps where the sequential chain is sixteen.
    XLA compiles that chain as sixteen kernels wherever a step's result has a second reader: Fed-PNE's
    three such prefixes of 16 rows were a fifth of its program's compile time, and SOO's sums over
    65 depths were 76 of its 315 kernels.  The doubling also runs in about half the time at 1,000
    runs; over several blocks, the blocks keep the work linear (a doubling over the whole axis ran
    at 0.6 times the speed at 64 elements)."""
    return _blocked(op, identity, x, within=_doubling)


def prefix_sum(x):
    """``jnp.cumsum(x, axis=-1)``, the same bits, at a third of its cost (:func:`_blocked`).
    A second fixed order beside :func:`inclusive_scan` (Hillis-Steele doubling): their last bits
    differ, and each keeps those of the code that used it first, whose results are on record.
    Integer sums are exact in any order (two's complement wraps alike): :func:`_exact`."""
    if jnp.issubdtype(x.dtype, jnp.integer):
        return _exact(jnp.add, 0, x)
    return _blocked(jnp.add, 0, x)


def prefix_min(x):
    """``jax.lax.cummin`` along the last axis.  A minimum is exact in any order (:func:`_exact`): XLA's
    minimum is IEEE 754's (NaN propagates, and -0 is below +0 whichever operand it is), on every
    backend, so the order changes no bit (NaN's payload aside)."""
    identity = jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).max
    return _exact(jnp.minimum, identity, x)


def compensated_add(acc, x):
    """One step of Kahan summation on a (total, lost) pair.  Long float32 sums (n ~ 1e9 rewards of a
    node, 1e6+ rounds of regret) would stall with a plain running sum at 2^24 (adding 1.0 no longer
    changes it); the compensated sum stays within a few ulps for any n."""
    total, lost = acc
    y = x - lost
    t = total + y
    return t, (t - total) - y


def no_contraction(x):
    """x, with +-inf as NaN, behind a select that XLA cannot fold away.

    XLA's CPU backend contracts a multiply followed by an add into one FMA whenever both land in the
    same fused loop (always enabled), which eager execution (``jax.disable_jit``) never does, so
    ``f_star - f(x)`` with f ending in a product differs in its last bit between the two.  A select
    between the product and the add keeps them apart.  +-inf become NaN (flagged alike)."""
    return jnp.where(jnp.isfinite(x), x, jnp.nan)


def first_argmax(x):
    """np.argmax of a 1-D array (the first largest, or the first NaN if there is one) as two plain
    reductions, a max and a min of indices.  jnp.argmax reduces (value, index) pairs together, which
    XLA's CPU backend does not vectorise: landmine's SMO step spent 40 % of its time in its two."""
    top = jnp.max(x)
    hit = (x == top) | jnp.isnan(x)
    return jnp.min(jnp.where(hit, jnp.arange(x.shape[0], dtype=jnp.int32), x.shape[0])).astype(jnp.int32)
