"""Drawing figures with matplotlib (the ``plot`` extra): one style for every figure.

A figure is data first (:mod:`fedpne_jax.figures` builds it as panels of series); this module only
draws it.  Each algorithm keeps its colour in every figure; series that vary a number (M, K, an
amplitude) take shades of one colour map in order.

``fedpne plot RESULTS...`` draws regret curves of any ``fedpne run --output`` JSON files and sweep
folders on one axes (:func:`plot_results`).
"""
from __future__ import annotations

import json
import math
import os

import numpy as np

from fedpne_jax.core.errors import MissingExtra
from fedpne_jax.core import registry
from fedpne_jax.experiments.load import load_sweep
from fedpne_jax.paper.figures import stats

def pyplot():
    """matplotlib.pyplot with a file-only backend, or an error that says how to install it."""
    try:
        import matplotlib
    except ImportError:
        raise MissingExtra('plots need matplotlib: pip install "fedpne-jax[plot]" (or pip install matplotlib)') \
            from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def series_color(series: dict, index: int, count: int, plt):
    """The algorithm's colour; a shade of viridis for series that vary a parameter instead."""
    s = registry.style(series.get("key"))
    if s is not None:
        return s.colour
    return plt.get_cmap("viridis")(0.1 + 0.8 * index / max(count - 1, 1))


def _marker(key) -> str:
    s = registry.style(key)
    return s.marker if s is not None else "o"


def _curves(ax, panel, plt):
    n = len(panel["series"])
    for i, s in enumerate(panel["series"]):
        x, mean, spread = np.asarray(s["x"], float), np.asarray(s["mean"], float), np.asarray(s[panel["band"]], float)
        color = series_color(s, i, n, plt)
        ax.plot(x, mean, color=color, label=s["label"], lw=1.6)
        ax.fill_between(x, mean - spread, mean + spread, color=color, alpha=0.18, lw=0)


def _points(ax, panel, plt):
    n = len(panel["series"])
    for i, s in enumerate(panel["series"]):
        color = series_color(s, i, n, plt)
        ax.errorbar(np.asarray(s["x"], float), np.asarray(s["mean"], float), yerr=np.asarray(s[panel["band"]], float),
                    color=color, marker=_marker(s.get("key")), ms=4, lw=1.4, capsize=2, label=s["label"])
    for line in panel.get("lines", []):
        ax.plot(line["x"], line["y"], color="black", ls=line.get("style", "--"), lw=1.0, label=line["label"])


def _heatmap(ax, panel, plt):
    rows = panel["series"]                                  # one series per y value, x along each
    x = rows[0]["x"]
    grid = np.array([r["mean"] for r in rows], float)
    image = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis_r")
    ax.set_xticks(range(len(x)), [f"{v:g}" for v in x])
    ax.set_yticks(range(len(rows)), [r["label"] for r in rows])
    best = np.unravel_index(np.nanargmin(grid), grid.shape)
    lo, hi = np.nanmin(grid), np.nanmax(grid)
    for (i, j), value in np.ndenumerate(grid):
        # viridis_r is light at low values: dark text there, light text on the dark cells.
        light = (value - lo) <= 0.5 * (hi - lo)
        ax.text(j, i, f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}", ha="center", va="center", fontsize=7,
                color="red" if (i, j) == best else ("black" if light else "white"),
                fontweight="bold" if (i, j) == best else None)
    ax.figure.colorbar(image, ax=ax, label=panel.get("colorbar", ""))


DRAW = {"curves": _curves, "points": _points, "heatmap": _heatmap}


