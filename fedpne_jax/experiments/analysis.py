"""Benchmark analyses of finished runs, as COCO and IOHanalyzer define them: fixed-budget quantiles,
fixed-target expected running times and success rates, runtime ECDFs, ranks and win rates.

They read what every algorithm records per run (cumulative, best-so-far and simple regret at the
checkpoints, and the first round reaching each of COCO's 51 targets: docs/concepts/measures.md).
Budgets and running times are counted in rounds, and in evaluations = M x rounds for a federated
algorithm.  ERT, the runtime ECDF and the other tables are defined in docs/guides/reports.md,
section "fedpne report".
"""
from __future__ import annotations

import dataclasses
import math
import os

import numpy as np

from fedpne_jax.core import checkpoints as checkpoints_lib
from fedpne_jax.core import measures, registry
from fedpne_jax.experiments.load import read_finished_part, read_input
from objectives import registry as objective_registry

QUANTILES = (0.1, 0.5, 0.9)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One configuration's finished runs."""

    label: str                   # distinct among the entries of a report
    algorithm: str
    objective: str               # the objective's name ("?" where the results do not say)
    dim: int | None              # its dimension (None where the results do not say)
    per_round: int               # objective evaluations per round (M for a federated algorithm)
    horizon: int
    checkpoints: np.ndarray      # (C,) rounds
    curves: np.ndarray           # (S, C) cumulative regret (per client for federated algorithms)
    best: np.ndarray             # (S, C) best-so-far regret
    hits: np.ndarray             # (S, 51) first round reaching each target, 0: not reached
    scale: np.ndarray            # (S,) the targets' scale
    simple: np.ndarray           # (S, C) simple regret (NaN in results written before it was recorded)
    source: str
    seeds: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))   # (S,) seed indices
    base_seed: int = 0

    @property
    def problem(self) -> str:
        """The objective and its dimension, e.g. "garland-1d": what the tables group runs by."""
        return f"{self.objective}-{'?' if self.dim is None else self.dim}d"

    @property
    def runs(self) -> int:
        return int(self.curves.shape[0])

    @property
    def targets(self) -> np.ndarray:
        """(51,) the targets (the scale is the objective's, the same in every run)."""
        return float(self.scale[0]) * 10.0 ** checkpoints_lib.TARGET_EXPONENTS


def _problem(config: dict) -> dict:
    """A run file's objective and dimension (``objective`` and ``dim`` of its config)."""
    dim = config.get("dim")
    return {"objective": str(config.get("objective", "?")), "dim": None if dim is None else int(dim)}


def _sweep_problem(labels: dict) -> dict:
    """A sweep configuration's objective and dimension (the sweep's ``dim``, else the objective's
    default, read from the registry without building it)."""
    dim = labels.get("dim")
    if dim is None:
        try:
            dim = objective_registry.spec(labels["objective"]).default_dim
        except (KeyError, TypeError, ValueError):
            dim = None
    return _problem({"objective": labels.get("objective", "?"), "dim": dim})


def _measures(per_seed: dict, where: str) -> tuple:
    """(best, hits, scale, simple); results written before the simple regret was recorded read with a
    NaN one, before the best-so-far regret not at all."""
    missing = [m for m in measures.REPORTED if m != "simple_curve" and m not in per_seed]
    if missing:
        raise ValueError(f"{where!r} has no {', '.join(missing)}: it was written before the best-so-far "
                         f"regret was recorded; rerun it")
    best = np.asarray(per_seed["best_curve"], float)
    simple = np.asarray(per_seed["simple_curve"], float) if "simple_curve" in per_seed else np.full_like(best, np.nan)
    return best, np.asarray(per_seed["hits"], np.int64), np.asarray(per_seed["target_scale"], float), simple


