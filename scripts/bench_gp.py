"""Benchmark of the GP baselines (KernelTS, GP-UCB, BO, BBO) against their NumPy references.

    python scripts/bench_gp.py [--quick] [--out bench_gp.json]

Garland, gaussian:0.1 noise, default parameters (K = 100 candidates).  A "pull" is one evaluation:
one per round for the centralized algorithms, M per round for BBO (M = 10).  The JAX rows time one
compiled call for all seeds (compile excluded, best of ``repeats``); the horizon is data, so the
rows of one algorithm and seed count share one program.  The reference rows run
tests/support/reference_gp.py (float64, a fresh (K_t + lam I)^{-1} every round, O(t^3) per round, one run)
on the same candidates.  Its runs are timed in full up to 100 pulls; beyond (a T = 1,000 GP-UCB run
takes minutes, T = 10,000 would take days) its rate is extrapolated from one timed pick at history
n = T pulls, as n / sum_t c (t/n)^3 = 4 / c pulls/s (marked "extrapolated").  A round's cost
a + b t + c t^3 is at least cost(n) (t/n)^3, so this over-states the reference's rate and the
ratios are conservative.  ``ratio`` is JAX pulls/s over the reference's at the same T.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402,F401  (the project on the import path)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import fedpne_jax as fp  # noqa: E402
import objectives  # noqa: E402
from fedpne_jax.algorithms.gp import bbo, bo, gp, gpucb, kernelts  # noqa: E402
from fedpne_jax.core import executor  # noqa: E402
from fedpne_jax.core.result import device_name  # noqa: E402
from tests.support import (
    reference,  # noqa: E402
    reference_gp,  # noqa: E402
)

MODULES = {"kernelts": kernelts, "gpucb": gpucb, "bo": bo, "bbo": bbo}
BBO_CLIENTS = 10


def _setup(name: str, T: int):
    M = BBO_CLIENTS if name == "bbo" else 1
    kw = dict(num_clients=M) if name == "bbo" else {}
    config = MODULES[name].ALGORITHM.config_type(horizon=T, noise="gaussian:0.1", **kw)
    return config, objectives.make_objective("garland", M)


def jax_rate(name: str, T: int, seeds: int, repeats: int) -> dict:
    config, objective = _setup(name, T)
    first = fp.run(config, objective, seeds=seeds)
    best = first.run_seconds
    for _ in range(repeats - 1):
        best = min(best, fp.run(config, objective, seeds=seeds).run_seconds)
    pulls = seeds * T * getattr(config, "num_clients", 1)
    return dict(seconds=best, pulls_per_s=pulls / best, compile_seconds=first.compile_seconds,
                final_regret_mean=float(first.final_regret.mean()))


def _reference_inputs(name: str, T: int):
    config, objective = _setup(name, T)
    static = MODULES[name].ALGORITHM.make_static(config, objective)
    key = executor.seed_key(0, 0)
    unit = np.asarray(gp.unit_candidates(static, key), np.float64)
    f = reference.garland(np.asarray(gp.candidate_points(static, objective, key), np.float64))
    return config, objective, static, key, unit, f


def reference_run_seconds(name: str, T: int) -> float:
    """One full reference run (same candidates as seed 0; its own noise)."""
    config, objective, static, key, unit, f = _reference_inputs(name, T)
    rng = np.random.default_rng(0)
    if name == "kernelts":
        normals = jax.jit(jax.vmap(lambda t: kernelts.standard_normals(key, t, static)))(jnp.arange(1, T + 1))
        normals = np.asarray(normals, np.float64)
        start = time.perf_counter()
        reference_gp.kernelts(unit, f, objective.f_star, T, lambda t: normals[t - 1], noise_sd=0.1, rng=rng)
    elif name == "bo":
        initial = [int(bo.initial_index(key, t, static)) for t in range(1, config.initial + 1)]
        start = time.perf_counter()
        reference_gp.bo(unit, f, objective.f_star, T, lambda t: initial[t - 1], noise_sd=0.1, rng=rng)
    elif name == "gpucb":
        start = time.perf_counter()
        reference_gp.gpucb(unit, f, objective.f_star, T, lam=config.lam_value, R=config.R_value, noise_sd=0.1,
                           rng=rng)
    else:
        local = f[:, None] + np.asarray(objective.data["shift"], np.float64)[None, :]
        start = time.perf_counter()
        reference_gp.bbo(unit, f, local, objective.f_star, T, lam=config.lam_value, R=config.R_value,
                         noise_sd=0.1, rng=rng)
    return time.perf_counter() - start


def reference_round_seconds(name: str, history: int) -> float:
    """One reference pick with ``history`` past observations (random candidates and values): the
    posterior, and for GP-UCB / BBO the information gain (BBO's round is M such picks)."""
    config, objective, static, key, unit, f = _reference_inputs(name, history)
    rng = np.random.default_rng(1)
    idx = rng.integers(0, len(f), history)
    X, y = list(unit[idx]), f[idx] + 0.1 * rng.standard_normal(history)
    kind, scale = config.kernel, config.lengthscale
    lam = {"bo": lambda: config.noise_var, "kernelts": lambda: config.lam}.get(name, lambda: config.lam_value)()
    start = time.perf_counter()
    reference_gp.posterior(kind, scale, lam, unit, X, y)
    if name in ("gpucb", "bbo"):
        reference_gp.information_gain(kind, scale, lam, X)
    return time.perf_counter() - start


def rows(quick: bool) -> list[dict]:
    """Benchmark rows: per algorithm, the reference and the JAX engine at 1 and 100 seeds for each T."""
    device = device_name()
    horizons = [100, 1000] if quick else [100, 1000, 10_000]
    seed_counts = [1, 100]
    repeats = 1 if quick else 3
    out = []
    # BBO pulls M = 10 points a round: its reference at T = 1,000 means a 10^4 x 10^4 inverse.
    plan = [("kernelts", horizons), ("gpucb", horizons), ("bo", horizons), ("bbo", [10, 100] if quick else [10, 100, 1000])]
    for name, Ts in plan:
        M = BBO_CLIENTS if name == "bbo" else 1
        for T in Ts:
            if T * M <= 100:
                ref_s = reference_run_seconds(name, T)
                ref_rate, how = T * M / ref_s, "measured"
            else:
                ref_rate, how = 4.0 / reference_round_seconds(name, T * M), "extrapolated"
                ref_s = T * M / ref_rate
            out.append(dict(name=f"{name} numpy reference (fresh inverse)", algorithm=name, implementation="reference",
                            seeds=1, T=T, seconds=ref_s, pulls_per_s=ref_rate, reference_pulls_per_s=ref_rate,
                            ratio=1.0, device="cpu (numpy)", reference=how))
            print(f"  {name} T={T} reference: {ref_rate:.1f} pulls/s ({how})", file=sys.stderr, flush=True)
            for seeds in seed_counts:
                r = jax_rate(name, T, seeds, repeats)
                out.append(dict(name=f"{name} fedpne-jax", algorithm=name, implementation="jax", seeds=seeds, T=T,
                                seconds=r["seconds"], pulls_per_s=r["pulls_per_s"], reference_pulls_per_s=ref_rate,
                                ratio=r["pulls_per_s"] / ref_rate, device=device,
                                compile_seconds=r["compile_seconds"], final_regret_mean=r["final_regret_mean"]))
                print(f"  {name} T={T} seeds={seeds}: {r['pulls_per_s']:.0f} pulls/s", file=sys.stderr, flush=True)
    out += portability_rows(quick, repeats)
    if not quick:
        # How far T goes: the cost of a round does not grow with t.
        for T in (100_000,):
            r = jax_rate("gpucb", T, 1, 1)
            out.append(dict(name="gpucb fedpne-jax", algorithm="gpucb", implementation="jax", seeds=1, T=T,
                            seconds=r["seconds"], pulls_per_s=r["pulls_per_s"], reference_pulls_per_s=float("nan"),
                            ratio=float("nan"), device=device, compile_seconds=r["compile_seconds"],
                            final_regret_mean=r["final_regret_mean"]))
    return out


def portability_rows(quick: bool, repeats: int) -> list[dict]:
    """The cost of processor-independent numbers: every algorithm at 100 seeds with its exact square
    roots (the package) and with the approximate rsqrt XLA makes of c / sqrt(d) (what the package did
    before, and what made BBO's runs differ between Intel and AMD), in the same run.  ``ratio`` is
    exact pulls/s over approximate pulls/s."""
    T, seeds, device = (200 if quick else 2000), 100, device_name()
    rates, original = {}, gp.exact_sqrt
    for name in MODULES:                         # the two variants of one algorithm back to back
        for variant, sqrt in (("exact", original), ("approximate", jnp.sqrt)):
            executor._compiled.clear()           # the program depends on the patched function, not its key
            gp.exact_sqrt = bo.exact_sqrt = sqrt
            try:
                rates[name, variant] = jax_rate(name, T // (BBO_CLIENTS if name == "bbo" else 1), seeds, repeats)
            finally:
                gp.exact_sqrt = bo.exact_sqrt = original
    out = []
    for name in MODULES:
        exact, approx = rates[name, "exact"], rates[name, "approximate"]
        for variant, r in (("exact sqrt", exact), ("approximate rsqrt", approx)):
            out.append(dict(name=f"{name} fedpne-jax, {variant}", algorithm=name, implementation=variant, seeds=seeds,
                            T=T // (BBO_CLIENTS if name == "bbo" else 1), seconds=r["seconds"],
                            pulls_per_s=r["pulls_per_s"], reference_pulls_per_s=approx["pulls_per_s"],
                            ratio=r["pulls_per_s"] / approx["pulls_per_s"], device=device,
                            compile_seconds=r["compile_seconds"], final_regret_mean=r["final_regret_mean"]))
        print(f"  {name}: exact {exact['pulls_per_s']:.0f} pulls/s, approximate {approx['pulls_per_s']:.0f} "
              f"({exact['pulls_per_s'] / approx['pulls_per_s']:.3f}x)", file=sys.stderr, flush=True)
    return out


def table(rows_: list[dict]) -> str:
    """The rows as a text table (scripts/bench.py prints it for its 'gp' section)."""
    header = (f"{'name':<42} {'seeds':>5} {'T':>8} {'seconds':>9} {'pulls/s':>11} {'ref pulls/s':>11} "
              f"{'ratio':>8}  device")
    lines = [header, "-" * len(header)]
    for r in rows_:
        note = f" ({r['reference']})" if r.get("reference") not in (None, "measured") else ""
        lines.append(f"{r['name']:<42} {r['seeds']:>5} {r['T']:>8} {r['seconds']:>9.4g} {r['pulls_per_s']:>11.4g} "
                     f"{r['reference_pulls_per_s']:>11.4g} {r['ratio']:>8.4g}  {r['device']}{note}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(harness.main(__doc__, rows, table, "bench_gp.json"))
