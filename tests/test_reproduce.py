"""Figures: ``reproduce --quick`` writes a PNG and data equal to the underlying runs, reruns resume,
SUMMARY.md is computed from the data, ``fedpne plot`` draws runs and sweeps, bad input is refused."""
import csv
import dataclasses
import json
import os

import numpy as np
import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax.cli import main
from fedpne_jax.core.registry import label
from fedpne_jax.experiments import sweep as sweep_lib
from fedpne_jax.experiments import workers
from fedpne_jax.experiments.store import write_json
from fedpne_jax.paper import figures, studies, summary
from fedpne_jax.paper.reproduce import TIMING, reproduce, resolve, study_seconds
from fedpne_jax.plotting.render import draw
from tests.support.fake_sweeps import fake_results
from tests.support.tiny_studies import tiny_studies

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The sensitivity figure in quick mode (35 (c, rho) configurations x 4 seeds in one compiled
    call); returns the folder quick mode writes to."""
    out = str(tmp_path_factory.mktemp("results"))
    reproduce("sensitivity", out=out, quick=True, progress=False, log=lambda *_: None)
    return os.path.join(out, "quick")


def read_csv(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


def test_quick_figure_png_and_data_equal_the_runs(quick):
    with open(os.path.join(quick, "figures", "sensitivity.png"), "rb") as fh:
        png = fh.read()
    assert png.startswith(PNG) and len(png) > 10_000
    rows = read_csv(os.path.join(quick, "figures", "sensitivity.csv"))
    study = studies.STUDIES["sensitivity"]
    grid = study.grid["fedpne"]
    assert len(rows) == len(grid["c"]) * len(grid["rho"])
    # Two cells rerun on their own with fp.run: the file holds exactly their numbers.  Far apart in c
    # and rho, with node tables of one size (Fed-PNE's plan), so that both runs are one program.
    objective = objectives.make_objective("garland", num_clients=10, heterogeneity="shift", seed=0)
    for c, rho in [(0.1, 0.3), (2.0, 0.6)]:
        config = fp.FedPNEConfig(num_clients=10, horizon=study.quick.horizon[0], c=c, rho=rho,
                                 noise=studies.NOISE, checkpoints=20)
        result = fp.run(config, objective, seeds=study.quick.seeds)
        row = next(r for r in rows if float(r["x"]) == c and r["series"] == f"ρ = {rho:g}")
        assert float(row["mean"]) == result.final_regret.mean()
        assert float(row["std"]) == result.final_regret.std(ddof=1)
        assert int(row["runs"]) == study.quick.seeds
    with open(os.path.join(quick, "figures", "sensitivity.json")) as fh:
        data = json.load(fh)
    assert data["run"]["mode"] == "quick" and data["studies"]["sensitivity"]["definition"]["seeds"] == 4
    assert data["run"]["command"].startswith("fedpne reproduce sensitivity --quick")


def test_rerun_resumes_without_running(quick):
    before = read_csv(os.path.join(quick, "figures", "sensitivity.csv"))
    lines = []
    reproduce(["sensitivity"], out=os.path.dirname(quick), quick=True, progress=False, log=lines.append)
    assert not any("computed" in line for line in lines)       # every sweep chunk was already there
    assert read_csv(os.path.join(quick, "figures", "sensitivity.csv")) == before


def test_summary_is_generated_from_the_data(quick, tmp_path):
    with open(os.path.join(quick, "figures", "sensitivity.json")) as fh:
        data = json.load(fh)
    row = next(s for s in data["panels"][0]["series"] if s["label"] == "ρ = 0.5")
    text = open(os.path.join(quick, "SUMMARY.md")).read()
    i = row["x"].index(0.1)
    assert f"c = 0.1: {row['mean'][i]:.4g} ± {row['stderr'][i]:.2g} (std {row['std'][i]:.3g})" in text
    # A copy whose regret falls as c grows: the regenerated summary turns the verdict round.
    row["mean"] = [10.0 - j for j in range(len(row["x"]))]
    row["stderr"] = [0.01] * len(row["x"])
    os.makedirs(tmp_path / "figures")
    with open(tmp_path / "figures" / "sensitivity.json", "w") as fh:
        json.dump(data, fh)
    text = open(summary.write(str(tmp_path))).read()
    assert "Garland, ρ = 0.5 | **not held** | c = 0.1: 8 ± 0.01" in text
    # A file of another layout version is skipped and named, not misread.
    data["schema"] = -1
    with open(tmp_path / "figures" / "sensitivity.json", "w") as fh:
        json.dump(data, fh)
    text = open(summary.write(str(tmp_path))).read()
    assert "Skipped (not this version's figure data; rerun to refresh): sensitivity.json" in text
    # So are a damaged file and ones that are not a figure's data at all, beside it.
    (tmp_path / "figures" / "cut.json").write_text('{"schema": ')
    (tmp_path / "figures" / "list.json").write_text("[1]")
    (tmp_path / "figures" / "binary.json").write_bytes(b"\xff\xfe")
    text = open(summary.write(str(tmp_path))).read()
    assert "Skipped (not this version's figure data; rerun to refresh): binary.json, cut.json, list.json, " \
           "sensitivity.json" in text


@pytest.mark.parametrize("content", ['[]', '{"sensitivity": "long"}', '{"sensitivity": '])
def test_damaged_study_times_start_afresh_with_a_note(tmp_path, capsys, content):
    (tmp_path / TIMING).write_text(content)
    assert study_seconds(str(tmp_path)) == {}
    assert f"fedpne: note: {str(tmp_path / TIMING)!r}" in capsys.readouterr().err
    (tmp_path / TIMING).write_text('{"sensitivity": 12.5}')
    assert study_seconds(str(tmp_path)) == {"sensitivity": 12.5}


def _curve_series(key, final_mean, final_err, runs=100):
    return {"key": key, "label": label(key), "x": [10, 100], "mean": [0.0, final_mean], "std": [0.0, 1.0],
            "stderr": [0.0, final_err], "runs": runs, "final": {"mean": final_mean, "std": 1.0, "stderr": final_err}}


def _figure(name, panels, paper="Figure 3"):
    return {"schema": figures.SCHEMA, "figure": name, "title": name, "paper": paper, "panels": panels,
            "run": {"mode": "full", "device": "cpu", "command": f"fedpne reproduce {name}", "seconds": {"x": 1.0}}}


def _comm_panels(objective, T, rounds, uploads):
    point = lambda y: {"key": "fedpne", "label": "Fed-PNE", "x": T, "mean": y, "std": [0] * len(T),
                       "stderr": [0] * len(T), "runs": 10}
    return [{"objective": objective, "metric": metric, "num_clients": 10, "title": objective, "kind": "points",
             "series": [point(y)]} for metric, y in (("phases", rounds), ("uploads", uploads))]


def test_summary_verdicts_on_known_data(tmp_path):
    os.makedirs(tmp_path / "figures")
    panel = lambda o, *series: {"objective": o, "title": o, "kind": "curves", "series": list(series)}
    fig3 = _figure("fig3", [
        panel("garland", _curve_series("fedpne", 10.0, 0.1), _curve_series("hct", 20.0, 0.1)),
        panel("doublesine", _curve_series("fedpne", 30.0, 0.1), _curve_series("hct", 20.0, 0.1)),
        panel("landmine", _curve_series("fedpne", 10.0, 1.0), _curve_series("hct", 10.5, 1.0))])
    T = [100, 1000, 10_000, 100_000]
    log_growth = [2 + 3 * np.log10(t) for t in T]
    comm = _figure("communication", _comm_panels("garland", T, log_growth, [t / 10 for t in T])
                   + _comm_panels("covid", T[:2], [1, 2], [5, 6]), paper="App. E, communication")
    for fig in (fig3, comm):
        with open(tmp_path / "figures" / f"{fig['figure']}.json", "w") as fh:
            json.dump(fig, fh)
    text = open(summary.write(str(tmp_path))).read()
    assert "| Garland | 100 | 10 ± 0.1 (100) | 20 ± 0.1 (100) | Fed-PNE |" in text
    assert "smallest cumulative regret (Fig. 3): Garland | **held** |" in text
    assert "(Fig. 3): DoubleSine | **not held** | Fed-PNE 30 ± 0.1, best HCT 20 ± 0.1" in text
    assert "| Landmine | 100 | 10 ± 1 (100) | 10.5 ± 1 (100) | Fed-PNE, within noise of HCT |" in text
    assert "(Fig. 3): Landmine | **inconclusive** |" in text
    assert "rounds grow logarithmically in T (Thm. 3.1, App. E): Garland | **held** | 3 per decade of T, R² = 1.000" in text
    assert "Uploaded information grows logarithmically in T (App. E): Garland | **not held**" in text
    # Two horizons fit any curve: no verdict from them.
    assert "(Thm. 3.1, App. E): COVID | **inconclusive** |" in text


@pytest.mark.parametrize("points, decreasing, verdict", [
    ([(10, 0.1), (8, 0.1), (5, 0.1)], True, summary.HELD),
    ([(10, 0.1), (12, 0.1), (5, 0.1)], True, summary.NOT_HELD),      # a significant step the wrong way
    ([(10, 1.0), (9.5, 1.0)], True, summary.INCONCLUSIVE),
    ([(5, 0.1), (8, 0.1)], False, summary.HELD),
])
def test_trend_verdicts(points, decreasing, verdict):
    assert summary.trend(points, decreasing) == verdict


def test_every_figure_builds_draws_and_summarises(tmp_path):
    results = {s: fake_results(s, i) for i, s in enumerate(studies.STUDIES)}
    os.makedirs(tmp_path / "figures")
    for name in figures.NAMES:
        data = figures.build(name, results)
        data["run"] = {"mode": "quick", "device": "cpu", "command": name, "seconds": {}}
        write_json(str(tmp_path / "figures" / f"{name}.json"), data, allow_nan=False)
        assert figures.rows(data) and all(p["series"] for p in data["panels"])
        draw(data, str(tmp_path / "figures" / f"{name}.png"))
        assert (tmp_path / "figures" / f"{name}.png").read_bytes().startswith(PNG)
    # Uploads per client: the metric (all clients' values) divided by M.
    comm = json.load(open(tmp_path / "figures" / "communication.json"))
    res = results["horizons-covid"]
    panel = next(p for p in comm["panels"] if p["objective"] == "covid" and p["metric"] == "uploads")
    assert panel["series"][0]["mean"] == [100.0 + j for j in res.find(objective="covid")]
    # The BBOB figure: one panel per function and dimension, each with Fed-PNE, HCT and BBO.
    bbob = json.load(open(tmp_path / "figures" / "bbob.json"))
    assert len(bbob["panels"]) == len(studies.BBOB) == 8
    assert all([s["key"] for s in p["series"]] == ["fedpne", "hct", "bbo"] for p in bbob["panels"])
    # The X-armed gallery: one panel per problem, each with Fed-PNE and the whole family.
    xarmed = json.load(open(tmp_path / "figures" / "xarmed.json"))
    assert len(xarmed["panels"]) == 7
    assert all([s["key"] for s in p["series"]] == ["fedpne", *studies.XARMED] for p in xarmed["panels"])
    # fig3's Garland panel holds each compared algorithm once, with its study's final regrets.
    fig3 = json.load(open(tmp_path / "figures" / "fig3.json"))
    garland = fig3["panels"][0]
    assert [s["key"] for s in garland["series"]] == list(studies.COMPARED)
    hct = results["compare-synthetic"].find(objective="garland", algorithm="hct")[0]
    assert garland["series"][1]["final"]["mean"] == results["compare-synthetic"].final_regret[hct].mean()
    text = open(summary.write(str(tmp_path))).read()
    for claim in ("smallest cumulative regret (Fig. 3): Garland", "not better than Fed-PNE (Fig. 6): DoubleSine",
                  "Fed1-UCB's dilemma", "More clients lower the per-client regret (Thm. 3.1, App. E, benefit of many clients): COVID",
                  "tuning the MLP (App. E, MNIST): Digits", "Communication rounds grow logarithmically",
                  "Privacy costs regret", "Regret grows sublinearly in T (Thm. 3.1): Garland",
                  "A large c explores slower", "| Garland | BBO |", "depends on the global objective only",
                  "### The X-armed family", " | f21 Gallagher 101, D = 2 | mean rank |"):
        assert claim in text, claim


def test_a_figure_refuses_nan():
    results = {s: fake_results(s) for s in figures.FIGURES["arms"].studies}
    results["arms"].final_regret[0, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        figures.build("arms", results)


def test_slope_recovers_a_power_law():
    T = np.array([100, 1000, 10_000])
    finals = [3.0 * t ** 0.6 * np.array([0.9, 1.0, 1.1]) for t in T]
    fit = figures.slope(T, finals)
    # Seeds scale every horizon alike and the law is exact: the slope and its error are exact too.
    assert fit["slope"] == pytest.approx(0.6, abs=1e-12) and fit["stderr"] < 1e-9
    bent = figures.slope(T, [f * (1.0 + 0.5 * (i == 1)) for i, f in enumerate(finals)])
    assert bent["stderr"] > 0.05          # a curve that is no power law gets an uncertain slope
    # The fit keeps the horizons from the geometric middle up, and at least the last two.
    upper = figures.upper_slope(T, finals)
    assert (upper["from_T"], upper["to_T"], upper["points"]) == (1000, 10_000, 2)
    upper = figures.upper_slope([10, 100], [np.full(3, 1.0), np.full(3, 10.0)])
    assert (upper["from_T"], upper["points"], upper["slope"]) == (10, 2, pytest.approx(1.0))


def test_every_study_is_a_valid_sweep():
    for study in studies.STUDIES.values():
        full, quick = (sweep_lib.load(study.definition(q)) for q in (False, True))
        assert quick.num_runs < full.num_runs, study.name
        assert max(study.quick.horizon) <= max(study.full.horizon)
        assert sweep_lib.load(study.definition(True, seeds=3)).definition["seeds"] == 3
    for name in ("compare-synthetic", "compare-covid", "clients-synthetic", "horizons-synthetic", "sensitivity"):
        assert studies.STUDIES[name].full.seeds >= 100
    assert set(figures.studies_of(figures.NAMES)) == set(studies.STUDIES)
    # Studies that share panels run the same horizons (final regrets are compared across a panel).
    for a, b in [("compare-synthetic", "compare-synthetic-fnucb"), ("compare-covid", "compare-covid-fnucb"),
                 ("heterogeneity", "heterogeneity-bbo")]:
        for mode in ("full", "quick"):
            assert getattr(studies.STUDIES[a], mode).horizon == getattr(studies.STUDIES[b], mode).horizon


def test_sweep_objective_amplitude():
    raw = {"objectives": [{"name": "garland", "heterogeneity": "fourier", "amplitude": a} for a in (0.0, 0.5)],
           "seeds": 2, "horizon": [50], "clients": [3]}
    sw = sweep_lib.load(raw)
    assert [e.labels["amplitude"] for e in sw.entries] == [0.0, 0.5]
    built = sw.entries[1].make_objective()
    x = np.array([[0.3]], np.float32)
    expected = objectives.make_objective("garland", num_clients=3, heterogeneity="fourier", amplitude=0.5)
    np.testing.assert_array_equal(np.asarray(built.local_values(x)), np.asarray(expected.local_values(x)))
    with pytest.raises(sweep_lib.SweepError, match="amplitude applies to heterogeneity 'fourier' only"):
        sweep_lib.load({"objectives": [{"name": "garland", "amplitude": 0.5}]})
    with pytest.raises(sweep_lib.SweepError, match="must be a number >= 0"):
        sweep_lib.load({"objectives": [{"name": "garland", "heterogeneity": "fourier", "amplitude": -1}]})


def test_plot_command_draws_runs_and_sweeps(quick, tmp_path, capsys):
    # A cell of the quick study (c = 0.1, rho = 0.3): the program of the cells' fp.run in
    # test_quick_figure_png_and_data_equal_the_runs.
    run_json = str(tmp_path / "run.json")
    assert main(["run", "--horizon", "300", "--rho", "0.3", "--seeds", "4", "--checkpoints", "20",
                 "--output", run_json]) == 0
    png = str(tmp_path / "curves.png")
    sweep_dir = os.path.join(quick, "sweeps", "sensitivity")
    assert main(["plot", run_json, sweep_dir, "--out", png, "--logy"]) == 0
    with open(png, "rb") as fh:
        assert fh.read().startswith(PNG)
    capsys.readouterr()
    assert main(["plot", str(tmp_path / "nothing.json"), "--out", png]) == 2
    assert "nothing.json' does not exist (a run result JSON file or a sweep folder)" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["plot", "x.json", "--out", "/no/such/folder/x.png"], "--out: the folder of '/no/such/folder/x.png' does not exist"),
    (["run", "--output", "/no/such/folder/r.json"], "--output: the folder of '/no/such/folder/r.json' does not exist"),
])
def test_output_folder_must_exist(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_all_leaves_out_the_galleries_that_run_by_name():
    assert resolve("all") == [n for n in figures.NAMES if n != "xarmed"]
    assert resolve(["xarmed", "all", "fig3"])[0] == "xarmed"
    assert resolve(["all", "xarmed"])[-1] == "xarmed" and resolve(["xarmed"]) == ["xarmed"]
    with pytest.raises(ValueError, match="unknown figure.*'fig99'"):
        resolve(["all", "fig99"])


@pytest.mark.parametrize("argv, message", [
    (["reproduce", "fig99"], "unknown figure(s) 'fig99'"),
    (["reproduce", "fig3", "--seeds", "1"], "--seeds must be an integer >= 2"),
    (["reproduce", "fig3", "--jobs", "0"], "--jobs must be a positive integer or auto, got '0'"),
    (["reproduce", "fig3", "--jobs", "two"], "--jobs must be a positive integer or auto, got 'two'"),
])
def test_reproduce_refuses_bad_input(argv, message, capsys, tmp_path):
    assert main(argv + ["--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "sweeps")


def test_without_matplotlib_data_are_still_written(quick, tmp_path, monkeypatch, capsys):
    import shutil

    from fedpne_jax.core.errors import MissingExtra
    from fedpne_jax.plotting import render as plot

    def missing():
        raise MissingExtra('plots need matplotlib: pip install "fedpne-jax[plot]" (or pip install matplotlib)')

    monkeypatch.setattr(plot, "pyplot", missing)
    out = str(tmp_path / "results")
    shutil.copytree(os.path.dirname(quick), out)          # finished sweeps: nothing is recomputed
    os.remove(os.path.join(out, "quick", "figures", "sensitivity.png"))
    lines = []
    reproduce("sensitivity", out=out, quick=True, progress=False, log=lines.append)
    assert any('pip install "fedpne-jax[plot]"' in line for line in lines)
    assert os.path.exists(os.path.join(out, "quick", "figures", "sensitivity.csv"))
    assert not os.path.exists(os.path.join(out, "quick", "figures", "sensitivity.png"))
    assert main(["plot", os.path.join(out, "quick", "sweeps", "sensitivity"), "--out", str(tmp_path / "x.png")]) == 2
    assert "plots need matplotlib" in capsys.readouterr().err


def test_changed_study_is_refused_unless_overwrite(quick, tmp_path, monkeypatch):
    import dataclasses
    import shutil

    out = str(tmp_path / "results")
    shutil.copytree(os.path.dirname(quick), out)
    study = studies.STUDIES["sensitivity"]
    smaller = dataclasses.replace(study, quick=studies.Size(study.quick.horizon, 3))
    monkeypatch.setitem(studies.STUDIES, "sensitivity", smaller)
    with pytest.raises(sweep_lib.SweepError, match="--overwrite"):
        reproduce("sensitivity", out=out, quick=True, progress=False, plot=False, log=lambda *_: None)
    reproduce("sensitivity", out=out, quick=True, progress=False, plot=False, overwrite=True, log=lambda *_: None)
    rows = read_csv(os.path.join(out, "quick", "figures", "sensitivity.csv"))
    assert {int(r["runs"]) for r in rows} == {3}


def test_a_figure_that_asks_for_it_writes_the_report_of_its_studies(quick, monkeypatch):
    """bbob and xarmed write `fedpne report` of their sweeps beside the figure; here the sensitivity
    figure, asked to, on its finished study (nothing reruns): the report's fixed-budget table holds every
    configuration of the study, as `fedpne report` on the sweep folder writes it."""
    assert figures.FIGURES["bbob"].report and figures.FIGURES["xarmed"].report
    monkeypatch.setitem(figures.FIGURES, "sensitivity", dataclasses.replace(figures.FIGURES["sensitivity"], report=True))
    lines = []
    reproduce(["sensitivity"], out=os.path.dirname(quick), quick=True, progress=False, plot=False, log=lines.append)
    folder = os.path.join(quick, "reports", "sensitivity")
    assert any("REPORT.md" in line for line in lines) and os.path.isfile(os.path.join(folder, "REPORT.md"))
    ours = read_csv(os.path.join(folder, "fixed_budget.csv"))
    direct = os.path.join(os.path.dirname(quick), "direct")
    fp.report([os.path.join(quick, "sweeps", "sensitivity")], direct, plots=False)
    assert ours == read_csv(os.path.join(direct, "fixed_budget.csv")) and len({r["entry"] for r in ours}) == 35
    assert {r["problem"] for r in ours} == {"garland-1d"}


# ------------------------------------------------------------------------------ --jobs (workers)

def test_jobs_auto_is_one_per_core_on_a_cpu_and_one_on_an_accelerator(monkeypatch):
    import jax

    from fedpne_jax.core import host_devices

    class Accelerator:
        platform = "gpu"

    cpus = tuple(jax.devices())
    monkeypatch.setattr(host_devices, "cores", lambda: 3)
    assert workers.check_jobs("auto", cpus) == 3 == workers.default_jobs(cpus)
    monkeypatch.setattr(host_devices, "cores", lambda: 64)
    assert workers.check_jobs(" AUTO ", cpus) == workers.MAX_AUTO
    assert workers.check_jobs("auto", (Accelerator(),)) == 1 == workers.check_jobs(1, (Accelerator(),))
    assert workers.check_jobs("5", cpus) == 5
    with pytest.raises(ValueError, match="--jobs 2: studies run in parallel processes on the host's cores only, and "
                                         "the devices are GPUs, which one process uses whole; use --jobs 1"):
        workers.check_jobs(2, (Accelerator(),))
    for bad in (0, -1, 1.5, "1.5", "", None, True):
        with pytest.raises(ValueError, match="--jobs must be a positive integer or auto"):
            workers.check_jobs(bad, cpus)


def _tiny_studies(monkeypatch, seeds=2):
    """Two studies of two configurations, each one compiled program (an arm count is a shape)."""
    for name, study in tiny_studies(seeds).items():
        monkeypatch.setitem(studies.STUDIES, name, study)


def _arrays(folder):
    """{chunk file: {array: value}} of a sweep folder, without the chunk's identity (which holds its
    wall times)."""
    out = {}
    for name in sorted(os.listdir(os.path.join(folder, "chunks"))):
        with np.load(os.path.join(folder, "chunks", name)) as data:
            out[name] = {k: data[k] for k in data.files if k != "identity"}
    return out


def test_studies_in_worker_processes_write_the_same_numbers(tmp_path, monkeypatch):
    """Two studies computed at once in two spawned processes give the sweeps and figures of one
    process bit for bit; an error in a worker (a changed study without overwrite) reaches the caller
    with its message."""
    _tiny_studies(monkeypatch)
    names = ["sensitivity", "arms"]
    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    reproduce(names, out=one, quick=True, progress=False, plot=False, jobs=1, log=lambda *_: None)
    lines = []
    reproduce(names, out=two, quick=True, progress=False, plot=False, jobs=2, log=lines.append)
    assert "2 studies at a time" in lines[0]
    assert sum(" computed in " in line for line in lines) == 2
    for study in names:
        a, b = _arrays(os.path.join(one, "quick", "sweeps", study)), _arrays(os.path.join(two, "quick", "sweeps", study))
        assert a.keys() == b.keys() and a
        for name in a:
            assert a[name].keys() == b[name].keys()
            for k in a[name]:
                np.testing.assert_array_equal(a[name][k], b[name][k], err_msg=f"{study} {name} {k}")
    for name in names:
        assert read_csv(os.path.join(one, "quick", "figures", f"{name}.csv")) == \
            read_csv(os.path.join(two, "quick", "figures", f"{name}.csv"))
    _tiny_studies(monkeypatch, seeds=3)
    with pytest.raises(sweep_lib.SweepError, match="--overwrite"):
        reproduce(names, out=two, quick=True, progress=False, plot=False, jobs=2, log=lambda *_: None)