def _run_entry(path: str, data: dict) -> Entry:
    """The entry of a run result file's content ``data``, checked by
    :func:`fedpne_jax.experiments.load.read_run` (with its measures)."""
    config, algorithm = data["config"], data["algorithm"]
    best, hits, scale, simple = _measures(data["per_seed"], path)
    return Entry(label=registry.label(algorithm), algorithm=algorithm, **_problem(config),
                 per_round=int(config.get("num_clients", 1)), horizon=int(config["horizon"]),
                 checkpoints=np.asarray(data["checkpoints"], np.int64),
                 curves=np.asarray(data["per_seed"]["curves"], float), best=best, hits=hits, scale=scale,
                 simple=simple, source=path, seeds=np.asarray(data.get("seeds") or [], np.int64),
                 base_seed=int(data.get("base_seed", 0)))


def _sweep_entries(path: str) -> list[Entry]:
    res = read_finished_part(path)
    out = []
    # A label names what varies among one algorithm's configurations; the objective and its dimension
    # are the problem, named apart.
    varied = {a: [k for k in sorted({k for c in res.configs for k in c})
                  if k not in ("algorithm", "objective", "dim")
                  and len({repr(c.get(k)) for c in res.configs if c["algorithm"] == a}) > 1]
              for a in {c["algorithm"] for c in res.configs}}
    for i, labels in enumerate(res.configs):
        done = res.done[i]
        if not done.any():
            continue
        resolved, algorithm = res.resolved[i], res.algorithms[i] or labels["algorithm"]
        metrics = {m: res.metrics[m][i][done] for m in measures.REPORTED if m in res.metrics}
        best, hits, scale, simple = _measures(metrics, path)
        extra = ", ".join(f"{k}={labels[k]}" for k in varied[labels["algorithm"]] if labels.get(k) is not None)
        out.append(Entry(label=registry.label(algorithm) + (f" ({extra})" if extra else ""), algorithm=algorithm,
                         **_sweep_problem(labels), per_round=int(resolved.get("num_clients", 1)),
                         horizon=int(resolved["horizon"]), checkpoints=np.asarray(res.checkpoints[i], np.int64),
                         curves=res.curves[i][done], best=best, hits=hits, scale=scale, simple=simple, source=path,
                         seeds=np.asarray(res.seeds)[done], base_seed=int(res.definition.get("base_seed", 0))))
    return out


def load(paths) -> list[Entry]:
    """The entries of run JSON files and sweep folders; labels made distinct per problem (the source
    file's name appended where two coincide)."""
    entries: list[Entry] = []
    # Every run file is read and checked first, before any sweep is loaded or anything computed (a
    # damaged one is refused naming the file and the field).
    inputs = [(path, *read_input(path, measures=True)) for path in paths]
    for path, kind, data in inputs:
        if kind == "sweep":
            entries += _sweep_entries(path)
        else:
            entries.append(_run_entry(path, data))
    if not entries:
        raise ValueError("nothing to report: the results hold no finished runs")
    seen: dict = {}
    for e in entries:
        seen.setdefault((e.problem, e.label), []).append(e)
    out = []
    for e in entries:
        twins = seen[(e.problem, e.label)]
        if len(twins) > 1:
            e = dataclasses.replace(e, label=f"{e.label} [{os.path.basename(os.path.normpath(e.source))}]")
        out.append(e)
    return out


def ert(hits: np.ndarray, horizon: int) -> np.ndarray:
    """(targets,) COCO's expected running time in rounds: over runs, the rounds until the target was
    reached (its hit round) or the whole horizon when it was not, summed, over the successes."""
    hits = np.asarray(hits, np.int64)
    reached = hits > 0
    spent = np.where(reached, hits, horizon).sum(axis=0).astype(float)
    successes = reached.sum(axis=0)
    with np.errstate(divide="ignore"):
        return np.where(successes > 0, spent / np.maximum(successes, 1), math.inf)


def success_rate(hits: np.ndarray) -> np.ndarray:
    return (np.asarray(hits) > 0).mean(axis=0)


def ecdf(hits: np.ndarray, budgets) -> np.ndarray:
    """(B,) the fraction of (run, target) pairs reached within each budget of ``budgets`` (rounds)."""
    hits = np.asarray(hits, np.int64).reshape(-1)
    reached = np.sort(hits[hits > 0])
    return np.searchsorted(reached, np.asarray(budgets), side="right") / hits.size


