"""``fedpne report RESULTS... --out DIR`` (``fp.report``): one folder of CSV tables, figures and a
REPORT.md that links them, over run JSON files and sweep folders (the analyses:
:mod:`fedpne_jax.experiments.analysis`).

Written: ``fixed_budget.csv`` (quantiles of simple, best-so-far and cumulative regret at the budgets),
``fixed_target.csv`` (ERT and success rate per target), ``ecdf.csv`` and ``ecdf.png`` (runtime ECDFs
per problem and aggregated over the problems), ``curves.png`` (cumulative regret, mean and 95 %
confidence band), ``ranks.csv`` and ``win_rates.csv``.  Every file is written atomically.
"""
from __future__ import annotations

import csv
import io
import math
import os

import numpy as np

from fedpne_jax.core.errors import MissingExtra
from fedpne_jax.core.files import write_atomic
from fedpne_jax.experiments import analysis
from fedpne_jax.plotting.render import draw
from fedpne_jax.plotting.style import FULL_WIDTH

REPORT_FILE = "REPORT.md"   # the report's page, beside its tables and figures
ECDF_POINTS = 60          # budgets per ECDF, log-spaced from round 1 to the longest horizon


def _write_text(path: str, text: str) -> None:
    data = text.encode()
    write_atomic(path, lambda fh: fh.write(data))


def _write_csv(path: str, rows: list[dict]) -> None:
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    _write_text(path, buffer.getvalue())


