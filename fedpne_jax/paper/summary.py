"""``SUMMARY.md``: what the figures' data say, generated from ``figures/*.json`` (never by hand).

Final regret per algorithm and objective (mean ± standard error), the winner of each comparison,
Fed-PNE's communication, and for each claim of the paper a verdict: **held**, **not held**, or
**inconclusive** when the data cannot tell (differences within noise, too few horizons).  A
difference is significant when it exceeds Z = 2 standard errors of the difference (about 95 %).
"""
from __future__ import annotations

import glob
import json
import math
import os
from collections.abc import Sequence

import numpy as np

from fedpne_jax.core.files import write_atomic
from fedpne_jax.core.registry import label
from fedpne_jax.paper.figures import SCHEMA, TITLES

Z = 2.0
HELD, NOT_HELD, INCONCLUSIVE = "**held**", "**not held**", "**inconclusive**"
SKIPPED = "Skipped (not this version's figure data; rerun to refresh)"     # before the files load_figures skipped


def load_figures(out: str) -> tuple[dict, list]:
    """{figure: data} of ``out/figures/*.json``, and the files skipped: another layout version's, or
    files that are not a figure's data at all (damaged, or put there by hand), which must not stop the
    summary of the others."""
    figures, skipped = {}, []
    for path in sorted(glob.glob(os.path.join(out, "figures", "*.json"))):
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (ValueError, RecursionError):        # JSONDecodeError, UnicodeDecodeError
            data = None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("figure"), str):
            skipped.append(os.path.basename(path))
            continue
        figures[data["figure"]] = data
    return figures, skipped


def significant(a: tuple, b: tuple) -> bool:
    """a = (mean, stderr) lies significantly below b."""
    return b[0] - a[0] > Z * math.hypot(a[1], b[1])


def _fmt(mean, err) -> str:
    # One run has no standard error: JSON stores it as null (or NaN), and 0 would claim certainty.
    if err is None or not math.isfinite(err):
        return f"{mean:.4g} ± n/a"
    return f"{mean:.4g} ± {err:.2g}"


def _final(series) -> tuple:
    return series["final"]["mean"], series["final"]["stderr"]


def _at(series, j) -> tuple:
    return series["mean"][j], series["stderr"][j]


def _objective(panel) -> str:
    return TITLES.get(panel["objective"], panel["objective"])


def winner(series: list) -> tuple:
    """(best series, runner-up or None, whether the best is significantly below the runner-up)."""
    ranked = sorted(series, key=lambda s: s["final"]["mean"])
    if len(ranked) == 1:
        return ranked[0], None, True
    return ranked[0], ranked[1], significant(_final(ranked[0]), _final(ranked[1]))


