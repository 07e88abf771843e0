"""The Python API's own mistakes are refused with a TypeError or ValueError naming the argument, before
anything compiles: an objective given by name (accepted, built as the command line builds it) or of
the wrong type, a box whose sides differ in length, data JAX cannot trace, functions of the wrong
arity, more checkpoints than rounds, a misspelt label in ``SweepResults.find``; and a partial sweep's
statistics are computed without NumPy's warnings."""
import dataclasses
import json
import re
import shutil
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax.algorithms.trees import stroquool
from fedpne_jax.core import executor, registry
from fedpne_jax.core import run as run_lib
from fedpne_jax.core.config import BaselineConfig
from objectives import Objective

T = 20
CONFIG = fp.FedPNEConfig(num_clients=3, horizon=T, checkpoints=4)
HOO = fp.make_config("hoo", horizon=T, checkpoints=4)


def _same(a, b):
    np.testing.assert_array_equal(a.final_regret, b.final_regret)
    np.testing.assert_array_equal(a.curves, b.curves)
    np.testing.assert_array_equal(a.checkpoints, b.checkpoints)
    assert (a.objective, a.config) == (b.objective, b.config)
    for name, value in a.metrics.items():
        np.testing.assert_array_equal(value, b.metrics[name])


# ------------------------------------------------------------------ an objective given by name
def test_run_accepts_a_registered_objective_name():
    named = fp.run(CONFIG, "garland", seeds=2)
    built = fp.run(CONFIG, objectives.make_objective("garland", num_clients=CONFIG.num_clients), seeds=2)
    _same(named, built)
    assert named.curves.shape == (2, CONFIG.checkpoints)


def test_run_builds_a_single_client_objective_for_an_algorithm_without_clients():
    assert "num_clients" not in {f.name for f in dataclasses.fields(HOO)}
    named = fp.run(HOO, "garland", seeds=2)
    _same(named, fp.run(HOO, objectives.make_objective("garland", num_clients=1), seeds=2))


def test_run_grid_builds_the_named_objective_for_each_configuration():
    configs = [CONFIG, CONFIG.replace(num_clients=2)]
    named = fp.run_grid(configs, "garland", seeds=2)
    for config, result in zip(configs, named):
        _same(result, fp.run(config, objectives.make_objective("garland", num_clients=config.num_clients), seeds=2))


def test_a_named_objective_under_bernoulli_noise_has_no_client_shifts():
    # As on the command line: Bernoulli rewards need values in [0, 1], which shifts would leave.
    config = CONFIG.replace(noise="bernoulli")
    objective = run_lib.resolve_objectives([config], "garland")[0]
    expected = objectives.make_objective("garland", num_clients=3, heterogeneity="none")
    assert objective._static_fields() == expected._static_fields()
    shifted = run_lib.resolve_objectives([CONFIG], "garland")[0]
    assert shifted._static_fields() == objectives.make_objective("garland", num_clients=3)._static_fields()
    assert np.any(np.asarray(shifted.data["shift"]) != 0)


def test_an_unknown_objective_name_is_a_value_error_naming_objective():
    traces = executor.trace_count()
    with pytest.raises(ValueError, match=r"^objective must be one of .*got 'garlnd'$"):
        fp.run(CONFIG, "garlnd", seeds=2)
    assert executor.trace_count() == traces


@pytest.mark.parametrize("bad", [3, None, b"garland", ["garland"]])
def test_an_objective_of_another_type_is_a_type_error_naming_objective(bad):
    traces = executor.trace_count()
    expected = re.escape(f"objective must be an objectives.Objective (see objectives.make_objective) or the name "
                         f"of a registered objective (e.g. 'garland'), got {type(bad).__name__} {bad!r}")
    with pytest.raises(TypeError, match=f"^{expected}$"):
        fp.run(CONFIG, bad, seeds=2)
    with pytest.raises(TypeError, match=f"^{expected}$"):
        fp.run_grid([CONFIG], bad, seeds=2)
    assert executor.trace_count() == traces


