"""``SUMMARY.md``: what the figures' data say, generated from ``figures/*.json`` (never by hand).

Final regret per algorithm and objective (mean ± standard error), the winner of each comparison,
Fed-PNE's communication, and for each claim of the paper whether the data bear it out.  A
difference counts as significant when it exceeds twice the standard error of the difference
(about 95 %); otherwise the verdict says it is within noise.
"""
from __future__ import annotations

import glob
import json
import math
import os

import numpy as np

from fedpne_jax.result import LABELS

Z = 2.0          # differences beyond Z standard errors count as significant


def load_figures(out: str) -> dict:
    figures = {}
    for path in sorted(glob.glob(os.path.join(out, "figures", "*.json"))):
        with open(path) as fh:
            data = json.load(fh)
        figures[data["figure"]] = data
    return figures


def _fmt(mean, err) -> str:
    return f"{mean:.4g} ± {err:.2g}"


def _finals(panel) -> list[tuple]:
    """(label, key, mean, stderr, runs) of a curves panel's series at round T."""
    return [(s["label"], s.get("key"), s["final"]["mean"], s["final"]["stderr"], s["runs"]) for s in panel["series"]]


def _objective(panel) -> str:
    return panel["title"].split(") ", 1)[-1]


def compare(finals) -> dict:
    """The winner (lowest mean) and whether it beats the runner-up by more than Z standard errors."""
    ranked = sorted(finals, key=lambda f: f[2])
    best = ranked[0]
    if len(ranked) == 1:
        return {"best": best, "second": None, "significant": True}
    second = ranked[1]
    gap = second[2] - best[2]
    return {"best": best, "second": second, "significant": gap > Z * math.hypot(best[3], second[3])}


def _verdict(held: bool, note: str = "") -> str:
    return ("**held**" if held else "**not held**") + (f" ({note})" if note else "")


def _regret_tables(figures, lines, claims):
    for name, claim_text in [("fig3", "Fed-PNE has the smallest cumulative regret (Fig. 3)"),
                             ("fig6", "BO and BBO are not better than Fed-PNE (Fig. 6)"),
                             ("digits", "Fed-PNE has the smallest regret tuning the MLP (Fig. 10a)")]:
        if name not in figures:
            continue
        fig = figures[name]
        panels = [p for p in fig["panels"] if p["kind"] == "curves" and p["series"] and p["series"][0].get("key")]
        if not panels:
            continue
        algorithms = []
        for p in panels:
            for s in p["series"]:
                if s["key"] not in algorithms:
                    algorithms.append(s["key"])
        lines += [f"### {fig['paper'] or name}: final regret R(T) per client (mean ± s.e.; runs)", "",
                  "| objective | T | " + " | ".join(LABELS.get(a, a) for a in algorithms) + " | best |",
                  "|---|---|" + "---|" * len(algorithms) + "---|"]
        for p in panels:
            finals = _finals(p)
            by_key = {f[1]: f for f in finals}
            T = p["series"][0]["x"][-1]
            result = compare(finals)
            best = result["best"]
            cells = [f"{_fmt(by_key[a][2], by_key[a][3])} ({by_key[a][4]})" if a in by_key else "—"
                     for a in algorithms]
            tie = "" if result["significant"] else f", within noise of {result['second'][0]}"
            lines.append(f"| {_objective(p)} | {T:,} | " + " | ".join(cells) + f" | {best[0]}{tie} |")
            fed = by_key.get("fedpne")
            if fed is None:
                continue
            if name == "fig6":
                rivals = [by_key[a] for a in ("bo", "bbo") if a in by_key]
                better = [r for r in rivals if fed[2] - r[2] > Z * math.hypot(fed[3], r[3])]
                held = not better
                note = ("; ".join(f"{r[0]} {_fmt(r[2], r[3])} vs Fed-PNE {_fmt(fed[2], fed[3])}" for r in rivals))
            else:
                held = best[1] == "fedpne"
                note = (f"Fed-PNE {_fmt(fed[2], fed[3])}, best {best[0]} {_fmt(best[2], best[3])}" if not held
                        else f"Fed-PNE {_fmt(fed[2], fed[3])}" + ("" if result["significant"] else
                                                                    f", within noise of {result['second'][0]}"))
            claims.append((f"{claim_text}: {_objective(p)}", _verdict(held), note))
        lines.append("")


def log_fit(T, y) -> dict:
    """y = a + b log10 T by least squares: b (per decade), R^2, and the log-log slope of y vs T."""
    x = np.log10(np.asarray(T, float))
    y = np.asarray(y, float)
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    total = ((y - y.mean()) ** 2).sum()
    r2 = 1.0 - (resid ** 2).sum() / total if total > 0 else 1.0
    power = float(np.polyfit(x, np.log10(np.maximum(y, 1e-12)), 1)[0])
    return {"per_decade": float(b), "r2": float(r2), "power": power}