def _regret_tables(figures, lines, claims):
    for name, claim in [("fig3", "Fed-PNE has the smallest cumulative regret (Fig. 3)"),
                        ("fig6", "BO and BBO are not better than Fed-PNE (Fig. 6)"),
                        ("digits", "Fed-PNE has the smallest regret tuning the MLP (App. E, MNIST)")]:
        fig = figures.get(name)
        if fig is None:
            continue
        panels = [p for p in fig["panels"] if p["series"] and p["series"][0].get("key")]
        algorithms = list(dict.fromkeys(s["key"] for p in panels for s in p["series"]))
        lines += [f"### {fig['paper']}: final regret at round T (per client for federated algorithms; "
                  f"mean ± s.e., runs)", "",
                  "| objective | T | " + " | ".join(label(a) for a in algorithms) + " | best |",
                  "|---|---|" + "---|" * len(algorithms) + "---|"]
        for p in panels:
            by_key = {s["key"]: s for s in p["series"]}
            best, second, sig = winner(p["series"])
            cells = [f"{_fmt(*_final(by_key[a]))} ({by_key[a]['runs']})" if a in by_key else "—" for a in algorithms]
            tie = "" if sig else f", within noise of {second['label']}"
            lines.append(f"| {_objective(p)} | {p['series'][0]['x'][-1]:,} | " + " | ".join(cells)
                         + f" | {best['label']}{tie} |")
            fed = by_key.get("fedpne")
            if fed is None:
                continue
            others = [s for s in p["series"] if s is not fed]
            if name == "fig6":
                rivals = [by_key[a] for a in ("bo", "bbo") if a in by_key]
                verdict = NOT_HELD if any(significant(_final(r), _final(fed)) for r in rivals) else HELD
                note = "; ".join(f"{r['label']} {_fmt(*_final(r))}" for r in rivals) + f" vs Fed-PNE {_fmt(*_final(fed))}"
            else:
                if all(significant(_final(fed), _final(s)) for s in others):
                    verdict = HELD
                elif any(significant(_final(s), _final(fed)) for s in others):
                    verdict = NOT_HELD
                else:
                    verdict = INCONCLUSIVE
                note = f"Fed-PNE {_fmt(*_final(fed))}" + ("" if best is fed else
                                                          f", best {best['label']} {_fmt(*_final(best))}")
            claims.append((f"{claim}: {_objective(p)}", verdict, note))
        lines.append("")


def _ranking(figures, lines):
    """The X-armed gallery: each algorithm's final regret per problem with its rank there (1 = least
    regret); bold where it is not significantly above the problem's best."""
    fig = figures.get("xarmed")
    if fig is None:
        return
    panels = fig["panels"]
    keys = [s["key"] for s in panels[0]["series"]]
    labels = {s["key"]: s["label"] for s in panels[0]["series"]}
    lines += ["### The X-armed family: final regret at round T per problem (mean ± s.e., rank)", "",
              # Titles without the panel letters build() gives them.
              "| algorithm | " + " | ".join(p["title"].partition(") ")[2] or p["title"] for p in panels)
              + " | mean rank |",
              "|---|" + "---|" * len(panels) + "---|"]
    cells = {k: [] for k in keys}
    ranks = {k: [] for k in keys}
    for p in panels:
        by_key = {s["key"]: s for s in p["series"]}
        order = sorted(by_key, key=lambda k: by_key[k]["final"]["mean"])
        best = _final(by_key[order[0]])
        for rank, k in enumerate(order, 1):
            text = f"{_fmt(*_final(by_key[k]))} ({rank})"
            cells[k].append(text if significant(best, _final(by_key[k])) else f"**{text}**")
            ranks[k].append(rank)
    for k in sorted(keys, key=lambda k: sum(ranks[k])):
        lines.append(f"| {labels[k]} | " + " | ".join(cells[k]) + f" | {sum(ranks[k]) / len(ranks[k]):.1f} |")
    lines.append("")


def log_fit(T, y) -> dict:
    """y = a + b log10 T by least squares: b (per decade), R^2, and the log-log slope of y vs T."""
    x = np.log10(np.asarray(T, float))
    y = np.asarray(y, float)
    b, a = np.polyfit(x, y, 1)
    total = ((y - y.mean()) ** 2).sum()
    r2 = 1.0 - ((y - (a + b * x)) ** 2).sum() / total if total > 0 else 1.0
    power = float(np.polyfit(x, np.log10(np.maximum(y, 1e-12)), 1)[0])
    return {"per_decade": float(b), "r2": float(r2), "power": power, "points": int(x.size)}


def logarithmic(fit) -> str:
    """Logarithmic growth: a line in log T (R² >= 0.9) whose log-log slope stays below 0.25, over
    at least three horizons (two points fit any curve)."""
    if fit["points"] < 3:
        return INCONCLUSIVE
    return HELD if fit["r2"] >= 0.9 and fit["power"] < 0.25 else NOT_HELD


