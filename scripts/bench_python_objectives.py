"""Benchmark of objectives evaluated on the host (objectives.python) against the same ones in JAX.

    python scripts/bench_python_objectives.py [--quick] [--out bench_python_objectives.json]

* Garland, M clients with heterogeneity 'none', gaussian:0.1 noise: Fed-PNE (the aggregate sampler,
  one site; and the client sampler, two sites) and HCT, each with Garland written in JAX
  (``objectives.make_objective``), the same NumPy function through ``from_python`` and a
  PyXAB-style object (``f`` on one point, PyXAB's own Garland when PyXAB is installed) through
  ``from_pyxab``.  Columns: compile and run seconds of one ``fp.run`` call for all seeds (the
  second call, compiled), the host calls of that call (``objectives.python.stats``: one per
  site per phase, one per HCT round), the values returned and the distinct points the Python
  function evaluated, the seconds spent on the host, the cost per host call ((run s - JAX run s) /
  calls), and the largest |final regret - JAX's| over the seeds (float64 against float32 values).
* landmine (M = 4, seed 0): the JAX SMO solver against landmine-sklearn (scikit-learn's SVC through
  from_python; only when scikit-learn is installed, the svm extra): a short noise-free Fed-PNE run
  of each (seconds, host calls, final regret and recommendation), and the AUCs of every client at
  a grid of (C, gamma) points (agreement; evaluations per second, the JAX batch compiled and timed
  on its second call).

``rows(quick)`` returns the rows and ``table(rows)`` formats them; ``--quick`` stays under a minute
on 2 CPU cores.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the project on the import path)
import jax  # noqa: E402

import fedpne_jax as fp  # noqa: E402
import objectives  # noqa: E402
from fedpne_jax.algorithms.trees.hct import HCTConfig  # noqa: E402
from fedpne_jax.core.result import device_name  # noqa: E402
from objectives import python as pyobj  # noqa: E402
from objectives.synthetic import GARLAND_F_STAR  # noqa: E402


def garland_np(X):
    x = X[:, 0]
    return x * (1.0 - x) * (4.0 - np.sqrt(np.abs(np.sin(60.0 * x))))


class GarlandPyXAB:
    """PyXAB's interface (used when PyXAB itself is not installed): f on one point, fmax = 1."""
    fmax = 1

    def f(self, x):
        x = x[0]
        return x * (1 - x) * (4 - np.sqrt(np.abs(np.sin(60 * x))))


def pyxab_garland():
    try:
        from PyXAB.synthetic_obj.Garland import Garland
        return Garland(), "PyXAB Garland"
    except ImportError:
        return GarlandPyXAB(), "PyXAB-style class"


def garland_objectives(M: int) -> list[tuple[str, object]]:
    target, label = pyxab_garland()
    return [("jax", objectives.make_objective("garland", M, heterogeneity="none")),
            ("from_python", pyobj.from_python(garland_np, 0.0, 1.0, GARLAND_F_STAR, name="garland-python",
                                              num_clients=M)),
            (f"from_pyxab ({label})", objectives.from_pyxab(target, 0.0, 1.0, f_star=GARLAND_F_STAR, num_clients=M))]


def _timed(run):
    """(result of the second call, compile seconds of the first): the run is compiled once."""
    first = run()
    second = run()
    return second, first.compile_seconds


def _host(obj) -> dict:
    try:
        return pyobj.stats(obj)
    except ValueError:                                        # a JAX objective
        return {}


def garland_rows(quick: bool) -> list[dict]:
    M, T_fed, T_hct, seeds = (4, 2000, 500, 8) if quick else (10, 10_000, 2000, 100)
    cases = [("fedpne", "aggregate", fp.FedPNEConfig(num_clients=M, horizon=T_fed, checkpoints=10)),
             ("fedpne", "client", fp.FedPNEConfig(num_clients=M, horizon=T_fed, checkpoints=10, sampling="client")),
             ("hct", "-", HCTConfig(horizon=T_hct, checkpoints=10))]
    out = []
    objs = garland_objectives(M)
    for algorithm, sampling, config in cases:
        jax_row = None
        for impl, obj in objs:
            def run(impl=impl, obj=obj, config=config):
                if impl != "jax":
                    pyobj.stats(obj, reset=True)
                return fp.run(config, obj, seeds=seeds, devices=1)
            result, compile_s = _timed(run)
            host = _host(obj)
            row = dict(section="garland", algorithm=algorithm, sampling=sampling, objective=impl, M=M,
                       T=config.horizon, seeds=seeds, compile_seconds=compile_s, run_seconds=result.run_seconds,
                       host_calls=host.get("global_calls", 0) + host.get("local_calls", 0),
                       values=host.get("points", 0), distinct_points=host.get("distinct_points", 0),
                       host_seconds=host.get("seconds", 0.0), final_regret_mean=float(result.final_regret.mean()))
            if impl == "jax":
                jax_row, jax_final = row, result.final_regret
                row.update(seconds_per_call=float("nan"), max_regret_diff=0.0)
            else:
                calls = max(row["host_calls"], 1)
                row.update(seconds_per_call=(row["run_seconds"] - jax_row["run_seconds"]) / calls,
                           max_regret_diff=float(np.max(np.abs(result.final_regret - jax_final))))
            out.append(row)
            print(f"  garland {algorithm} {sampling} {impl}: {row['run_seconds']:.3f} s, {row['host_calls']} calls",
                  file=sys.stderr, flush=True)
    return out