def _communication(figures, lines, claims):
    fig = figures.get("communication")
    if fig is None:
        return
    half = len(fig["panels"]) // 2
    lines += ["### Communication of Fed-PNE (Fig. 9): per client, mean over seeds", "",
              "| objective | T | rounds | uploaded values | rounds per decade of T (R²) | uploads per decade (R²) | "
              "log-log slope of uploads |",
              "|---|---|---|---|---|---|---|"]
    for rounds, uploads in zip(fig["panels"][:half], fig["panels"][half:]):
        r, u = rounds["series"][0], uploads["series"][0]
        fr, fu = log_fit(r["x"], r["mean"]), log_fit(u["x"], u["mean"])
        name = _objective(rounds)
        T = ", ".join(f"{t:,}" for t in r["x"])
        lines.append(f"| {name} | {T} | {', '.join(f'{v:.3g}' for v in r['mean'])} | "
                     f"{', '.join(f'{v:.4g}' for v in u['mean'])} | {fr['per_decade']:.3g} ({fr['r2']:.3f}) | "
                     f"{fu['per_decade']:.4g} ({fu['r2']:.3f}) | {fu['power']:.3f} |")
        claims.append((f"Communication rounds grow logarithmically in T (Thm. 3.1, Fig. 9): {name}",
                       _verdict(fr["r2"] >= 0.9 and fr["power"] < 0.5,
                                f"{fr['per_decade']:.3g} rounds per decade, R² = {fr['r2']:.3f}, "
                                f"log-log slope {fr['power']:.3f}"), ""))
        claims.append((f"Uploaded information grows logarithmically in T (App. E, Fig. 9): {name}",
                       _verdict(fu["r2"] >= 0.9 and fu["power"] < 0.5,
                                f"{fu['per_decade']:.4g} values per decade, R² = {fu['r2']:.3f}, "
                                f"log-log slope {fu['power']:.3f}"), ""))
    lines.append("")


def _monotone(series_finals, decreasing=True):
    """True when no step goes the wrong way by more than Z standard errors."""
    for (m0, e0), (m1, e1) in zip(series_finals, series_finals[1:]):
        wrong = (m1 - m0) if decreasing else (m0 - m1)
        if wrong > Z * math.hypot(e0, e1):
            return False
    return True


def _clients(figures, lines, claims):
    for name, panels_of in [("clients", lambda f: f["panels"]), ("digits", lambda f: f["panels"][1:])]:
        fig = figures.get(name)
        if fig is None:
            continue
        lines += [f"### {fig['paper']}: Fed-PNE's final regret per client for several M (mean ± s.e.)", "",
                  "| objective | " + " | ".join(["M", "final regret R(T)/M"]) + " |", "|---|---|---|"]
        for p in panels_of(fig):
            finals = [(s["final"]["mean"], s["final"]["stderr"]) for s in p["series"]]
            Ms = [s["label"].split("= ")[-1] for s in p["series"]]
            obj = _objective(p).replace("Fed-PNE on ", "")
            lines.append(f"| {obj} | {', '.join(Ms)} | {', '.join(_fmt(m, e) for m, e in finals)} |")
            held = _monotone(finals) and finals[-1][0] < finals[0][0]
            claims.append((f"More clients lower the per-client regret (Thm. 3.1, {fig['paper'].split(' (')[0]}): {obj}",
                           _verdict(held, f"M = {Ms[0]} → {Ms[-1]}: {_fmt(*finals[0])} → {_fmt(*finals[-1])}"), ""))
        lines.append("")


def _arms(figures, claims):
    fig = figures.get("arms")
    if fig is None:
        return
    for p in fig["panels"]:
        finals = [(s["label"], s["final"]["mean"], s["final"]["stderr"]) for s in p["series"]]
        best = min(range(len(finals)), key=lambda i: finals[i][1])
        held = 0 < best < len(finals) - 1
        claims.append((f"Fed1-UCB's arm dilemma: both few and many arms hurt (App. E, Fig. 4): "
                       f"{_objective(p).replace('Fed1-UCB on ', '')}",
                       _verdict(held, f"best {finals[best][0]}: {_fmt(finals[best][1], finals[best][2])}; "
                                      + ", ".join(f"{f[0]}: {f[1]:.4g}" for f in finals)), ""))


