"""The 'fourier' heterogeneity: zero-sum smooth perturbations that move the clients' optima while
the global objective stays exactly the original function."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedpne_jax as fp
import objectives
from tests.support import reference

M = 4


def perturbation_numpy(data, x, lo, hi):
    """p_m(x) for all clients from the stored features, written out in float64: (..., M)."""
    freq = np.asarray(data["freq"], np.float64)
    phase = np.asarray(data["phase"], np.float64)
    weight = np.asarray(data["weight"], np.float64)
    z = (np.asarray(x, np.float64) - lo) / (hi - lo)
    return np.cos(2 * np.pi * z @ freq.T + phase) @ weight.T


@pytest.fixture(scope="module")
def program():
    return jax.jit(lambda o, X: (o.local_values(X), o.value(X)))


@pytest.mark.parametrize("name,dim", [("garland", 1), ("himmelblau", 2), ("ackley", 3)])
def test_mean_of_locals_is_the_original_function(name, dim, program):
    obj = objectives.make_objective(name, M, heterogeneity="fourier", seed=2, dim=dim, amplitude=0.3)
    rng = np.random.default_rng(0)
    lo, hi = np.asarray(obj.lo), np.asarray(obj.hi)
    X = lo + rng.uniform(size=(64, dim)) * (hi - lo)
    local, glob = (np.asarray(v, np.float64) for v in program(obj, X.astype(np.float32)))
    f = reference.FUNCTIONS[name][0](X.astype(np.float32).astype(np.float64))
    np.testing.assert_allclose(glob, f, rtol=2e-6, atol=2e-6)              # the engine's global: f itself
    np.testing.assert_allclose(local.mean(axis=1), glob, rtol=0, atol=1e-6 * (1 + np.abs(f).max()))
    # Each local is f plus the documented perturbation.
    want = perturbation_numpy(obj.data, X.astype(np.float32), lo, hi)
    np.testing.assert_allclose(local - glob[:, None], want, atol=2e-6 * (1 + np.abs(f)).max())
    assert np.abs(want).max() > 0.05                                        # clients really differ
    np.testing.assert_allclose(np.asarray(obj.data["weight"], np.float64).sum(axis=0), 0.0, atol=1e-7)


def test_local_argmaxes_differ(program):
    obj = objectives.make_objective("garland", M, heterogeneity="fourier", seed=0, amplitude=0.1)
    xs = np.linspace(0.0, 1.0, 4001, dtype=np.float32)[:, None]
    local, glob = (np.asarray(v, np.float64) for v in program(obj, xs))
    best_global = xs[np.argmax(glob), 0]
    best_local = xs[np.argmax(local, axis=0), 0]
    assert len(set(np.round(best_local, 3))) >= 3                          # optima differ between clients
    assert np.sum(np.abs(best_local - best_global) > 0.01) >= 2           # and from the global optimum
    # The 'shift' heterogeneity, for contrast, keeps every local optimum where the global one is.
    shifted = objectives.make_objective("garland", M, heterogeneity="shift", seed=0)
    local_s = np.asarray(program(shifted, xs)[0])
    assert np.all(xs[np.argmax(local_s, axis=0), 0] == best_global)


def test_amplitude_scales_the_perturbation_and_zero_removes_it(program):
    X = np.random.default_rng(1).uniform(-1, 1, (256, 2)).astype(np.float32)
    rms = []
    for amp in (0.0, 0.05, 0.5):
        obj = objectives.make_objective("rastrigin", M, heterogeneity="fourier", seed=3, amplitude=amp)
        local, glob = (np.asarray(v) for v in program(obj, X))
        rms.append(np.sqrt(np.mean((local - glob[:, None]) ** 2)))
        if amp == 0.0:
            np.testing.assert_array_equal(local, np.repeat(glob[:, None], M, axis=1))
    assert rms[0] == 0.0
    assert rms[2] / rms[1] == pytest.approx(10.0, rel=1e-4)
    # Root-mean-square about amplitude * sqrt(1 - 1/M) (random features: within a factor of 2).
    assert 0.5 < rms[2] / (0.5 * np.sqrt(1 - 1 / M)) < 2.0


def test_amplitude_is_data_not_a_new_program():
    traces = []

    @jax.jit
    def evaluate(o, X):
        traces.append(1)
        return o.local_values(X)

    X = jnp.linspace(0.0, 1.0, 8)[:, None]
    a = objectives.make_objective("doublesine", M, heterogeneity="fourier", amplitude=0.1)
    b = objectives.make_objective("doublesine", M, heterogeneity="fourier", amplitude=0.7, seed=9)
    evaluate(a, X)
    evaluate(b, X)
    assert len(traces) == 1


def test_same_seed_same_perturbation_other_seed_other():
    a = objectives.make_objective("himmelblau", 3, heterogeneity="fourier", seed=4)
    b = objectives.make_objective("himmelblau", 3, heterogeneity="fourier", seed=4)
    c = objectives.make_objective("himmelblau", 3, heterogeneity="fourier", seed=5)
    for k in a.data:
        np.testing.assert_array_equal(np.asarray(a.data[k]), np.asarray(b.data[k]))
    assert not np.allclose(np.asarray(a.data["weight"]), np.asarray(c.data["weight"]))
    one = objectives.make_objective("himmelblau", 1, heterogeneity="fourier")
    assert np.all(np.asarray(one.data["weight"]) == 0.0)          # a single client sees f


@pytest.mark.parametrize("kwargs,match", [
    (dict(heterogeneity="fourier", amplitude=-0.1), "amplitude"),
    (dict(heterogeneity="fourier", amplitude=float("nan")), "amplitude"),
    (dict(heterogeneity="fourier", amplitude=float("inf")), "amplitude"),
    (dict(heterogeneity="fourier", amplitude="big"), "amplitude"),
    (dict(heterogeneity="shift", amplitude=0.1), "amplitude"),
    (dict(heterogeneity="spread"), "heterogeneity must be one of .*fourier"),
])
def test_bad_fourier_inputs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        objectives.make_objective("garland", M, **kwargs)


def test_fedpne_runs_on_fourier_heterogeneity():
    obj = objectives.make_objective("garland", M, heterogeneity="fourier", amplitude=0.2)
    config = fp.FedPNEConfig(num_clients=M, horizon=4000, sampling="client", checkpoints=8)
    result = fp.run(config, obj, seeds=1)
    curves = np.asarray(result.curves)
    assert np.all(np.isfinite(curves)) and np.all(np.diff(curves, axis=1) >= 0)
    per_round = np.diff(np.concatenate([np.zeros((1, 1)), curves], axis=1), axis=1)   # equal chunks
    assert np.all(per_round[:, -1] < per_round[:, 0])
    # Regret is measured on the global objective, the original Garland: the recommendation is near pi/6.
    assert np.all(np.abs(result.recommendation[:, 0] - np.pi / 6) < 0.05)
