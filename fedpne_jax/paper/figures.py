"""The paper's figures and the new ones: the numbers each figure shows, from its studies' results.

A *figure* names the studies it reads (:mod:`fedpne_jax.paper.studies`) and turns their results
into panels of series (:func:`build`): plain data (JSON/CSV next to the PNG, :mod:`fedpne_jax.plotting`
draws it, :mod:`fedpne_jax.paper.summary` judges the paper's claims from it).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

from fedpne_jax.core.registry import label
from fedpne_jax.paper.studies import (
    BBOB_DIMS,
    BBOB_FUNCTIONS,
    BBOB_NAMES,
    COMPARED,
    REAL,
    REGRET_AXIS,
    SYNTHETIC,
    TITLES,
    XARMED,
    XARMED_OBJECTIVES,
)
from fedpne_jax.plotting.series import stats
from fedpne_jax.plotting.style import COLUMN_WIDTH, FULL_WIDTH

# ---------------------------------------------------------------------------------------------- series

SCHEMA = 1       # version of a figure's JSON layout; the summary skips files of another version


def curve(res, i: int, label: str, key) -> dict:
    """Configuration i's regret curve: mean ± std over seeds at the checkpoints, and its final regret."""
    mean, std, err, n = stats(res.curves[i])
    fmean, fstd, ferr, _ = stats(res.final_regret[i])
    return {"key": key, "label": label, "config": res.configs[i], "x": res.checkpoints[i].tolist(),
            "mean": mean.tolist(), "std": std.tolist(), "stderr": err.tolist(), "runs": n,
            "final": {"mean": float(fmean), "std": float(fstd), "stderr": float(ferr)}}


def points(key, label, x, samples) -> dict:
    """A series of per-x samples (list of (S,) arrays): mean ± std and standard error at each x."""
    s = [stats(v) for v in samples]
    return {"key": key, "label": label, "x": list(x), "mean": [float(v[0]) for v in s],
            "std": [float(v[1]) for v in s], "stderr": [float(v[2]) for v in s], "runs": s[0][3]}


def _one(res, **labels) -> int:
    found = res.find(**labels)
    if len(found) != 1:
        raise ValueError(f"{res.path}: expected one configuration with {labels}, found {len(found)}")
    return found[0]


def _label(name: str) -> str:
    return label(name)


def _algorithm_curves(results: list, objective: str, names) -> list[dict]:
    """One curve per algorithm, from whichever study ran it on ``objective``."""
    out = []
    for name in names:
        holders = [res for res in results if res.find(objective=objective, algorithm=name)]
        if len(holders) > 1:
            raise ValueError(f"{name} on {objective} is in several studies: {[r.path for r in holders]}")
        if holders:
            res = holders[0]
            out.append(curve(res, _one(res, objective=objective, algorithm=name), _label(name), name))
    return out


def _regret_panel(objective, title, series, ylabel=REGRET_AXIS) -> dict:
    ends = {s["x"][-1] for s in series}
    if len(ends) > 1:
        # Final regrets are compared across a panel: every curve must end at the same T.
        raise ValueError(f"{title}: the curves end at different horizons {sorted(ends)}")
    return {"objective": objective, "title": title, "kind": "curves", "band": "std", "xlabel": "round t",
            "ylabel": ylabel, "series": series}


def _by_parameter(res, objective, name, label) -> list[dict]:
    """Curves of the configurations of ``objective`` that differ in parameter ``name``."""
    return [curve(res, j, f"{label} = {res.configs[j][name]}", None) for j in res.find(objective=objective)]


def _final_points(objective, title, xlabel, series, **extra) -> dict:
    return {"objective": objective, "title": title, "kind": "points", "band": "stderr", "xlabel": xlabel,
            "ylabel": "final regret R(T)/M", "series": series, **extra}


# --------------------------------------------------------------------------------------------- figures

SOURCES = {"garland": ("synthetic",), "doublesine": ("synthetic",), "landmine": ("landmine",),
           "covid": ("covid",), "digits": ("digits",)}


def _studies(r, prefix: str, objective: str) -> list:
    """The studies named ``prefix-<source>`` (and ``prefix-<source>-fnucb``) that hold ``objective``."""
    out = []
    for source in SOURCES[objective]:
        out += [r[name] for name in (f"{prefix}-{source}", f"{prefix}-{source}-fnucb") if name in r]
    return out


def _fig3(r) -> list[dict]:
    return [_regret_panel(o, TITLES[o], _algorithm_curves(_studies(r, "compare", o), o, COMPARED))
            for o in SYNTHETIC + REAL]


def _fig6(r) -> list[dict]:
    return [_regret_panel(o, TITLES[o], _algorithm_curves([r["compare-synthetic"]], o, ("fedpne", "hct", "bo", "bbo")))
            for o in SYNTHETIC]


