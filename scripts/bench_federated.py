"""Benchmark of the federated baselines, Fed1-UCB and FN-UCB, against plain NumPy implementations.

    python scripts/bench_federated.py [--quick] [--out bench_federated.json]

Garland, shift heterogeneity, gaussian:0.1 noise, M = 10 clients, defaults otherwise (K = 100 grid
arms).  ``rows(quick)`` returns the rows (scripts/bench.py imports it); ``seconds`` is execution
only (best of the repeats), compile time is reported apart.  pulls/s counts every client's pulls,
seeds x T x M per second.

* Fed1-UCB at 1, 100 and 1,000 seeds (T = 10^4), against tests/support/reference_fed1ucb.py (one run at a
  time, every reward drawn).
* FN-UCB rounds/s against T at 1 and 100 seeds; the reference is the explicit NumPy FN-UCB of
  tests/test_fnucb.py (per client, a V inverse per round, histories as lists; the public code's
  structure in float64), timed at T = 100 only: its cost per round grows with t.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402,F401  (the project on the import path)
import jax  # noqa: E402

import fedpne_jax as fp  # noqa: E402
import objectives  # noqa: E402
from fedpne_jax.algorithms.arms import arm_grid as arms  # noqa: E402
from fedpne_jax.algorithms.arms import fed1ucb, fnucb, network
from fedpne_jax.core import executor  # noqa: E402
from fedpne_jax.core.result import device_name  # noqa: E402
from tests.support import (
    reference,  # noqa: E402
    reference_fed1ucb,  # noqa: E402
)

M = 10


def _problem(objective):
    shifts = np.asarray(objective.data["shift"], np.float64)
    return reference.problem(objective.name, objective.num_clients, objective.dim, shifts=shifts)


def _engine(algorithm, config, objective, seeds: int, repeats: int):
    first = fp.run(config, objective, seeds=seeds)
    best = min([first.run_seconds] + [fp.run(config, objective, seeds=seeds).run_seconds
                                      for _ in range(repeats - 1)])
    return best, first


def fed1ucb_reference_rate(config, objective, runs: int) -> float:
    """Runs per second of the NumPy Fed1-UCB (grid with its own random start, every pull drawn)."""
    prob = _problem(objective)
    k = arms.per_dim(config.arms, objective.dim)
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for _ in range(runs):
        points = reference_fed1ucb.grid(rng.random(objective.dim), prob.lo, prob.hi, k)
        reference_fed1ucb.fed1ucb(prob.f, prob.local, points, prob.f_star, config.horizon, config.num_clients,
                                  config.kappa, config.sigma_value, noise=config.noise_kind,
                                  noise_scale=config.noise_scale, checkpoints=config.checkpoints, rng=rng)
    return runs / (time.perf_counter() - start)


def fnucb_reference_rate(config, objective) -> float:
    """Rounds per second of the explicit NumPy FN-UCB (tests/test_fnucb.py) over ``config.horizon`` rounds."""
    from tests.test_fnucb import np_fnucb
    prob = _problem(objective)
    k = arms.per_dim(config.arms, objective.dim)
    key = executor.seed_key(0, 0)
    points = reference_fed1ucb.grid(np.asarray(arms.start_offsets(key, 1), np.float64), prob.lo, prob.hi, k)
    X = (points - prob.lo) / (prob.hi - prob.lo)
    theta0 = np.asarray(network.flatten(network.init_net(jax.random.fold_in(key, fnucb.INIT_STREAM), 1, config.width)),
                        np.float64)
    local = prob.local(points)
    rng = np.random.default_rng(0)
    rewards = lambda t, arm: local[arm] + config.noise_scale * rng.standard_normal(config.num_clients)
    start = time.perf_counter()
    np_fnucb(theta0, X, prob.f_star - prob.f(points), rewards, config.horizon, config)
    return config.horizon / (time.perf_counter() - start)


def _row(name, seeds, T, seconds, ref_pulls_per_s, **extra) -> dict:
    pulls = seeds * T * M / seconds
    return dict(name=name, seeds=seeds, T=T, M=M, seconds=seconds, pulls_per_s=pulls,
                reference_pulls_per_s=ref_pulls_per_s,
                ratio=(pulls / ref_pulls_per_s if ref_pulls_per_s else None), device=device_name(), **extra)


def rows(quick: bool) -> list[dict]:
    out = []
    objective = objectives.make_objective("garland", M)

    T = 10_000
    config = fed1ucb.Fed1UCBConfig(num_clients=M, horizon=T, noise="gaussian:0.1")
    ref_runs = fed1ucb_reference_rate(config, objective, 5 if quick else 30)
    ref_pulls = ref_runs * T * M
    out.append(_row("fed1ucb numpy reference", 1, T, 1 / ref_runs, ref_pulls, runs_per_s=ref_runs))
    for seeds in ([1, 100] if quick else [1, 100, 1000]):
        seconds, first = _engine(fed1ucb.ALGORITHM, config, objective, seeds, 1 if quick else 3)
        out.append(_row("fed1ucb", seeds, T, seconds, ref_pulls, runs_per_s=seeds / seconds,
                        compile_s=first.compile_seconds, final_regret_mean=float(first.final_regret.mean()),
                        phases_mean=float(first.phases.mean())))

    ref_T = 50 if quick else 100
    fconfig = fnucb.FNUCBConfig(num_clients=M, horizon=ref_T, noise="gaussian:0.1")
    ref_rounds = fnucb_reference_rate(fconfig, objective)
    out.append(_row("fnucb numpy reference", 1, ref_T, ref_T / ref_rounds, ref_rounds * M, rounds_per_s=ref_rounds))
    cases = [(1, 100), (1, 1000), (100, 100)] if quick else \
        [(1, 100), (1, 1000), (1, 10_000), (100, 100), (100, 1000)]
    for seeds, T in cases:
        seconds, first = _engine(fnucb.ALGORITHM, fconfig.replace(horizon=T, checkpoints=min(100, T)), objective,
                                 seeds, 1)
        out.append(_row("fnucb", seeds, T, seconds, ref_rounds * M, rounds_per_s=seeds * T / seconds,
                        compile_s=first.compile_seconds, final_regret_mean=float(first.final_regret.mean())))
    return out


def table(rows_: list[dict]) -> str:
    header = f"{'name':<24} {'seeds':>6} {'T':>7} {'seconds':>9} {'pulls/s':>12} {'ref pulls/s':>12} {'x ref':>8} " \
             f"{'compile s':>9}"
    lines = [header, "-" * len(header)]
    for r in rows_:
        ratio = f"{r['ratio']:.1f}" if r["ratio"] is not None else "-"
        lines.append(f"{r['name']:<24} {r['seeds']:>6} {r['T']:>7} {r['seconds']:>9.3f} {r['pulls_per_s']:>12.4g} "
                     f"{r['reference_pulls_per_s']:>12.4g} {ratio:>8} {r.get('compile_s', float('nan')):>9.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(harness.main(__doc__, rows, table, "bench_federated.json"))
