"""Scale-out benchmark: chunked sweeps from 100 to 100,000 seeds, a hyper-parameter grid, devices.

    python scripts/bench_scale.py [--quick] [--out bench_scale.json] [--memory-gb 0.0625]

``rows(quick)`` returns the rows (scripts/bench.py imports it).  Garland, M = 10, T = 10^4,
gaussian:0.1, the paper's defaults, C = 100 checkpoints.  Every row runs in a fresh process, so its
compile time is cold and its peak RSS is its own:

* ``sweep``: ``fedpne_jax.run_sweep`` of S seeds into a temporary folder with a memory budget, so
  large S run in several calls (chunks); "ms/run exec" is execution only, "ms/run wall" is the whole
  sweep (compilation, sizing and writing the chunks included).  "XLA MiB" is the memory analysis of
  the program the calls used (per device), to compare with the budget; "RSS MiB" is the process's
  peak resident memory above what importing took (compilation included, loading the results not).
* ``grid``: ``fedpne_jax.run_grid`` of 20 values of c x 500 seeds, one program; "programs if
  separate" counts the distinct programs 20 separate runs would compile (one per depth-table size).
* ``devices``: the same sweep with the seeds sharded over 2 forced host devices
  (XLA_FLAGS=--xla_force_host_platform_device_count=2; on a CPU, devices share its cores).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402,F401  (the project on the import path)

M, T, CHECKPOINTS = 10, 10_000, 100
GRID_C = [round(0.02 + 0.01 * i, 2) for i in range(20)]
GRID_SEEDS = 500
DEFAULT_BUDGET_GB = 1 / 64


def _definition(seeds: int) -> dict:
    return {"objectives": ["garland"], "clients": [M], "horizon": [T], "seeds": seeds,
            "params": {"noise": "gaussian:0.1", "checkpoints": CHECKPOINTS}}


def _rss_mb(base_kb: int) -> float:
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base_kb) / 1024


def sweep_row(seeds: int, memory_gb: float, devices: str = "all", repeats: int = 1) -> dict:
    """One sweep row; with repeats > 1 the sweep runs again into fresh folders (its programs compiled)
    and the fastest execution counts, as this machine's load moves single timings by tens of percent."""
    import jax

    import fedpne_jax as fp
    from fedpne_jax.core.result import device_name

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with tempfile.TemporaryDirectory() as out:
        report = fp.run_sweep(_definition(seeds), out, memory_gb=memory_gb, devices=devices, progress=False)
        rss = _rss_mb(base)         # before loading: the loader holds the whole sweep in memory
        final = fp.load_sweep(out).final_regret
    for _ in range(repeats - 1):
        with tempfile.TemporaryDirectory() as out:
            again = fp.run_sweep(_definition(seeds), out, memory_gb=memory_gb, devices=devices, progress=False)
        if again.run_seconds < report.run_seconds:
            report.run_seconds = again.run_seconds
    rss = max(rss, _rss_mb(base))
    return dict(kind="sweep" if devices == "all" and jax.device_count() == 1 else "devices", seeds=seeds,
                device=device_name(), devices=len(jax.devices()) if devices == "all" else int(devices),
                calls=report.calls, runs_per_call=report.call_runs[0], compilations=report.compilations,
                compile_seconds=report.compile_seconds, run_seconds=report.run_seconds, wall_seconds=report.seconds,
                ms_per_run_exec=1e3 * report.run_seconds / seeds, ms_per_run_wall=1e3 * report.seconds / seeds,
                runs_per_second=seeds / report.run_seconds, budget_mb=memory_gb * 1024,
                xla_mb=max(report.call_bytes) / 2**20, rss_mb=rss, final_regret_mean=float(final.mean()))


