"""``fedpne reproduce FIGURE|all``: run the studies a figure needs (resumable sweeps), then write its
data (JSON and CSV), its PNG and ``SUMMARY.md``.

Layout of ``--out`` (default ``results``)::

    sweeps/<study>/            one sweep folder per study (``<study>.quick`` in quick mode, ``.sN`` with
                               --seeds N): an interrupted reproduce resumes where it stopped
    figures/<figure>.json      the figure's numbers, the studies' definitions, device and timing
    figures/<figure>.csv       the same numbers as rows (panel, series, x, mean, std, stderr, runs)
    figures/<figure>.png       the plot (needs matplotlib: the ``plot`` extra)
    SUMMARY.md                 final regrets, winners, communication and the paper's claims, from the JSON
"""
from __future__ import annotations

import csv
import json
import os
import time

from fedpne_jax import figures as figs
from fedpne_jax.errors import MissingExtra


def sweep_dir(out: str, study: str, quick: bool, seeds: int | None) -> str:
    suffix = (".quick" if quick else "") + (f".s{seeds}" if seeds is not None else "")
    return os.path.join(out, "sweeps", study + suffix)


def resolve(names) -> list[str]:
    """Figure names from the command line ('all' or names); an unknown name is an error naming the choices."""
    names = [names] if isinstance(names, str) else list(names)
    if not names:
        raise ValueError(f"name a figure or 'all'; the figures are {', '.join(figs.NAMES)}")
    if "all" in names:
        return list(figs.NAMES)
    unknown = [n for n in names if n not in figs.FIGURES]
    if unknown:
        raise ValueError(f"unknown figure(s) {', '.join(map(repr, unknown))}; the figures are "
                         f"{', '.join(figs.NAMES)} or all")
    return list(dict.fromkeys(names))


def expected_minutes(names, quick: bool = False) -> float:
    """The full mode's measured run time on a 2-core CPU (studies shared by figures counted once)."""
    return 0.0 if quick else sum(figs.STUDIES[s].minutes for s in figs.studies_of(names))


def reproduce(names="all", out: str = "results", quick: bool = False, seeds: int | None = None,
              progress: bool = True, memory_gb: float | None = None, devices=None, plot: bool = True,
              log=print) -> dict:
    """Run the studies of the figures ``names`` into ``out``, then write each figure's data and PNG and
    the summary.  Returns {figure: path of its JSON}.  ``plot=False`` (or no matplotlib) skips the PNGs."""
    from fedpne_jax.load import load_sweep
    from fedpne_jax.result import device_name, versions
    from fedpne_jax.runner import run_sweep
    from fedpne_jax import sweep as sweep_lib, summary

    names = resolve(names)
    if seeds is not None and (isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 2):
        raise ValueError(f"--seeds must be an integer >= 2 (a standard deviation needs two runs), got {seeds!r}")
    studies = figs.studies_of(names)
    # Every definition is checked before anything runs.
    definitions = {s: sweep_lib.load(figs.STUDIES[s].definition(quick, seeds)) for s in studies}
    if plot:
        try:
            from fedpne_jax.plot import pyplot
            pyplot()
        except MissingExtra as err:
            log(f"fedpne reproduce: {err}; writing the data only")
            plot = False
    minutes = expected_minutes(names, quick)
    runs = sum(d.num_runs for d in definitions.values())
    log(f"fedpne reproduce: {', '.join(names)} — {len(studies)} studies, {runs:,} runs"
        + (f", about {minutes:.0f} min on a 2-core CPU (less where sweeps are already done)" if minutes else ""))
    seconds = {}
    results = {}
    for study in studies:
        path = sweep_dir(out, study, quick, seeds)
        start = time.perf_counter()
        report = run_sweep(definitions[study], path, memory_gb=memory_gb, devices=devices, progress=progress,
                           label=study)
        seconds[study] = time.perf_counter() - start
        if report.runs_computed:
            log(f"  {study}: {report.summary().splitlines()[0]}")
        results[study] = load_sweep(path)
    os.makedirs(os.path.join(out, "figures"), exist_ok=True)
    written = {}
    for name in names:
        data = figs.build(name, results)
        data["run"] = {"mode": "quick" if quick else "full", "seeds": seeds, "device": device_name(),
                       "versions": versions(), "seconds": {s: seconds[s] for s in figs.FIGURES[name].studies},
                       "command": _command(name, quick, seeds, out)}
        base = os.path.join(out, "figures", name)
        write_json(data, base + ".json")
        write_csv(data, base + ".csv")
        if plot:
            from fedpne_jax.plot import draw
            draw(data, base + ".png")
        written[name] = base + ".json"
        log(f"  wrote {base}.json, .csv" + (", .png" if plot else ""))
    path = summary.write(out)
    log(f"  wrote {path}")
    return written


def _command(name, quick, seeds, out) -> str:
    return " ".join(["fedpne reproduce", name] + (["--quick"] if quick else []) +
                    ([f"--seeds {seeds}"] if seeds is not None else []) + [f"--out {out}"])


def write_json(data: dict, path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1, default=_plain)
    os.replace(tmp, path)


def _plain(value):
    import numpy as np
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def write_csv(data: dict, path: str) -> None:
    rows = figs.rows(data)
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["figure", "panel", "series", "algorithm", "x", "mean", "std",
                                                "stderr", "runs"])
        writer.writeheader()
        # repr keeps every digit, so the file's numbers are the run's numbers.
        writer.writerows({k: repr(v) if isinstance(v, float) else v for k, v in row.items()} for row in rows)
    os.replace(tmp, path)
