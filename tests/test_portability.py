"""Numbers that do not depend on the processor (BBO's runs once differed between Intel and AMD).

XLA's CPU backend lowers a few operations to code the processor picks at run time
(fedpne_jax.core.portability).  These tests hold the objectives' programs to that list (the
algorithms' programs: tests/test_contract.py and tests/test_behaviour.py), check the checker on
programs known to contain such operations, and check the fixed-order replacements (exact_sqrt, matvec, the prefix sums, the BBOB host algebra) against IEEE arithmetic in NumPy.  A test
on one machine thus catches what otherwise shows only when the same run is repeated on another
processor."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import objectives
from fedpne_jax.core.portability import COMPILER_OPTIONS, processor_dependent_ops
from objectives import bbob
from objectives.ordered import exact_sqrt, first_argmax, matvec, prefix_min, prefix_sum


def _ops(fn, *args):
    return processor_dependent_ops(jax.jit(fn).lower(*args).compile().as_text())


def test_ynnpack_fusions_come_with_the_batch_size_and_the_package_compiles_without_them():
    """XLA gives a softmax-like fusion to YNNPACK for 125 x 10 x 10 values and not for 4 x 10 x 10 (so a
    value could depend on its batch); with portability.COMPILER_OPTIONS, which the executor compiles
    with, neither size has one, and an algorithm's program has none."""
    f = lambda x: jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    small, large = jax.jit(f).lower(jnp.ones((4, 10, 10))), jax.jit(f).lower(jnp.ones((125, 10, 10)))
    assert processor_dependent_ops(small.compile().as_text()) == []
    assert processor_dependent_ops(large.compile().as_text()) == ["ynn-fusion"]
    assert processor_dependent_ops(large.compile(compiler_options=COMPILER_OPTIONS).as_text()) == []


def test_the_checker_sees_what_xla_lowers_to_processor_code():
    one, two = jnp.float32(1.0), jnp.float32(2.0)
    assert _ops(lambda a, b: a / jnp.sqrt(b), one, two) == ["rsqrt"]       # XLA's own rewrite
    assert _ops(lambda a, b: a * jax.lax.rsqrt(b), one, two) == ["rsqrt"]
    assert "dot" in _ops(lambda a, b: a @ b, jnp.ones((4, 4)), jnp.ones(4))
    assert _ops(lambda a, b: a / exact_sqrt(b), one, two) == []
    assert _ops(lambda a, b: matvec(a, b), jnp.ones(4), jnp.ones((4, 3))) == []


def test_exact_sqrt_division_is_the_ieee_result_in_any_batch():
    rng = np.random.default_rng(0)
    c = rng.standard_normal(20000).astype(np.float32)
    d = (rng.random(20000) * 3.0 + 1e-3).astype(np.float32)
    expected = c / np.sqrt(d)                                  # float32 IEEE sqrt and division
    divide = lambda a, b: a / exact_sqrt(b)
    np.testing.assert_array_equal(np.asarray(jax.jit(divide)(c, d)), expected)
    for shape in ((20000,), (100, 200), (20000, 1)):
        batched = jax.jit(jax.vmap(divide) if len(shape) == 1 else jax.vmap(jax.vmap(divide)))
        np.testing.assert_array_equal(np.asarray(batched(c.reshape(shape), d.reshape(shape))).ravel(), expected)
    # The plain spelling is XLA's approximate rsqrt on this processor, a different number for some inputs
    # on some processors: the checker above flags it; here it must at least stay within a few ulps.
    plain = np.asarray(jax.jit(lambda a, b: a / jnp.sqrt(b))(c, d))
    np.testing.assert_allclose(plain, expected, rtol=4e-7)


