"""Your own algorithm and objective, from outside the package: examples/random_search.py and
examples/my_objective.py run through fp.run, fp.run_grid, a sweep file with ``plugins``,
``fedpne run --plugin`` and installed entry points, and the registry refuses conflicting names.

The examples' regret is checked against closed forms: uniform random search earns the mean of f over
the box each round, so E R(T) = T (f* - mean f), within 4 standard errors over the seeds."""
import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax.cli import main
from fedpne_jax.core import registry
from tests.support import reference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
RANDOM_SEARCH = os.path.join(EXAMPLES, "random_search.py")
MY_OBJECTIVE = os.path.join(EXAMPLES, "my_objective.py")


@pytest.fixture(scope="module")
def plugins():
    """The examples, loaded in this worker for this file only: the registries are restored after it,
    since the files a worker runs next must see the built-in names alone (tests/test_real_objectives.py
    checks that every registered objective is a built-in one)."""
    saved = [(table, table.copy()) for table in (registry._ALGORITHMS, registry._BY_TYPE, registry._STYLES,
                                                 registry._OWNER, registry._LOADED_FILES, objectives.OBJECTIVES)]
    fp.load_plugin(RANDOM_SEARCH)
    fp.load_plugin(MY_OBJECTIVE)
    yield sys.modules
    for table, copy in saved:
        table.clear()
        table.update(copy)


def garland_mean() -> float:
    """The mean of Garland over [0, 1] (midpoint rule on 2^20 cells, float64: error far below 1e-6)."""
    x = (np.arange(2**20) + 0.5) / 2**20
    return float(reference.garland(x[:, None]).mean())


def test_registered_algorithm_is_everywhere_a_builtin_is(plugins):
    assert "random-search" in fp.ALGORITHMS and "random-search" in list(fp.ALGORITHMS)     # a live view
    config = fp.make_config("random-search", horizon=300, noise="none", checkpoints=6)
    assert type(config).__name__ == "RandomSearchConfig"
    assert registry.for_config(config).name == "random-search"
    assert registry.label("random-search") == "Random search"
    with pytest.raises(ValueError, match="no parameter 'rho'"):
        fp.make_config("random-search", rho=0.5)


def test_random_search_regret_is_T_times_the_mean_gap(plugins):
    T, S = 300, 400
    objective = objectives.make_objective("garland")
    result = fp.run(fp.make_config("random-search", horizon=T, noise="none", checkpoints=6), objective, seeds=S)
    expected = T * (objective.f_star - garland_mean())
    stderr = result.final_regret.std(ddof=1) / np.sqrt(S)
    assert abs(result.final_regret.mean() - expected) < 4 * stderr
    assert result.recommendation.shape == (S, 1)
    np.testing.assert_array_equal(result.checkpoints, [50, 100, 150, 200, 250, 300])


def test_run_grid_equals_separate_runs(plugins):
    objective = objectives.make_objective("garland")
    configs = fp.grid_product(fp.make_config("random-search", horizon=200, checkpoints=4),
                              noise=["gaussian:0.1", "gaussian:0.5"])
    grid = fp.run_grid(configs, objective, seeds=5)
    for config, res in zip(configs, grid):
        alone = fp.run(config, objective, seeds=5)
        np.testing.assert_array_equal(res.final_regret, alone.final_regret)
        np.testing.assert_array_equal(res.recommendation, alone.recommendation)


def test_registered_objective_regret_is_T_times_the_mean_gap(plugins):
    T, S, D = 250, 400, 3
    objective = objectives.make_objective("paraboloid", num_clients=4, dim=D, seed=5)
    assert objective.num_clients == 4 and objective.dim == D
    result = fp.run(fp.make_config("random-search", horizon=T, noise="none", checkpoints=5), objective, seeds=S)
    # f = 1 - sum_d (x_d - c_d)^2 with x_d uniform on [0, 1]: E (x_d - c_d)^2 = 1/3 - c_d + c_d^2.
    c = np.asarray(objective.data["centre"], np.float64)
    expected = T * np.sum(1.0 / 3.0 - c + c * c)
    stderr = result.final_regret.std(ddof=1) / np.sqrt(S)
    assert abs(result.final_regret.mean() - expected) < 4 * stderr
    assert objectives.default_size("paraboloid") == (10, 10_000)
    with pytest.raises(ValueError, match="takes no instance"):
        objectives.make_objective("paraboloid", instance=2)


