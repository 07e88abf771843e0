"""Running a sweep into its results folder: groups, chunk sizes from a memory budget, resumption.

Configurations that share an algorithm, an objective and a static key (see :mod:`fedpne_jax.core.grid`)
form a group; a group's runs, (configuration, seed) pairs, go through one compiled program in calls
of R runs.  R comes from the memory budget: XLA's memory analysis of the program for all of the
group's pending runs (arguments + outputs + temporaries of one device) is compared with the budget,
and R shrinks in proportion until it fits (usually one compilation, two when the budget binds; the
program that fits is the one the calls then use).  ``--chunk-runs`` sets R directly.  Every call is
padded to R runs, so a group compiles once however many calls it takes.  A configuration's S seeds
are cut into equal chunks of at most R seeds at fixed positions, a call packs as many chunks as fit,
and the calls are balanced (the fewest calls, then the smallest R), so padding wastes little.  Each
call's chunks are written as soon as it finishes (see :mod:`fedpne_jax.experiments.store`); a rerun skips the
finished ones and fills only the gaps.

Chunk boundaries never change a number: seed i's key is fold_in(key(base_seed), i) wherever it runs.
"""
from __future__ import annotations

import dataclasses
import json
import sys
import time
import warnings

import jax
import numpy as np
from jax.experimental import multihost_utils

from fedpne_jax.core import executor, host_devices, sharding
from fedpne_jax.core import run as runs
from fedpne_jax.core.diagnostics import DegenerateRunWarning
from fedpne_jax.core.grid import group_indices
from fedpne_jax.core.validation import is_int
from fedpne_jax.experiments import sweep as sweep_lib
from fedpne_jax.experiments.store import Store, check_writable


@dataclasses.dataclass
class Report:
    """What a :func:`run_sweep` call did."""

    path: str
    configs: int
    runs: int                  # configurations x seeds
    runs_before: int           # already in the folder when the call started
    runs_computed: int = 0
    chunks_written: int = 0
    calls: int = 0
    compilations: int = 0
    seconds: float = 0.0           # wall time of the whole call
    compile_seconds: float = 0.0   # compiling the calls' programs (sizing included)
    run_seconds: float = 0.0       # executing the calls
    budget_bytes: int = 0
    call_runs: list = dataclasses.field(default_factory=list)     # R per group that ran
    call_bytes: list = dataclasses.field(default_factory=list)    # XLA bytes per device of each group's program
    rejected: list = dataclasses.field(default_factory=list)      # (file, reason): chunks that failed verification
    warnings: list = dataclasses.field(default_factory=list)      # "labels: warning", once per configuration

    @property
    def runs_per_second(self) -> float:
        return self.runs_computed / self.seconds if self.seconds > 0 else float("inf")

    def summary(self) -> str:
        peak = max(self.call_bytes, default=0)
        rejected = f" ({len(self.rejected)} damaged or foreign chunk(s) rejected)" if self.rejected else ""
        return (f"sweep {self.path}: {self.configs} configurations, {self.runs} runs; {self.runs_before} were done"
                f"{rejected}, {self.runs_computed} computed in {self.calls} call(s) ({self.chunks_written} chunks, "
                f"{self.compilations} compilation(s)) in {self.seconds:.1f} s, {self.runs_per_second:,.0f} runs/s; "
                f"largest program {executor.format_bytes(peak)} per device (budget "
                f"{executor.format_bytes(self.budget_bytes)})")


def missing(covered: list[tuple[int, int]], total: int) -> list[tuple[int, int]]:
    """The parts of [0, total) that no range of ``covered`` holds."""
    gaps, at = [], 0
    for start, end in sorted(covered):
        if start > at:
            gaps.append((at, start))
        at = max(at, end)
    if at < total:
        gaps.append((at, total))
    return gaps