def _arms(r) -> list[dict]:
    return [_regret_panel(o, f"Fed1-UCB on {TITLES[o]}", _by_parameter(r["arms"], o, "arms", "K")) for o in SYNTHETIC]


def _clients(r) -> list[dict]:
    return [_regret_panel(o, f"Fed-PNE on {TITLES[o]}", _by_parameter(_studies(r, "clients", o)[0], o, "num_clients", "M"))
            for o in SYNTHETIC + REAL]


def _communication(r) -> list[dict]:
    rounds: list = []
    uploads: list = []
    for o in SYNTHETIC + REAL:
        res = _studies(r, "horizons", o)[0]
        index = res.find(objective=o)
        T = [res.configs[j]["horizon"] for j in index]
        M = res.configs[index[0]]["num_clients"]
        for panels, metric, ylabel, scale in [(rounds, "phases", "communication rounds (phases)", 1),
                                              (uploads, "uploads", "uploaded values per client", M)]:
            # The uploads metric counts every client's values; per client is the paper's measure.
            panels.append({"objective": o, "metric": metric, "num_clients": M, "title": f"{TITLES[o]} (M = {M})",
                           "kind": "points", "band": "std", "xlabel": "horizon T (rounds)", "ylabel": ylabel,
                           "xscale": "log", "series": [points("fedpne", "Fed-PNE", T,
                                                              [res.metrics[metric][j] / scale for j in index])]})
    return rounds + uploads


def _digits(r) -> list[dict]:
    ylabel = "cumulative regret Σ(1 − accuracy)"
    res = r["compare-digits"]
    a = _regret_panel("digits", f"algorithms, M = {res.definition['clients'][0]}",
                      _algorithm_curves([res], "digits", COMPARED), ylabel)
    b = _regret_panel("digits", "Fed-PNE, several M", _by_parameter(r["clients-digits"], "digits", "num_clients", "M"),
                      ylabel)
    return [a, b]


def _privacy(r) -> list[dict]:
    res, base = r["privacy"], r["compare-synthetic"]
    panels = []
    for o in SYNTHETIC:
        index = res.find(objective=o)
        eps = [res.configs[j]["dp_epsilon"] for j in index]
        mean, std, err, n = stats(base.final_regret[_one(base, objective=o, algorithm="fedpne")])
        reference = {"label": "Fed-PNE without DP", "mean": float(mean), "std": float(std), "stderr": float(err),
                     "runs": n}
        panels.append(_final_points(o, TITLES[o], "privacy budget ε (δ = 1/M)",
                                    [points("dp-fedpne", "DP-Fed-PNE", eps, [res.final_regret[j] for j in index])],
                                    xscale="log", reference=reference,
                                    lines=[{"x": [min(eps), max(eps)], "y": [float(mean)] * 2,
                                            "label": f"Fed-PNE without DP ({float(mean):.4g})"}]))
    return panels


def _heterogeneity(r) -> list[dict]:
    panels = []
    for o in SYNTHETIC:
        series = []
        for res in (r["heterogeneity"], r["heterogeneity-bbo"]):
            index = res.find(objective=o)
            name = res.configs[index[0]]["algorithm"]
            series.append(points(name, _label(name), [res.configs[j]["amplitude"] for j in index],
                                 [res.final_regret[j] for j in index]))
        if series[0]["x"] != series[1]["x"] or _horizon(r, "heterogeneity", o) != _horizon(r, "heterogeneity-bbo", o):
            raise ValueError(f"heterogeneity on {o}: the algorithms ran different amplitudes or horizons")
        panels.append(_final_points(o, TITLES[o], "amplitude of the clients' Fourier perturbations", series,
                                    xscale="symlog", linthresh=0.1, xticks=series[0]["x"]))
    return panels


def _bbob(r) -> list[dict]:
    res = r["bbob"]
    panels = []
    for d in BBOB_DIMS:
        for f in BBOB_FUNCTIONS:
            name = f"bbob-f{f}"
            series = [curve(res, _one(res, objective=name, dim=d, algorithm=a), _label(a), a)
                      for a in ("fedpne", "hct", "bbo")]
            panels.append(_regret_panel(name, f"f{f} {BBOB_NAMES[f]}, D = {d}", series))
    return panels


def _objective_name(objective) -> str:
    return objective if isinstance(objective, str) else objective["name"]


def _xarmed(r) -> list[dict]:
    res = r["xarmed"]
    panels = []
    for objective in map(_objective_name, XARMED_OBJECTIVES):
        series = [curve(res, _one(res, objective=objective, algorithm=a), _label(a), a) for a in ("fedpne",) + XARMED]
        f = objective.removeprefix("bbob-f")
        title = f"f{f} {BBOB_NAMES[int(f)]}, D = 2" if f != objective else TITLES.get(objective, objective.title())
        # Regrets of the family span four decades on a problem: a log axis, and standard errors, as a
        # std band below the mean would reach zero there.
        panels.append({**_regret_panel(objective, title, series), "yscale": "log", "band": "stderr"})
    return panels


