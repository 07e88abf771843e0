"""Reading a sweep's results folder as arrays with labelled axes.

    res = fp.load_sweep("out/")
    res.curves            # (config, seed, checkpoint) R(t)/M at the checkpoint rounds
    res.final_regret      # (config, seed)
    res.metrics["phases"] # (config, seed, ...)
    res.configs[i]        # what configuration i varies: objective, algorithm, num_clients, horizon, grid values
    res.seeds             # (seed,) seed indices;  res.checkpoints: (config, checkpoint) rounds
    res.mean, res.std, res.stderr           # (config,) final regret over seeds (std: ddof=1; stderr = std/sqrt(S))
    res.curve_mean, res.curve_std, res.curve_stderr   # (config, checkpoint)
    print(res.table())
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys

import numpy as np

from fedpne_jax.core import checkpoints as checkpoints_lib
from fedpne_jax.core import measures as measures_lib
from fedpne_jax.experiments.store import (
    INDEX_FILE,
    SWEEP_FILE,
    BadChunk,
    listed_file,
    read_index,
    read_json,
    scan_chunks,
    verify_chunk,
)
from fedpne_jax.experiments.sweep import SweepError
from fedpne_jax.plotting.labels import LABEL_ORDER


@dataclasses.dataclass(frozen=True)
class SweepResults:
    path: str
    hash: str
    definition: dict
    configs: list              # per config: the labels the sweep varies
    config_ids: list
    resolved: list             # per config: every resolved parameter
    algorithms: list           # per config: the result's algorithm ('fedpne', 'dp-fedpne', ...)
    seeds: np.ndarray          # (S,)
    checkpoints: np.ndarray    # (N, C) rounds
    curves: np.ndarray         # (N, S, C)
    final_regret: np.ndarray   # (N, S)
    metrics: dict              # name -> (N, S, ...)
    done: np.ndarray           # (N, S) bool: the run is in the folder (all True unless loaded partial)

    dims = ("config", "seed", "checkpoint")

    @property
    def complete(self) -> bool:
        return bool(self.done.all())

    @property
    def count(self) -> np.ndarray:
        """(N,) finished runs per config."""
        return self.done.sum(axis=1)

    @staticmethod
    def _mean(x, axis):
        # np.nanmean's arithmetic (the sum of the present values over their count), without its
        # "Mean of empty slice" warning for a configuration that has no finished run yet (NaN there).
        present = ~np.isnan(x)
        n = present.sum(axis=axis)
        total = np.where(present, x, 0.0).sum(axis=axis)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, total / n, np.nan)

    def _std(self, x, axis):
        # ddof = 1 as RunResult.regret_std: NaN with fewer than two runs, where it is undefined (0
        # would claim the runs have no spread).
        present = ~np.isnan(x)
        n = present.sum(axis=axis)
        deviation = np.where(present, x - np.expand_dims(self._mean(x, axis), axis), 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.sqrt((deviation ** 2).sum(axis=axis) / (n - 1))
        return np.where(n > 1, out, np.nan)

    @property
    def mean(self) -> np.ndarray:
        """(N,) mean final regret over the finished seeds; NaN for a configuration without any."""
        return self._mean(self.final_regret, 1)

    @property
    def std(self) -> np.ndarray:
        """(N,) standard deviation over seeds (ddof = 1, as RunResult.regret_std: NaN with fewer than
        two finished seeds)."""
        return self._std(self.final_regret, 1)

    @property
    def stderr(self) -> np.ndarray:
        """(N,) standard error of the mean, std / sqrt(S)."""
        return self.std / np.sqrt(np.maximum(self.count, 1))

    @property
    def curve_mean(self) -> np.ndarray:
        return self._mean(self.curves, 1)

    @property
    def curve_std(self) -> np.ndarray:
        return self._std(self.curves, 1)

    @property
    def curve_stderr(self) -> np.ndarray:
        return self.curve_std / np.sqrt(np.maximum(self.count, 1))[:, None]

    def find(self, **labels) -> list[int]:
        """Indices of the configurations whose labels match, e.g. ``find(objective="garland", c=0.1)``.
        A label no configuration has raises ValueError listing the known ones (a misspelt label
        would otherwise match nothing, and look like a value the sweep did not run)."""
        known = {k for c in self.configs for k in c}
        unknown = sorted(set(labels) - known)
        if unknown:
            raise ValueError(f"find: unknown label{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                             f"the labels of this sweep are {', '.join(map(repr, sorted(known)))}")
        return [i for i, c in enumerate(self.configs) if all(c.get(k) == v for k, v in labels.items())]

    def rows(self) -> list[dict]:
        """Per config: its labels and the final regret's mean, std, standard error and run count (the
        numbers :meth:`table` prints)."""
        return [dict(labels, mean=float(m), std=float(s), stderr=float(e), runs=int(n))
                for labels, m, s, e, n in zip(self.configs, self.mean, self.std, self.stderr, self.count)]

    def table(self) -> str:
        order = lambda k: (k not in LABEL_ORDER, LABEL_ORDER.index(k) if k in LABEL_ORDER else 0, k)
        names = sorted({k for c in self.configs for k in c}, key=order)
        # Columns for what varies; objective and algorithm always, so a one-config sweep has a label.
        keys = [k for k in names if k in ("objective", "algorithm")
                or len({repr(c.get(k)) for c in self.configs}) > 1]
        rows = [[str(c.get(k)) for k in keys] + [f"{m:.6g}", f"{e:.3g}", str(n)]
                for c, m, e, n in zip(self.configs, self.mean, self.stderr, self.count)]
        head = keys + ["final regret", "± s.e.", "runs"]
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
        line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))
        return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows])


def read_input(path, measures: bool = False) -> tuple:
    """(kind, data): what ``fedpne plot``, ``report`` and ``export`` read.  ('sweep', None) for a folder
    (read with :func:`load_sweep`), ('run', the checked content) for a run result file
    (:func:`read_run`: a damaged or hand-edited result is refused here, before anything is computed);
    a ValueError naming ``path`` otherwise (one that does not exist is said so)."""
    if os.path.isdir(path):
        return "sweep", None
    if os.path.isfile(path):
        data = read_run(path, measures)
        if data.get("partial") is True:
            print(f"fedpne: note: {os.fspath(path)!r} holds the {len(data['per_seed']['curves'])} seed(s) that "
                  f"finished before its run was interrupted (marked partial)", file=sys.stderr)
        return "run", data
    if not os.path.lexists(path):
        raise ValueError(f"{os.fspath(path)!r} does not exist (a run result JSON file or a sweep folder)")
    raise ValueError(f"{os.fspath(path)!r} is neither a run result (JSON file) nor a sweep folder")


def read_finished_part(path) -> SweepResults:
    """A sweep folder as plot, report and export read it: an unfinished one too, by its finished runs,
    with a note on standard error of what is missing, so that a figure or a table of part of a sweep
    does not pass for the whole of it."""
    res = load_sweep(path, allow_partial=True)
    if not res.complete:
        empty = int((~res.done.any(axis=1)).sum())
        print(f"fedpne: note: {os.fspath(path)!r} is an unfinished sweep: {int(res.done.sum())} of {res.done.size} "
              f"runs are done" + (f", and {empty} of its {len(res.configs)} configurations have none, so they are "
                                  f"left out" if empty else "") + "; rerun its sweep command to finish it",
              file=sys.stderr)
    return res


def read_run(path, measures: bool = False) -> dict:
    """The content of the ``fedpne run --output`` file ``path``, checked by :func:`check_run` (with
    ``measures``: also the best-so-far regret, hits and target scale that reports and exports read)."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (ValueError, RecursionError) as err:    # JSONDecodeError, UnicodeDecodeError; nested too deep
        raise ValueError(f"{path!r} is not a JSON file ({err or 'nested too deeply'}); give a 'fedpne run "
                         f"--output' file or a sweep folder") from None
    return check_run(data, path, measures)