def _communication(figures, lines, claims):
    fig = figures.get("communication")
    if fig is None:
        return
    by = {(p["objective"], p["metric"]): p for p in fig["panels"]}
    lines += ["### Fed-PNE's communication (App. E): mean over seeds", "",
              "| objective | M | T | communication rounds | uploaded values per client | rounds per decade of T "
              "(R²) | uploads per decade (R²) | log-log slope of uploads |", "|---|---|---|---|---|---|---|---|"]
    for objective in dict.fromkeys(p["objective"] for p in fig["panels"]):
        rounds, uploads = by[(objective, "phases")], by[(objective, "uploads")]
        r, u = rounds["series"][0], uploads["series"][0]
        fr, fu = log_fit(r["x"], r["mean"]), log_fit(u["x"], u["mean"])
        name = _objective(rounds)
        lines.append(f"| {name} | {rounds['num_clients']} | {', '.join(f'{t:,}' for t in r['x'])} | "
                     f"{', '.join(f'{v:.3g}' for v in r['mean'])} | {', '.join(f'{v:.4g}' for v in u['mean'])} | "
                     f"{fr['per_decade']:.3g} ({fr['r2']:.3f}) | {fu['per_decade']:.4g} ({fu['r2']:.3f}) | "
                     f"{fu['power']:.3f} |")
        for what, fit, source in [("Communication rounds grow", fr, "Thm. 3.1, App. E"),
                                  ("Uploaded information grows", fu, "App. E")]:
            claims.append((f"{what} logarithmically in T ({source}): {name}", logarithmic(fit),
                           f"{fit['per_decade']:.4g} per decade of T, R² = {fit['r2']:.3f}, log-log slope "
                           f"{fit['power']:.3f}, {fit['points']} horizons"))
    lines.append("")


def trend(points: list, decreasing: bool = True) -> str:
    """HELD when the last point is significantly below the first (above, if not ``decreasing``) and
    no step goes significantly the other way; NOT_HELD when a step or the whole range goes
    significantly the wrong way; INCONCLUSIVE otherwise."""
    sign = 1 if decreasing else -1
    flip = lambda p: (sign * p[0], p[1])
    wrong = [significant(flip(a), flip(b)) for a, b in zip(points, points[1:])]
    if any(wrong) or significant(flip(points[0]), flip(points[-1])):
        return NOT_HELD
    return HELD if significant(flip(points[-1]), flip(points[0])) else INCONCLUSIVE


def _clients(figures, lines, claims):
    for name, first in [("clients", 0), ("digits", 1)]:
        fig = figures.get(name)
        if fig is None:
            continue
        lines += [f"### {fig['paper']}: Fed-PNE's final regret per client for several M (mean ± s.e.)", "",
                  "| objective | T | M | final regret R(T)/M |", "|---|---|---|---|"]
        for p in fig["panels"][first:]:
            finals = [_final(s) for s in p["series"]]
            Ms = [s["config"]["num_clients"] for s in p["series"]]
            objective = _objective(p)
            lines.append(f"| {objective} | {p['series'][0]['x'][-1]:,} | {', '.join(map(str, Ms))} | "
                         f"{', '.join(_fmt(*f) for f in finals)} |")
            claims.append((f"More clients lower the per-client regret (Thm. 3.1, {fig['paper']}): {objective}", trend(finals),
                           f"M = {Ms[0]} → {Ms[-1]}: {_fmt(*finals[0])} → {_fmt(*finals[-1])}"))
        lines += ["", "On landmine, COVID and digits client m owns field, region or shard m, so M also changes "
                      "the instance (its global objective and best value); with f* = 1 (landmine, digits, as the "
                      "paper) the per-client regret includes 1 − max f per round, which differs with M.", ""]


