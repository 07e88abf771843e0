"""What fp.run and fp.run_grid refuse or bound before trusting a number: memory (calls sized from
XLA's memory analysis under a budget, requests too large for it refused before compiling), repeated
seeds and configurations, objectives whose shapes, mean identity or f* break the engine's
assumptions, and NumPy scalars where Python ones are accepted."""
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax.core import executor, noise
from fedpne_jax.core import run as run_lib
from fedpne_jax.core.batch import prepare
from fedpne_jax.core.errors import F_STAR_RTOL, FLAG_ABOVE_F_STAR

M = 3
# checkpoints=11 appears in no other test file: programs compiled here are this file's own.
CONFIG = fp.FedPNEConfig(num_clients=M, horizon=2000, checkpoints=11)
SEEDS = 48


@pytest.fixture(scope="module")
def garland():
    return objectives.make_objective("garland", M)


@pytest.fixture
def calls(monkeypatch):
    """The number of runs of every executor call (the monkeypatched executor is run.py's)."""
    sizes = []
    execute = executor.execute

    def counted(*args, **kwargs):
        sizes.append(len(args[5]))
        return execute(*args, **kwargs)

    monkeypatch.setattr(executor, "execute", counted)
    return sizes


def _low_f_star(objective, f_star=0.5, name="garland-low"):
    """``objective`` with an f* below values it takes (Garland reaches 0.998)."""
    return objectives.Objective(name=name, lo=objective.lo, hi=objective.hi, f_star=f_star,
                                num_clients=objective.num_clients, global_fn=objective.global_fn,
                                local_fn=objective.local_fn, data=objective.data)


# ------------------------------------------------------------------------------------------ memory

def test_a_run_cut_into_calls_equals_one_call(garland, calls):
    whole = fp.run(CONFIG, garland, seeds=SEEDS, base_seed=3)
    assert calls == [SEEDS]
    # Half of what XLA says one call of every run needs: the calls shrink to fit it.
    budget = run_lib.pairs_memory([CONFIG], garland, SEEDS) / 2
    calls.clear()
    cut = fp.run(CONFIG, garland, seeds=SEEDS, base_seed=3, memory_gb=budget / 2**30)
    assert len(calls) > 1 and sum(calls) == SEEDS
    np.testing.assert_array_equal(cut.final_regret, whole.final_regret)
    np.testing.assert_array_equal(cut.curves, whole.curves)
    np.testing.assert_array_equal(cut.seeds, whole.seeds)
    assert cut.metrics.keys() == whole.metrics.keys()
    for name, values in whole.metrics.items():
        np.testing.assert_array_equal(cut.metrics[name], values)


def test_results_too_large_are_refused_at_once(garland):
    traces = executor.trace_count()
    start = time.perf_counter()
    per_seed = prepare(fp.core.registry.for_config(CONFIG), [CONFIG], garland).run_bytes()
    with pytest.raises(ValueError, match=rf"{per_seed:,} bytes per seed x 1,000,000,000,000 runs = "
                                         rf"{per_seed * 10**12:,} bytes .* memory this host has available"):
        fp.run(CONFIG, garland, seeds=10**12)
    with pytest.raises(ValueError, match=r"2 configurations x 1,000,000,000 seeds"):
        fp.run_grid(fp.grid_product(CONFIG, c=[0.05, 0.2]), garland, seeds=10**9)
    assert time.perf_counter() - start < 5.0
    assert executor.trace_count() == traces          # nothing compiled


def test_results_beyond_available_memory_are_refused(garland, monkeypatch):
    monkeypatch.setattr(executor, "available_memory", lambda: 1000)
    with pytest.raises(ValueError, match=r"x 1,000 runs = .* above the 9.31e-07 GiB of memory this host has"):
        fp.run(CONFIG, garland, seeds=1000, memory_gb=100)


@pytest.mark.parametrize("memory_gb", [0, -1.0, float("nan"), "2", True])
def test_bad_memory_budget_is_refused(garland, memory_gb):
    with pytest.raises(ValueError, match="memory_gb"):
        fp.run(CONFIG, garland, seeds=2, memory_gb=memory_gb)