def pieces(gaps: list[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """``gaps`` cut at multiples of ``size``: the same chunks on every rerun with the same size."""
    out = []
    for start, end in gaps:
        while start < end:
            stop = min(end, (start // size + 1) * size)
            out.append((start, stop))
            start = stop
    return out


def pack(items: list, sizes: list[int], limit: int) -> list[list]:
    """Consecutive items grouped so that each group's sizes sum to at most ``limit``."""
    calls: list[list] = []
    current: list = []
    used = 0
    for item, size in zip(items, sizes):
        if current and used + size > limit:
            calls.append(current)
            current, used = [], 0
        current.append(item)
        used += size
    if current:
        calls.append(current)
    return calls


def plan(entries, gaps: dict, S: int, limit: int, devices: int) -> tuple[int, list]:
    """(R, calls) for a group's missing runs with at most ``limit`` runs per call: each call a list of
    (entry position, start, end) pieces.  Chunks are equal shares of a configuration's S seeds (at most
    ``limit`` each), and calls are balanced (the fewest calls, then the smallest R), so padding the
    last call to R wastes little."""
    limit = sharding.padded_size(limit, devices)
    width = min(S, limit)
    width = -(-S // -(-S // width))
    work = [(g, a, b) for g, e in enumerate(entries) for a, b in pieces(gaps[e.id], width)]
    sizes = [b - a for _, a, b in work]
    count = len(pack(work, sizes, limit))
    lo, hi = max(sizes), limit
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if len(pack(work, sizes, mid)) <= count else (mid + 1, hi)
    calls = pack(work, sizes, lo)
    return sharding.padded_size(max(sum(b - a for _, a, b in c) for c in calls), devices), calls


def call_size(name, configs, objective, entries, gaps, S: int, budget: int, devices: tuple):
    """(R, calls, bytes per device of the program) with every pending run in one call if XLA's memory
    analysis says it fits ``budget`` bytes per device, else fewer per call, shrunk in proportion
    (memory grows about linearly with the runs) until it fits.  At least one run per device."""
    limit = sum(b - a for e in entries for a, b in gaps[e.id])
    n = len(host_devices.share(devices, limit))      # the devices a call of them all uses
    planned = {}

    def plan_runs(limit):
        R, planned["calls"] = plan(entries, gaps, S, limit, n)
        return R

    R, need = executor.fit_runs(limit, budget, n, lambda R: runs.pairs_memory(configs, objective, R, devices=devices),
                              plan=plan_runs)
    calls = planned["calls"]
    if need > budget:
        print(f"fedpne: warning: {R // n} run(s) per device need {executor.format_bytes(need)}, above the memory "
              f"budget of {executor.format_bytes(budget)}", file=sys.stderr)
    return R, calls, need


class Progress:
    """A tqdm bar (runs done, runs/s, ETA) when tqdm is installed, else a line on stderr every few seconds."""

    def __init__(self, total: int, initial: int, enabled: bool, label: str = "sweep"):
        self.total, self.done, self.enabled, self.label = total, initial, enabled, label
        self.bar = None
        self.start, self.last, self.initial = time.perf_counter(), 0.0, initial
        if not enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            print("fedpne: (pip install tqdm, or the 'progress' extra, for a progress bar)", file=sys.stderr)
            return
        self.bar = tqdm(total=total, initial=initial, unit="run", unit_scale=total >= 10_000, desc=label,
                        smoothing=0.05, file=sys.stderr, dynamic_ncols=True)

    def update(self, runs: int) -> None:
        self.done += runs
        if self.bar is not None:
            self.bar.update(runs)
            return
        now = time.perf_counter()
        if self.enabled and (now - self.last > 5.0 or self.done == self.total):
            self.last = now
            rate = (self.done - self.initial) / max(now - self.start, 1e-9)
            eta = (self.total - self.done) / rate if rate > 0 else float("inf")
            print(f"{self.label}: {self.done}/{self.total} runs, {rate:,.0f} runs/s, ETA {eta:,.0f} s", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _slice(result, rows: slice) -> dict:
    return {"seeds": result.seeds[rows], "final_regret": result.final_regret[rows], "curves": result.curves[rows],
            "checkpoints": result.checkpoints, "metrics": {k: v[rows] for k, v in result.metrics.items()},
            "algorithm": result.algorithm}


def run_sweep(definition, out, *, memory_gb: float | None = None, devices=None, progress: bool = True,
              chunk_runs: int | None = None, overwrite: bool = False, repair: bool = False,
              label: str = "sweep") -> Report:
    """Run (or finish) a sweep into the folder ``out``.

    ``definition``: a dict, a TOML/JSON path or a :class:`fedpne_jax.experiments.sweep.Sweep`.  ``memory_gb``: the
    budget for one call's XLA buffers per device (default 2).  ``chunk_runs``: runs per call, instead
    of sizing calls from the budget.  ``devices``: see :func:`fedpne_jax.core.sharding.select_devices`.
    ``overwrite``: discard the results of another definition in ``out`` instead of refusing.
    ``repair``: rebuild index.json from the chunk files even if it looks sound (a missing or damaged
    index is rebuilt anyway; listed chunks are always verified, bad ones named on stderr and computed
    again).  ``label``: the progress bar's name.
    A full disk or an unwritable folder raises :class:`fedpne_jax.experiments.sweep.SweepWriteError`
    (a SweepError and an OSError) naming the file.  KeyboardInterrupt (Ctrl-C) propagates; every
    chunk finished before it is in the folder and indexed, so rerunning resumes.
    Multi-host: every process calls this with the same arguments; process 0 writes the folder, which
    every process must be able to read (a shared file system).
    """

    start_time = time.perf_counter()
    sweep = sweep_lib.load(definition)
    budget = runs.memory_budget(memory_gb)
    if chunk_runs is not None and (not is_int(chunk_runs) or chunk_runs < 1):
        raise sweep_lib.SweepError(f"chunk_runs must be a positive integer, got {chunk_runs!r}")
    selected = sharding.select_devices(devices)
    writer = jax.process_index() == 0
    if writer:
        check_writable(out)

    ids, base_seed = sweep.seed_ids, sweep.base_seed
    S = ids.size
    built: dict = {}

    def objective_of(entry):
        key = json.dumps(entry.objective, sort_keys=True)
        if key not in built:
            built[key] = entry.make_objective(shared_with=sweep_lib.shared_with(sweep, entry))
        return key, built[key]

    keys = []
    for entry in sweep.entries:
        key, objective = objective_of(entry)
        try:
            runs.check_inputs(entry.config, objective)
        except ValueError as err:
            raise sweep_lib.SweepError(f"sweep configuration {entry.index} ({entry.labels}): {err}") from None
        keys.append((entry.algorithm, key, runs.static_key(entry.config, objective)))

    store = _open_store(out, sweep, overwrite, writer, repair)
    gaps = {e.id: missing(store.covered(e.id), S) for e in sweep.entries}
    done = sweep.num_runs - sum(b - a for g in gaps.values() for a, b in g)
    report = Report(path=store.path, configs=len(sweep.entries), runs=sweep.num_runs, runs_before=done,
                    budget_bytes=budget, rejected=list(store.rejected))
    traces, compiled = executor.trace_count(), executor.compile_seconds()
    bar = None
    try:
        bar = Progress(sweep.num_runs, done, progress and writer, label)
        for members in group_indices(keys):
            entries = [sweep.entries[i] for i in members]
            pending = sum(b - a for e in entries for a, b in gaps[e.id])
            if not pending:
                continue
            name, objective = entries[0].algorithm, built[keys[members[0]][1]]
            configs = [e.config for e in entries]
            if chunk_runs is not None:
                R, calls = plan(entries, gaps, S, chunk_runs, len(selected))
                need = 0
            else:
                R, calls, need = call_size(name, configs, objective, entries, gaps, S, budget, selected)
            report.call_runs.append(R)
            report.call_bytes.append(need)
            for call in calls:
                grid_index = np.concatenate([np.full(b - a, g, np.int64) for g, a, b in call])
                seeds = np.concatenate([ids[a:b] for _, a, b in call])
                with warnings.catch_warnings():      # kept per configuration below, with its labels
                    warnings.simplefilter("ignore", DegenerateRunWarning)
                    results = runs.run_pairs(configs, objective, grid_index, seeds, base_seed, devices=selected,
                                             pad_to=R, check=False)
                cursor = [0] * len(entries)
                chunks = []
                for g, a, b in call:
                    rows = slice(cursor[g], cursor[g] + b - a)
                    cursor[g] += b - a
                    result = results[g]
                    extra = {"capacity": result.config.get("capacity"), "run_seconds": result.run_seconds * (b - a)
                             / result.num_seeds, "compile_seconds": result.compile_seconds * (b - a) / result.num_seeds,
                             "warnings": list(result.warnings)}
                    labels = ", ".join(f"{k}={v}" for k, v in entries[g].labels.items())
                    report.warnings.extend(w for w in (f"{labels}: {w}" for w in result.warnings)
                                           if w not in report.warnings)
                    chunks.append((entries[g].id, a, b, _slice(result, rows), extra))
                store.write_chunks(chunks)
                report.run_seconds += sum(r.run_seconds for r in results if r is not None)
                report.calls += 1
                report.chunks_written += len(call)
                report.runs_computed += grid_index.size
                bar.update(grid_index.size)
    finally:
        if bar is not None:
            bar.close()
        store.close()
        report.compilations = executor.trace_count() - traces
        report.compile_seconds = executor.compile_seconds() - compiled
        report.seconds = time.perf_counter() - start_time
    return report


def _open_store(out, sweep, overwrite, writer, repair) -> Store:
    if jax.process_count() == 1:
        return Store(out, sweep, overwrite=overwrite, writer=writer, repair=repair)
    # Process 0 creates, verifies and repairs the folder before the others read its index.
    store = Store(out, sweep, overwrite=overwrite, writer=True, repair=repair) if writer else None
    multihost_utils.sync_global_devices("fedpne sweep: results folder ready")
    return store or Store(out, sweep, writer=False)