@pytest.mark.parametrize("n,k", [(64, 64), (64, 10), (10, 64), (5, 3), (7, 2)])
def test_matvec_is_pairwise_in_an_order_fixed_by_n(n, k):
    rng = np.random.default_rng(n * 100 + k)
    x = rng.standard_normal((12, n)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    # Without jit nothing is fused, so each product is rounded before it is added: NumPy's own pairwise
    # tree over the n products, in float32, is the oracle.
    terms = [x[:, i:i + 1] * w[i][None, :] for i in range(n)]
    while len(terms) > 1:
        terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
    eager = np.stack([np.asarray(matvec(jnp.asarray(row), jnp.asarray(w))) for row in x])
    np.testing.assert_array_equal(eager, terms[0])
    # Compiled, a seed's value is the same alone and in batches of any shape.
    alone = np.stack([np.asarray(jax.jit(matvec)(row, w)) for row in x])
    in_batch = np.asarray(jax.jit(jax.vmap(matvec, in_axes=(0, None)))(x, w))
    in_pairs = np.asarray(jax.jit(jax.vmap(jax.vmap(matvec, in_axes=(0, None)), in_axes=(0, None)))(
        x.reshape(6, 2, n), w)).reshape(12, k)
    np.testing.assert_array_equal(alone, in_batch)
    np.testing.assert_array_equal(alone, in_pairs)
    np.testing.assert_allclose(alone, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-5)



def _round_to_float32(v):
    """The float32 nearest the exact rational ``v`` (ties to even), rounding once: via float64 only
    where that cannot round twice."""
    from fractions import Fraction
    d = float(v)                                                 # correctly rounded (CPython)
    f = np.float32(d)
    if Fraction(d) != v:
        other = np.nextafter(f, np.float32(np.inf) if Fraction(float(f)) < Fraction(d) else np.float32(-np.inf))
        lo, hi = sorted((f, other))
        mid = (Fraction(float(lo)) + Fraction(float(hi))) / 2
        if Fraction(d) == mid:                                   # a float32 tie in float64, not in v
            f = hi if v > mid else lo
    return f


def _matvec_contracted(x, w):
    """x @ w as the compiled matvec computes it: the pairwise tree of matvec's docstring, in which
    every sum of a product and another term is one fused multiply-add (the first product of a pair
    is the one contracted), and every other sum is a float32 addition."""
    from fractions import Fraction
    exact = lambda a: Fraction(float(a))
    value = lambda t: np.float32(t[1] * t[2]) if t[0] == "product" else t[1]

    def add(s, t):
        if s[0] == "product":
            return "sum", _round_to_float32(exact(s[1]) * exact(s[2]) + exact(value(t)))
        if t[0] == "product":
            return "sum", _round_to_float32(exact(t[1]) * exact(t[2]) + exact(s[1]))
        return "sum", np.float32(s[1] + t[1])

    out = np.empty(w.shape[1], np.float32)
    for j in range(w.shape[1]):
        terms = [("product", x[i], w[i, j]) for i in range(x.shape[0])]
        while len(terms) > 1:
            terms = [add(terms[i], terms[i + 1]) if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
        out[j] = value(terms[0])
    return out


@pytest.mark.parametrize("n,k", [(64, 10), (10, 6), (7, 2)])
def test_compiled_matvec_contracts_each_product_into_the_sum_that_adds_it(n, k):
    """The compiled bits are pinned, not only the same alone and in a batch: matvec's vectorised tree
    must fuse each product into its sum as the spelled-out terms of the results on record did (an odd
    n's last product included), in one run and in a batch of runs with their own weights."""
    rng = np.random.default_rng(7 * n + k)
    x = rng.standard_normal((6, n)).astype(np.float32)
    w = rng.standard_normal((6, n, k)).astype(np.float32)
    expected = np.stack([_matvec_contracted(x[r], w[r]) for r in range(6)])
    np.testing.assert_array_equal(np.asarray(jax.jit(jax.vmap(matvec))(x, w)), expected)
    np.testing.assert_array_equal(np.asarray(jax.jit(matvec)(x[0], w[0])), expected[0])

def _blocked_cumsum(x):
    """XLA's CPU order for a cumulative sum, in float32 NumPy: a window of one is the element; up to
    16 elements, a sequential sum from 0; beyond, blocks of 16 summed so, each plus the sum of the
    block totals before it (that same order, recursively)."""
    n = x.size
    if n == 1:
        return x.copy()
    if n <= 16:
        out, acc = np.empty_like(x), np.float32(0)
        for j in range(n):
            acc = np.float32(acc + x[j])
            out[j] = acc
        return out
    blocks = -(-n // 16)
    inner = np.stack([_blocked_cumsum(np.concatenate([b, np.zeros(16 - b.size, np.float32)]))
                      for b in np.array_split(np.concatenate([x, np.zeros(blocks * 16 - n, np.float32)]), blocks)])
    before = np.concatenate([[np.float32(0)], _blocked_cumsum(inner[:-1, -1])]).astype(np.float32)
    return (before[:, None] + inner).reshape(-1)[:n]


@pytest.mark.parametrize("n", [1, 2, 16, 17, 32, 100, 257, 1000])
def test_prefix_sums_are_jnp_cumsums_bits_in_a_fixed_order(n):
    """The engine's prefix sums keep the bits jnp.cumsum had when the fixture was recorded: XLA's
    blocked order, written out in NumPy; alone and in a batch; minima and integers exactly."""
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((6, n)) * 10.0 ** rng.integers(-4, 5, (6, n))).astype(np.float32)
    x[0, ::3] = -0.0
    expected = np.stack([_blocked_cumsum(row) for row in x])
    got = np.asarray(jax.jit(prefix_sum)(x))
    assert np.array_equal(got, expected) and np.array_equal(np.signbit(got), np.signbit(expected))
    assert np.array_equal(got, np.asarray(jax.jit(lambda v: jnp.cumsum(v, axis=-1))(x)))
    alone = np.stack([np.asarray(jax.jit(prefix_sum)(row)) for row in x])
    assert np.array_equal(alone, got)
    x[1, n // 2] = np.nan
    np.testing.assert_array_equal(np.asarray(jax.jit(prefix_min)(x)), np.minimum.accumulate(x, axis=-1))
    # Zeros of both signs: the minimum's order (doubling within blocks) keeps XLA's own cummin's signs.
    zeros = np.where(rng.random((6, n)) < 0.3, np.float32(1.0),
                     np.where(rng.random((6, n)) < 0.5, np.float32(0.0), np.float32(-0.0)))
    mins = np.asarray(jax.jit(prefix_min)(zeros))
    xla = np.asarray(jax.jit(lambda v: jax.lax.cummin(v, axis=1))(zeros))
    assert np.array_equal(mins, xla) and np.array_equal(np.signbit(mins), np.signbit(xla))
    ints = rng.integers(-1000, 1000, (6, n)).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(jax.jit(prefix_sum)(ints)), np.cumsum(ints, axis=-1))
    np.testing.assert_array_equal(np.asarray(jax.jit(prefix_min)(ints)), np.minimum.accumulate(ints, axis=-1))


def test_first_argmax_is_numpys_argmax():
    """ordered.first_argmax against np.argmax: ties (the first wins), all -inf, +inf, NaN (the first NaN
    wins), one element; jitted, alone and vmapped."""
    rng = np.random.default_rng(3)
    rows = [rng.choice(np.float32([0.0, 0.5, 1.0, -1.0]), 40) for _ in range(6)]
    rows += [np.full(40, -np.inf, np.float32), np.where(np.arange(40) == 7, np.inf, rows[0]).astype(np.float32)]
    with_nan = rows[1].copy()
    with_nan[[5, 9]] = np.nan
    rows += [with_nan, rng.standard_normal(40).astype(np.float32)]
    x = np.stack(rows)
    want = np.argmax(x, axis=1)
    assert len(set(want.tolist())) > 3
    np.testing.assert_array_equal(np.asarray(jax.jit(jax.vmap(first_argmax))(x)), want)
    for row, w in zip(x, want):
        assert int(jax.jit(first_argmax)(row)) == w
    assert int(first_argmax(jnp.float32([2.0]))) == 0


def test_bbob_host_algebra_is_correctly_rounded():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(40), rng.standard_normal(40)
    assert bbob._dot(a, b) == math.fsum(a * b)
    A, B = rng.standard_normal((5, 7)), rng.standard_normal((7, 3))
    expected = np.array([[math.fsum(A[i] * B[:, j]) for j in range(3)] for i in range(5)])
    np.testing.assert_array_equal(bbob._matmul(A, B), expected)
    np.testing.assert_array_equal(bbob._matmul(A, B[:, 0]), expected[:, 0])
    R = bbob.legacy_rotation(17, 10)
    np.testing.assert_allclose(R.T @ R, np.eye(10), atol=1e-14)


def _synthetic_objectives():
    """Registered JAX objectives not covered elsewhere: landmine, covid and digits are checked on the
    programs tests/test_real_objectives.py compiles anyway; landmine-sklearn runs on the host."""
    names = [n for n in objectives.OBJECTIVES
             if n not in ("landmine", "covid", "digits", "landmine-sklearn") and not n.startswith("bbob-")]
    return names + ["bbob-f*"]


@pytest.mark.parametrize("name", _synthetic_objectives())
def test_objectives_compile_to_portable_programs(name):
    names = [f"bbob-f{k}" for k in range(1, 25)] if name == "bbob-f*" else [name]
    for n in names:
        o = objectives.make_objective(n, num_clients=2, **({"dim": 3} if n.startswith("bbob") else {}))
        x = jnp.asarray(o.lo, jnp.float32)[None, :] + 0.3 * (jnp.asarray(o.hi, jnp.float32) - jnp.asarray(o.lo))
        assert _ops(lambda X, o=o: (o.value(X), o.local_values(X)), jnp.repeat(x, 2, axis=0)) == [], n
