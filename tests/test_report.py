"""``fedpne report`` / ``fp.report`` (fedpne_jax/experiments/report.py, analysis.py): ERT, success
rates, runtime ECDFs, ranks and win rates against hand-computed cases; a report over run files and a
sweep whose tables equal the runs' own numbers, with every file REPORT.md names; clear errors."""
import csv
import json
import math
import os
import sys

import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax import cli
from fedpne_jax.core.errors import MissingExtra
from fedpne_jax.experiments import analysis
from fedpne_jax.experiments import report as report_lib

T = 200


def test_ert_and_success_rate_by_hand():
    # three runs, two targets; 0 = not reached within T = 20 rounds
    hits = np.array([[3, 0], [5, 10], [0, 0]])
    np.testing.assert_allclose(analysis.ert(hits, 20), [(3 + 5 + 20) / 2, (20 + 10 + 20) / 1])
    np.testing.assert_allclose(analysis.success_rate(hits), [2 / 3, 1 / 3])
    assert analysis.ert(np.zeros((4, 1), int), 20)[0] == math.inf


def test_runtime_ecdf_by_hand():
    hits = np.array([[3, 0], [5, 10], [0, 0]])              # six (run, target) pairs
    np.testing.assert_allclose(analysis.ecdf(hits, [1, 3, 4, 5, 10, 20]), [0, 1 / 6, 1 / 6, 2 / 6, 3 / 6, 3 / 6])


def _entry(label, objective, final):
    final = np.asarray(final, float)
    return analysis.Entry(label=label, algorithm=label.lower(), objective=objective, dim=2, per_round=1, horizon=10,
                          checkpoints=np.array([5, 10]), curves=np.ones((final.size, 2)),
                          best=np.stack([final + 1, final], 1), hits=np.zeros((final.size, 51), int),
                          scale=np.ones(final.size), simple=np.stack([final + 2, final], 1), source="x")


def test_ranks_and_win_rates_by_hand():
    entries = [_entry("A", "p", [1, 2]), _entry("B", "p", [2, 3]), _entry("A", "q", [5, 5]), _entry("B", "q", [4, 4])]
    ranks = analysis.ranks(entries)
    assert ranks["per_problem"] == {"p-2d": {"A": 1.0, "B": 2.0}, "q-2d": {"A": 2.0, "B": 1.0}}
    assert ranks["mean"] == {"A": 1.5, "B": 1.5}
    labels, wins = analysis.win_rates(entries)
    # p: A beats B in (1<2, 1<3, 2=2 half, 2<3) = 3.5 of 4; q: A never.  Averaged over the two problems.
    assert labels == ["A", "B"]
    np.testing.assert_allclose(wins, [[np.nan, (0.875 + 0) / 2], [(0.125 + 1) / 2, np.nan]])


@pytest.fixture(scope="module")
def run_files(tmp_path_factory):
    """HCT's and DOO's runs and their result files (the gate's report tests need no more)."""
    folder = tmp_path_factory.mktemp("report-inputs")
    runs = {}
    for name in ("hct", "doo"):
        res = fp.run(fp.make_config(name, horizon=T, checkpoints=10), "garland", seeds=8)
        res.write_json(folder / f"{name}.json")
        runs[name] = res
    return folder, runs