def test_fit_runs_shrinks_in_proportion():
    need = lambda runs: 1000 + 100 * runs
    assert executor.fit_runs(50, 10**6, 1, need) == (50, 6000)              # everything fits: one call
    R, bytes_ = executor.fit_runs(50, 3000, 2, need)
    assert bytes_ <= 3000 and R % 2 == 0 and R == 20
    assert executor.fit_runs(50, 500, 2, need) == (2, 1200)                 # one run per device, above budget


# --------------------------------------------------------------------------- repeated runs

def test_repeated_seeds_are_refused(garland):
    traces = executor.trace_count()
    with pytest.raises(ValueError, match=r"seeds must be distinct: seed\(s\) \[3\]"):
        fp.run(CONFIG, garland, seeds=[3, 3])
    with pytest.raises(ValueError, match=r"seed\(s\) \[1, 4\]"):
        fp.run_grid([CONFIG], garland, seeds=np.array([4, 1, 2, 4, 1]))
    assert executor.trace_count() == traces


@pytest.mark.parametrize("a, b", [
    (dict(noise="gaussian:0.1"), dict(noise="gaussian:0.10")),
    (dict(noise="gaussian"), dict(noise="gaussian:0.1")),           # the default scale, written out
    (dict(c=0.1), dict(c=np.float64(0.1))),
    (dict(), dict(c=0.1, delta=1 / M)),                             # the defaults, written out
])
def test_equal_configurations_in_a_grid_are_refused(garland, a, b):
    configs = [CONFIG.replace(rho=0.6), CONFIG.replace(**a), CONFIG.replace(**b)]
    with pytest.raises(ValueError, match="configs 1 and 2 are the same configuration"):
        fp.run_grid(configs, garland, seeds=2)


def test_different_noise_scales_are_not_duplicates(garland):
    run_lib.check_distinct([CONFIG.replace(noise="gaussian:0.1"), CONFIG.replace(noise="gaussian:0.11"),
                            CONFIG.replace(noise="uniform:0.1"), fp.make_config("hoo", noise="gaussian:0.1")])


# --------------------------------------------------------------------------------- objectives

def _objective(global_fn, local_fn, name="custom", data=None, f_star=1.0):
    return objectives.Objective(name=name, lo=(0.0,), hi=(1.0,), f_star=f_star, num_clients=2,
                                global_fn=global_fn, local_fn=local_fn, data=data)


def test_objectives_of_the_wrong_shape_are_refused():
    scalar = lambda d, x, m: x[0]
    with pytest.raises(ValueError, match=r"objective 'custom': global_fn\(data, x\) must return one number "
                                         r"\(shape \(\)\) for a point x of shape \(1,\); at the box centre it "
                                         r"returns shape \(2,\)"):
        _objective(lambda d, x: jnp.stack([x[0], x[0]]), scalar)
    with pytest.raises(ValueError, match=r"local_fn\(data, x, m\) must return one number .* returns shape \(1,\)"):
        _objective(lambda d, x: x[0], lambda d, x, m: x)


def test_run_checks_shapes_before_compiling(garland):
    """Data replaced through the pytree (not the constructor) can change a shape: run refuses it."""
    obj = _objective(lambda d, x: d["w"] * x[0], lambda d, x, m: d["w"] * x[0], data={"w": jnp.float32(0.5)})
    wide = jax.tree.map(lambda w: jnp.ones((2,), jnp.float32), obj)
    traces = executor.trace_count()
    with pytest.raises(ValueError, match=r"global_fn\(data, x\) must return one number"):
        fp.run(fp.FedPNEConfig(num_clients=2, horizon=100), wide, seeds=1)
    assert executor.trace_count() == traces


def test_a_global_fn_that_is_not_the_mean_is_refused():
    with pytest.raises(ValueError, match=r"'custom': global_fn must be the mean of local_fn over the 2 clients.*"
                                         r"at x = \[0.5\] global_fn gives 0.5 but the mean of local_fn is 0.75"):
        _objective(lambda d, x: x[0], lambda d, x, m: x[0] * (m + 1.0))
    # NaN is a value, reported by the run's flags, not a broken identity.
    _objective(lambda d, x: x[0], lambda d, x, m: jnp.where(m == 0, jnp.nan, x[0]))
    shifted = _objective(lambda d, x: x[0], lambda d, x, m: x[0] + d[m], data=jnp.asarray([1e-3, -1e-3]))
    assert shifted.num_clients == 2