def _privacy(figures, lines, claims):
    fig = figures.get("privacy")
    if fig is None:
        return
    lines += ["### DP-Fed-PNE: final regret per client vs ε (mean ± s.e.)", "",
              "| objective | " + " | ".join(f"ε = {e:g}" for e in fig["panels"][0]["series"][0]["x"])
              + " | without DP |", "|---|" + "---|" * (len(fig["panels"][0]["series"][0]["x"]) + 1)]
    for p in fig["panels"]:
        s, ref = p["series"][0], p["reference"]
        pairs = list(zip(s["mean"], s["stderr"]))
        lines.append(f"| {_objective(p)} | " + " | ".join(_fmt(m, e) for m, e in pairs)
                     + f" | {_fmt(ref['mean'], ref['stderr'])} |")
        gap = abs(pairs[-1][0] - ref["mean"])
        close = gap <= Z * math.hypot(pairs[-1][1], ref["stderr"]) or gap <= 0.05 * ref["mean"]
        claims.append((f"Privacy costs regret, vanishing as ε grows (Thm. D.2): {_objective(p)}",
                       _verdict(_monotone(pairs) and pairs[0][0] > pairs[-1][0] and close,
                                f"ε = {s['x'][0]:g}: {_fmt(*pairs[0])}, ε = {s['x'][-1]:g}: {_fmt(*pairs[-1])}, "
                                f"no DP: {_fmt(ref['mean'], ref['stderr'])}"), ""))
    lines.append("")


def _rate(figures, claims):
    fig = figures.get("rate")
    if fig is None:
        return
    for p in fig["panels"]:
        fit = p["fit"]
        s, e = fit["slope"], fit["stderr"]
        implied = (2 * s - 1) / (1 - s) if s < 1 else float("inf")
        name = _objective(p).split(",")[0]
        claims.append((f"Regret is sublinear in T, R(T) = Õ(T^((d+1)/(d+2))) (Thm. 3.1): {name}",
                       _verdict(s + Z * e < 1, f"log-log slope {s:.3f} ± {e:.3f} over T = {fit['from_T']:,}"
                                               f"–{fit['to_T']:,}; (d+1)/(d+2) = 0.5 for d = 0, "
                                               f"0.667 for d = 1; the slope matches d ≈ {max(implied, 0):.2f}"), ""))


def _sensitivity(figures, claims):
    fig = figures.get("sensitivity")
    if fig is None:
        return
    p = fig["panels"][0]
    row = next((s for s in p["series"] if s["label"] == "ρ = 0.5"), p["series"][0])
    cs = row["x"]
    i_small, i_large = cs.index(0.1) if 0.1 in cs else 0, len(cs) - 1
    more = row["mean"][i_large] > row["mean"][i_small]
    tighter = row["std"][i_large] < row["std"][i_small]
    claims.append((f"A large c explores slower (more regret) with smaller variance (App. E), {row['label']}",
                   _verdict(more and tighter, f"c = {cs[i_small]:g}: {row['mean'][i_small]:.4g} (std "
                                              f"{row['std'][i_small]:.3g}); c = {cs[i_large]:g}: "
                                              f"{row['mean'][i_large]:.4g} (std {row['std'][i_large]:.3g})"), ""))


def _heterogeneity(figures, lines):
    fig = figures.get("heterogeneity")
    if fig is None:
        return
    lines += ["### Heterogeneity with differing local optima (new): final regret per client vs amplitude", "",
              "| objective | algorithm | " + " | ".join(f"{a:g}" for a in fig["panels"][0]["series"][0]["x"]) + " |",
              "|---|---|" + "---|" * len(fig["panels"][0]["series"][0]["x"])]
    for p in fig["panels"]:
        for s in p["series"]:
            lines.append(f"| {_objective(p)} | {s['label']} | "
                         + " | ".join(_fmt(m, e) for m, e in zip(s["mean"], s["stderr"])) + " |")
    lines.append("")


def render(figures: dict) -> str:
    if not figures:
        return "# Summary\n\nNo figure data yet: run `fedpne reproduce all`.\n"
    runs = {f["run"]["mode"] for f in figures.values()}
    devices = sorted({f["run"]["device"] for f in figures.values()})
    lines = ["# Summary of the reproduced figures", "",
             "Generated by `fedpne reproduce` from the data in `figures/*.json`; do not edit by hand.",
             f"Mode: {', '.join(sorted(runs))}. Device: {', '.join(devices)}. "
             f"Significant means beyond {Z:g} standard errors of the difference.", "",
             "| figure | paper | command | seconds (studies it ran) |", "|---|---|---|---|"]
    for name, f in figures.items():
        lines.append(f"| [{name}](figures/{name}.png) | {f['paper'] or 'new'} | `{f['run']['command']}` | "
                     f"{sum(f['run']['seconds'].values()):.0f} |")
    lines.append("")
    body, claims = [], []
    _regret_tables(figures, body, claims)
    _clients(figures, body, claims)
    _communication(figures, body, claims)
    _arms(figures, claims)
    _privacy(figures, body, claims)
    _rate(figures, claims)
    _sensitivity(figures, claims)
    _heterogeneity(figures, body)
    lines += ["## The paper's claims", "", "| claim | verdict |", "|---|---|"]
    lines += [f"| {c} | {v}{' — ' + n if n else ''} |" for c, v, n in claims]
    lines += ["", "## Numbers", ""] + body
    return "\n".join(lines) + "\n"


def write(out: str) -> str:
    path = os.path.join(out, "SUMMARY.md")
    text = render(load_figures(out))
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)
    return path