@pytest.fixture(scope="module")
def inputs(run_files):
    """run_files with a federated run's file and a sweep folder beside them."""
    folder, runs = run_files
    fed = fp.run(fp.make_config("fedpne", num_clients=2, horizon=T, checkpoints=10), "garland", seeds=[3, 1])
    fed.write_json(folder / "fedpne.json")
    runs["fedpne"] = fed
    sweep = folder / "sweep"
    fp.run_sweep({"objectives": ["garland"], "algorithms": ["soo"], "horizon": [T], "seeds": 6,
                  "params": {"checkpoints": 10}, "soo": {"grid": {"h_max": [20, 30]}}}, str(sweep), progress=False)
    return folder, runs, sweep


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_report_tables_equal_the_runs(inputs, tmp_path):
    folder, runs, sweep = inputs
    out = tmp_path / "report"
    written = fp.report([str(folder / "hct.json"), str(folder / "doo.json"), str(sweep)], str(out),
                        budgets=[100, T])
    assert set(written) == {"fixed_budget.csv", "fixed_target.csv", "ecdf.csv", "ranks.csv", "win_rates.csv",
                            "ecdf.png", "curves.png", "win_rates.png", "REPORT.md"}
    target = [r for r in _rows(out / "fixed_target.csv") if r["entry"] == "HCT"]
    hits = runs["hct"].hits
    assert len(target) == 51
    for r in target:
        j = int(r["target_index"])
        reached = hits[:, j] > 0
        want = np.where(reached, hits[:, j], T).sum() / reached.sum() if reached.any() else math.inf
        assert float(r["ert_rounds"]) == pytest.approx(want)
        assert float(r["success_rate"]) == pytest.approx(reached.mean())
    budget = [r for r in _rows(out / "fixed_budget.csv") if r["entry"] == "DOO"]
    i = list(runs["doo"].checkpoints).index(100)
    assert [int(r["checkpoint_round"]) for r in budget] == [100, T]
    assert float(budget[0]["best_so_far_q50"]) == pytest.approx(np.median(runs["doo"].best_curve[:, i]))
    assert float(budget[1]["simple_q10"]) == pytest.approx(np.quantile(runs["doo"].simple_curve[:, -1], 0.1))
    assert float(budget[1]["cumulative_q90"]) == pytest.approx(np.quantile(runs["doo"].curves[:, -1], 0.9))
    entries = {r["entry"] for r in _rows(out / "ranks.csv")}
    assert {"HCT", "DOO", "SOO (h_max=20)", "SOO (h_max=30)"} <= entries       # the sweep's grid, told apart
    text = (out / "REPORT.md").read_text()
    for name in written:
        if name != "REPORT.md":
            assert f"]({name})" in text and os.path.getsize(written[name]) > 0
    from PIL import Image
    with Image.open(written["ecdf.png"]) as image:
        assert image.info["dpi"][0] == pytest.approx(300, abs=1) and image.size[0] == 2100


def test_ecdf_axis_is_the_unit_interval_and_win_rates_a_heat_map(run_files):
    folder, _ = run_files
    entries = analysis.load([str(folder / "hct.json"), str(folder / "doo.json")])
    figure, _ = report_lib.ecdf_figure(entries)
    assert all(panel["ylim"] == (0.0, 1.0) for panel in figure["panels"])
    labels, wins = analysis.win_rates(entries)
    heat = report_lib.win_rate_figure(labels, wins)["panels"][0]
    assert heat["kind"] == "heatmap" and heat["xticklabels"] == list(labels)
    np.testing.assert_array_equal([s["mean"] for s in heat["series"]], wins)


def test_report_without_matplotlib_writes_everything_else(run_files, tmp_path, monkeypatch):
    folder, _ = run_files

    def no_matplotlib(*args, **kwargs):
        raise MissingExtra('plots need matplotlib: pip install "fedpne-jax[plot]" (or pip install matplotlib)')

    monkeypatch.setattr(report_lib, "draw", no_matplotlib)
    out = tmp_path / "report"
    written = fp.report([str(folder / "hct.json"), str(folder / "doo.json")], str(out))
    assert not any(name.endswith(".png") for name in written) and not list(out.glob("*.png"))
    text = (out / "REPORT.md").read_text()
    assert 'No figures: plots need matplotlib: pip install "fedpne-jax[plot]"' in text
    assert "## Win rates" in text