def grid_row(seeds: int, repeats: int = 1) -> dict:
    import fedpne_jax as fp
    import objectives
    from fedpne_jax.algorithms.fedpne.plan import plan
    from fedpne_jax.core import executor
    from fedpne_jax.core.result import device_name

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    config = fp.FedPNEConfig(num_clients=M, horizon=T, noise="gaussian:0.1", checkpoints=CHECKPOINTS)
    configs = fp.grid_product(config, c=GRID_C)
    objective = objectives.make_objective("garland", M)
    traces = executor.trace_count()
    start = time.perf_counter()
    results = fp.run_grid(configs, objective, seeds=seeds)
    wall = time.perf_counter() - start
    compilations = executor.trace_count() - traces
    run_s = sum(r.run_seconds for r in results)
    compile_s = sum(r.compile_seconds for r in results)
    for _ in range(repeats - 1):
        run_s = min(run_s, sum(r.run_seconds for r in fp.run_grid(configs, objective, seeds=seeds)))
    separate = len({(plan(c).depth_limit, plan(c).initial_capacity) for c in configs})
    runs = seeds * len(configs)
    return dict(kind="grid", seeds=runs, device=device_name(), devices=1, grid_points=len(configs),
                seeds_per_point=seeds, compilations=compilations, programs_if_separate=separate,
                compile_seconds=compile_s, run_seconds=run_s, wall_seconds=wall, ms_per_run_exec=1e3 * run_s / runs,
                ms_per_run_wall=1e3 * wall / runs, runs_per_second=runs / run_s, rss_mb=_rss_mb(base),
                capacity=max(r.capacity for r in results))


def _subprocess(args: list[str], env_devices: int | None = None) -> dict:
    env = dict(os.environ)
    if env_devices:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={env_devices}"
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--row", *args], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def rows(quick: bool, memory_gb: float = DEFAULT_BUDGET_GB) -> list[dict]:
    """The benchmark's rows, each measured in a fresh process."""
    seed_counts = [100, 1000] if quick else [100, 1000, 10_000, 100_000]
    out = []
    for seeds in seed_counts:
        out.append(_subprocess(["sweep", str(seeds), str(memory_gb), "all", "1" if quick else "3"]))
        print(f"  sweep {seeds} seeds: {out[-1]['runs_per_second']:.0f} runs/s", file=sys.stderr)
    out.append(_subprocess(["grid", str(50 if quick else GRID_SEEDS), "1" if quick else "3"]))
    print(f"  grid: {out[-1]['runs_per_second']:.0f} runs/s", file=sys.stderr)
    if not quick:
        out.append(_subprocess(["sweep", "10000", str(memory_gb), "2", "3"], env_devices=2))
        print(f"  2 devices: {out[-1]['runs_per_second']:.0f} runs/s", file=sys.stderr)
    return out


def table(rows_: list[dict]) -> str:
    head = ["kind", "runs", "devices", "calls", "runs/call", "programs", "compile s", "ms/run exec", "ms/run wall",
            "runs/s", "XLA MiB", "budget MiB", "RSS MiB"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows_:
        programs = f"{r['compilations']}" + (f" (separate: {r['programs_if_separate']})" if "programs_if_separate" in r
                                             else "")
        cells = [r["kind"] + (f" {r['grid_points']} c x {r['seeds_per_point']}" if r["kind"] == "grid" else ""),
                 f"{r['seeds']:,}", str(r["devices"]), str(r.get("calls", 1)),
                 f"{r.get('runs_per_call', r['seeds']):,}",
                 programs, f"{r['compile_seconds']:.2f}", f"{r['ms_per_run_exec']:.4f}", f"{r['ms_per_run_wall']:.4f}",
                 f"{r['runs_per_second']:,.0f}", f"{r['xla_mb']:.1f}" if "xla_mb" in r else "–",
                 f"{r['budget_mb']:.0f}" if "budget_mb" in r else "–", f"{r['rss_mb']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small seed counts (a smoke run)")
    ap.add_argument("--out", default="bench_scale.json")
    ap.add_argument("--memory-gb", type=float, default=DEFAULT_BUDGET_GB, help="the sweeps' memory budget")
    ap.add_argument("--row", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.row:
        kind, *rest = args.row
        row = sweep_row(int(rest[0]), float(rest[1]), rest[2], int(rest[3])) if kind == "sweep" \
            else grid_row(int(rest[0]), int(rest[1]))
        print(json.dumps(row))
        return 0
    result = rows(args.quick, args.memory_gb)
    print(table(result))
    harness.report({"scale": result}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
