"""``fedpne plot``: the regret curves of run results (``fedpne run --output`` JSON files) and sweep
folders on one axes, :data:`PLOT_SIZE` inches (taller only when its legend needs more lines than
that holds).
"""
from __future__ import annotations

import numpy as np

from fedpne_jax.core import registry
from fedpne_jax.experiments.load import read_finished_part, read_input
from fedpne_jax.plotting.render import draw
from fedpne_jax.plotting.series import stats
from fedpne_jax.plotting.style import FULL_WIDTH

PLOT_SIZE = (FULL_WIDTH, 3.0)          # inches


def _run_series(path: str, data: dict) -> list[dict]:
    """Series of a ``fedpne run --output`` JSON file, its content checked (load.read_run)."""
    curves = np.asarray(data["per_seed"]["curves"], float)
    algorithm = data["algorithm"]
    config = dict(data["config"], algorithm=algorithm)
    label = registry.label(algorithm) + (f" M={config['num_clients']}" if config.get("num_clients") else "")
    objective = config.get("objective")
    return [_series(algorithm, label + (f" ({objective})" if objective else ""), data["checkpoints"], curves,
                    config, path)]


def _sweep_series(path: str) -> list[dict]:
    res = read_finished_part(path)
    out = []
    # A series is labelled by the parameters that differ between the configurations of its own
    # algorithm (and the objective's, which differ between all): not by what varies for another.
    by_algorithm: dict = {}
    for i, labels in enumerate(res.configs):
        by_algorithm.setdefault(res.algorithms[i] or labels["algorithm"], []).append(labels)
    varied = {name: [k for k in sorted({k for c in configs for k in c})
                     if k != "algorithm" and len({repr(c.get(k)) for c in configs}) > 1]
              for name, configs in by_algorithm.items()}
    for i, labels in enumerate(res.configs):
        done = res.done[i]
        if not done.any():
            continue
        algorithm = res.algorithms[i] or labels["algorithm"]
        extra = ", ".join(f"{k}={labels[k]}" for k in varied[algorithm] if labels.get(k) is not None)
        out.append(_series(algorithm, registry.label(algorithm) + (f" ({extra})" if extra else ""),
                           res.checkpoints[i], res.curves[i][done], dict(labels, algorithm=algorithm), path))
    return out


def _series(key, label, x, curves, config, source) -> dict:
    try:
        mean, std, err, n = stats(curves)
    except ValueError as error:         # which input holds it, as every other refusal says
        raise ValueError(f"{source!r}: {error}") from None
    return {"key": key, "label": label, "x": np.asarray(x).tolist(), "mean": mean.tolist(), "std": std.tolist(),
            "stderr": err.tolist(), "runs": int(n), "config": config, "source": source}


def results_figure(paths, title: str | None = None, band: str = "std", xscale: str = "linear",
                   yscale: str = "linear") -> dict:
    """The figure ``fedpne plot`` draws: one axes of regret curves (mean and a band of ±1 ``band``) of
    run JSON files and sweep folders, :data:`PLOT_SIZE` inches."""
    if band not in ("std", "stderr"):
        raise ValueError(f"band must be 'std' or 'stderr', got {band!r}")
    series = []
    for path in paths:
        kind, data = read_input(path)
        series += _sweep_series(path) if kind == "sweep" else _run_series(path, data)
    if not series:
        raise ValueError("nothing to plot: the results hold no finished runs")
    panel = {"kind": "curves", "band": band, "title": "", "xlabel": "round t",
             "ylabel": "cumulative regret (per client for federated algorithms)", "xscale": xscale, "yscale": yscale,
             "series": series, "shades": True}
    figure = {"title": title or "Cumulative regret (mean ± 1 " + ("std" if band == "std" else "s.e.") + ")",
              "panels": [panel], "columns": 1, "width": PLOT_SIZE[0], "height": PLOT_SIZE[1],
              "row_height": PLOT_SIZE[1] - 0.3}
    return figure


def plot_results(paths, out: str, title: str | None = None, band: str = "std", xscale: str = "linear",
                 yscale: str = "linear") -> str:
    """Regret curves (mean and a band of ±1 ``band``: std or stderr) of run JSON files and sweep
    folders on one axes, written to exactly ``out`` (PNG unless its extension names another format)."""
    return draw(results_figure(paths, title, band, xscale, yscale), out)
