"""The per-pull block sampler: Philox4x32-10 against its published known answers and an independent
NumPy implementation, the block layout of the draws, and the accuracy of float32 row sums against
float64 sums of the same numbers."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fedpne_jax.core import counters, pulls

# Random123's kat_vectors (Salmon et al., SC 2011): counter (4 words), key (2 words) -> 4 output words.
KAT = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
     (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
    ((0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff),
     (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
    ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
     (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)),
]


def numpy_philox(counter, key, rounds=10):
    """Philox4x32 written from the paper in NumPy uint64 arithmetic (vectorised over counters)."""
    mask = np.uint64(0xFFFFFFFF)
    c = [np.asarray(x, np.uint64) for x in counter]
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + np.uint64(0x9E3779B9)) & mask, (k1 + np.uint64(0xBB67AE85)) & mask
        p0 = c[0] * np.uint64(0xD2511F53)
        p1 = c[2] * np.uint64(0xCD9E8D57)
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & mask, (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & mask]
    return [x.astype(np.uint32) for x in c]


@pytest.mark.parametrize("counter,key,expected", KAT)
def test_philox_known_answers(counter, key, expected):
    words = np.uint32(counter), np.uint32(key)
    for fn in (counters.philox4x32, jax.jit(counters.philox4x32)):
        out = fn(tuple(words[0]), tuple(words[1]))
        assert tuple(int(x) for x in out) == expected
    assert tuple(int(x) for x in numpy_philox(counter, key)) == expected


def test_philox_matches_numpy_on_many_counters():
    rng = np.random.default_rng(0)
    counter = rng.integers(0, 2**32, (4, 5000), dtype=np.uint64).astype(np.uint32)
    key = rng.integers(0, 2**32, 2, dtype=np.uint64).astype(np.uint32)
    out = jax.jit(counters.philox4x32)(tuple(counter), tuple(key))
    for got, want in zip(out, numpy_philox(counter, key)):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_unit_floats_are_the_top_bits():
    w = np.array([0, 1, 511, 512, 2**31, 2**32 - 1], np.uint32)
    u32 = np.asarray(counters.unit_floats(jnp.asarray(w)))
    np.testing.assert_array_equal(u32, (w >> 9).astype(np.float64) / 2**23)
    assert u32.dtype == np.float32 and u32.max() < 1.0
    with jax.enable_x64(True):
        u64 = np.asarray(counters.unit_floats(jnp.asarray(w), jnp.float64))
    np.testing.assert_array_equal(u64, w.astype(np.float64) / 2**32)


def test_block_uniforms_layout():
    """Pull s = bP + l P/4 + i draws word w for client m from lane l of Philox((bP/4 + i, j, m, w))."""
    key = np.uint32([123, 456])
    row, block, M, W = 5, 3, 2, 3
    u = np.stack(jax.jit(pulls.block_uniforms, static_argnums=(3, 4, 5))(
        key, jnp.int32(row), jnp.int32(block), M, W, jnp.float32))
    quads = pulls.PULL_BLOCK // 4
    assert u.shape == (4, W, M, quads)
    s = np.asarray(pulls.block_offsets(block))
    np.testing.assert_array_equal(s.ravel(), block * pulls.PULL_BLOCK + np.arange(pulls.PULL_BLOCK))
    q = block * quads + np.arange(quads)
    for w in range(W):
        for m in range(M):
            lanes = numpy_philox((q, np.full(quads, row), np.full(quads, m), np.full(quads, w)), key)
            for lane in range(4):
                np.testing.assert_array_equal(u[lane, w, m], (lanes[lane] >> 9).astype(np.float32) / 2**23)


def test_block_sum_is_the_pairwise_sum_in_pull_order():
    """The lane-major block sum equals ordered.pairwise_sum of the block in pull order, bit for bit."""
    from objectives.ordered import pairwise_sum
    x = jnp.asarray(np.random.default_rng(1).standard_normal((4, 3, pulls.PULL_BLOCK // 4)), jnp.float32)
    valid = jnp.asarray(np.random.default_rng(2).random((4, 1, pulls.PULL_BLOCK // 4)) < 0.7)
    got = jax.jit(pulls.block_sum)(list(x), valid)
    flat = pulls.in_pull_order(list(jnp.where(valid, x, 0.0)))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(pairwise_sum(flat)))


def test_uniforms_are_uniform():
    """Mean 1/2 and variance 1/12 over a million draws, within 5 standard errors."""
    key = np.uint32([7, 9])
    u = jax.jit(jax.vmap(lambda b: jnp.stack(pulls.block_uniforms(key, 0, b, 4, 1, jnp.float32))))(jnp.arange(1024))
    u = np.asarray(u, np.float64).ravel()
    n = u.size
    assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / n)
    assert abs(u.var() - 1 / 12) < 5 * np.sqrt(1 / 180 / n)
    # Adjacent words are uncorrelated (lag-1 and lag-4: the lanes of one Philox call).
    for lag in (1, 4):
        r = np.corrcoef(u[:-lag], u[lag:])[0, 1]
        assert abs(r) < 5 / np.sqrt(n)


def _row_sums(n, rows, dtype):
    """Row sums of n uniforms per (row, client) through pulls.row_sums, summed in ``dtype`` (the
    uniforms are the float32 ones in both cases)."""
    key = np.uint32([1, 2])
    M = 3

    def block(j, b):
        u = [x[0].astype(dtype) for x in pulls.block_uniforms(key, j, b, M, 1, jnp.float32)]
        return pulls.block_sum(u, (pulls.block_offsets(b) < n)[:, None, :]), (), jnp.int32(0)

    run = jax.jit(lambda: pulls.row_sums(jnp.int32(rows), pulls.block_count(jnp.int32(n)), block,
                                         jnp.zeros((M,), dtype), (), rows + 2))
    return np.asarray(run()[0], np.float64)


def test_row_sums_in_float32_keep_float32_accuracy():
    """2^24 + 77 pulls on each of 2 rows x 3 clients, past where a running float32 sum of values
    near 1/2 loses whole units: the float32 row sums are within a few float32 ulps of the float64
    sums of the same numbers.  (scripts/bench.py --sections perpull checks 10^9 pulls.)"""
    n = 2**24 + 77
    single = _row_sums(n, 2, jnp.float32)
    with jax.enable_x64(True):
        double = _row_sums(n, 2, jnp.float64)
    assert np.all(single[2:] == 0) and np.all(double[2:] == 0)       # rows not pulled stay zero
    np.testing.assert_allclose(single[:2], double[:2], rtol=3e-7)
    np.testing.assert_allclose(double[:2] / n, 0.5, atol=5 * np.sqrt(1 / 12 / n))


def test_row_sums_handle_partial_blocks_and_rows():
    """Pull counts that are not multiples of the block, one row of one pull: the sums equal NumPy's."""
    key = np.uint32([3, 4])
    counts = jnp.array([pulls.PULL_BLOCK * 2 + 5, 1, 0, 0], jnp.int32)
    M = 2

    def block(j, b):
        u = [x[0] for x in pulls.block_uniforms(key, j, b, M, 1, jnp.float32)]
        return pulls.block_sum(u, (pulls.block_offsets(b) < counts[j])[:, None, :]), (), jnp.int32(0)

    table, _, _ = jax.jit(lambda: pulls.row_sums(jnp.int32(2), pulls.block_count(counts[0]), block,
                                                 jnp.zeros((M,), jnp.float32), (), 4))()
    for j, n in enumerate([int(counts[0]), 1]):
        s = np.arange(n)
        for m in range(M):
            quads = pulls.PULL_BLOCK // 4
            b, within = s // pulls.PULL_BLOCK, s % pulls.PULL_BLOCK
            lanes = numpy_philox((b * quads + within % quads, np.full(n, j), np.full(n, m), np.zeros(n)), key)
            want = ((np.choose(within // quads, lanes) >> 9) / 2**23).sum()
            np.testing.assert_allclose(float(table[j, m]), want, rtol=1e-6)
    assert np.all(np.asarray(table[2:]) == 0)