def draw(figure: dict, path: str, columns: int | None = None) -> str:
    """Draw a figure (the dict of :func:`fedpne_jax.figures.build`) into the PNG ``path``."""
    plt = pyplot()
    panels = figure["panels"]
    columns = columns or figure.get("columns") or min(len(panels), 4)
    rows = math.ceil(len(panels) / columns)
    width = figure.get("panel_width", 4.0)
    fig, axes = plt.subplots(rows, columns, figsize=(width * columns, 3.3 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        DRAW[panel["kind"]](ax, panel, plt)
        ax.set_title(panel["title"], fontsize=10)
        ax.set_xlabel(panel["xlabel"])
        ax.set_ylabel(panel["ylabel"])
        if panel["kind"] != "heatmap":
            xscale = panel.get("xscale", "linear")
            ax.set_xscale(xscale, **({"linthresh": panel.get("linthresh", 1.0)} if xscale == "symlog" else {}))
            if panel.get("xticks"):
                ax.set_xticks(panel["xticks"], [f"{v:g}" for v in panel["xticks"]])
            ax.set_yscale(panel.get("yscale", "linear"))
            ax.grid(alpha=0.3, which="both" if panel.get("xscale") == "log" else "major")
            if len(panel["series"]) + len(panel.get("lines", [])) > 8:
                # A long legend would cover the curves: beside the axes instead.
                ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
            else:
                ax.legend(fontsize=7, loc=panel.get("legend", "best"))
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(figure["title"], fontsize=11)
    lines = figure["title"].count("\n") + 1
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.22 * lines / (3.3 * rows)))     # room for the title's lines
    fig.savefig(path, dpi=figure.get("dpi", 90))
    plt.close(fig)
    return path


def _run_series(path: str) -> list[dict]:
    """Series of a ``fedpne run --output`` JSON file."""
    with open(path) as fh:
        data = json.load(fh)
    if "checkpoints" not in data or "per_seed" not in data:
        raise ValueError(f"{path!r} is not a result of 'fedpne run --output' (no checkpoints/per_seed)")
    curves = np.asarray(data["per_seed"]["curves"], float)
    algorithm = data["algorithm"]
    config = data["config"]
    label = registry.label(algorithm) + (f" M={config['num_clients']}" if "num_clients" in config else "")
    return [_series(algorithm, f"{label} ({config['objective']})", data["checkpoints"], curves)]


def _sweep_series(path: str) -> list[dict]:

    res = load_sweep(path, allow_partial=True)
    out = []
    varied = [k for k in sorted({k for c in res.configs for k in c})
              if k != "algorithm" and len({repr(c.get(k)) for c in res.configs}) > 1]
    for i, labels in enumerate(res.configs):
        done = res.done[i]
        if not done.any():
            continue
        name = registry.label(res.algorithms[i] or labels["algorithm"])
        extra = ", ".join(f"{k}={labels[k]}" for k in varied if labels.get(k) is not None)
        out.append(_series(res.algorithms[i] or labels["algorithm"], name + (f" ({extra})" if extra else ""),
                           res.checkpoints[i], res.curves[i][done]))
    return out


def _series(key, label, x, curves) -> dict:
    mean, std, err, n = stats(curves)
    return {"key": key, "label": label, "x": np.asarray(x).tolist(), "mean": mean.tolist(), "std": std.tolist(),
            "stderr": err.tolist(), "runs": int(n)}


def plot_results(paths, out: str, title: str | None = None, band: str = "std", xscale: str = "linear",
                 yscale: str = "linear") -> str:
    """Regret curves (mean and a band of ±1 ``band``: std or stderr) of run JSON files and sweep
    folders on one axes, written to the PNG ``out``."""
    if band not in ("std", "stderr"):
        raise ValueError(f"band must be 'std' or 'stderr', got {band!r}")
    series = []
    for path in paths:
        if os.path.isdir(path):
            series += _sweep_series(path)
        elif os.path.isfile(path):
            series += _run_series(path)
        else:
            raise ValueError(f"{path!r} is neither a run result (JSON file) nor a sweep folder")
    if not series:
        raise ValueError("nothing to plot: the results hold no finished runs")
    # Several series of one algorithm (e.g. M values) would share a colour: shades then.
    keys = [s["key"] for s in series]
    if len(set(keys)) < len(keys):
        for s in series:
            s["key"] = None
    panel = {"kind": "curves", "band": band, "title": "", "xlabel": "round t",
             "ylabel": "cumulative regret (per client for federated algorithms)", "xscale": xscale, "yscale": yscale,
             "series": series}
    figure = {"title": title or "Cumulative regret (mean ± 1 " + ("std" if band == "std" else "s.e.") + ")",
              "panels": [panel], "columns": 1}
    return draw(figure, out)
