"""Benchmarks of fedpne-jax: the Fed-PNE engine against the NumPy reference and a per-pull NumPy
simulation, then the sections of the other scripts here (scale-out, baselines, objectives).

    python scripts/bench.py [--quick] [--sections engine,asktell,perpull,scale,trees,federated,gp,objectives] [--out bench.json]

Prints a table and writes JSON.  All numbers of one invocation come from the same machine in the same
run, so the ratios (engine runs/s over reference runs/s) are the figures to quote; absolute times
move with the machine's load.  Objective: Garland with shift heterogeneity and gaussian:0.1 noise,
the paper's defaults otherwise.  Each engine row runs in a fresh process: its compile time is cold and
"peak MB" is that process's peak resident memory above what importing the package took.  The reference (tests/support/reference.py) is the same algorithm, one run at
a time, drawing every client's mean of n pulls exactly; the per-pull simulation draws every reward of
every round (timed on a few seeds and reported per run).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the project on the import path)

import fedpne_jax as fp  # noqa: E402
import objectives  # noqa: E402
from fedpne_jax.core import processor  # noqa: E402
from fedpne_jax.core.result import device_name  # noqa: E402
from fedpne_jax.core.run import compiled_memory  # noqa: E402
from tests.support import reference  # noqa: E402


def reference_rate(config, objective, runs: int, per_pull: bool) -> float:
    shifts = np.asarray(objective.data["shift"], np.float64)
    prob = reference.problem(objective.name, objective.num_clients, objective.dim, shifts=shifts)
    def one_run(rng):
        reference.fedpne(prob, config.horizon, c=config.c_value, noise="gaussian", sigma=config.noise_scale,
                         checkpoints=config.checkpoints, rng=rng, per_pull=per_pull)

    # One run first, untimed: a process's first run is up to a quarter slower (imports, NumPy's first
    # calls), which would flatter the engine's ratio.
    one_run(np.random.default_rng(1))
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for _ in range(runs):
        one_run(rng)
    return runs / (time.perf_counter() - start)


def engine_row(M: int, T: int, seeds: int, repeats: int) -> dict:
    """One engine measurement, in this process (run by main() in a fresh subprocess per row, so
    compile time is cold and the peak RSS belongs to this configuration alone)."""
    config = fp.FedPNEConfig(num_clients=M, horizon=T, noise="gaussian:0.1")
    objective = objectives.make_objective("garland", M)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    first = fp.run(config, objective, seeds=seeds)           # compiles (and grows capacity if needed)
    config = config.replace(capacity=first.capacity)
    best = harness.best_run_seconds(lambda: fp.run(config, objective, seeds=seeds), repeats)
    mem = compiled_memory(config, objective, seeds)
    xla_bytes = mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
    return dict(seeds=seeds, runs_per_second=seeds / best, seconds_per_run=best / seeds,
                compile_seconds=first.compile_seconds, capacity=first.capacity,
                peak_mb=(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base_rss) / 1024,
                xla_buffers_mb=xla_bytes / 2**20, final_regret_mean=float(first.final_regret.mean()))


def engine_row_subprocess(M: int, T: int, seeds: int, repeats: int) -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--row", str(M), str(T), str(seeds),
                          str(repeats)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# Further sections, one module each beside this script: rows(quick) -> list of dicts, and optionally
# table(rows) -> str (otherwise every row's keys are printed as columns).
SECTIONS = {"asktell": "bench_asktell", "perpull": "bench_perpull", "python": "bench_python_objectives", "scale": "bench_scale", "trees": "bench_trees", "federated": "bench_federated", "gp": "bench_gp",
            "objectives": "bench_objectives"}


def engine_rows(quick: bool) -> list[dict]:
    cases = [(10, 10**4), (100, 10**6)]
    seed_counts = [1, 100] if quick else [1, 100, 1000, 10000]
    rows = []
    for M, T in cases:
        config = fp.FedPNEConfig(num_clients=M, horizon=T, noise="gaussian:0.1")
        objective = objectives.make_objective("garland", M)
        ref_rate = reference_rate(config.replace(split="longest"), objective, 5 if quick else 50, False)
        pull_runs = 1 if (quick or T > 10**5) else 3
        pull_rate = reference_rate(config.replace(split="longest"), objective, pull_runs, True)
        rows.append(dict(M=M, T=T, implementation="numpy reference (exact means)", seeds=1,
                         runs_per_second=ref_rate, seconds_per_run=1 / ref_rate, speedup=1.0))
        rows.append(dict(M=M, T=T, implementation="numpy per-pull simulation", seeds=pull_runs,
                         runs_per_second=pull_rate, seconds_per_run=1 / pull_rate, speedup=pull_rate / ref_rate))
        for seeds in seed_counts:
            row = engine_row_subprocess(M, T, seeds, repeats=1 if quick else 3)
            row.update(M=M, T=T, implementation="fedpne-jax engine", speedup=row["runs_per_second"] / ref_rate)
            rows.append(row)
            print(f"  M={M} T={T} seeds={seeds}: {row['runs_per_second']:.0f} runs/s", file=sys.stderr)
    return rows


def engine_table(rows: list[dict]) -> str:
    header = f"{'M':>4} {'T':>8} {'implementation':<32} {'seeds':>6} {'runs/s':>10} {'ms/run':>9} " \
             f"{'x ref':>7} {'compile s':>9} {'peak MB':>8}"
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(f"{r['M']:>4} {r['T']:>8.0e} {r['implementation']:<32} {r['seeds']:>6} "
                     f"{r['runs_per_second']:>10.1f} {1e3 * r['seconds_per_run']:>9.3f} {r['speedup']:>7.1f} "
                     f"{r.get('compile_seconds', float('nan')):>9.2f} {r.get('peak_mb', float('nan')):>8.1f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small seed counts (a smoke run)")
    ap.add_argument("--out", default="bench.json")
    ap.add_argument("--sections", default="all",
                    help=f"comma-separated subset of engine,{','.join(SECTIONS)} (default: all)")
    ap.add_argument("--row", nargs=4, type=int, metavar=("M", "T", "SEEDS", "REPEATS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.row:
        print(json.dumps(engine_row(*args.row)))
        return 0
    names = ["engine", *SECTIONS] if args.sections == "all" else [s.strip() for s in args.sections.split(",")]
    unknown = [n for n in names if n != "engine" and n not in SECTIONS]
    if unknown:
        ap.error(f"unknown sections {unknown}; choose from engine,{','.join(SECTIONS)}")
    results = {}
    print(f"device: {device_name()}, {processor.describe()}")
    for name in names:
        if name == "engine":
            rows = engine_rows(args.quick)
            text = engine_table(rows)
        else:
            module = importlib.import_module(SECTIONS[name])
            rows = module.rows(args.quick)
            text = module.table(rows) if hasattr(module, "table") else harness.generic_table(rows)
        results[name] = rows
        print(f"\n## {name}\n{text}", flush=True)
    print(f"process peak RSS: {harness.peak_rss_mb():.0f} MB")
    harness.report(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
