"""The best-so-far regret and the fixed-target hit rounds (fedpne_jax.core.checkpoints), recomputed
in NumPy from the points a run evaluated: f* - max_{s<=t} f(x_s) at the checkpoints, the targets
scale x 10^e (e = 2, 1.8, .., -8) with scale = f* - f(centre of the box), and the first round at
which the best-so-far regret reaches each target (0: never)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax.algorithms.trees import doo, hct, hoo, soo
from fedpne_jax.core import checkpoints, executor, registry
from tests.support import reference
from tests.support.helpers import target_hits, traced_tree_run

T = 300
EXPONENTS = np.linspace(2.0, -8.0, 51)


def best_so_far(points, f_star):
    """(best-so-far regret per round, in float64) of the evaluated points under Garland."""
    gaps = f_star - reference.garland(np.asarray(points, np.float64))
    return np.minimum.accumulate(gaps)


@pytest.mark.parametrize("module", [hct, hoo, doo, soo], ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_tree_measures_equal_numpy_over_the_evaluated_points(module, garland):
    config = fp.make_config(module.ALGORITHM.name, horizon=T, checkpoints=12, noise="gaussian:0.3")
    out, _ = traced_tree_run(module, config, garland, seeds=[0, 1, 2])
    f_star = garland.f_star
    scale = f_star - reference.garland(np.array([0.5]))
    np.testing.assert_allclose(out.target_scale, scale, rtol=1e-6)
    goals = scale * 10.0 ** EXPONENTS
    rounds = np.asarray(config.checkpoint_rounds)
    for i in range(3):
        best = best_so_far(out.points[i], f_star)
        np.testing.assert_allclose(out.best_curve[i], best[rounds - 1], rtol=1e-5, atol=1e-7)
        hits, near = target_hits(best, goals)
        np.testing.assert_array_equal(out.hits[i][~near], hits[~near])
        assert out.hits[i][0] == 1 and np.any(out.hits[i] == 0)   # the easiest at once, the hardest never


def test_results_carry_the_measures_per_seed():
    config = fp.make_config("hct", horizon=T, checkpoints=12, noise="gaussian:0.3")
    res = fp.run(config, "garland", seeds=3)
    assert res.best_curve.shape == (3, 12) and res.hits.shape == (3, checkpoints.TARGET_EXPONENTS.size)
    assert np.all(np.diff(res.best_curve, axis=1) <= 0)                 # never gets worse
    # the smallest regret of the first t rounds is at most their mean
    assert np.all(res.best_curve <= res.curves / res.checkpoints + 1e-6)
    hit = res.hits > 0
    assert np.all(np.diff(np.where(hit, res.hits, T + 1), axis=1) >= 0)  # harder targets are reached later
    stored = res.to_dict()["per_seed"]
    assert np.asarray(stored["hits"]).shape == (3, 51) and len(stored["best_curve"]) == 3


def test_targets_follow_coco_defaults():
    assert checkpoints.TARGET_EXPONENTS.size == 51
    np.testing.assert_allclose(checkpoints.TARGET_EXPONENTS[[0, 5, 50]], [2.0, 1.0, -8.0])
    np.testing.assert_allclose(np.diff(checkpoints.TARGET_EXPONENTS), -0.2)


@pytest.mark.parametrize("name", ["gpucb", "bbo"])
def test_gp_measures_equal_numpy_over_the_picked_candidates(name):
    """GP-UCB picks one candidate a round, BBO one per client: the best-so-far regret is over all."""
    from tests.test_gp_baselines import CONFIGS, T_EXACT, _instance, _objective

    objective = _objective(name)
    res = fp.run(CONFIGS[name].replace(horizon=T_EXACT), objective, seeds=3)
    scale = objective.f_star - reference.garland(np.array([0.5]))
    np.testing.assert_allclose(res.target_scale, scale, rtol=1e-6)
    goals = scale * 10.0 ** EXPONENTS
    for i in range(3):
        unit, _, _ = _instance(name, i)
        # The run's float32 candidates and values: at Garland's cusps (sqrt|sin 60x|) a float64
        # evaluation differs by up to 1e-4, and the values are not what is tested here.
        lo, hi = np.asarray(objective.lo, np.float32), np.asarray(objective.hi, np.float32)
        values = np.asarray(objective.value(lo + (hi - lo) * unit.astype(np.float32)), np.float64)
        chosen = res.choices[i].reshape(T_EXACT, -1)
        gaps = np.float32(objective.f_star) - values[chosen].max(axis=1)
        best = np.minimum.accumulate(gaps)
        np.testing.assert_allclose(res.best_curve[i], best[res.checkpoints - 1], rtol=1e-5, atol=1e-7)
        hits, near = target_hits(best, goals)
        np.testing.assert_array_equal(res.hits[i][~near], hits[~near])


# Algorithms whose rounds do not depend on the horizon T (HCT, VHCT and DOO size only their tables
# by it; the GP's candidates and FN-UCB's arms do not depend on it): a run cut at round t makes
# round t's recommendation its final one.  (T-HOO, GP-UCB, Fed-PNE, POO and the fixed-budget
# algorithms set their rules from T.)
ANYTIME = ("doo", "kernelts", "hct", "vhct", "soo", "zooming", "bo", "fnucb")


@pytest.mark.parametrize("name", ANYTIME)
def test_simple_regret_at_a_checkpoint_is_the_final_one_of_the_run_cut_there(name):
    """The simple regret f* - f(x_hat_t) recorded at each checkpoint t equals the final simple regret
    of the same seeds run for t rounds, and that one equals f* - f(recommendation) on the host: the
    recommendation after round t is the one the algorithm returns when stopped there."""
    fed = name == "fnucb"
    objective = objectives.make_objective("garland", num_clients=2 if fed else 1, heterogeneity="none")
    options = dict(noise="gaussian:0.3", **({"num_clients": 2} if fed else {}))
    res = fp.run(fp.make_config(name, horizon=T, checkpoints=2, **options), objective, seeds=3)
    assert np.all(res.simple_curve >= 0) and len(set(res.simple_curve.ravel().tolist())) > 1
    for c, t in enumerate(res.checkpoints):
        # Cut at T, the run is the run itself: its final simple regret is still checked on the host.
        # The cut run keeps the checkpoint count: where T is data (KernelTS, BO) it is the same program.
        cut = res if t == T else fp.run(fp.make_config(name, horizon=int(t), checkpoints=2, **options), objective,
                                        seeds=3)
        np.testing.assert_array_equal(cut.simple_curve[:, -1], res.simple_curve[:, c])
        f = reference.garland(np.asarray(cut.recommendation, np.float64))
        np.testing.assert_allclose(cut.simple_curve[:, -1], objective.f_star - f, rtol=1e-4, atol=1e-6)


def _numpy_hits(gaps, goals, hits0):
    """First round (1-based) whose best-so-far gap is at or below each goal, rounds in order; a NaN
    gap makes every later best-so-far NaN, which reaches nothing."""
    hits = hits0.copy()
    best = np.inf
    for t, g in enumerate(gaps, start=1):
        best = np.nan if (np.isnan(best) or np.isnan(g)) else min(best, g)
        for i, goal in enumerate(goals):
            if hits[i] == 0 and best <= goal:
                hits[i] = t
    return hits


@pytest.mark.parametrize("nan_at", [None, 37])
def test_settled_hits_equal_the_first_round_at_or_below_each_target(nan_at):
    """settle_hits over blocks of any length (the loop settles a chunk, or the part of it an epoch
    holds) gives each target's first round, as a per-round scan of the best-so-far does."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(3)
    goals = np.float32(2.0) * (10.0 ** EXPONENTS).astype(np.float32)
    n = 16
    for _ in range(4):
        gaps = (10.0 ** rng.uniform(-9, 3, size=90)).astype(np.float32)
        gaps[rng.choice(90, size=10, replace=False)] = goals[rng.integers(0, 51, size=10)]   # exactly on targets
        if nan_at is not None:
            gaps[nan_at] = np.nan
        best = np.minimum.accumulate(np.where(np.isnan(gaps), -np.inf, gaps)).astype(np.float32)
        if nan_at is not None:
            best[nan_at:] = np.nan
        hits = jnp.zeros(51, jnp.int32)
        settle = jax.jit(checkpoints.settle_hits)
        t, cuts = 1, np.sort(rng.choice(np.arange(2, 90), size=6, replace=False))
        for stop in list(cuts) + [91]:                 # blocks t .. stop - 1, each inside one window of n
            while t < stop:
                start = (t - 1) // n * n + 1
                hi = min(stop - 1, start + n - 1)
                window = np.full(n, np.float32(-1.0))  # slots outside the block: stale, below every target
                window[t - start:hi - start + 1] = best[t - 1:hi]
                hits = settle(hits, jnp.asarray(window), t - start, hi - start, start, jnp.asarray(goals))
                t = hi + 1
        np.testing.assert_array_equal(np.asarray(hits), _numpy_hits(gaps, goals, np.zeros(51, np.int32)))


