"""Sweeps: results equal a grid run, chunks from a memory budget, a killed sweep resumes to the same
numbers, another definition in the same folder is refused, and the loader reads what was written."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.cli import main
from fedpne_jax.cli.sweep import from_options
from fedpne_jax.core import grid
from fedpne_jax.experiments import sweep as sweep_lib
from tests.test_grid import C_VALUES, CONFIG, SEEDS, objective

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# test_grid's grid as a sweep: its group call is the very program of test_grid's run_grid.
TOML = f"""
objectives = [{{name = "himmelblau", dim = 2}}]
clients = [3]
horizon = [600]
seeds = {SEEDS}
base_seed = 3

[params]
noise = "gaussian:0.3"
checkpoints = 4
capacity = 32

[grid]
c = {C_VALUES}
"""


def definition(seeds=SEEDS) -> dict:
    return {"objectives": [{"name": "himmelblau", "dim": 2}], "clients": [3], "horizon": [600], "seeds": seeds,
            "base_seed": 3, "params": {"noise": "gaussian:0.3", "checkpoints": 4, "capacity": 32},
            "grid": {"c": C_VALUES}}


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    out = tmp_path_factory.mktemp("clean")
    report = fp.run_sweep(definition(), out, progress=False)
    return out, report


def test_sweep_equals_grid_and_loader_reads_the_chunks(clean):
    out, report = clean
    assert report.compilations <= 1 and report.runs_computed == 3 * SEEDS and report.calls == 1
    res = fp.load_sweep(out)
    assert res.curves.shape == (3, SEEDS, 4) and res.final_regret.shape == (3, SEEDS) and res.complete
    assert [c["c"] for c in res.configs] == C_VALUES and res.dims == ("config", "seed", "checkpoint")
    np.testing.assert_array_equal(res.seeds, np.arange(SEEDS))
    direct = fp.run_grid(grid.product(CONFIG, c=C_VALUES), objective(), seeds=SEEDS, base_seed=3)
    for i, r in enumerate(direct):
        np.testing.assert_array_equal(res.final_regret[i], r.final_regret)
        np.testing.assert_array_equal(res.curves[i], r.curves)
        np.testing.assert_array_equal(res.checkpoints[i], r.checkpoints)
        for name, value in r.metrics.items():
            np.testing.assert_array_equal(res.metrics[name][i], value)
    # The loader against the raw files.
    index = json.loads((out / "index.json").read_text())["chunks"]
    ids = {c["id"]: c["index"] for c in json.loads((out / "sweep.json").read_text())["configs"]}
    for entry in index.values():
        with np.load(out / entry["file"]) as raw:
            i, a, b = ids[entry["config"]], entry["start"], entry["end"]
            np.testing.assert_array_equal(raw["curves"], res.curves[i, a:b])
            np.testing.assert_array_equal(raw["metric.phases"], res.metrics["phases"][i, a:b])
    f = res.final_regret
    np.testing.assert_allclose(res.mean, f.mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(res.std, f.std(axis=1, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(res.stderr, f.std(axis=1, ddof=1) / np.sqrt(SEEDS), rtol=1e-12)
    np.testing.assert_allclose(res.curve_stderr, res.curves.std(axis=1, ddof=1) / np.sqrt(SEEDS), rtol=1e-12)
    assert res.find(c=0.1) == [1] and res.rows()[1]["runs"] == SEEDS and "final regret" in res.table()
    assert not hasattr(res, "summary")      # rows() is the table as data; a summary() elsewhere is text


def test_tiny_memory_budget_gives_many_chunks_and_the_same_results(clean, tmp_path):
    report = fp.run_sweep(definition(), tmp_path, memory_gb=1e-6, progress=False)
    assert report.call_runs == [1] and report.calls == 3 * SEEDS and report.chunks_written == 3 * SEEDS
    tiny, whole = fp.load_sweep(tmp_path), fp.load_sweep(clean[0])
    np.testing.assert_array_equal(tiny.curves, whole.curves)
    for name in whole.metrics:
        np.testing.assert_array_equal(tiny.metrics[name], whole.metrics[name])


def _chunks(out) -> int:
    try:
        return len(json.loads((out / "index.json").read_text())["chunks"])
    except (OSError, ValueError, KeyError):
        return 0


def test_killed_sweep_resumes_to_the_same_results(tmp_path):
    """SIGKILL in the middle; the rerun keeps every finished chunk, computes only the missing ones and
    ends with the clean run's numbers.  One run per call (the program test_tiny_memory_budget compiled)."""
    seeds = 20
    definition_file = tmp_path / "sweep.json"
    definition_file.write_text(json.dumps(definition(seeds)))
    killed = tmp_path / "killed"
    log = open(tmp_path / "child.log", "w")
    child = subprocess.Popen([sys.executable, "-m", "fedpne_jax", "sweep", str(definition_file), "--out", str(killed),
                              "--chunk-runs", "1", "--no-progress"], cwd=ROOT, stdout=log, stderr=log)
    deadline = time.time() + 240
    while _chunks(killed) < 3 and child.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    child.wait()
    log.close()
    done = _chunks(killed)
    assert 3 <= done < 3 * seeds, f"the sweep was not killed in the middle ({done} chunks): " \
                                  f"{(tmp_path / 'child.log').read_text()[-2000:]}"
    clean = fp.run_sweep(definition(seeds), tmp_path / "clean", chunk_runs=1, progress=False)
    assert clean.runs_computed == clean.calls == 3 * seeds
    # The finished chunks (in the index; a chunk written but not yet indexed is computed again).
    finished = json.loads((killed / "index.json").read_text())["chunks"].values()
    before = {e["file"]: (killed / e["file"]).stat().st_mtime_ns for e in finished}
    resumed = fp.run_sweep(definition(seeds), killed, chunk_runs=1, progress=False)
    assert resumed.runs_before == done and resumed.runs_computed == 3 * seeds - done
    assert resumed.compilations == 0        # the clean run compiled the one-run program
    assert all((killed / name).stat().st_mtime_ns == mtime for name, mtime in before.items())
    assert not [p for p in killed.rglob(".*tmp*")]
    a, b = fp.load_sweep(killed), fp.load_sweep(tmp_path / "clean")
    np.testing.assert_array_equal(a.curves, b.curves)
    for name in b.metrics:
        np.testing.assert_array_equal(a.metrics[name], b.metrics[name])
    # A rerun of a finished sweep computes nothing.
    assert fp.run_sweep(definition(seeds), killed, chunk_runs=1, progress=False).runs_computed == 0