def _arms(figures, claims):
    fig = figures.get("arms")
    if fig is None:
        return
    for p in fig["panels"]:
        finals = [_final(s) for s in p["series"]]
        best = min(range(len(finals)), key=lambda i: finals[i][0])
        ends = [0, len(finals) - 1]
        if best in ends and all(significant(finals[best], finals[i]) for i in range(len(finals)) if i != best):
            verdict = NOT_HELD
        elif best not in ends and all(significant(finals[best], finals[i]) for i in ends):
            verdict = HELD
        else:
            verdict = INCONCLUSIVE
        claims.append((f"Fed1-UCB's dilemma: both few and many arms cost regret (App. E): {_objective(p)}",
                       verdict, ", ".join(f"{s['label']}: {_fmt(*f)}" for s, f in zip(p["series"], finals))))


def _privacy(figures, lines, claims):
    fig = figures.get("privacy")
    if fig is None:
        return
    eps = fig["panels"][0]["series"][0]["x"]
    lines += ["### DP-Fed-PNE: final regret per client vs ε (mean ± s.e.)", "",
              "| objective | " + " | ".join(f"ε = {e:g}" for e in eps) + " | without DP |", "|---|" + "---|" * (len(eps) + 1)]
    for p in fig["panels"]:
        s, ref = p["series"][0], p["reference"]
        pts = [_at(s, j) for j in range(len(s["x"]))]
        base = (ref["mean"], ref["stderr"])
        lines.append(f"| {_objective(p)} | " + " | ".join(_fmt(*q) for q in pts) + f" | {_fmt(*base)} |")
        verdict = trend(pts)
        far = significant(base, pts[-1]) and pts[-1][0] - base[0] > 0.05 * abs(base[0])
        if verdict == HELD and far:
            verdict = NOT_HELD
        claims.append((f"Privacy costs regret, vanishing as ε grows (Thm. D.2): {_objective(p)}", verdict,
                       f"ε = {s['x'][0]:g}: {_fmt(*pts[0])}, ε = {s['x'][-1]:g}: {_fmt(*pts[-1])}, "
                       f"without DP: {_fmt(*base)}"))
    lines.append("")


def _rate(figures, claims):
    fig = figures.get("rate")
    if fig is None:
        return
    for p in fig["panels"]:
        fit = p["fit"]
        s, e = fit["slope"], fit["stderr"]
        implied = max((2 * s - 1) / (1 - s), 0.0) if s < 1 else float("inf")
        verdict = INCONCLUSIVE if fit["points"] < 3 else (HELD if s + Z * e < 1 else NOT_HELD)
        claims.append((f"Regret grows sublinearly in T (Thm. 3.1): {_objective(p)}", verdict,
                       f"log-log slope {s:.3f} ± {e:.3f} over T = {fit['from_T']:,}–{fit['to_T']:,} "
                       f"({fit['points']} horizons); (d+1)/(d+2) is 0.5 for d = 0 and 0.667 for d = 1; the slope "
                       f"corresponds to d ≈ {implied:.2f}"))


def _sensitivity(figures, claims):
    fig = figures.get("sensitivity")
    if fig is None:
        return
    p = fig["panels"][0]
    row = next((s for s in p["series"] if s.get("rho") == 0.5), p["series"][0])
    cs = row["x"]
    small, large = (cs.index(0.1) if 0.1 in cs else 0), len(cs) - 1
    n = row["runs"]
    more = significant(_at(row, small), _at(row, large))
    # log(std) has standard error about 1/sqrt(2(n-1)) per estimate, so a log ratio about 1/sqrt(n-1).
    log_ratio = math.log(max(row["std"][small], 1e-300) / max(row["std"][large], 1e-300))
    tighter = n > 2 and log_ratio > Z / math.sqrt(n - 1)
    looser = n > 2 and -log_ratio > Z / math.sqrt(n - 1)
    verdict = HELD if more and tighter else (NOT_HELD if significant(_at(row, large), _at(row, small)) or looser
                                             else INCONCLUSIVE)
    claims.append((f"A large c explores slower (more regret) with smaller variance (App. E): Garland, ρ = {row['rho']:g}",
                   verdict, f"c = {cs[small]:g}: {_fmt(*_at(row, small))} (std {row['std'][small]:.3g}); "
                            f"c = {cs[large]:g}: {_fmt(*_at(row, large))} (std {row['std'][large]:.3g})"))