def test_run_pairs_refuses_a_non_objective_naming_objective():
    with pytest.raises(TypeError, match=r"^objective must be an objectives\.Objective .*got str 'garland'$"):
        run_lib.run_pairs([CONFIG], "garland", [0], [0])


# ------------------------------------------------------------------ from_python's box
def _fn(X):
    return -np.sum((X - 0.5) ** 2, axis=1)


@pytest.mark.parametrize("lo, hi, n_lo, n_hi", [([0], [1, 1], 1, 2), ([0, 0, 0], [1, 1], 3, 2),
                                                ((0.0, 0.0), np.ones(3), 2, 3)])
def test_from_python_refuses_sides_of_different_lengths(lo, hi, n_lo, n_hi):
    message = (f"objective 'python': lo and hi must have the same length (the dimension D), got lo of length "
               f"{n_lo} ({lo!r}) and hi of length {n_hi} ({hi!r})")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        objectives.from_python(_fn, lo, hi, 0.25)


def test_from_python_still_broadcasts_a_number():
    assert objectives.from_python(_fn, [0, 0], 1, 0.0).hi == (1.0, 1.0)
    assert objectives.from_python(_fn, 0, [1, 2, 3], 0.0).lo == (0.0, 0.0, 0.0)
    obj = objectives.from_python(_fn, [0], [1], 0.0)
    assert (obj.lo, obj.hi) == ((0.0,), (1.0,))


def test_from_pyxab_refuses_sides_of_different_lengths():
    class Target:
        fmax = 0.0

        def f(self, x):
            return -float(np.sum((np.asarray(x) - 0.5) ** 2))

    with pytest.raises(ValueError, match=r"lo of length 1 \(\[0\]\) and hi of length 2 \(\[1, 1\]\)$"):
        objectives.from_pyxab(Target(), [0], [1, 1])


# ------------------------------------------------------------------ Objective's data and functions
def _global(data, x):
    return -jnp.sum(x ** 2)


def _local(data, x, m):
    return -jnp.sum(x ** 2)


def _objective(**changes):
    fields = {"name": "toy", "lo": (-1.0, -1.0), "hi": (1.0, 1.0), "f_star": 0.0, "num_clients": 2,
              "global_fn": _global, "local_fn": _local}
    fields.update(changes)
    return Objective(**fields)


@pytest.mark.parametrize("data, got", [
    ("hello", "str: 'hello'"),
    ({"w": np.zeros(2), "tag": "a"}, "str at data['tag']: 'a'"),
    ([np.zeros(2), (1.0, object)], "type at data[1][1]: <class 'object'>"),
    ({"names": np.array(["a", "b"])}, "an array of dtype <U1 at data['names']: array(['a', 'b'], dtype='<U1')"),
])
def test_data_that_jax_cannot_trace_is_a_type_error_naming_data(data, got):
    message = (f"objective 'toy': data must be a pytree (dicts, lists, tuples, None) of arrays or numbers, "
               f"which JAX can trace; got {got}")
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        _objective(data=data)


def test_data_of_arrays_and_numbers_is_accepted():
    data = {"a": jnp.ones(2), "b": np.arange(3), "c": [1, 2.5, True, np.float32(1)], "d": None, "e": ()}
    assert _objective(data=data).data is data
    assert _objective().data is None


ARITY = [
    ("global_fn", lambda x: -jnp.sum(x ** 2),
     ("global_fn is called as global_fn(data, x), but <lambda>(x) cannot take those 2 arguments "
      "(too many positional arguments)")),
    ("global_fn", lambda data, x, m: 0.0,
     ("global_fn is called as global_fn(data, x), but <lambda>(data, x, m) cannot take those 2 arguments "
      "(missing a required argument: 'm')")),
    ("local_fn", _global,
     ("local_fn is called as local_fn(data, x, m), but _global(data, x) cannot take those 3 arguments "
      "(too many positional arguments)")),
    ("local_fn", lambda data, *, x, m: 0.0,
     ("local_fn is called as local_fn(data, x, m), but <lambda>(data, *, x, m) cannot take those 3 arguments "
      "(too many positional arguments)")),
]


