"""The contract every registered algorithm keeps, tested over the registry (tests/conftest.py):
``fp.run(fp.make_config(name, ...), objective, seeds)`` works for every name; a seed in a grid of two
configurations equals the same seed in a batch of three and in a separate run, bit for bit; its
program has no operation whose numbers depend on the processor; the curve has the checkpoints'
shape, never decreases and ends at the final regret; the simple regret ends at the recommendation's; a plain run raises no flag; a global value
above f* is reported; bad parameters are refused by name before anything compiles.  Each algorithm
compiles two programs here: its batch and its grid."""
import dataclasses

import numpy as np
import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax.algorithms import BUILTIN
from fedpne_jax.core import checkpoints, executor, measures, registry
from fedpne_jax.core.portability import processor_dependent_ops
from tests.support import behaviour, tiers
from tests.support.behaviour import M, recorded_objective
from tests.support.contract import COMMON_BAD, CONTRACT

SEEDS = 3      # the batch's shape, which the flag, f* and grid tests' separate runs share


def _objective():
    return recorded_objective()


def _config(name, **changes):
    options, _ = CONTRACT[name]
    return fp.make_config(name, **{**options, **changes})


@pytest.fixture(scope="module")
def batches():
    return {}


def _base_seed(name):
    return behaviour.BASE_SEED if name in behaviour.OWN else 4


def _batch(batches, name):
    """The recorded run where the algorithm has one (tests/support/behaviour.py), else a run as small."""
    if name not in batches:
        batches[name] = fp.run(_config(name), _objective(), seeds=SEEDS, base_seed=_base_seed(name))
    return batches[name]


def test_every_algorithm_has_a_contract_entry():
    assert sorted(CONTRACT) == sorted(a.name for a in BUILTIN)
    assert set(CONTRACT) <= set(fp.ALGORITHMS)
    # The gate runs the contract of CONTRACT_GATE's only, each with a recorded run of its own.
    assert set(tiers.CONTRACT_GATE) <= set(tiers.RECORDED)


def test_run_by_name_and_curve_shape(algorithm, batches):
    res = _batch(batches, algorithm)
    assert res.algorithm == algorithm and res.num_seeds == SEEDS
    config = _config(algorithm)
    assert res.curves.shape == (SEEDS, config.checkpoints)
    np.testing.assert_array_equal(res.checkpoints, config.checkpoint_rounds)
    assert res.checkpoints[-1] == config.horizon
    assert np.all(np.diff(res.curves, axis=1) >= -1e-4 * np.abs(res.curves[:, 1:]).max())
    np.testing.assert_allclose(res.curves[:, -1], res.final_regret, rtol=1e-6)
    assert np.all(res.final_regret > 0) and len(set(res.final_regret.tolist())) > 1
    for metric in registry.get(algorithm).metrics:
        assert getattr(res, metric).shape[0] == SEEDS
    _check_measures(res)
    _check_simple_regret(res)


def _check_simple_regret(res):
    """Simple regret f* - f(recommendation): one per checkpoint, never below 0 (f* is the supremum),
    and the last is the final recommendation's, evaluated here on the host."""
    simple = res.simple_curve
    assert simple.shape == res.curves.shape and np.all(np.isfinite(simple))
    garland = _objective()
    assert np.all(simple >= -1e-6 * max(1.0, abs(garland.f_star)))
    values = np.asarray(garland.value(np.asarray(res.recommendation, np.float32)), float)
    np.testing.assert_allclose(simple[:, -1], garland.f_star - values, rtol=1e-5, atol=1e-6)


def _check_measures(res):
    """Best-so-far regret: never rises, is at most the mean regret per round so far (a smallest gap
    is at most the mean gap), and reaches each target exactly from its hit round on."""
    assert set(measures.REPORTED) <= set(res.metrics)
    best, hits = res.best_curve, res.hits
    assert best.shape == res.curves.shape and hits.shape == (SEEDS, checkpoints.TARGET_EXPONENTS.size)
    assert np.all(np.diff(best, axis=1) <= 0)
    assert np.all(best <= res.curves / res.checkpoints * (1 + 1e-5) + 1e-6)
    goals = res.target_scale[:, None] * 10.0 ** checkpoints.TARGET_EXPONENTS
    reached = best[:, :, None] <= goals[:, None, :]                        # (S, C, targets)
    after = (hits[:, None, :] > 0) & (res.checkpoints[None, :, None] >= hits[:, None, :])
    decided = ~np.isclose(best[:, :, None], goals[:, None, :], rtol=1e-6)
    assert np.array_equal(reached[decided], after[decided])
    assert np.all(hits[:, 0] >= 1)          # 100 times the first point's regret: reached at once or soon