def _horizon(r, study, objective) -> int:
    res = r[study]
    return res.configs[res.find(objective=objective)[0]]["horizon"]


def slope(T, final_regret, draws: int = 200) -> dict:
    """Least-squares slope of log mean regret against log T.  Its standard error combines a bootstrap
    over seeds (fixed resampling seed: the same data give the same numbers) with the fit's own
    residual error (a power law that does not fit is uncertain even with many seeds)."""
    logT = np.log(np.asarray(T, float))
    data = np.stack([np.asarray(f, float) for f in final_regret])       # (len(T), S)
    y = np.log(data.mean(axis=1))
    (b, a) = np.polyfit(logT, y, 1)
    rng = np.random.default_rng(0)
    S = data.shape[1]
    boot = np.std([np.polyfit(logT, np.log(data[:, rng.integers(0, S, S)].mean(axis=1)), 1)[0]
                   for _ in range(draws)], ddof=1) if S > 1 else 0.0
    resid = 0.0
    if logT.size > 2:
        sse = ((y - (a + b * logT)) ** 2).sum() / (logT.size - 2)
        resid = math.sqrt(sse / ((logT - logT.mean()) ** 2).sum())
    return {"slope": float(b), "intercept": float(a), "stderr": float(math.hypot(boot, resid)), "points": int(logT.size)}


def upper_slope(T, final_regret, draws: int = 200) -> dict:
    """:func:`slope` over the horizons from the geometric middle of the range up (at least two):
    Thm. 3.1's rate is asymptotic, the M-dependent first term of its bound weighs on small T."""
    T = np.asarray(T, float)
    keep = T >= np.sqrt(T.min() * T.max())
    if keep.sum() < 2:
        keep[-2:] = True
    fit = slope(T[keep], [f for f, k in zip(final_regret, keep) if k], draws)
    return dict(fit, from_T=int(T[keep].min()), to_T=int(T.max()))


def _rate(r) -> list[dict]:
    res = r["horizons-synthetic"]
    panels = []
    for o in SYNTHETIC:
        index = res.find(objective=o)
        T = np.array([res.configs[j]["horizon"] for j in index])
        finals = [res.final_regret[j] for j in index]
        fit = upper_slope(T, finals)
        fitted = T[T >= fit["from_T"]]
        lines = [{"x": fitted.tolist(), "y": np.exp(fit["intercept"] + fit["slope"] * np.log(fitted)).tolist(),
                  "style": "-", "label": f"fit for T ≥ {fit['from_T']:,}: slope {fit['slope']:.3f} ± {fit['stderr']:.3f}"}]
        y0 = float(np.mean(finals[0]))
        for d, style in [(0, "--"), (1, ":")]:
            rate = (d + 1) / (d + 2)
            # Reference lines start at the first point so only the slopes are compared.
            lines.append({"x": [float(T[0]), float(T[-1])], "y": [y0, y0 * (T[-1] / T[0]) ** rate], "style": style,
                          "label": f"$T^{{(d+1)/(d+2)}}$, d = {d}: slope {rate:.3g}"})
        panels.append(_final_points(o, f"{TITLES[o]}, M = {res.definition['clients'][0]}", "horizon T (rounds)",
                                    [points("fedpne", "Fed-PNE", T.tolist(), finals)], xscale="log", yscale="log",
                                    lines=lines, fit=fit))
    return panels


def _sensitivity(r) -> list[dict]:
    res = r["sensitivity"]
    grid = res.definition["per_algorithm"]["fedpne"]["grid"]
    cs, rhos = grid["c"], grid["rho"]
    series = [points(None, f"ρ = {rho:g}", cs, [res.final_regret[_one(res, c=c, rho=rho)] for c in cs]) for rho in rhos]
    for s, rho in zip(series, rhos):
        s["rho"] = rho
    return [{"objective": "garland", "title": f"Fed-PNE on Garland, M = {res.definition['clients'][0]}, "
                                              f"T = {res.definition['horizon'][0]:,}: final regret R(T)/M",
             "kind": "heatmap", "band": "stderr", "xlabel": "confidence constant c", "ylabel": "smoothness ρ",
             "colorbar": "mean final regret R(T)/M", "series": series}]


@dataclasses.dataclass(frozen=True)
class Figure:
    name: str
    title: str
    studies: tuple
    panels: Callable              # {study name: SweepResults} -> list of panel dicts
    columns: int = 4
    paper: str = ""               # where the paper shows it ("" for new studies)
    width: float = FULL_WIDTH     # inches; the height is row_height per row plus the title and legend
    row_height: float = 2.1       # inches
    in_all: bool = True           # whether `fedpne reproduce all` draws it (galleries run by name)
    report: bool = False          # also write `fedpne report` of its studies (OUT/reports/<name>/)