def _heterogeneity(figures, lines, claims):
    fig = figures.get("heterogeneity")
    if fig is None:
        return
    for p in fig["panels"]:
        s = next((s for s in p["series"] if s["key"] == "fedpne"), None)
        if s is None:
            continue
        pts = [_at(s, j) for j in range(len(s["x"]))]
        moved = [q for q in pts[1:] if significant(q, pts[0]) or significant(pts[0], q)]
        claims.append((f"Fed-PNE's regret depends on the global objective only, not on how the clients' objectives "
                       f"differ (Thm. 3.1's bound has f alone; new test): {_objective(p)}",
                       NOT_HELD if moved else HELD,
                       f"amplitude {s['x'][0]:g} → {s['x'][-1]:g}: {_fmt(*pts[0])} → {_fmt(*pts[-1])}"))
    amplitudes = fig["panels"][0]["series"][0]["x"]
    lines += ["### Clients with differing optima (new): final regret per client vs the perturbations' amplitude", "",
              "| objective | algorithm | " + " | ".join(f"{a:g}" for a in amplitudes) + " |",
              "|---|---|" + "---|" * len(amplitudes)]
    for p in fig["panels"]:
        for s in p["series"]:
            lines.append(f"| {_objective(p)} | {s['label']} | "
                         + " | ".join(_fmt(*_at(s, j)) for j in range(len(s["x"]))) + " |")
    lines.append("")


def render(figures: dict, skipped: Sequence[str] = (), figure_dir: str = "figures/") -> str:
    """The summary's Markdown; ``figure_dir``: where the PNGs lie relative to the summary file."""
    if not figures:
        note = f" {SKIPPED}: {', '.join(skipped)}." if skipped else ""
        return f"# Summary\n\nNo figure data yet: run `fedpne reproduce all`.{note}\n"
    modes = sorted({f["run"]["mode"] for f in figures.values()})
    devices = sorted({f["run"]["device"] for f in figures.values()})
    lines = ["# Summary of the reproduced figures", "",
             "Generated by `fedpne reproduce` from the data in `figures/*.json`; do not edit by hand. "
             f"Mode: {', '.join(modes)}. Device: {', '.join(devices)}. A difference is significant beyond "
             f"{Z:g} standard errors; **inconclusive** means the data cannot tell.", "",
             "| figure | paper | command | wall seconds of its studies |", "|---|---|---|---|"]
    for name, f in figures.items():
        lines.append(f"| [{name}]({figure_dir}{name}.png) | {f['paper'] or 'new'} | `{f['run']['command']}` | "
                     f"{sum(f['run']['seconds'].values()):.0f} |")
    if skipped:
        lines += ["", f"{SKIPPED}: {', '.join(skipped)}."]
    lines.append("")
    body: list[str] = []
    claims: list[tuple[str, str, str]] = []      # (claim, verdict, evidence)
    _regret_tables(figures, body, claims)
    _clients(figures, body, claims)
    _communication(figures, body, claims)
    _arms(figures, claims)
    _privacy(figures, body, claims)
    _rate(figures, claims)
    _sensitivity(figures, claims)
    _heterogeneity(figures, body, claims)
    _ranking(figures, body)
    lines += ["## The paper's claims", "", "| claim | verdict | evidence |", "|---|---|---|"]
    lines += [f"| {c} | {v} | {n} |" for c, v, n in claims]
    lines += ["", "## Numbers", ""] + body
    return "\n".join(lines) + "\n"


def write(out: str) -> str:
    path = os.path.join(out, "SUMMARY.md")
    text = render(*load_figures(out)).encode()
    write_atomic(path, lambda fh: fh.write(text))
    return path