def test_the_centre_is_evaluated_once_outside_the_programs():
    """f(centre of the box), the targets' scale and the first recommendation's value, comes from one
    small program per objective and precision (checkpoints.with_centre), not from every algorithm's:
    an objective evaluated on the host is called from HCT's program at its pulls only.  The engine
    computes the value itself, whatever the objective carries, and computes it as a program
    evaluating it inside would, bit for bit."""
    host = objectives.from_python(lambda X: 0.5 + 0.5 * np.sin(13 * X[:, 0]) * np.sin(27 * X[:, 0]), [0.0], [1.0],
                                  1.0, name="host-garland")
    scale = 0.5 - 0.5 * np.sin(6.5) * np.sin(13.5)
    config = fp.make_config("hct", horizon=50, checkpoints=5)
    before = set(executor._compiled)
    for objective in (host, host.with_centre_value(jnp.float32(-7.0))):
        res = fp.run(config, objective, seeds=2)
        np.testing.assert_allclose(res.target_scale, scale, rtol=1e-6)
    run_single = registry.get("hct").run_single
    programs = [exe for key, (exe, _) in executor._compiled.items() if key[0] is run_single and key not in before]
    assert len(programs) == 1 and programs[0].as_text().count("custom-call(") == 1
    garland = objectives.make_objective("garland", 1)
    inside = jax.jit(lambda o, x: o.global_value(x))
    for real in ("float32", "float64"):
        with jax.enable_x64(real == "float64"):
            stored = checkpoints.with_centre(garland, real).centre_value
            assert stored.dtype == np.dtype(real)
            np.testing.assert_array_equal(stored, inside(garland, jnp.asarray([0.5], real)))