LANDMINE_RUN = dict(horizon=64, noise="none", nu=0.01, c=0.01, checkpoints=4)


def landmine_rows(quick: bool) -> list[dict]:
    """The JAX SMO landmine against landmine-sklearn (skipped without scikit-learn)."""
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return [dict(section="landmine", objective="landmine-sklearn", skipped="scikit-learn is not installed "
                     "(pip install \"fedpne-jax[svm]\")")]
    M, seeds = 4, 1 if quick else 4
    config = fp.FedPNEConfig(num_clients=M, **(LANDMINE_RUN if quick else dict(LANDMINE_RUN, horizon=500)))
    n_side = 3 if quick else 6
    grid = np.array([(C, g) for C in np.logspace(-4, 1, n_side) for g in np.logspace(-2, 1, n_side)], np.float32)
    out, values = [], {}
    for name in ("landmine", "landmine-sklearn"):
        obj = objectives.make_objective(name, M, seed=0)
        if name == "landmine":
            fn = jax.jit(lambda o, x: o.local_values(x))
            start = time.perf_counter()
            jax.block_until_ready(fn(obj, grid))
            compile_s = time.perf_counter() - start
        else:
            fn, compile_s = (lambda o, x: o.local_values(x)), 0.0
        start = time.perf_counter()
        values[name] = np.asarray(jax.block_until_ready(fn(obj, grid)))
        eval_s = time.perf_counter() - start
        if name != "landmine":
            pyobj.stats(obj, reset=True)
        result = fp.run(config, obj, seeds=seeds, devices=1)
        host = _host(obj)
        out.append(dict(section="landmine", objective=name, M=M, T=config.horizon, seeds=seeds,
                        compile_seconds=result.compile_seconds, run_seconds=result.run_seconds,
                        host_calls=host.get("global_calls", 0) + host.get("local_calls", 0),
                        distinct_points=host.get("distinct_points", 0), host_seconds=host.get("seconds", 0.0),
                        final_regret_mean=float(result.final_regret.mean()),
                        recommendation=[float(v) for v in result.recommendation[0]],
                        grid_points=len(grid), evaluations=len(grid) * M, evaluation_seconds=eval_s,
                        evaluations_per_second=len(grid) * M / eval_s, grid_compile_seconds=compile_s))
        print(f"  landmine {name}: run {result.run_seconds:.2f} s, {len(grid) * M / eval_s:.0f} evaluations/s",
              file=sys.stderr, flush=True)
    diff = np.abs(values["landmine-sklearn"] - values["landmine"])
    out[-1].update(mean_abs_auc_diff=float(diff.mean()), max_abs_auc_diff=float(diff.max()),
                   max_abs_global_diff=float(np.abs(values["landmine-sklearn"].mean(1)
                                                    - values["landmine"].mean(1)).max()))
    return out


def rows(quick: bool) -> list[dict]:
    device = device_name()
    out = garland_rows(quick) + landmine_rows(quick)
    for r in out:
        r["device"] = device
    return out


def table(rows_: list[dict]) -> str:
    header = (f"{'algorithm':<8} {'sampling':<9} {'objective':<34} {'M':>3} {'T':>6} {'seeds':>5} {'compile s':>9} "
              f"{'run s':>8} {'calls':>6} {'values':>9} {'distinct':>8} {'host s':>7} {'us/call':>8} "
              f"{'|d regret|':>10}")
    lines = [header, "-" * len(header)]
    for r in rows_:
        if r["section"] != "garland":
            continue
        per_call = "" if np.isnan(r["seconds_per_call"]) else f"{1e6 * r['seconds_per_call']:.0f}"
        lines.append(f"{r['algorithm']:<8} {r['sampling']:<9} {r['objective']:<34} {r['M']:>3} {r['T']:>6} "
                     f"{r['seeds']:>5} {r['compile_seconds']:>9.2f} {r['run_seconds']:>8.4f} {r['host_calls']:>6} "
                     f"{r['values']:>9} {r['distinct_points']:>8} {r['host_seconds']:>7.3f} {per_call:>8} "
                     f"{r['max_regret_diff']:>10.2e}")
    for r in rows_:
        if r["section"] != "landmine":
            continue
        if "skipped" in r:
            lines.append(f"landmine-sklearn: skipped, {r['skipped']}")
            continue
        lines.append(f"{r['objective']:<17} Fed-PNE M={r['M']} T={r['T']} seeds={r['seeds']}: "
                     f"run {r['run_seconds']:.2f} s (compile {r['compile_seconds']:.1f} s), {r['host_calls']} host "
                     f"calls, final regret {r['final_regret_mean']:.4f}, recommendation "
                     f"{np.round(r['recommendation'], 4).tolist()}; "
                     f"{r['evaluations_per_second']:.0f} evaluations/s on {r['grid_points']} (C, gamma) x {r['M']} "
                     f"clients")
        if "max_abs_auc_diff" in r:
            lines.append(f"  AUC agreement: |d| mean {r['mean_abs_auc_diff']:.2e}, max {r['max_abs_auc_diff']:.2e}, "
                         f"mean over clients max {r['max_abs_global_diff']:.2e}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(harness.main(__doc__, rows, table, "bench_python_objectives.json"))
