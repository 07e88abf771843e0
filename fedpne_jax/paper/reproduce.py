"""``fedpne reproduce FIGURE|all``: run the studies a figure needs (resumable sweeps), then write its
data (JSON and CSV), its PNG and ``SUMMARY.md``.

``--out`` (default ``results``) holds ``sweeps/<study>/``, ``timing.json``, ``figures/<figure>.json``,
``.csv`` and ``.png``, ``reports/<figure>/`` and ``SUMMARY.md``; quick mode and ``--seeds N`` write
the same layout under ``OUT/quick``, ``OUT/seeds-N`` or ``OUT/quick-seeds-N``, so runs of different
sizes never mix.  What each file holds: docs/guides/paper-figures.md, section "fedpne reproduce".
"""
from __future__ import annotations

import csv
import io
import os
import sys

from fedpne_jax.core import sharding
from fedpne_jax.core.errors import MissingExtra
from fedpne_jax.core.files import write_atomic
from fedpne_jax.core.result import device_name, versions
from fedpne_jax.core.validation import is_int
from fedpne_jax.experiments import store, workers
from fedpne_jax.experiments import sweep as sweep_lib
from fedpne_jax.experiments.load import load_sweep
from fedpne_jax.experiments.report import REPORT_FILE
from fedpne_jax.experiments.report import report as benchmark_report
from fedpne_jax.experiments.runner import run_sweep
from fedpne_jax.experiments.store import read_json
from fedpne_jax.paper import figures as figs
from fedpne_jax.paper import summary
from fedpne_jax.paper.studies import STUDIES
from fedpne_jax.plotting import render as plotting


def folder(out: str, quick: bool, seeds: int | None) -> str:
    """Where a run of this size writes (see the module docstring)."""
    name = "-".join((["quick"] if quick else []) + ([f"seeds-{seeds}"] if seeds is not None else []))
    return os.path.join(out, name) if name else out


def resolve(names) -> list[str]:
    """Figure names from the command line ('all' and/or names); an unknown name is an error naming the choices."""
    names = [names] if isinstance(names, str) else list(names)
    if not names:
        raise ValueError(f"name a figure or 'all'; the figures are {', '.join(figs.NAMES)}")
    unknown = [n for n in names if n not in figs.FIGURES and n != "all"]
    if unknown:
        raise ValueError(f"unknown figure(s) {', '.join(map(repr, unknown))}; the figures are "
                         f"{', '.join(figs.NAMES)} or all")
    # 'all' is every figure but the galleries run by name (figures.ALL); named ones join it.
    return list(dict.fromkeys(n for name in names for n in (figs.ALL if name == "all" else (name,))))


def expected_minutes(names, seeds: int | None = None) -> float:
    """The full mode's measured study times summed (two studies at a time on a 2-core CPU, so about
    twice the wall time of ``--jobs 2``), scaled to ``seeds`` (studies shared by figures counted once)."""
    total = 0.0
    for s in figs.studies_of(names):
        study = STUDIES[s]
        total += study.minutes * (1.0 if seeds is None else seeds / study.full.seeds)
    return total


TIMING = "timing.json"      # per study: wall seconds spent computing it, summed over the sessions that did


def study_seconds(base: str) -> dict:
    """{study: wall seconds} recorded in ``base/timing.json`` (empty before the first study ran)."""
    path = os.path.join(base, TIMING)
    if not os.path.exists(path):
        return {}
    try:
        timing = read_json(path)
    except store.SweepError as err:
        timing, problem = None, str(err)
    else:
        problem = f"{path!r} is not a table of study seconds"
    if isinstance(timing, dict) and all(type(v) in (int, float) for v in timing.values()):
        return timing
    # The times are a note beside the studies, not results: a damaged file must not stop them, and
    # it is written again as they finish.
    print(f"fedpne: note: {problem}; the studies' times start afresh", file=sys.stderr)
    return {}