FIGURES = {f.name: f for f in [
    Figure("fig3", "Cumulative regret on the synthetic functions and the real-life datasets (per client for the "
                   "federated algorithms; mean ± 1 std)",
           ("compare-synthetic", "compare-synthetic-fnucb", "compare-landmine", "compare-covid",
            "compare-covid-fnucb"), _fig3, paper="Figure 3"),
    Figure("fig6", "Fed-PNE, HCT and Bayesian optimisation on the synthetic functions\n(per client for the federated "
                   "algorithms; mean ± 1 std)",
           ("compare-synthetic",), _fig6, columns=2, paper="Figure 6 (App. E)"),
    Figure("arms", "Fed1-UCB with K grid arms (per-client regret, mean ± 1 std)", ("arms",), _arms, columns=2,
           paper="App. E, Fed1-UCB with K arms"),
    Figure("clients", "Fed-PNE's per-client regret for several numbers of clients M (mean ± 1 std)",
           ("clients-synthetic", "clients-landmine", "clients-covid"), _clients, columns=2,
           paper="App. E, benefit of many clients"),
    Figure("communication", "Fed-PNE's communication: rounds (top) and uploaded values per client (bottom) "
                            "vs T (mean ± 1 std)",
           ("horizons-synthetic", "horizons-landmine", "horizons-covid"), _communication,
           paper="App. E, communication"),
    Figure("digits", "Tuning an MLP on handwritten digits\n(per client for the federated algorithms; mean ± 1 std)", ("compare-digits", "clients-digits"),
           _digits, columns=2, paper="App. E, MNIST"),
    Figure("privacy", "DP-Fed-PNE: final regret vs privacy budget (mean ± 1 s.e.)", ("privacy", "compare-synthetic"),
           _privacy, columns=2),
    Figure("heterogeneity", "Clients with differing optima: regret on the global objective (mean ± 1 s.e.)",
           ("heterogeneity", "heterogeneity-bbo"), _heterogeneity, columns=2),
    Figure("rate", "Regret growth in T against the (d+1)/(d+2) rate (mean ± 1 s.e., log-log)",
           ("horizons-synthetic",), _rate, columns=2),
    Figure("bbob", "COCO's BBOB functions (instance 1, [-5, 5]^D, regret = precision f - f_opt; per client for the "
                   "federated algorithms; mean ± 1 std)", ("bbob",), _bbob, columns=4, report=True),
    Figure("xarmed", "The X-armed family and Fed-PNE (M = 10; PyXAB's defaults, ν = 1, ρ = 0.75 where they apply; "
                     "per client for Fed-PNE; mean ± 1 s.e.)", ("xarmed",), _xarmed, columns=4,
           in_all=False, report=True),       # 105 programs: it alone would triple `all --quick`
    Figure("sensitivity", "Fed-PNE's sensitivity to c and ρ", ("sensitivity",), _sensitivity, columns=1,
           width=COLUMN_WIDTH, row_height=2.8),
]}
NAMES = tuple(FIGURES)
ALL = tuple(name for name in NAMES if FIGURES[name].in_all)     # what `fedpne reproduce all` draws


def studies_of(names) -> list[str]:
    """The studies the figures need, each once, in a stable order."""
    out = []
    for name in names:
        for study in FIGURES[name].studies:
            if study not in out:
                out.append(study)
    return out


def build(name: str, results: dict) -> dict:
    """Figure ``name`` as data: title, panels (each a list of series), the studies' definitions."""
    figure = FIGURES[name]
    panels = figure.panels({s: results[s] for s in figure.studies})
    if len(panels) > 1:
        for i, panel in enumerate(panels):
            panel["title"] = f"({'abcdefghijklmnopqrstuvwxyz'[i]}) {panel['title']}"
    return {"schema": SCHEMA, "figure": name, "title": figure.title, "paper": figure.paper, "columns": figure.columns,
            "width": figure.width, "row_height": figure.row_height, "panels": panels,
            "studies": {s: {"path": results[s].path, "hash": results[s].hash, "definition": results[s].definition}
                        for s in figure.studies}}


def rows(figure: dict) -> list[dict]:
    """The figure's numbers as flat rows (the CSV file): one per panel, series and x."""
    out = []
    for panel in figure["panels"]:
        for s in panel["series"]:
            for j, x in enumerate(s["x"]):
                out.append({"figure": figure["figure"], "panel": panel["title"], "series": s["label"],
                            "algorithm": s.get("key") or "", "x": x, "mean": s["mean"][j], "std": s["std"][j],
                            "stderr": s["stderr"][j], "runs": s["runs"]})
    return out