@pytest.mark.parametrize("field, fn, expected", ARITY)
def test_a_function_of_the_wrong_arity_is_a_type_error_naming_it(field, fn, expected):
    message = f"objective 'toy': {expected}"
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        _objective(**{field: fn})


def test_a_function_that_is_not_callable_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match=re.escape("objective 'toy': local_fn must be a function called as "
                                                  "local_fn(data, x, m), got float 1.5")):
        _objective(local_fn=1.5)


def test_functions_with_defaults_varargs_or_no_readable_signature_are_accepted():
    class Unreadable:
        # inspect.signature cannot read this one (as for some C callables): the shape check decides.
        __signature__ = "unreadable"

        def __call__(self, data, x, m=None):
            return -jnp.sum(x ** 2)

    obj = _objective(global_fn=lambda *args: -jnp.sum(args[1] ** 2), local_fn=Unreadable())
    assert float(obj.value(jnp.zeros(2))) == 0.0
    assert _objective(local_fn=lambda data, x, m, scale=1.0: -scale * jnp.sum(x ** 2)).num_clients == 2


# ------------------------------------------------------------------ checkpoints <= horizon
BASELINES = [name for name in fp.ALGORITHMS if issubclass(registry.config_type(name), BaselineConfig)]


def test_every_baseline_derives_the_shared_config():
    assert {"hoo", "hct", "gpucb"} <= set(BASELINES)


@pytest.mark.parametrize("name", BASELINES)
def test_more_checkpoints_than_rounds_is_refused_naming_both(name):
    T = stroquool.min_horizon() if name == "stroquool" else 50      # StroquOOL needs T >= 68
    message = ("checkpoints must be <= horizon (each checkpoint is a distinct round of the T rounds), "
               f"got checkpoints=1000, horizon={T}")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        fp.make_config(name, horizon=T, checkpoints=1000)
    with pytest.raises(ValueError, match=rf"got checkpoints={T + 1}, horizon={T}$"):
        fp.make_config(name, horizon=T, checkpoints=T + 1)
    with pytest.raises(ValueError, match=rf"got checkpoints=100, horizon={T}$"):
        fp.make_config(name, horizon=T)                 # the default of 100 too
    rounds = fp.make_config(name, horizon=T, checkpoints=T).checkpoint_rounds
    np.testing.assert_array_equal(rounds, np.arange(1, T + 1))


def test_the_checkpoint_check_follows_the_other_checks():
    with pytest.raises(ValueError, match=r"^checkpoints must be an integer >= 1, got 0$"):
        fp.make_config("hoo", horizon=50, checkpoints=0)
    with pytest.raises(ValueError, match=r"^horizon \(T\) must be an integer in .*got 0$"):
        fp.make_config("hoo", horizon=0, checkpoints=5)


# ------------------------------------------------------------------ sweeps
SWEEP_SEEDS = 3


@pytest.fixture(scope="module")
def sweep_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    definition = {"objectives": ["garland"], "clients": [2], "horizon": [T], "seeds": SWEEP_SEEDS,
                  "params": {"noise": "gaussian:0.1", "checkpoints": 4}, "grid": {"c": [0.1, 0.2, 0.3]}}
    fp.run_sweep(definition, out, chunk_runs=1, progress=False)
    return out


def test_find_refuses_an_unknown_label_listing_the_known_ones(sweep_out):
    res = fp.load_sweep(sweep_out)
    assert res.find(c=0.2) == [1] and res.find(objective="garland", c=0.3) == [2] and res.find(c=0.4) == []
    known = ", ".join(repr(k) for k in sorted(res.configs[0]))
    assert "'c'" in known and "'objective'" in known
    message = f"find: unknown label 'foo'; the labels of this sweep are {known}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        res.find(foo=1)
    with pytest.raises(ValueError, match=re.escape("find: unknown labels 'C', 'objetive'; the labels")):
        res.find(objetive="garland", C=0.1, c=0.1)