def test_registering_twice_is_a_no_op_and_conflicts_name_the_taken_name(plugins):
    algorithm = registry.get("random-search")
    assert fp.register(algorithm) is algorithm
    other = dataclasses.replace(algorithm, metrics=())
    with pytest.raises(ValueError, match="'random-search' is already registered"):
        fp.register(other)
    hct = registry.get("hct")
    with pytest.raises(ValueError, match="config_type HCTConfig already belongs to algorithm 'hct'"):
        fp.register(dataclasses.replace(hct, name="hct-copy", styles=()))
    with pytest.raises(TypeError, match="Algorithm"):
        fp.register("random-search")
    spec = objectives.spec("paraboloid")
    assert objectives.register("paraboloid", spec.factory, **{f.name: getattr(spec, f.name) for f in
                               dataclasses.fields(spec) if f.name not in ("factory", "kind", "fixed_dim")}) is spec
    with pytest.raises(ValueError, match="'paraboloid' is already registered"):
        objectives.register("paraboloid", lambda num_clients: None)
    with pytest.raises(ValueError, match="'garland' is already registered \\(a built-in objective\\)"):
        objectives.register("garland", spec.factory)


def test_a_registered_objective_is_held_to_what_it_declares(plugins):
    """A factory's signature, its limits and its defaults are checked where they are registered or
    used, naming the objective: none is silently ignored, and no call ends in a TypeError."""
    def garland(num_clients, dim=None, heterogeneity=None):       # builds 1-D Garland whatever dim says
        return objectives.make_objective("garland", num_clients=num_clients)

    with pytest.raises(ValueError, match=r"objective 'no-m': the factory must take num_clients=.*are M, dim"):
        objectives.register("no-m", lambda M, dim=1: garland(M))
    for defaults, message in [(dict(default_clients=0), "default_clients must be an integer >= 1"),
                              (dict(default_horizon=-5), "default_horizon must be an integer >= 1"),
                              (dict(default_seeds=2.5), "default_seeds must be an integer >= 1"),
                              (dict(max_clients=2), "default_clients=10 is more than max_clients=2"),
                              (dict(heterogeneities=("none",), default_heterogeneity="shift"),
                               "default_heterogeneity 'shift' is not one of heterogeneities"),
                              (dict(heterogeneities="none"), "heterogeneities must be a tuple")]:
        with pytest.raises(ValueError, match=f"objective 'limited': {re.escape(message)}"):
            objectives.register("limited", garland, **defaults)
    assert "no-m" not in objectives.OBJECTIVES and "limited" not in objectives.OBJECTIVES
    objectives.register("limited", garland, max_clients=4, default_clients=2, heterogeneities=("none",))
    assert objectives.make_objective("limited", num_clients=4).num_clients == 4
    with pytest.raises(ValueError, match="objective 'limited' has at most 4 clients, got num_clients=5"):
        objectives.make_objective("limited", num_clients=5)
    with pytest.raises(ValueError, match=r"heterogeneity of 'limited' must be one of \('none',\), got 'shift'"):
        objectives.make_objective("limited", heterogeneity="shift")
    with pytest.raises(ValueError, match="objective 'limited': its factory built a 1-D objective, asked for dim=3"):
        objectives.make_objective("limited", dim=3)
    assert objectives.make_objective("limited", dim=1).dim == 1


def test_the_describe_hook_makes_the_result(plugins):
    """An Algorithm's describe hook turns its outputs into the result; without one, the metrics it
    names are kept."""
    from fedpne_jax.core.algorithm import describe
    base = registry.get("random-search")
    config = fp.make_config("random-search", horizon=20, checkpoints=2)
    outputs = type("Out", (), {"final_regret": np.asarray([1.0, 2.0]), "recommendation": np.asarray([[0.5], [0.25]])})()

    def hook(config, tables, outputs):
        return "random-search", config.resolved(), {"twice": 2 * outputs.final_regret}

    name, resolved, metrics = describe(dataclasses.replace(base, describe=hook), config, None, outputs)
    assert name == "random-search" and resolved == config.resolved()
    np.testing.assert_array_equal(metrics["twice"], [2.0, 4.0])
    name, resolved, metrics = describe(base, config, None, outputs)      # no hook: the metrics named
    assert name == "random-search" and list(metrics) == ["recommendation"]
    np.testing.assert_array_equal(metrics["recommendation"], [[0.5], [0.25]])
    with pytest.raises(TypeError, match="report"):
        dataclasses.replace(base, report=hook)                # the hook's name before it was describe


def test_the_tables_hook_gets_the_objective_and_its_former_one_argument_form_still_works(plugins):
    base = registry.get("random-search")
    config = fp.make_config("random-search", horizon=20, checkpoints=2)
    objective = objectives.make_objective("garland", 1)
    seen = []
    current = dataclasses.replace(base, tables=lambda configs, obj: seen.append((len(configs), obj)) or "now",
                                  grow=lambda *a: None)
    former = dataclasses.replace(base, tables=lambda configs: seen.append((len(configs),)) or "before",
                                 grow=lambda *a: None)
    assert current.initial_tables([config, config], objective) == "now"
    assert former.initial_tables([config], objective) == "before"
    assert seen == [(2, objective), (1,)]
    assert base.initial_tables([config], objective) is None


