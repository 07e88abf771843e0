"""`fedpne run` prints a summary and writes the JSON contract."""
import json
import subprocess
import sys

import numpy as np

from fedpne_jax.cli import main


def test_run_writes_json(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["run", "--objective", "doublesine", "--clients", "3", "--horizon", "2000", "--seeds", "5",
               "--noise", "gaussian:0.2", "--checkpoints", "10", "--seed", "4", "--output", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    for word in ("final per-client regret", "phases", "uploaded scalars", "compile", "runs/s"):
        assert word in text
    data = json.loads(out.read_text())
    for key in ("config", "versions", "device", "checkpoints", "regret_mean", "regret_std", "per_seed", "timing"):
        assert key in data
    assert data["config"]["num_clients"] == 3 and data["config"]["delta"] == 1 / 3 and data["config"]["c"] == 0.1
    assert data["checkpoints"][-1] == 2000 and len(data["checkpoints"]) == 10
    per_seed = data["per_seed"]
    for key in ("final_regret", "phases", "uploads", "depth", "recommendation"):
        assert len(per_seed[key]) == 5
    curves = np.array(per_seed["curves"])
    np.testing.assert_allclose(curves.mean(axis=0), data["regret_mean"], rtol=1e-12)
    np.testing.assert_allclose(curves[:, -1], per_seed["final_regret"], rtol=1e-6)
    assert set(data["timing"]) >= {"compile_seconds", "run_seconds"}


def test_module_entry_point_runs_dp(tmp_path):
    out = tmp_path / "dp.json"
    proc = subprocess.run([sys.executable, "-m", "fedpne_jax", "run", "--clients", "2", "--horizon", "500",
                           "--seeds", "2", "--dp-epsilon", "1", "--dp-delta", "0.01", "--output", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "(DP)" in proc.stdout
    assert json.loads(out.read_text())["algorithm"] == "dp-fedpne"


def test_run_baseline_with_set_options(tmp_path, capsys):
    out = tmp_path / "g.json"
    rc = main(["run", "--algorithm", "gpucb", "--horizon", "40", "--seeds", "2", "--checkpoints", "4",
               "--set", "delta=0.2", "--set", "num_candidates=16", "--output", str(out)])
    assert rc == 0
    assert "GP-UCB on garland" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["algorithm"] == "gpucb"
    assert data["config"]["delta"] == 0.2 and data["config"]["num_candidates"] == 16
    assert data["checkpoints"] == [10, 20, 30, 40] and len(data["per_seed"]["curves"]) == 2


def test_run_refuses_options_the_algorithm_lacks(capsys):
    assert main(["run", "--algorithm", "gpucb", "--rho", "0.5"]) == 2
    err = capsys.readouterr().err
    assert "'gpucb' has no parameter 'rho'" in err and "num_candidates" in err
    assert main(["run", "--algorithm", "hct", "--set", "rho"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    assert main(["run", "--algorithm", "fed1ucb", "--no-grow"]) == 2
