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
import os
import sys

import numpy as np

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


def input_kind(path) -> str:
    """'sweep' for a folder, 'run' for a file: what ``fedpne plot`` and ``fedpne report`` read, or a
    ValueError naming ``path`` (one that does not exist is said so)."""
    if os.path.isdir(path):
        return "sweep"
    if os.path.isfile(path):
        return "run"
    if not os.path.lexists(path):
        raise ValueError(f"{os.fspath(path)!r} does not exist (a run result JSON file or a sweep folder)")
    raise ValueError(f"{os.fspath(path)!r} is neither a run result (JSON file) nor a sweep folder")


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