def test_sweep_file_with_plugins_runs_and_a_missing_plugin_is_refused(plugins, tmp_path):
    definition = {"plugins": [RANDOM_SEARCH, MY_OBJECTIVE], "objectives": [{"name": "paraboloid", "dim": 2}],
                  "algorithms": ["random-search"], "clients": [2], "horizon": [120], "seeds": 4,
                  "params": {"checkpoints": 4, "noise": "none"}}
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(definition))
    fp.run_sweep(str(path), str(tmp_path / "out"), progress=False)
    res = fp.load_sweep(str(tmp_path / "out"))
    objective = objectives.make_objective("paraboloid", num_clients=2, dim=2)
    alone = fp.run(fp.make_config("random-search", horizon=120, checkpoints=4, noise="none"), objective, seeds=4)
    np.testing.assert_array_equal(np.asarray(res.final_regret).ravel(), alone.final_regret)
    stored = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert json.dumps(stored).count("random_search.py") >= 1
    missing = dict(definition, plugins=["no_such_fedpne_plugin"])
    with pytest.raises(fp.SweepError, match="plugins: plugin 'no_such_fedpne_plugin' could not be imported"):
        fp.run_sweep(missing, str(tmp_path / "other"), progress=False)


def test_command_line_plugin(plugins, tmp_path, capsys):
    out = tmp_path / "rs.json"
    rc = main(["run", "--plugin", RANDOM_SEARCH, "--plugin", MY_OBJECTIVE, "--algorithm", "random-search",
               "--objective", "paraboloid", "--dim", "2", "--horizon", "100", "--seeds", "3", "--checkpoints", "4",
               "--noise", "none", "--output", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["algorithm"] == "random-search" and len(data["per_seed"]["final_regret"]) == 3
    assert data["style"] == {"label": "Random search", "colour": "#17becf", "marker": "v"}
    assert "Random search on paraboloid" in capsys.readouterr().out
    assert main(["run", "--plugin", "no_such_fedpne_plugin", "--horizon", "10"]) == 2
    assert "--plugin: plugin 'no_such_fedpne_plugin' could not be imported" in capsys.readouterr().err
    assert main(["run", "--algorithm", "no-such-algorithm", "--horizon", "10"]) == 2
    assert "random-search" in capsys.readouterr().err                      # the message lists what exists
    assert main(["run", "--algorithm", "random-search", "--no-grow", "--horizon", "10"]) == 2
    assert "--no-grow: algorithm 'random-search' has no table that grows" in capsys.readouterr().err


ENTRY_POINTS = """\
[fedpne_jax.algorithms]
random-search = random_search:ALGORITHM

[fedpne_jax.objectives]
paraboloid = my_objective:paraboloid
"""

CHILD = """
import json, sys
import fedpne_jax as fp, objectives
from fedpne_jax.cli import main
assert "random-search" not in sys.modules.get("fedpne_jax.core.registry")._ALGORITHMS   # lazy until looked up
names = list(fp.ALGORITHMS)
obj = objectives.make_objective("paraboloid", num_clients=2)
rc = main(["run", "--algorithm", "random-search", "--objective", "paraboloid", "--horizon", "60", "--seeds", "2",
           "--checkpoints", "3", "--noise", "none", "--output", sys.argv[1]])
print(json.dumps({"names": names, "dim": obj.dim, "rc": rc}))
"""


def test_installed_entry_points_load_lazily(tmp_path):
    """A distribution on the path whose entry points name the examples: no edit to the package, no --plugin."""
    dist = tmp_path / "fedpne_example_plugins-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fedpne-example-plugins\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), EXAMPLES, ROOT]))
    out = tmp_path / "run.json"
    child = subprocess.run([sys.executable, "-c", CHILD, str(out)], env=env, capture_output=True, text=True,
                           timeout=300)
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert "random-search" in report["names"] and report["dim"] == 2 and report["rc"] == 0
    assert json.loads(out.read_text())["algorithm"] == "random-search"


def _page_block(page: str) -> str:
    """The first Python block of a page of the documentation site (docs/)."""
    text = open(os.path.join(ROOT, "docs", page)).read()
    return textwrap.dedent(re.search(r"```python\n(.*?)```", text, re.S).group(1))


def test_readme_examples_run_as_printed(plugins, tmp_path, monkeypatch):
    """The examples of the site's pages "Your own algorithm" and "Your own objective" (they were the
    README's; tests/support/tiers.py names the test)."""
    monkeypatch.chdir(ROOT)
    for page in ("guides/own-algorithm.md", "guides/own-objective.md"):
        namespace: dict = {}
        exec(compile(_page_block(page), f"docs/{page}", "exec"), namespace)
        assert "result" in namespace and np.all(np.isfinite(namespace["result"].final_regret))
