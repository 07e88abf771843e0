"""Figures: ``reproduce --quick`` writes a PNG and data equal to the underlying runs, reruns resume,
SUMMARY.md is computed from the data, ``fedpne plot`` draws runs and sweeps, bad input is refused."""
import csv
import json
import os

import numpy as np
import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax import figures, summary, sweep as sweep_lib
from fedpne_jax.cli import main
from fedpne_jax.result import LABELS
from fedpne_jax.reproduce import reproduce

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The sensitivity figure in quick mode: 35 (c, rho) configurations x 4 seeds in one compiled call."""
    out = str(tmp_path_factory.mktemp("results"))
    reproduce("sensitivity", out=out, quick=True, progress=False, log=lambda *_: None)
    return out


def read_csv(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


def test_quick_figure_png_and_data_equal_the_runs(quick):
    with open(os.path.join(quick, "figures", "sensitivity.png"), "rb") as fh:
        png = fh.read()
    assert png.startswith(PNG) and len(png) > 10_000
    rows = read_csv(os.path.join(quick, "figures", "sensitivity.csv"))
    study = figures.STUDIES["sensitivity"]
    grid = study.grid["fedpne"]
    assert len(rows) == len(grid["c"]) * len(grid["rho"])
    # Two cells rerun on their own with fp.run: the file holds exactly their numbers.
    objective = objectives.make_objective("garland", num_clients=10, heterogeneity="shift", seed=0)
    for c, rho in [(0.1, 0.5), (2.0, 0.3)]:
        config = fp.FedPNEConfig(num_clients=10, horizon=study.quick.horizon[0], c=c, rho=rho,
                                 noise=figures.NOISE, checkpoints=20)
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
    reproduce(["sensitivity"], out=quick, quick=True, progress=False, log=lines.append)
    assert not any("computed" in line for line in lines)       # every sweep chunk was already there
    assert read_csv(os.path.join(quick, "figures", "sensitivity.csv")) == before


def test_summary_is_generated_from_the_data(quick):
    path = os.path.join(quick, "figures", "sensitivity.json")
    with open(path) as fh:
        data = json.load(fh)
    row = next(s for s in data["panels"][0]["series"] if s["label"] == "ρ = 0.5")
    text = open(os.path.join(quick, "SUMMARY.md")).read()
    i = row["x"].index(0.1)
    assert f"c = 0.1: {row['mean'][i]:.4g} (std {row['std'][i]:.3g})" in text
    # Edit the data so that the claim fails: the regenerated summary follows.
    row["mean"] = [1.0] * len(row["x"])
    with open(path, "w") as fh:
        json.dump(data, fh)
    text = open(summary.write(quick)).read()
    assert "(App. E), ρ = 0.5 | **not held**" in text


def _curve_series(key, final_mean, final_err, runs=100):
    return {"key": key, "label": LABELS[key], "x": [10, 100], "mean": [0.0, final_mean], "std": [0.0, 1.0],
            "stderr": [0.0, final_err], "runs": runs, "final": {"mean": final_mean, "std": 1.0, "stderr": final_err}}


def _figure(name, panels, paper="Figure 3"):
    return {"figure": name, "title": name, "paper": paper, "panels": panels,
            "run": {"mode": "full", "device": "cpu", "command": f"fedpne reproduce {name}", "seconds": {"x": 1.0}}}


def test_summary_judges_winners_and_logarithmic_growth(tmp_path):
    os.makedirs(tmp_path / "figures")
    fig3 = _figure("fig3", [
        {"title": "(a) Garland", "kind": "curves", "series": [_curve_series("fedpne", 10.0, 0.1),
                                                            _curve_series("hct", 20.0, 0.1)]},
        {"title": "(b) DoubleSine", "kind": "curves", "series": [_curve_series("fedpne", 30.0, 0.1),
                                                               _curve_series("hct", 20.0, 0.1)]},
        {"title": "(c) Landmine", "kind": "curves", "series": [_curve_series("fedpne", 10.0, 1.0),
                                                             _curve_series("hct", 10.5, 1.0)]}])
    T = [100, 1000, 10_000, 100_000]
    logarithmic = [2 + 3 * np.log10(t) for t in T]
    linear = [t / 10 for t in T]
    point = lambda y: {"key": "fedpne", "label": "Fed-PNE", "x": T, "mean": y, "std": [0] * 4, "stderr": [0] * 4,
                       "runs": 10}
    comm = _figure("communication", [{"title": "(a) Garland (M = 10)", "kind": "points", "series": [point(logarithmic)]},
                                     {"title": "(b) Garland (M = 10)", "kind": "points", "series": [point(linear)]}],
                   paper="Figure 9")
    for fig in (fig3, comm):
        with open(tmp_path / "figures" / f"{fig['figure']}.json", "w") as fh:
            json.dump(fig, fh)
    text = open(summary.write(str(tmp_path))).read()
    assert "| Garland | 100 | 10 ± 0.1 (100) | 20 ± 0.1 (100) | Fed-PNE |" in text
    assert "smallest cumulative regret (Fig. 3): Garland | **held**" in text
    assert "smallest cumulative regret (Fig. 3): DoubleSine | **not held** — Fed-PNE 30 ± 0.1, best HCT 20 ± 0.1" in text
    assert "| Landmine | 100 | 10 ± 1 (100) | 10.5 ± 1 (100) | Fed-PNE, within noise of HCT |" in text
    assert "rounds grow logarithmically in T (Thm. 3.1, Fig. 9): Garland (M = 10) | **held** (3 rounds per decade, R² = 1.000" in text
    assert "Uploaded information grows logarithmically in T (App. E, Fig. 9): Garland (M = 10) | **not held**" in text


def test_slope_recovers_a_power_law():
    T = np.array([100, 1000, 10_000])
    finals = [np.full(5, 3.0 * t ** 0.6) for t in T]
    fit = figures.slope(T, finals)
    assert fit["slope"] == pytest.approx(0.6, abs=1e-12) and fit["stderr"] < 1e-12


def test_every_study_is_a_valid_sweep():
    for study in figures.STUDIES.values():
        full, quick = (sweep_lib.load(study.definition(q)) for q in (False, True))
        assert quick.num_runs < full.num_runs, study.name
        assert max(study.quick.horizon) <= max(study.full.horizon)
        assert sweep_lib.load(study.definition(True, seeds=3)).definition["seeds"] == 3
    for name in ("compare-synthetic", "compare-covid", "clients-synthetic", "horizons-synthetic", "sensitivity"):
        assert figures.STUDIES[name].full.seeds >= 100
    assert set(figures.studies_of(figures.NAMES)) == set(figures.STUDIES)


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
    run_json = str(tmp_path / "run.json")
    assert main(["run", "--horizon", "200", "--seeds", "3", "--checkpoints", "20", "--output", run_json]) == 0
    png = str(tmp_path / "curves.png")
    sweep_dir = os.path.join(quick, "sweeps", "sensitivity.quick")
    assert main(["plot", run_json, sweep_dir, "--out", png, "--logy"]) == 0
    with open(png, "rb") as fh:
        assert fh.read().startswith(PNG)
    capsys.readouterr()
    assert main(["plot", str(tmp_path / "nothing.json"), "--out", png]) == 2
    assert "neither a run result" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["reproduce", "fig99"], "unknown figure(s) 'fig99'"),
    (["reproduce", "fig3", "--seeds", "1"], "--seeds must be an integer >= 2"),
])
def test_reproduce_refuses_bad_input(argv, message, capsys, tmp_path):
    assert main(argv + ["--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "sweeps")