def test_other_definition_in_the_folder_is_refused(clean, capsys):
    out = clean[0]
    changed = dict(definition(), grid={"c": [0.07, 0.1]})
    with pytest.raises(fp.SweepError, match="different sweep .*grid.*new --out folder"):
        fp.run_sweep(changed, out, progress=False)
    # A second writer at the same time is refused too (the lock dies with its process, see the SIGKILL test).
    from fedpne_jax.experiments.store import Store
    holder = Store(out, sweep_lib.load(definition()))
    with pytest.raises(fp.SweepError, match="being written by another"):
        fp.run_sweep(definition(), out, progress=False)
    holder.close()
    toml = out.parent / "changed.toml"
    toml.write_text(TOML.replace("base_seed = 3", "base_seed = 4"))
    assert main(["sweep", str(toml), "--out", str(out), "--no-progress"]) == 2
    assert "holds a different sweep" in capsys.readouterr().err


def test_cli_file_and_lists_name_the_same_sweep(clean, capsys):
    out = clean[0]
    toml = out.parent / "same.toml"
    toml.write_text(TOML)
    assert main(["sweep", str(toml), "--out", str(out), "--no-progress"]) == 0
    assert f"{3 * SEEDS} were done, 0 computed" in capsys.readouterr().out
    args = ["sweep", "--out", str(out), "--no-progress", "--clients", "3", "--horizon", "600", "--seeds", str(SEEDS),
            "--seed", "3", "--param", "noise=gaussian:0.3", "--param", "checkpoints=4", "--param", "capacity=32",
            "--grid", "c=" + ",".join(map(str, C_VALUES))]
    raw = from_options(clients="3", horizon="600", seeds=SEEDS, base_seed=3,
                                 params=["noise=gaussian:0.3", "checkpoints=4", "capacity=32"],
                                 grid=["c=0.07,0.1,0.12"], base={"objectives": [{"name": "himmelblau", "dim": 2}]})
    assert sweep_lib.load(raw).hash == sweep_lib.load(definition()).hash
    # himmelblau's default dimension is 2: the same sweep, already finished.
    assert main(args + ["--objectives", "himmelblau"]) == 0
    assert f"{3 * SEEDS} were done, 0 computed" in capsys.readouterr().out