def reproduce(names="all", out: str = "results", quick: bool = False, seeds: int | None = None,
              progress: bool = True, memory_gb: float | None = None, devices=None, plot: bool = True,
              overwrite: bool = False, jobs: int | str = 1, log=print) -> dict:
    """Run the studies of the figures ``names``, writing each figure's data and PNG as soon as its
    studies are done, then the summary.  Returns {figure: path of its JSON}.  ``plot=False`` (or no
    matplotlib) writes the data only.  ``overwrite``: rerun a study whose folder holds another
    definition (one written by another version of the study) instead of refusing.  ``jobs``: studies
    computed at once in worker processes (``"auto"``: see :mod:`fedpne_jax.experiments.workers`),
    longest first; the numbers are the same for any count."""

    names = resolve(names)
    # Another command's folder would take the studies in beside its own files (its resume then
    # meets folders it never wrote): a sweep's, or a report's.
    for marker, what in ((store.SWEEP_FILE, "a sweep's"), (store.INDEX_FILE, "a sweep's"), (REPORT_FILE, "a report's")):
        if os.path.isfile(os.path.join(out, marker)):
            raise ValueError(f"--out: {out!r} is {what} folder (it holds {marker}); fedpne reproduce writes its "
                             f"studies into a folder of its own")
    if seeds is not None and (not is_int(seeds) or seeds < 2):
        raise ValueError(f"--seeds must be an integer >= 2 (a standard deviation needs two runs), got {seeds!r}")
    selected = sharding.select_devices(devices)
    jobs = workers.check_jobs(jobs, selected)
    studies = figs.studies_of(names)
    raw = {s: STUDIES[s].definition(quick, seeds) for s in studies}
    # A bad definition must fail now, not after hours of other studies.
    definitions = {s: sweep_lib.load(raw[s]) for s in studies}
    if plot:
        try:
            plotting.pyplot()
        except MissingExtra as err:
            log(f"fedpne reproduce: {err}; writing the data only")
            plot = False
    base = folder(out, quick, seeds)
    runs = sum(d.num_runs for d in definitions.values())
    jobs = min(jobs, len(studies))
    # Two studies at a time keep 2 cores busy; one at a time took 1.25 times as long (24:24 against 19:23).
    minutes = 0.0 if quick else expected_minutes(names, seeds) / 2 * (1.25 if jobs == 1 else 1.0)
    log(f"fedpne reproduce: {', '.join(names)} — {len(studies)} studies, {runs:,} runs into {base}"
        + (f"; about {minutes:.0f} min on a 2-core CPU (less where sweeps are already done)" if minutes else "")
        + (f"; {jobs} studies at a time" if jobs > 1 else ""))
    os.makedirs(os.path.join(base, "figures"), exist_ok=True)
    results: dict = {}
    written: dict = {}
    timing = study_seconds(base)

    def sweep_folder(study):
        return os.path.join(base, "sweeps", study)

    def finished(study, report):
        if report.runs_computed:
            # A study computed from nothing (new, or discarded by --overwrite) took this session's
            # time alone; only a resumed one adds to the earlier sessions'.
            earlier = timing.get(study, 0.0) if report.runs_before else 0.0
            timing[study] = earlier + report.seconds
            store.write_json(os.path.join(base, TIMING), timing)
            log(f"  {study}: {report.summary().splitlines()[0]}")
        results[study] = load_sweep(sweep_folder(study))
        for name in names:        # figures in the order asked, each once its studies are all done
            if name not in written and all(s in results for s in figs.FIGURES[name].studies):
                written[name] = _write_figure(name, results, timing, base, quick, seeds, out, plot, log)

    if jobs == 1:
        for study in studies:
            finished(study, run_sweep(definitions[study], sweep_folder(study), memory_gb=memory_gb, devices=selected,
                                      progress=progress, label=study, overwrite=overwrite))
    else:
        # Longest first, so that the last study to start is a short one.
        order = sorted(studies, key=lambda s: -STUDIES[s].minutes)
        with workers.Workers(jobs) as pool:
            pending = {pool.submit(raw[s], sweep_folder(s), memory_gb=memory_gb, devices=len(selected),
                                   progress=False, label=s, overwrite=overwrite): s for s in order}
            for future in pool.completed(pending):
                finished(pending[future], pool.result(future))
    log(f"  wrote {summary.write(base)}")
    return written


def _write_figure(name, results, timing, base, quick, seeds, out, plot, log) -> str:
    """The figure's JSON, CSV and PNG, and its report where it asks for one; returns the JSON's path."""
    data = figs.build(name, results)
    data["run"] = {"mode": "quick" if quick else "full", "seeds": seeds, "device": device_name(),
                   "versions": versions(), "command": _command(name, quick, seeds, out),
                   "seconds": {s: timing.get(s, 0.0) for s in figs.FIGURES[name].studies}}
    stem = os.path.join(base, "figures", name)
    # allow_nan=False: figures.stats refuses NaN already, and the file must stay valid JSON.
    store.write_json(stem + ".json", data, allow_nan=False)
    write_csv(data, stem + ".csv")
    if plot:
        plotting.draw(data, stem + ".png")
    log(f"  wrote {stem}.json, .csv" + (", .png" if plot else ""))
    if figs.FIGURES[name].report:
        files = benchmark_report([os.path.join(base, "sweeps", s) for s in figs.FIGURES[name].studies],
                                 os.path.join(base, "reports", name), plots=plot)
        log(f"  wrote {files[REPORT_FILE]} and {len(files) - 1} more files")
    return stem + ".json"


def _command(name, quick, seeds, out) -> str:
    return " ".join(["fedpne reproduce", name] + (["--quick"] if quick else []) +
                    ([f"--seeds {seeds}"] if seeds is not None else []) + [f"--out {out}"])


def write_csv(data: dict, path: str) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=["figure", "panel", "series", "algorithm", "x", "mean", "std",
                                                "stderr", "runs"], lineterminator="\n")
    writer.writeheader()
    # repr keeps every digit, so the file's numbers are the run's numbers.
    writer.writerows({k: repr(v) if isinstance(v, float) else v for k, v in row.items()} for row in figs.rows(data))
    text = buffer.getvalue().encode()
    write_atomic(path, lambda fh: fh.write(text))