def test_command_line_report_and_its_errors(run_files, tmp_path, capsys):
    folder, _ = run_files
    out = tmp_path / "r"
    assert cli.main(["report", str(folder / "hct.json"), "--out", str(out), "--no-plots"]) == 0
    assert (out / "REPORT.md").exists() and not (out / "ecdf.png").exists()
    capsys.readouterr()
    old = tmp_path / "old.json"
    data = json.loads((folder / "hct.json").read_text())
    del data["per_seed"]["hits"]
    old.write_text(json.dumps(data))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases = [([str(tmp_path / "missing.json")], "missing.json' does not exist (a run result JSON file or a sweep"),
             ([str(tmp_path / "missing") + "/"], "missing/' does not exist"),
             ([str(fifo)], "is neither a run result (JSON file) nor a sweep folder"),
             ([str(folder / "hct.json"), "--budgets", "5"], "budget 5: HCT on garland-1d has no checkpoint"),
             ([str(old)], "has no hits: it was written before the best-so-far regret was recorded")]
    for argv, message in cases:
        assert cli.main(["report"] + argv + ["--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err


def test_export_writes_every_checkpoint_of_every_run(inputs, tmp_path):
    folder, runs, sweep = inputs
    out = tmp_path / "runs.csv"
    count = fp.export([str(folder / "hct.json"), str(folder / "fedpne.json"), str(sweep)], str(out))
    rows = _rows(out)
    assert count == len(rows) == (8 + 2 + 2 * 6) * 10
    fed = [r for r in rows if r["algorithm"] == "fedpne"]
    assert [int(r["seed"]) for r in fed[::10]] == [3, 1]
    res = runs["fedpne"]
    for k, r in enumerate(fed):
        i, c = divmod(k, 10)
        assert int(r["round"]) == res.checkpoints[c] and int(r["evaluations"]) == 2 * res.checkpoints[c]
        assert float(r["cumulative_regret"]) == res.curves[i, c]          # every digit: bit for bit
        assert float(r["best_so_far_regret"]) == res.best_curve[i, c]
        assert float(r["simple_regret"]) == res.simple_curve[i, c]
    assert {r["configuration"] for r in rows if r["algorithm"] == "soo"} == {"SOO (h_max=20)", "SOO (h_max=30)"}
    assert {r["problem"] for r in rows} == {"garland-1d"}          # a sweep's objective and dimension too
    assert cli.main(["export", str(folder / "hct.json"), "--format", "csv", "--out", str(tmp_path / "a.csv")]) == 0
    assert _rows(tmp_path / "a.csv") == [r for r in rows if r["algorithm"] == "hct"]


def test_ioh_export_is_read_back_by_iohinspector_exact_at_checkpoints_and_targets(inputs, tmp_path, capsys):
    """Every run, as iohinspector loads it: its evaluations (M per round for Fed-PNE) and budget, its seed,
    and a best-so-far trajectory that is exact where the run knows it: at every checkpoint (the last
    value at or before it equals the recorded regret) and at every target (the first value at or below
    it comes at the recorded round; none for a target never reached)."""
    iohinspector = pytest.importorskip("iohinspector")
    pytest.importorskip("ioh")
    folder, runs, _ = inputs
    out = tmp_path / "ioh"
    assert cli.main(["export", str(folder / "hct.json"), str(folder / "fedpne.json"), "--format", "ioh",
                     "--out", str(out)]) == 0
    assert "wrote 10 runs of IOHprofiler data" in capsys.readouterr().out
    folders = sorted(os.listdir(out))
    assert folders == ["Fed-PNE", "HCT"]
    for label, name, per in (("HCT", "hct", 1), ("Fed-PNE", "fedpne", 2)):
        res = runs[name]
        manager = iohinspector.DataManager()
        manager.add_folder(str(out / label))
        data = manager.load(monotonic=False, include_meta_data=True)
        values = {column: data[column].unique().to_list() for column in ("function_name", "dimension", "algorithm_name",
                                                                          "evals")}
        assert values == {"function_name": ["garland"], "dimension": [1], "algorithm_name": [label],
                          "evals": [T * per]}
        (meta,) = [f for f in os.listdir(out / label) if f.endswith(".json")]
        scenario = json.loads((out / label / meta).read_text())["scenarios"][0]
        assert [r["seed"] for r in scenario["runs"]] == res.seeds.tolist()
        targets = float(res.target_scale[0]) * 10.0 ** np.linspace(2.0, -8.0, 51)
        for i, run_id in enumerate(manager.overview["run_id"].to_list()):
            rows = data.filter(data["run_id"] == run_id)
            evals, y = rows["evaluations"].to_numpy(), rows["raw_y"].to_numpy()
            assert evals[0] == 1 and (np.diff(evals) > 0).all() and (np.diff(y) < 0).all()
            assert (y[0] == sys.float_info.max) == (per > 1 or res.hits[i, 0] != 1)   # nothing known at evaluation 1
            for c, r in enumerate(res.checkpoints):
                assert y[evals <= r * per][-1] == res.best_curve[i, c]
            for target, hit in zip(targets, res.hits[i]):
                reached = evals[y <= target]
                assert (reached[0] == hit * per) if hit > 0 else reached.size == 0
    # A second export into the same folder is refused before anything is written.
    assert cli.main(["export", str(folder / "hct.json"), "--format", "ioh", "--out", str(out)]) == 2
    assert "is not a new or empty folder" in capsys.readouterr().err and sorted(os.listdir(out)) == folders