def test_definition_is_normalised_and_checked(tmp_path):
    base = sweep_lib.load(definition())
    toml = tmp_path / "s.toml"
    toml.write_text(TOML)
    assert sweep_lib.load(str(toml)).hash == base.hash
    # Key order does not matter, numbers compare by value.
    reordered = dict(reversed(list(definition().items())), grid={"c": [0.07, 0.1, 0.12]})
    assert sweep_lib.load(reordered).hash == base.hash
    nu = [sweep_lib.load(dict(definition(), params=dict(definition()["params"], nu=v))) for v in (1, 1.0)]
    assert nu[0].hash == nu[1].hash and nu[0].entries[0].id == base.entries[0].id
    assert sweep_lib.load(dict(definition(), seeds=9)).hash != base.hash
    assert [e.labels["c"] for e in base.entries] == C_VALUES and len({e.id for e in base.entries}) == 3
    two = sweep_lib.load(dict(definition(), grid={"rho": [0.5, 0.6], "c": [0.1, 0.2]}, clients=[3, 4]))
    assert [(e.labels["num_clients"], e.labels["c"], e.labels["rho"]) for e in two.entries][:5] == \
        [(3, 0.1, 0.5), (3, 0.1, 0.6), (3, 0.2, 0.5), (3, 0.2, 0.6), (4, 0.1, 0.5)]
    bad = [({"colour": 1}, "unknown key"), ({"algorithms": ["nope"]}, "algorithm must be one of"),
           ({"params": {"horizon": 5}}, "top-level key 'horizon'"), ({"params": {"gamma": 1}}, "no parameter 'gamma'"),
           ({"grid": {"c": []}}, "non-empty list"), ({"grid": {"checkpoints": [4, 5]}}, "cannot be swept"),
           ({"params": {"rho": 2.0}}, r"configuration 0 .*rho"), ({"seeds": 0}, "seeds"),
           ({"objectives": ["nowhere"]}, "objective must be one of")]
    for change, message in bad:
        with pytest.raises(fp.SweepError, match=message):
            sweep_lib.load(dict(definition(), **change))


def test_chunk_planning():
    from types import SimpleNamespace

    from fedpne_jax.experiments.runner import missing, pack, pieces, plan
    assert missing([(0, 3), (5, 8)], 10) == [(3, 5), (8, 10)]
    assert missing([], 4) == [(0, 4)]
    assert pieces([(0, 10)], 4) == [(0, 4), (4, 8), (8, 10)]
    assert pieces([(3, 9)], 4) == [(3, 4), (4, 8), (8, 9)]
    assert pack(list("abcd"), [2, 2, 1, 3], 4) == [["a", "b"], ["c", "d"]]
    # Balanced: 100,000 seeds with room for 12,345 runs per call take 9 calls of 11,112, not 8 full and
    # one padded from 1,240; 20 configurations x 500 seeds with room for 3,000 take 4 calls of 2,500.
    one = [SimpleNamespace(id="a")]
    R, calls = plan(one, {"a": [(0, 100_000)]}, 100_000, 12_345, 1)
    assert (R, len(calls)) == (11_112, 9) and calls[0] == [(0, 0, 11_112)]
    many = [SimpleNamespace(id=str(i)) for i in range(20)]
    R, calls = plan(many, {str(i): [(0, 500)] for i in range(20)}, 500, 3_000, 1)
    assert (R, len(calls)) == (2_500, 4) and calls[1][0] == (5, 0, 500)
    # Padded to the device count; a resumed configuration's gaps are filled, finished chunks kept.
    R, calls = plan(one, {"a": [(3, 5), (8, 10)]}, 10, 3, 4)
    assert R == 4 and calls == [[(0, 3, 4), (0, 4, 5), (0, 8, 10)]]


def test_numpy_numbers_in_a_definition_are_the_numbers_they_hold():
    """A definition built in Python with NumPy values (np.int64 from an arange, an array of seeds) is
    the same sweep as with plain numbers: the same hash, stored as numbers, and found by them."""
    plain = {"objectives": ["garland"], "algorithms": ["fedpne"], "clients": [4], "horizon": [50, 100],
             "seeds": [0, 3], "base_seed": 2, "grid": {"c": [0.1, 0.2]}}
    numpy = {"objectives": ["garland"], "algorithms": ["fedpne"], "clients": [np.int64(4)],
             "horizon": list(np.array([50, 100])), "seeds": np.array([0, 3]), "base_seed": np.int32(2),
             "grid": {"c": np.array([0.1, 0.2])}}
    a, b = sweep_lib.load(plain), sweep_lib.load(numpy)
    assert a.hash == b.hash and a.definition == b.definition
    stored = json.loads(json.dumps(b.definition))
    assert stored["horizon"] == [50, 100] and stored["seeds"] == [0, 3] and stored["clients"] == [4]
    assert sweep_lib.load({**plain, "seeds": np.int64(2)}).hash == sweep_lib.load({**plain, "seeds": 2}).hash
