"""``fedpne export RESULTS... --format csv|ioh --out PATH`` (``fp.export``): run files and sweep folders
as one tidy CSV, one row per (configuration, seed, checkpoint), for pandas, R or any analysis tool; or
as IOHprofiler data, the format IOHanalyzer and iohinspector load (written by the ``ioh`` package's
own logger, ``ioh.logger.Analyzer``).

The CSV's columns, the IOHprofiler layout, and which of IOHanalyzer's analyses are exact on that
data: docs/guides/reports.md, section "fedpne export".
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import shutil
import sys
import tempfile

from fedpne_jax.core.errors import MissingExtra
from fedpne_jax.core.files import write_atomic, write_json
from fedpne_jax.experiments import analysis

FORMATS = ("csv", "ioh")
COLUMNS = ("problem", "configuration", "algorithm", "source", "seed", "base_seed", "round", "evaluations",
           "cumulative_regret", "best_so_far_regret", "simple_regret", "target_scale")


def tidy_rows(entries):
    for e in entries:
        for i in range(e.runs):
            seed = int(e.seeds[i]) if e.seeds.size else i
            for c, round_ in enumerate(e.checkpoints):
                yield (e.problem, e.label, e.algorithm, e.source, seed, e.base_seed, int(round_),
                       int(round_) * e.per_round, repr(float(e.curves[i, c])), repr(float(e.best[i, c])),
                       "" if math.isnan(e.simple[i, c]) else repr(float(e.simple[i, c])), repr(float(e.scale[i])))


def export(paths, out: str, fmt: str = "csv") -> int:
    """Write the runs of ``paths`` (run JSON files, sweep folders) to ``out`` in format ``fmt``: a CSV
    file (returns the rows written) or, for ``ioh``, a new or empty folder of IOHprofiler data
    (returns the runs written).  CSV values are written with every digit (repr), so they read back bit
    for bit; rows are streamed a configuration at a time, atomically (the file appears whole)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {list(FORMATS)}, got {fmt!r}")
    if fmt == "ioh":
        return export_ioh(paths, out)
    entries = analysis.load(list(paths))
    count = [0]

    def write(fh):
        for i, e in enumerate(entries):
            buffer = io.StringIO()
            writer = csv.writer(buffer, lineterminator="\n")
            if i == 0:
                writer.writerow(COLUMNS)
            for row in tidy_rows([e]):
                writer.writerow(row)
                count[0] += 1
            fh.write(buffer.getvalue().encode())

    write_atomic(out, write)
    return count[0]


def improvements(entry, i: int) -> list[tuple[int, float]]:
    """Run i's (evaluations, best-so-far regret) at every known improvement, in order: its checkpoints'
    values and its targets' first rounds (at the target's value; a round's events at its last
    evaluation, round x M), each value below the one before.  IOHprofiler data start every run at
    evaluation 1, so a run that knows nothing there starts with (1, the largest double): no bound yet
    (the logger writes inf as None, which readers drop, and with it the start of the run)."""
    per = entry.per_round
    known = [(int(r) * per, float(entry.best[i, c])) for c, r in enumerate(entry.checkpoints)]
    known += [(int(h) * per, float(t)) for h, t in zip(entry.hits[i], entry.targets) if h > 0]
    out: list[tuple[int, float]] = [] if min(known)[0] == 1 else [(1, sys.float_info.max)]
    for evaluations, value in sorted(known):
        if out and value >= out[-1][1]:
            continue
        if out and out[-1][0] == evaluations:
            out[-1] = (evaluations, value)
        else:
            out.append((evaluations, value))
    return out


def _problem(entry) -> tuple[str, int]:
    if entry.dim is None:
        raise ValueError(f"problem {entry.problem!r} names no dimension; the IOHprofiler format needs one")
    return entry.objective, entry.dim


