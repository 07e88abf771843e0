"""objectives.stored: values computed once and stored, the same bits as computing them in place."""
import jax
import jax.numpy as jnp
import numpy as np

from objectives.stored import stored


def _signal(w, x):
    """A cheap expression XLA would fuse into every element of an outer product with it."""
    return jnp.maximum(w @ x, 0.0) * jnp.tanh(x[:8])


def _step_program(with_store):
    def run(w, xs):
        def step(acc, k):
            x = xs[k]
            v = stored(k >= 0, _signal, w, x) if with_store else _signal(w, x)
            return acc + x[:, None] * v[None, :], None
        return jax.lax.scan(step, jnp.zeros((xs.shape[1], 8), xs.dtype), jnp.arange(xs.shape[0]))[0]
    return jax.jit(jax.vmap(run, in_axes=(None, 0)))


def test_stored_values_are_the_values_computed_in_place():
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.normal(size=(8, 64)), jnp.float32)
    xs = jnp.asarray(rng.normal(size=(3, 20, 64)), jnp.float32)
    a = np.asarray(_step_program(True)(w, xs))
    b = np.asarray(_step_program(False)(w, xs))
    np.testing.assert_array_equal(a, b)
    with jax.disable_jit():          # eagerly the conditional is Python's if
        np.testing.assert_array_equal(np.asarray(_step_program(True)(w, xs[:1])),
                                      np.asarray(_step_program(False)(w, xs[:1])))


def test_stored_values_are_a_conditionals_results_on_a_cpu_and_stay_unbatched_under_vmap():
    w = jnp.ones((8, 64), jnp.float32)
    xs = jnp.ones((3, 20, 64), jnp.float32)
    text = _step_program(True).lower(w, xs).compile().as_text()
    assert " conditional(" in text, "the stored values are not a conditional's results"
    assert " conditional(" not in _step_program(False).lower(w, xs).compile().as_text()


def test_stored_values_are_computed_in_place_on_a_gpu():
    """Lowered for CUDA (no GPU needed) the conditional is gone, which would cost a round trip to the
    host there (the choice of platform is itself a case on a constant, lowered on both)."""
    from jax import export
    w = jnp.ones((8, 64), jnp.float32)
    xs = jnp.ones((3, 20, 64), jnp.float32)
    cases = {p: export.export(_step_program(True), platforms=[p])(w, xs).mlir_module().count("stablehlo.case")
             for p in ("cpu", "cuda")}
    assert cases["cpu"] == cases["cuda"] + 1