def at_budget(entry: Entry, budget: int) -> int:
    """Index of the last checkpoint at or before ``budget`` rounds (ValueError if there is none)."""
    i = int(np.searchsorted(entry.checkpoints, budget, side="right")) - 1
    if i < 0:
        raise ValueError(f"budget {budget}: {entry.label} on {entry.problem} has no checkpoint at or before it "
                         f"(its first is round {int(entry.checkpoints[0])})")
    return i


def fixed_budget(entry: Entry, budgets) -> list[dict]:
    """Rows of quantiles (10, 50, 90 %) of simple, best-so-far and cumulative regret at each budget (the
    last checkpoint at or before it; NaN where the results hold no simple regret)."""
    rows = []
    for budget in budgets:
        i = at_budget(entry, budget)
        row = {"problem": entry.problem, "entry": entry.label, "budget_rounds": int(budget),
               "checkpoint_round": int(entry.checkpoints[i]), "evaluations": int(entry.checkpoints[i]) * entry.per_round,
               "runs": entry.runs}
        for name, values in (("simple", entry.simple[:, i]), ("best_so_far", entry.best[:, i]),
                             ("cumulative", entry.curves[:, i])):
            for q, v in zip(QUANTILES, np.quantile(values, QUANTILES)):
                row[f"{name}_q{int(q * 100)}"] = float(v)
        rows.append(row)
    return rows


def fixed_target(entry: Entry) -> list[dict]:
    """Per target: ERT in rounds and evaluations, successes and success rate."""
    times, rates = ert(entry.hits, entry.horizon), success_rate(entry.hits)
    return [{"problem": entry.problem, "entry": entry.label, "target_index": j, "target_exponent": float(e),
             "target": float(target), "ert_rounds": float(times[j]), "ert_evaluations": float(times[j]) * entry.per_round,
             "successes": int((entry.hits[:, j] > 0).sum()), "runs": entry.runs, "success_rate": float(rates[j])}
            for j, (e, target) in enumerate(zip(checkpoints_lib.TARGET_EXPONENTS, entry.targets))]


def final_best(entry: Entry) -> np.ndarray:
    """(S,) each run's best-so-far regret at its horizon."""
    return entry.best[:, -1]


def ranks(entries: list[Entry]) -> dict:
    """Per problem, each entry's rank by median final best-so-far regret (1 = best; ties share the
    mean rank), and the mean rank over the problems each entry ran on."""
    per_problem: dict = {}
    for problem in sorted({e.problem for e in entries}):
        group = [e for e in entries if e.problem == problem]
        medians = np.array([np.median(final_best(e)) for e in group])
        order = np.argsort(np.argsort(medians, kind="stable"), kind="stable").astype(float) + 1
        for value in np.unique(medians):                   # ties: the mean of their ranks
            order[medians == value] = order[medians == value].mean()
        per_problem[problem] = {e.label: float(r) for e, r in zip(group, order)}
    labels = list(dict.fromkeys(e.label for e in entries))
    mean = {label: float(np.mean([r[label] for r in per_problem.values() if label in r])) for label in labels}
    return {"per_problem": per_problem, "mean": mean}


def win_rates(entries: list[Entry]) -> tuple[list[str], np.ndarray]:
    """(labels, W): W[a, b] is the probability that a run of a ends with a smaller best-so-far regret
    than a run of b on the same problem (ties count one half), averaged over the problems both ran
    on; NaN where they share none."""
    labels = list(dict.fromkeys(e.label for e in entries))
    n = len(labels)
    total, count = np.zeros((n, n)), np.zeros((n, n))
    for problem in sorted({e.problem for e in entries}):      # a fixed order: the sums are the same every run
        group = {e.label: final_best(e) for e in entries if e.problem == problem}
        for a, x in group.items():
            for b, y in group.items():
                if a == b:
                    continue
                i, j = labels.index(a), labels.index(b)
                less = (x[:, None] < y[None, :]).mean() + 0.5 * (x[:, None] == y[None, :]).mean()
                total[i, j] += less
                count[i, j] += 1
    with np.errstate(invalid="ignore"):
        return labels, np.where(count > 0, total / np.maximum(count, 1), np.nan)