def _show(value) -> str:
    """``value`` as JSON writes it (null, "x"), cut short: what an error message quotes."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_number(v) -> bool:
    return type(v) in (int, float)              # not bool or str; NaN and inf are numbers (a box without f*)


def _is_integer(v) -> bool:
    return type(v) is int or (type(v) is float and v.is_integer())


def check_run(data, path, measures: bool = False) -> dict:
    """``data``, the content of the run result file ``path``, if it holds what plot, report and export
    read, else a ValueError naming ``path`` and the field: ``algorithm`` (a string), ``config`` (an
    object; its ``horizon``, ``num_clients`` and ``dim`` positive integers where present, ``horizon``
    required with ``measures``), ``checkpoints`` (positive increasing integers, at most the horizon),
    ``per_seed.curves`` (one row per seed, one number per checkpoint; NaN allowed), and where present
    ``seeds``, ``base_seed`` and ``per_seed.final_regret``.  With ``measures`` also the best-so-far and
    simple regret (as the curves), ``hits`` (one integer per target) and ``target_scale`` (a number
    per seed), which results written before they were recorded lack (refused, saying so)."""
    path = os.fspath(path)
    if not isinstance(data, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(data), "a number")
        raise ValueError(f"{path!r} is not a result of 'fedpne run --output' (it holds {kind}, not a JSON object)")
    missing = [k for k in ("algorithm", "config", "checkpoints", "per_seed") if k not in data]
    if isinstance(data.get("per_seed"), dict) and "curves" not in data["per_seed"]:
        missing.append("per_seed.curves")
    if missing:
        raise ValueError(f"{path!r} is not a result of 'fedpne run --output' (no {', '.join(missing)})")

    def bad(field, problem):
        return ValueError(f"{path!r} is not a valid result of 'fedpne run --output': {field} {problem}")

    algorithm, config, rounds, per_seed = data["algorithm"], data["config"], data["checkpoints"], data["per_seed"]
    if not isinstance(algorithm, str) or not algorithm:
        raise bad("algorithm", f"must be an algorithm's name (a string), got {_show(algorithm)}")
    if not isinstance(config, dict):
        raise bad("config", f"must be an object (the resolved parameters), got {_show(config)}")
    if "objective" in config and not isinstance(config["objective"], str):
        raise bad("config.objective", f"must be the objective's name (a string), got {_show(config['objective'])}")
    for key in ("horizon", "num_clients", "dim"):
        value = config.get(key)
        if key in config and not (value is None and key == "dim") and not (
                isinstance(value, (int, float)) and _is_integer(value) and value > 0):
            raise bad(f"config.{key}", f"must be a positive integer, got {_show(value)}")
    if measures and config.get("horizon") is None:
        raise bad("config.horizon", "is missing (the number of rounds)")
    if not isinstance(per_seed, dict):
        raise bad("per_seed", f"must be an object (the per-seed results), got {_show(per_seed)}")
    if not (isinstance(rounds, list) and rounds and all(_is_integer(r) and r > 0 for r in rounds)
            and all(a < b for a, b in zip(rounds, rounds[1:]))):
        raise bad("checkpoints", f"must be a non-empty list of positive increasing integers (the checkpoint "
                                 f"rounds), got {_show(rounds)}")
    if config.get("horizon") is not None and rounds[-1] > config["horizon"]:
        raise bad("checkpoints", f"go to round {rounds[-1]:g}, past config.horizon = {config['horizon']}")
    C = len(rounds)

    def table(field, value, rows, columns, unit, why, integer=False):
        """``value`` must hold ``rows`` rows (any number if None) of ``columns`` numbers, one per ``unit``."""
        kind, ok = ("integer", _is_integer) if integer else ("number", _is_number)
        if not isinstance(value, list) or (rows is not None and len(value) != rows):
            count = f" ({len(value)} rows)" if isinstance(value, list) else ""
            rows_said = "" if rows is None else f" ({rows} rows, as per_seed.curves has)"
            raise bad(field, f"must be a list with one row per seed{rows_said}, got {_show(value)}{count}")
        for i, row in enumerate(value):
            if not isinstance(row, list):
                raise bad(f"{field}[{i}]", f"must be a list of {columns} {kind}s (one per {unit}), got {_show(row)}")
            if len(row) != columns:
                raise bad(f"{field}[{i}]", f"has {len(row)} values, but {why} (one value per {unit})")
            if not all(map(ok, row)):
                j = next(j for j, v in enumerate(row) if not ok(v))
                raise bad(f"{field}[{i}][{j}]", f"must be a{'n' if integer else ''} {kind}, got {_show(row[j])}")

    def vector(field, value, rows, integer=False):
        kind, ok = ("integer", _is_integer) if integer else ("number", _is_number)
        if not isinstance(value, list) or len(value) != rows:
            size = f" ({len(value)} values)" if isinstance(value, list) else ""
            raise bad(field, f"must be a list of {rows} {kind}s (one per seed, as per_seed.curves has rows), "
                             f"got {_show(value)}{size}")
        if not all(map(ok, value)):
            j = next(j for j, v in enumerate(value) if not ok(v))
            raise bad(f"{field}[{j}]", f"must be a{'n' if integer else ''} {kind}, got {_show(value[j])}")

    per_checkpoint = ("checkpoint", f"checkpoints lists {C} round{'s' if C > 1 else ''}")
    curves = per_seed["curves"]
    if isinstance(curves, list) and not curves:
        raise bad("per_seed.curves", "is empty: the file holds no finished runs")
    table("per_seed.curves", curves, None, C, *per_checkpoint)
    S = len(curves)
    if data.get("seeds") is not None:
        vector("seeds", data["seeds"], S, integer=True)
    if "base_seed" in data and not _is_integer(data["base_seed"]):
        raise bad("base_seed", f"must be an integer, got {_show(data['base_seed'])}")
    if "final_regret" in per_seed:
        vector("per_seed.final_regret", per_seed["final_regret"], S)
    if measures:
        lacking = [m for m in measures_lib.REPORTED if m != "simple_curve" and m not in per_seed]
        if lacking:
            raise ValueError(f"{path!r} has no {', '.join(lacking)}: it was written before the best-so-far "
                             f"regret was recorded; rerun it")
        table("per_seed.best_curve", per_seed["best_curve"], S, C, *per_checkpoint)
        if "simple_curve" in per_seed:
            table("per_seed.simple_curve", per_seed["simple_curve"], S, C, *per_checkpoint)
        targets = checkpoints_lib.TARGET_EXPONENTS.size
        table("per_seed.hits", per_seed["hits"], S, targets, "target: the first round reaching it",
              f"there are {targets} targets", integer=True)
        vector("per_seed.target_scale", per_seed["target_scale"], S)
    return data


def load_sweep(path: str | os.PathLike, allow_partial: bool = False) -> SweepResults:
    """The results folder ``path`` as a :class:`SweepResults`.  An unfinished sweep raises SweepError
    unless ``allow_partial`` (missing runs are then NaN and ``done`` is False there).

    Every chunk is verified (whole, and recording this sweep, its configuration and seed range): a bad
    one raises SweepError naming its file, or with ``allow_partial`` counts as missing.  A missing or
    damaged index.json is rebuilt in memory from the chunks that verify (rerunning the sweep writes it
    again)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a results folder (a str or os.PathLike), got {type(path).__name__} {path!r:.60}")
    path = os.fspath(path)
    sweep_file = os.path.join(path, SWEEP_FILE)
    if not os.path.exists(sweep_file):
        raise SweepError(f"{path!r} is not a sweep results folder (no {SWEEP_FILE})")
    meta = read_json(sweep_file)
    try:
        definition, configs, sweep_hash = meta["definition"], meta["configs"], meta["hash"]
        seeds = definition["seeds"]
        seeds = np.arange(seeds, dtype=np.int64) if isinstance(seeds, int) else np.asarray(seeds, np.int64)
        position = {c["id"]: c["index"] for c in configs}
    except (TypeError, KeyError, ValueError) as err:
        raise SweepError(f"{sweep_file!r} is damaged (no valid {err})") from None
    N, S = len(configs), seeds.size

    chunks, problem = read_index(path, sweep_hash)
    if chunks is None:
        chunks, rejected = scan_chunks(path, sweep_hash, seeds, position)
        if problem != "is missing" or chunks or rejected:
            skipped = "".join(f"; skipped {os.path.join(path, f)!r}: it {why}" for f, why in rejected)
            print(f"fedpne: warning: {os.path.join(path, INDEX_FILE)!r} {problem}; read the {len(chunks)} chunk(s) "
                  f"that verify (rerun the sweep to write the index again){skipped}", file=sys.stderr)
    done = np.zeros((N, S), bool)
    parts: list = []
    for name, entry in chunks.items():
        file = listed_file(entry)
        try:
            if file is None:
                raise BadChunk("has a malformed index entry")
            data, entry = verify_chunk(path, file, sweep_hash, seeds, position, listed=entry)
        except BadChunk as bad:
            where = os.path.join(path, file or name)
            if not allow_partial:
                raise SweepError(f"chunk {where!r} {bad.reason}; rerun the sweep to compute its runs again, or "
                                 f"load with allow_partial=True") from None
            print(f"fedpne: warning: chunk {where!r} {bad.reason}; its runs are read as missing", file=sys.stderr)
            continue
        i, a, b = position[entry["config"]], entry["start"], entry["end"]
        if done[i, a:b].any():
            raise SweepError(f"{path!r}: chunk {entry['file']} overlaps another chunk of its configuration")
        done[i, a:b] = True
        parts.append((i, a, b, data, entry.get("algorithm")))
    parts.sort(key=lambda p: (p[0], p[1]))
    if not done.all() and not allow_partial:
        raise SweepError(f"{path!r}: the sweep is not finished ({int((~done).sum())} of {N * S} runs missing); "
                         f"rerun it, or load with allow_partial=True")

    C = max((p[3]["curves"].shape[1] for p in parts), default=0)
    checkpoints = np.zeros((N, C), np.int64)
    curves = np.full((N, S, C), np.nan)
    final = np.full((N, S), np.nan)
    algorithms = [None] * N
    shapes: dict = {}
    for i, a, b, data, algorithm in parts:
        curves[i, a:b] = data["curves"]
        final[i, a:b] = data["final_regret"]
        checkpoints[i] = data["checkpoints"]
        algorithms[i] = algorithm
        for key in data:
            if key.startswith("metric."):
                shapes.setdefault(key[7:], set()).add((data[key].shape[1:], data[key].dtype.str))
    metrics: dict[str, np.ndarray | list[np.ndarray | None]] = {}
    for name, kinds in shapes.items():
        if len({len(shape) for shape, _ in kinds}) > 1:
            # Shapes of different rank cannot share one array: one array per configuration instead.
            per_config = [[p[3][f"metric.{name}"] for p in parts if p[0] == i and f"metric.{name}" in p[3]]
                          for i in range(N)]
            metrics[name] = [np.concatenate(x) if x else None for x in per_config]
            continue
        rest = tuple(max(s[0][d] for s in kinds) for d in range(len(next(iter(kinds))[0])))
        exact = len(kinds) == 1 and done.all() and all(f"metric.{name}" in p[3] for p in parts)
        dtype = np.dtype(next(iter(kinds))[1]) if exact else np.float64
        array = np.zeros((N, S) + rest, dtype) if exact else np.full((N, S) + rest, np.nan)
        for i, a, b, data, _ in parts:
            value = data.get(f"metric.{name}")
            if value is not None:
                array[(i, slice(a, b)) + tuple(slice(0, n) for n in value.shape[1:])] = value
        metrics[name] = array
    return SweepResults(path=path, hash=meta["hash"], definition=definition,
                        configs=[c["labels"] for c in configs], config_ids=[c["id"] for c in configs],
                        resolved=[c["config"] for c in configs], algorithms=algorithms, seeds=seeds,
                        checkpoints=checkpoints, curves=curves, final_regret=final, metrics=metrics, done=done)