def default_budgets(entries) -> list[int]:
    """Budgets of the fixed-budget table: the checkpoints about 10 %, 50 % and 100 % of the way
    through the run with the shortest horizon."""
    cps = min(entries, key=lambda e: e.horizon).checkpoints
    C = len(cps)
    return sorted({int(cps[max(0, C // 10 - 1)]), int(cps[max(0, C // 2 - 1)]), int(cps[-1])})


def _series(entry, x, y, spread=None) -> dict:
    y = np.asarray(y, float)
    band = np.zeros_like(y) if spread is None else np.asarray(spread, float)
    return {"key": entry.algorithm, "label": entry.label, "x": np.asarray(x, float).tolist(), "mean": y.tolist(),
            "band": band.tolist(), "config": {"problem": entry.problem}, "source": entry.source}


def _budget_grid(entries) -> np.ndarray:
    top = max(e.horizon for e in entries)
    return np.unique(np.round(np.logspace(0, math.log10(top), ECDF_POINTS)).astype(np.int64))


def ecdf_figure(entries) -> tuple[dict, list[dict]]:
    """(figure, CSV rows): per problem, each entry's runtime ECDF over the 51 targets; and, over all
    problems, per label that ran on every one, the mean of its per-problem ECDFs (every problem weighs
    the same, as COCO aggregates over functions)."""
    budgets = _budget_grid(entries)
    problems = sorted({e.problem for e in entries})
    panels, rows = [], []
    pooled: dict = {}
    for problem in problems:
        series = []
        for e in (e for e in entries if e.problem == problem):
            y = analysis.ecdf(e.hits, np.minimum(budgets, e.horizon))
            series.append(_series(e, budgets, y))
            pooled.setdefault(e.label, (e, []))[1].append(y)
            rows += [{"problem": problem, "entry": e.label, "budget_rounds": int(b), "fraction": float(v)}
                     for b, v in zip(budgets, y)]
        panels.append(_panel(problem, "fraction of (run, target) pairs", series, ecdf=True))
    # Only what ran on every problem is aggregated: a mean over other sets would not compare.
    everywhere = {label: v for label, v in pooled.items() if len(v[1]) == len(problems)}
    if len(problems) > 1 and everywhere:
        series = []
        for label, (e, ys) in everywhere.items():
            y = np.mean(ys, axis=0)
            series.append(_series(e, budgets, y))
            rows += [{"problem": "all", "entry": label, "budget_rounds": int(b), "fraction": float(v)}
                     for b, v in zip(budgets, y)]
        panels.append(_panel(f"all {len(problems)} problems", "fraction of (problem, run, target)", series, ecdf=True))
    return _figure("Runtime ECDF over 51 targets (COCO's 1e2 .. 1e-8, times f* - f(centre))", panels), rows


def curves_figure(entries) -> dict:
    """Per problem, each entry's cumulative regret: mean and a 95 % confidence band (1.96 s.e.)."""
    panels = []
    for problem in sorted({e.problem for e in entries}):
        series = []
        for e in (e for e in entries if e.problem == problem):
            n = e.runs
            err = e.curves.std(axis=0, ddof=1) / math.sqrt(n) if n > 1 else np.zeros(e.curves.shape[1])
            series.append(_series(e, e.checkpoints, e.curves.mean(axis=0), 1.96 * err))
        panels.append(_panel(problem, "cumulative regret", series))
    return _figure("Cumulative regret (mean and 95 % confidence band; per client for federated algorithms)", panels)


def _panel(title, ylabel, series, ecdf=False) -> dict:
    panel = {"kind": "curves", "band": "band", "title": title, "xlabel": "rounds", "ylabel": ylabel,
             "xscale": "log" if ecdf else "linear", "yscale": "linear", "series": series}
    if ecdf:
        panel["ylim"] = (0.0, 1.0)       # a fraction: auto-scaling would make a flat 0.3 look like 1
    return panel


def win_rate_figure(labels, wins) -> dict:
    """The win-rate matrix as a heat map (row beats column), the table of REPORT.md drawn."""
    series = [{"label": a, "x": list(range(len(labels))), "mean": [float(v) for v in wins[i]]}
              for i, a in enumerate(labels)]
    panel = {"kind": "heatmap", "title": "win rate: row beats column", "xlabel": "column", "ylabel": "row",
             "series": series, "xticklabels": list(labels), "xrotation": 45, "cmap": "RdBu",
             "mark_best": False, "colorbar": "win rate", "origin": "upper", "range": (0.0, 1.0), "diverging": True}
    return {"title": "", "panels": [panel], "columns": 1, "width": FULL_WIDTH,
            "row_height": max(2.4, 0.35 * len(labels) + 1.2)}


def _figure(title, panels) -> dict:
    columns = min(len(panels), 2)
    return {"title": title, "panels": panels, "columns": columns, "width": FULL_WIDTH, "row_height": 2.4}


def _markdown(header: list, rows: list) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _g(x: float) -> str:
    return "∞" if math.isinf(x) else ("n/a" if math.isnan(x) else f"{x:.3g}")


def report(paths, out: str, budgets=None, plots: bool = True) -> dict:
    """Write the report of run files and sweep folders ``paths`` into folder ``out`` (created if
    missing); returns {name: path} of what was written.  ``budgets``: rounds of the fixed-budget table
    (default :func:`default_budgets`).  ``plots=False`` skips the figures (no matplotlib needed)."""
    entries = analysis.load(list(paths))
    if budgets is None:
        budgets = default_budgets(entries)
    budgets = [int(b) for b in budgets]
    if not budgets or any(b < 1 for b in budgets):
        raise ValueError(f"budgets must be rounds >= 1, got {budgets}")
    fixed_budget = [row for e in entries for row in analysis.fixed_budget(e, budgets)]
    fixed_target = [row for e in entries for row in analysis.fixed_target(e)]
    ranks = analysis.ranks(entries)
    labels, wins = analysis.win_rates(entries)
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"out: {out!r} is a file; the report is a folder")
    os.makedirs(out, exist_ok=True)
    written = {}

    def put(name, rows):
        written[name] = os.path.join(out, name)
        _write_csv(written[name], rows)

    put("fixed_budget.csv", fixed_budget)
    put("fixed_target.csv", fixed_target)
    ecdf, ecdf_rows = ecdf_figure(entries)
    put("ecdf.csv", ecdf_rows)
    put("ranks.csv", [{"problem": p, "entry": k, "rank": r} for p, per in ranks["per_problem"].items()
                      for k, r in per.items()] + [{"problem": "mean", "entry": k, "rank": r}
                                                  for k, r in ranks["mean"].items()])
    put("win_rates.csv", [dict({"entry": a}, **{b: float(wins[i, j]) for j, b in enumerate(labels)})
                          for i, a in enumerate(labels)])
    missing = None
    if plots:
        figures = (("ecdf.png", ecdf), ("curves.png", curves_figure(entries)),
                   ("win_rates.png", win_rate_figure(labels, wins)))
        try:
            for name, figure in figures:
                draw(figure, os.path.join(out, name))
                written[name] = os.path.join(out, name)
        except MissingExtra as err:
            # The tables are the report; the figures are drawn from their CSVs once matplotlib is there.
            missing = str(err)
    written[REPORT_FILE] = os.path.join(out, REPORT_FILE)
    _write_text(written[REPORT_FILE], _report_md(entries, budgets, fixed_budget, fixed_target, ranks, labels, wins,
                                                 written, paths, missing))
    return written


def _report_md(entries, budgets, fixed_budget, fixed_target, ranks, labels, wins, written, paths,
               missing=None) -> str:
    parts = ["# Benchmark report", "",
             "Inputs: " + ", ".join(f"`{p}`" for p in paths) + ".", "",
             f"{len(entries)} configurations on {len({e.problem for e in entries})} problem(s), "
             f"{sum(e.runs for e in entries):,} runs.", "",
             "Budgets and running times are in **rounds**; a federated algorithm evaluates the objective M times a "
             "round, so the CSV tables give evaluations (M x rounds) as well. Targets: COCO's 51, scale x 10^e for "
             "e = 2, 1.8, .., -8, with scale = f* - f(centre of the box). The best-so-far regret is f* - max f(x_s) "
             "over every point evaluated by round t; the simple regret is f* - f(x_hat_t) of the recommendation "
             "x_hat_t the algorithm would return after round t. ERT (COCO): the rounds of all runs until the target, or the "
             "whole run when it was not reached, over the number of runs that reached it.", "",
             "## Files", ""]
    parts += [f"- [{name}]({name})" for name in written if name != REPORT_FILE]
    if "ecdf.png" in written:
        parts += ["", "![runtime ECDF](ecdf.png)", "", "![cumulative regret](curves.png)"]
    if missing:
        parts += ["", f"No figures: {missing}; then run the same `fedpne report` command again."]
    parts += ["", "## Fixed budget: median simple, best-so-far and cumulative regret", ""]
    rows = [[r["problem"], r["entry"], r["checkpoint_round"], _g(r["simple_q50"]), _g(r["best_so_far_q50"]),
             _g(r["cumulative_q50"]), r["runs"]] for r in fixed_budget]
    parts.append(_markdown(["problem", "configuration", "round", "simple (median)", "best-so-far (median)",
                            "cumulative (median)", "runs"], rows))
    parts += ["", "## Fixed target: ERT in rounds (success rate)", ""]
    shown = [10, 15, 20]                       # targets scale x 1, x 0.1, x 0.01
    header = ["problem", "configuration"] + [f"scale x 1e{analysis.checkpoints_lib.TARGET_EXPONENTS[j]:g}"
                                              for j in shown]
    by_entry: dict = {}
    for r in fixed_target:
        by_entry.setdefault((r["problem"], r["entry"]), {})[r["target_index"]] = r
    rows = [[p, k] + [f"{_g(v[j]['ert_rounds'])} ({v[j]['success_rate']:.0%})" for j in shown]
            for (p, k), v in by_entry.items()]
    parts.append(_markdown(header, rows))
    parts += ["", "## Ranks (median final best-so-far regret; 1 = best)", ""]
    problems = list(ranks["per_problem"])
    parts.append(_markdown(["configuration"] + problems + ["mean"],
                           [[k] + [_g(ranks["per_problem"][p].get(k, math.nan)) for p in problems] + [_g(m)]
                            for k, m in sorted(ranks["mean"].items(), key=lambda kv: kv[1])]))
    parts += ["", "## Win rates (row beats column: smaller final best-so-far regret, ties one half)", ""]
    parts.append(_markdown([""] + labels, [[a] + [_g(wins[i, j]) for j in range(len(labels))]
                                           for i, a in enumerate(labels)]))
    if "win_rates.png" in written:
        parts += ["", "![win rates](win_rates.png)"]
    return "\n".join(parts) + "\n"