def _remove_runs(out, config: int, starts):
    """Delete the chunk files of configuration ``config`` holding the runs from ``starts``."""
    ids = {c["index"]: c["id"] for c in json.loads((out / "sweep.json").read_text())["configs"]}
    chunks = json.loads((out / "index.json").read_text())["chunks"]
    removed = 0
    for entry in chunks.values():
        if entry["config"] == ids[config] and entry["start"] in starts:
            (out / entry["file"]).unlink()
            removed += 1
    assert removed == len(starts)


def test_partial_sweep_statistics_raise_no_warning(sweep_out, tmp_path, capsys):
    full = fp.load_sweep(sweep_out)
    out = tmp_path / "partial"
    shutil.copytree(sweep_out, out)
    _remove_runs(out, 0, range(SWEEP_SEEDS))            # no run at all
    _remove_runs(out, 1, range(1, SWEEP_SEEDS))         # one run
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = fp.load_sweep(out, allow_partial=True)
        stats = {"mean": res.mean, "std": res.std, "stderr": res.stderr, "curve_mean": res.curve_mean,
                 "curve_std": res.curve_std, "curve_stderr": res.curve_stderr}
        summary, table = res.rows(), res.table()
    capsys.readouterr()
    assert res.count.tolist() == [0, 1, SWEEP_SEEDS]
    # No data: NaN.  One run: its value, and no spread to speak of (NaN, as RunResult's).
    assert np.isnan(stats["mean"][0]) and np.isnan(stats["curve_mean"][0]).all()
    assert stats["mean"][1] == full.final_regret[1, 0]
    np.testing.assert_array_equal(stats["curve_mean"][1], full.curves[1, 0])
    for key in ("std", "stderr"):
        assert np.isnan(stats[key][:2]).all()
    assert np.isnan(stats["curve_std"][:2]).all() and np.isnan(stats["curve_stderr"][:2]).all()
    # Complete: exactly what NumPy gives.
    f, c = full.final_regret[2], full.curves[2]
    np.testing.assert_allclose(stats["mean"][2], f.mean(), rtol=1e-15)
    np.testing.assert_allclose(stats["std"][2], f.std(ddof=1), rtol=1e-12)
    np.testing.assert_allclose(stats["stderr"][2], f.std(ddof=1) / np.sqrt(SWEEP_SEEDS), rtol=1e-12)
    np.testing.assert_allclose(stats["curve_mean"][2], c.mean(axis=0), rtol=1e-15)
    np.testing.assert_allclose(stats["curve_std"][2], c.std(axis=0, ddof=1), rtol=1e-12)
    assert [s["runs"] for s in summary] == [0, 1, SWEEP_SEEDS] and np.isnan(summary[0]["mean"])
    assert "nan" in table.splitlines()[2]


def test_complete_sweep_statistics_equal_numpy(sweep_out):
    res = fp.load_sweep(sweep_out)
    np.testing.assert_array_equal(res.mean, np.nanmean(res.final_regret, axis=1))
    np.testing.assert_array_equal(res.curve_mean, np.nanmean(res.curves, axis=1))
    np.testing.assert_allclose(res.std, res.final_regret.std(axis=1, ddof=1), rtol=1e-12)


@pytest.mark.parametrize("seeds", [b"ab", "01", {1: 2}, {3, 4}])
def test_seeds_that_would_iterate_into_indices_are_refused(seeds):
    with pytest.raises(ValueError, match="seeds must be a count"):
        fp.run(fp.make_config("hct", horizon=10, checkpoints=2), "garland", seeds=seeds)


def test_multi_host_options_without_distributed_are_refused(capsys):
    from fedpne_jax import cli
    assert cli.main(["run", "--process-id", "1", "--num-processes", "2", "--horizon", "10"]) == 2
    err = capsys.readouterr().err
    assert "--num-processes, --process-id without --distributed would be ignored" in err and "Traceback" not in err