def _folder(label: str, taken: set) -> str:
    name = re.sub(r"[^A-Za-z0-9_.=-]+", "_", label).strip("_.") or "configuration"
    folder, k = name, 1
    while folder in taken:
        k += 1
        folder = f"{name}-{k}"
    taken.add(folder)
    return folder


def export_ioh(paths, out: str) -> int:
    """The runs of ``paths`` as IOHprofiler data in the new or empty folder ``out`` (see the module
    docstring); returns the runs written.  Written into a staging folder beside ``out`` and moved
    into place when whole."""
    try:
        # The classes that ioh re-exports from its extension come from there: its stubs declare them there.
        import ioh
        from ioh.iohcpp import LogInfo, MetaData, OptimizationType, RealSolution
    except ImportError:
        raise MissingExtra('the IOHprofiler export needs the ioh package: pip install "fedpne-jax[ioh]" '
                           '(or pip install ioh)') from None
    if os.path.islink(out) or (os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out))):
        raise ValueError(f"out: {out!r} is not a new or empty folder; IOHprofiler data go to a folder of their own")
    entries = analysis.load(list(paths))
    for e in entries:
        if not (all(math.isfinite(v) for v in e.best.ravel()) and (e.hits >= 0).all()):
            raise ValueError(f"{e.label!r} on {e.problem}: its runs have no best-so-far regret (Fed-PNE with "
                             f"pull='uniform' does not record it), which the IOHprofiler format is made of")
    ids = {name: k + 1 for k, name in enumerate(sorted({_problem(e)[0] for e in entries}))}
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    stage = tempfile.mkdtemp(prefix=".fedpne-ioh-", dir=parent)
    try:
        runs, folders, taken = 0, {}, set[str]()
        for e in entries:
            if e.label not in folders:
                folders[e.label] = ioh.logger.Analyzer(
                    root=stage, folder_name=_folder(e.label, taken), algorithm_name=e.label,
                    algorithm_info=f"{e.algorithm} ({e.source})", triggers=[ioh.logger.trigger.ALWAYS])
                folders[e.label].full_precision = True
                folders[e.label].add_run_attribute("seed", 0.0)
            logger = folders[e.label]
            name, dim = _problem(e)
            optimum = RealSolution([0.0] * dim, 0.0)
            for i in range(e.runs):
                logger.attach_problem(MetaData(ids[name], 1, name, dim, OptimizationType.MIN))
                logger.set_run_attribute("seed", float(e.seeds[i]) if e.seeds.size else float(i))
                for evaluations, value in improvements(e, i):
                    logger.call(LogInfo(evaluations, value, value, value, value, value, value, [0.0] * dim, [],
                                            [], optimum, True))
                logger.reset()
                runs += 1
        for logger in folders.values():
            logger.close()
        _set_budgets(stage, entries)
        if os.path.isdir(out):
            os.rmdir(out)
        os.rename(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return runs


def _set_budgets(stage: str, entries) -> None:
    """Each run's evaluations in the JSON files (the logger, fed recorded improvements rather than a
    problem's calls, writes 0): T x M, which IOHanalyzer counts for a run that misses a target."""
    budgets: dict = {}
    for e in entries:
        name, dim = _problem(e)
        budgets.setdefault((e.label, name, dim), []).extend([e.horizon * e.per_round] * e.runs)
    for root, _, files in os.walk(stage):
        for file in files:
            if not (file.startswith("IOHprofiler_") and file.endswith(".json")):
                continue
            path = os.path.join(root, file)
            with open(path) as fh:
                meta = json.load(fh)
            for scenario in meta["scenarios"]:
                evals = budgets[(meta["algorithm"]["name"], meta["function_name"], scenario["dimension"])]
                if len(evals) != len(scenario["runs"]):
                    raise RuntimeError(f"{path}: {len(scenario['runs'])} runs written, {len(evals)} exported")
                for run, budget in zip(scenario["runs"], evals):
                    run["evals"] = budget
            write_json(path, meta)
