"""Legal but degenerate runs are reported, not refused (fedpne_jax.core.diagnostics): a configuration
that never leaves the root within T, and a node table above fp.LARGE_TABLE rows, each give one line
in RunResult.warnings and its JSON, a DegenerateRunWarning from the Python API, and a
"fedpne: warning:" line on stderr from the command line; a run that leaves the root says nothing."""
import json
import warnings

import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax import cli
from fedpne_jax.algorithms.fedpne.plan import n_from_tau, plan
from fedpne_jax.core import diagnostics
from tests.support.helpers import make, reference_run

M = 2
# The command line's defaults for these options, so that its runs share the Python tests' program.
BASE = fp.FedPNEConfig(num_clients=M, horizon=50, checkpoints=5, noise="gaussian:0.1")
ROOT = "no run left the root in T=50 rounds"


@pytest.fixture(scope="module")
def garland():
    return make("garland", M)


def _quiet(config, objective, seeds=3):
    """The run, failing if it warns."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", fp.DegenerateRunWarning)
        return fp.run(config, objective, seeds=seeds)


def test_a_root_only_configuration_warns_and_keeps_the_warning(garland, tmp_path):
    with pytest.warns(fp.DegenerateRunWarning, match=ROOT):
        res = fp.run(BASE.replace(c=1e30), garland, seeds=3)
    np.testing.assert_array_equal(res.depth, 0)
    np.testing.assert_array_equal(res.phases, 0)
    assert len(res.warnings) == 1 and res.warnings[0].startswith(ROOT)
    res.write_json(tmp_path / "run.json")
    assert json.loads((tmp_path / "run.json").read_text())["warnings"] == list(res.warnings)


def test_the_warning_follows_the_first_phase_of_the_plan(garland):
    """The root's phase of n_0 rounds decides it (n_0 grows with T through log T), as the NumPy
    reference says: the last T with n_0 >= T never leaves the root; two rounds more do, and say nothing."""
    config = BASE.replace(c=3.0, noise="none", split="longest")

    def root_rounds(T):
        return n_from_tau(plan(config.replace(horizon=T)).tau(0), config.replace(horizon=T))

    T = 6
    while root_rounds(T) >= T:
        T += 1
    stuck, leaves = config.replace(horizon=T - 1), config.replace(horizon=T + 1)
    assert reference_run(stuck, garland).depth == 0 and reference_run(leaves, garland).depth >= 1
    with pytest.warns(fp.DegenerateRunWarning, match=f"no run left the root in T={T - 1:,} rounds"):
        assert fp.run(stuck, garland).depth[0] == 0
    assert _quiet(leaves, garland, seeds=1).warnings == ()


def test_a_plain_run_says_nothing(garland):
    res = _quiet(BASE, garland)
    assert res.warnings == () and res.depth.max() >= 1
    assert json.loads(json.dumps(res.to_dict()))["warnings"] == []


def test_a_large_node_table_warns(garland, monkeypatch):
    """The table-size rule through a whole run, with the threshold lowered to the run's own table (a
    table above 65,536 rows costs seconds to compile and run)."""
    res = _quiet(BASE, garland)
    monkeypatch.setattr(diagnostics, "LARGE_TABLE", res.capacity - 1)
    with pytest.warns(fp.DegenerateRunWarning, match=f"the node table holds {res.capacity:,} rows per run "
                                                     f"\\(above {res.capacity - 1:,}\\)"):
        again = fp.run(BASE, garland, seeds=3)
    np.testing.assert_array_equal(again.final_regret, res.final_regret)


def test_the_rules_read_depth_and_capacity():
    assert diagnostics.degenerate({"depth": np.zeros(3, int)}, 100, None)[0].startswith(
        "no run left the root in T=100 rounds")
    assert diagnostics.degenerate({"depth": np.array([0, 0, 1])}, 100, None) == ()
    assert diagnostics.degenerate({"depth": np.zeros(3, int)}, 1, None) == ()        # T = 1: nothing to leave for
    assert diagnostics.degenerate({}, 100, None) == ()                                # no tree, no depth
    assert diagnostics.degenerate({"depth": np.ones(2, int)}, 100, fp.LARGE_TABLE) == ()
    (big,) = diagnostics.degenerate({"depth": np.ones(2, int)}, 100, 4 * fp.LARGE_TABLE)
    assert big.startswith("the node table holds 262,144 rows per run (above 65,536)")


def test_command_line_warns_on_stderr_and_in_the_json(tmp_path, capsys):
    out = tmp_path / "run.json"
    code = cli.main(["run", "--clients", str(M), "--horizon", "50", "--checkpoints", "5", "--seeds", "3",
                     "--c", "1e30", "--output", str(out)])
    captured = capsys.readouterr()
    assert code == 0
    lines = [line for line in captured.err.splitlines() if line.startswith("fedpne: warning:")]
    assert len(lines) == 1 and lines[0].startswith(f"fedpne: warning: {ROOT}")
    assert "Traceback" not in captured.err and "DegenerateRunWarning" not in captured.err
    assert json.loads(out.read_text())["warnings"][0].startswith(ROOT)


def test_sweep_warns_once_per_configuration_naming_it(tmp_path, capsys):
    out = tmp_path / "sweep"
    code = cli.main(["sweep", "--objectives", "garland", "--clients", str(M), "--horizon", "50", "--seeds", "3",
                     "--param", "checkpoints=5", "--grid", "c=1e30,0.1", "--out", str(out), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    lines = [line for line in captured.err.splitlines() if line.startswith("fedpne: warning:")]
    assert len(lines) == 1 and "c=1e+30" in lines[0] and ROOT in lines[0]
    index = json.loads((out / "index.json").read_text())
    stored = [chunk["warnings"] for chunk in index["chunks"].values()]
    assert sorted(len(w) for w in stored) == [0, 1] and stored[[len(w) for w in stored].index(1)][0].startswith(ROOT)