@pytest.mark.parametrize("recorded", sorted(behaviour.OWN))
def test_recorded_run_is_unchanged(recorded, batches):
    """The batch of an algorithm with a recorded configuration gives the fixture's numbers, bit for bit
    (recorded on an AMD EPYC, checked on Intel Xeons: tests/test_behaviour.py)."""
    run = behaviour.OWN[recorded]
    assert behaviour.config(run) == _config(recorded) and SEEDS == behaviour.SEEDS
    expected = {k: v for k, v in behaviour.recorded().items() if k.rpartition("/")[0] == run}
    assert len(expected) >= 3
    assert behaviour.compare(expected, behaviour.stored(run, _batch(batches, recorded))) == []


def test_program_has_no_processor_dependent_operation(algorithm, batches):
    """A seed gives the same numbers on any x86-64 processor (fedpne_jax.core.portability)."""
    _batch(batches, algorithm)
    run_single = registry.get(algorithm).run_single
    programs = [exe for key, (exe, _) in executor._compiled.items() if key[0] is run_single]
    assert programs
    for exe in programs:
        assert processor_dependent_ops(exe.as_text()) == []


def test_seed_in_a_grid_of_two_equals_batch(algorithm, batches):
    """One seed of two configurations in one grid program: the first is the batch's seed, bit for bit
    (a seed's numbers depend neither on its company nor on the grid), the second a separate run's, and
    the noise scale is data (one program).  The batch and this grid are the algorithm's only programs."""
    res = _batch(batches, algorithm)
    config = _config(algorithm)
    kind, _, scale = CONTRACT[algorithm][0]["noise"].partition(":")
    other = _config(algorithm, noise=f"{kind}:{float(scale) * 2}")
    traces = executor.trace_count()
    grid = fp.run_grid([config, other], _objective(), seeds=[1], base_seed=_base_seed(algorithm))
    separate = fp.run(other, _objective(), seeds=SEEDS, base_seed=_base_seed(algorithm))
    assert executor.trace_count() - traces == 1
    for got, want in ((grid[0], res), (grid[1], separate)):
        np.testing.assert_array_equal(got.final_regret[0], want.final_regret[1])
        np.testing.assert_array_equal(got.curves[0], want.curves[1])
        for name, value in got.metrics.items():
            np.testing.assert_array_equal(value[0], want.metrics[name][1])
    assert not np.array_equal(separate.curves, res.curves)


def test_plain_run_raises_no_flag(algorithm):
    algo = registry.get(algorithm)
    config, objective = _config(algorithm), _objective()
    tables = algo.initial_tables([config], objective)
    out, _, _ = executor.execute(algo.run_single, algo.make_static(config, objective, tables),
                                 algo.make_params(config, tables), objective, 0, np.arange(3))
    np.testing.assert_array_equal(out.flags, 0)


def test_global_value_above_f_star_is_reported(algorithm, batches):
    """Every algorithm checks the global objective at the points it pulls against f* (Garland takes
    values up to 0.998; this f* says 0.5), as it checks NaN: the run raises, naming the seeds."""
    garland = _objective()
    _batch(batches, algorithm)
    low = objectives.Objective(name=garland.name, lo=garland.lo, hi=garland.hi, f_star=0.5, num_clients=M,
                               global_fn=garland.global_fn, local_fn=garland.local_fn, data=garland.data)
    traces = executor.trace_count()
    with pytest.raises(fp.ObjectiveError, match=r"'garland' returned a global value above its f\* = 0.5 "
                                                r".*\(seeds \[0, 1(, 2)?\]"):
        fp.run(_config(algorithm), low, seeds=SEEDS)
    assert executor.trace_count() == traces      # f* is data: the batch's program serves


EXTREMES = (5e-324, 1e-320, 1e-200, 1e-30, 1e30, 1e200, 1.7e308)
# Every real parameter of every algorithm (by its annotation: an optional one included).
REALS = [(name, f.name) for name in sorted(CONTRACT)
         for f in dataclasses.fields(registry.get(name).config_type) if "float" in str(f.type)]


def test_every_algorithm_with_real_parameters_is_in_reals():
    assert {name for name, _ in REALS} >= set(CONTRACT) - {"soo", "sequool", "stroquool"}


@pytest.mark.parametrize("name, field", REALS)
def test_extreme_real_parameters_are_accepted_or_refused_by_value(name, field):
    """A real parameter at values from the smallest subnormal to the largest double: the config is
    built or refused with a ValueError naming the parameter, never an arithmetic error of the
    formulas it derives (a traceback on the command line)."""
    base = _config(name)
    for value in EXTREMES:
        try:
            base.replace(**{field: value})
        except ValueError as err:
            assert field in str(err), (value, str(err))


def test_bad_parameters_are_refused_by_name(algorithm):
    _, bad = CONTRACT[algorithm]
    for name, value in COMMON_BAD + bad:
        with pytest.raises(ValueError, match=name):
            _config(algorithm, **{name: value})
    with pytest.raises(ValueError, match="no parameter 'bogus'"):
        _config(algorithm, bogus=1)