def test_a_global_fn_averaging_its_own_local_fn_is_not_probed():
    """A global function marked as the mean of local_fn (objectives.averages) is trusted for that
    local_fn only: the pair below is not a mean, and is refused unless the mark names its local_fn.
    The real objectives' globals carry the mark; their tests hold them to the identity."""
    local = lambda d, x, m: x[0] * (m + 1.0)
    marked = objectives.averages(local)(lambda d, x: x[0])
    assert _objective(marked, local).num_clients == 2
    with pytest.raises(ValueError, match=r"'custom': global_fn must be the mean of local_fn over the 2 clients"):
        _objective(marked, lambda d, x, m: x[0] * (m + 1.0))
    from objectives import covid, digits, landmine
    for module in (covid, digits, landmine):
        assert module.global_.averages is module.local

def test_built_in_heterogeneities_keep_the_mean():
    """The clients' shifts and Fourier weights sum to zero only up to float32 rounding (the other
    built-ins are built in their own test files, which construction checks as well)."""
    for name, kwargs in [("garland", dict(heterogeneity="shift")), ("ackley", dict(heterogeneity="fourier", dim=3))]:
        assert objectives.make_objective(name, 7, seed=5, **kwargs).num_clients == 7


def test_the_f_star_tolerance():
    f_star = -200.0
    tol = F_STAR_RTOL * 200.0
    values = jnp.asarray([f_star - 1.0, f_star + 0.9 * tol, f_star + 1.1 * tol], jnp.float32)
    flag = lambda used: int(noise.value_flags("gaussian", values, jnp.asarray(used), rewards=False, f_star=f_star))
    assert flag([True, True, False]) == 0
    assert flag([False, False, True]) == FLAG_ABOVE_F_STAR
    assert int(noise.value_flags("gaussian", values, jnp.asarray([True] * 3), rewards=False)) == 0   # no f*: no check


@pytest.mark.parametrize("kw", [dict(noise="uniform:0.2"), dict(pull="uniform", noise="none")])
def test_f_star_below_the_values_is_reported_by_the_explicit_sampler(garland, kw):
    """The explicit sampler evaluates the global objective at its own sites (tests/test_contract.py
    covers every algorithm's default)."""
    with pytest.raises(fp.ObjectiveError, match=r"objective 'garland-low' returned a global value above its "
                                                r"f\* = 0.5 .* \(seeds \[0, 1\]; the runs keep a flag, not the point"):
        fp.run(CONFIG.replace(**kw), _low_f_star(garland), seeds=2)


# ------------------------------------------------------------------------------- NumPy scalars

def test_numpy_scalars_are_accepted(garland):
    obj = objectives.make_objective("garland", np.int64(M), seed=np.int32(0), dim=np.int64(1))
    assert jax.tree.structure(obj) == jax.tree.structure(garland) and type(obj.num_clients) is int
    np.testing.assert_array_equal(obj.data["shift"], garland.data["shift"])
    custom = objectives.Objective(name="np", lo=(np.float32(0.0),), hi=[np.int64(1)], f_star=np.float32(1.0),
                                  num_clients=np.int64(2), global_fn=lambda d, x: x[0], local_fn=lambda d, x, m: x[0])
    assert (custom.lo, custom.hi, custom.f_star, custom.num_clients) == ((0.0,), (1.0,), 1.0, 2)
    assert all(type(v) is float for v in custom.lo + custom.hi + (custom.f_star,))
    one = fp.run(CONFIG, garland, seeds=np.int64(SEEDS), base_seed=np.int32(3))
    many = fp.run(CONFIG, garland, seeds=SEEDS, base_seed=3)
    np.testing.assert_array_equal(one.final_regret, many.final_regret)
    with pytest.raises(ValueError, match="f_star"):
        objectives.Objective(name="np", lo=(0.0,), hi=(1.0,), f_star=np.bool_(True), num_clients=2,
                             global_fn=lambda d, x: x[0], local_fn=lambda d, x, m: x[0])
