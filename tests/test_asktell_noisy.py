"""Noisy runs driven through ask/tell agree with fp.run in distribution: one algorithm of each family,
500 seeds a side, the stepper told the objective's values with the configuration's noise drawn by
Stepper.evaluate (independent of fp.run's own draws), fp.run's seeds disjoint from the stepper's.

Each metric is compared by a two-sample z-test of the means (|z| < 4) and a two-sample
Kolmogorov-Smirnov test of the whole distributions at level 1e-4.  Under the null the false-alarm
rate of one comparison is at most 6.3e-5 (z) + 1e-4 (KS); over the 14 comparisons here it is below
2.3e-3 (Bonferroni).  A discrete metric (depth) is compared by its mean only: the KS test's level
does not hold for ties.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import fedpne_jax as fp
import objectives
from fedpne_jax.core import registry
from fedpne_jax.core import stepper as stepper_lib
from fedpne_jax.core.algorithm import describe

SEEDS = 500
Z_LIMIT = 4.0
KS_LEVEL = 1e-4

# One algorithm of each family, small enough for the gate: (name, options, metrics compared).
CASES = {
    "hct": (dict(horizon=300, checkpoints=3, noise="gaussian:0.3"), ("final_regret", "depth")),
    "fedpne": (dict(horizon=400, checkpoints=3, num_clients=3, noise="gaussian:0.3"), ("final_regret", "depth")),
    "fed1ucb": (dict(horizon=300, checkpoints=3, num_clients=3, noise="gaussian:0.3"), ("final_regret",)),
    "gpucb": (dict(horizon=40, checkpoints=2, noise="gaussian:0.1"), ("final_regret",)),
}
DISCRETE = {"depth"}


def stepper_outputs(s: fp.Stepper, seeds: int, base_seed: int, steps: int, noise_factor: float = 1.0):
    """Outputs of ``seeds`` runs told the objective's values with the configuration's noise (its scale
    times ``noise_factor``: a planted defect when not 1)."""
    init, ask, tell, _, done, outputs, _ = stepper_lib.batch(s)
    if noise_factor == 1.0:
        evaluate = jax.vmap(s.evaluate, in_axes=(stepper_lib.QUERY_AXES, 0))
    else:
        scale = noise_factor * s.config.noise_scale

        def one(q, key):
            f = s.evaluate(q)
            z = jax.random.normal(key, f.shape, f.dtype)
            return f + scale * z / jnp.sqrt(jnp.maximum(q.counts, 1).astype(f.dtype))
        evaluate = jax.vmap(one, in_axes=(stepper_lib.QUERY_AXES, 0))

    def whole(keys):
        noise = jax.vmap(lambda k: jax.random.fold_in(k, 2**31 - 1))(keys)    # not the run's own key

        def body(state, _):
            q, state = ask(state)
            step_keys = jax.vmap(lambda k: jax.random.fold_in(k, state.step))(noise)
            return tell(state, q, evaluate(q, step_keys)), None
        state = jax.lax.scan(body, init(keys), None, length=steps)[0]
        return outputs(state), done(state)

    keys = jax.vmap(lambda i: s.key(i, base_seed))(jnp.arange(seeds))
    with s.x64():
        out, finished = jax.jit(whole)(keys)
    assert np.all(np.asarray(finished))
    return jax.tree.map(np.asarray, out)


def agree(a, b, discrete: bool) -> list[str]:
    """Problems found comparing samples a and b (empty: they agree)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    se = np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    problems = []
    z = (a.mean() - b.mean()) / se if se > 0 else (0.0 if a.mean() == b.mean() else np.inf)
    if abs(z) >= Z_LIMIT:
        problems.append(f"means differ: {a.mean():.5g} vs {b.mean():.5g}, z = {z:.2f}")
    if not discrete:
        p = stats.ks_2samp(a, b).pvalue
        if p < KS_LEVEL:
            problems.append(f"distributions differ: KS p = {p:.2g}")
    return problems


def compare(name: str, noise_factor: float = 1.0) -> list[str]:
    options, metrics = CASES[name]
    config = fp.make_config(name, **options)
    clients = options.get("num_clients", 1)
    objective = objectives.make_objective("garland", num_clients=clients)
    expected = fp.run(config, objective, seeds=SEEDS, base_seed=11)
    s = fp.stepper(config, objective)
    out = stepper_outputs(s, SEEDS, 12, int(config.horizon), noise_factor)
    _, _, mine = describe(s.algorithm, config, s.tables, out)
    mine["final_regret"] = out.final_regret
    return [f"{m}: {p}" for m in metrics for p in agree(mine[m], getattr(expected, m), m in DISCRETE)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_noisy_stepper_agrees_with_run(name):
    if registry.get(name).steps is None:
        pytest.fail(f"{name} has no ask/tell steps")
    assert compare(name) == []


def test_a_planted_noise_defect_is_caught():
    """The same comparison fails when the told values' noise has twice the configuration's scale."""
    assert compare("hct", noise_factor=2.0) != []
