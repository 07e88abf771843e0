"""Benchmark of the batched tree algorithms (HCT, T-HOO, DOO, SOO, StoSOO, VHCT, POO, GPO, PCT, VPCT,
SequOOL, StroquOOL, Zooming, VROOM) against PyXAB's own implementations.

    python scripts/bench_trees.py [--quick] [--out bench_trees.json] [--only doo,soo,soo-pyxab]

``rows(quick)`` returns one row per measurement (scripts/bench.py imports it): the aggregate pulls/s
of a batched run (seeds x T pulls over the execution time, compile excluded; the best of the
repeats) and the same-run rate of the reference: PyXAB 0.3.0's ``HCT`` / ``T_HOO`` when PyXAB is
installed (``pip install pyxab``; bench-only, never a dependency of fedpne_jax), else the NumPy
references of tests/.  Objective: Garland (one client), Gaussian noise 0.1, PyXAB's default
parameters (nu = 1, rho = 0.5, c = 0.1, delta = 0.01); T = 10^4 (--quick: 2,000).

PyXAB's T_HOO re-sums every node's reward list every round, so it slows as it runs (about 37 pulls/s
over a whole T = 10^4 run); it is timed over its first REFERENCE_ROUNDS rounds of a T = 10^4 run,
which overstates its rate and so understates the ratio.  DOO and SOO (both rules, ``soo`` the paper's
and ``soo-pyxab`` PyXAB's) are timed against PyXAB for TIME_BUDGET seconds: as many whole runs as
fit, or the first rounds of one run where a run takes longer (PyXAB's DOO, O(nodes) a round, slows as
it runs, so its rate over the first rounds is again an overstatement).  HCT rows use
``expand='leaf'`` (the default); the ``hct-pyxab`` row uses PyXAB's own expansion rule, the like-for-like comparison, and
also reports both mean regrets (PyXAB's over its few timed runs).  StoSOO, VHCT, POO, GPO, PCT,
VPCT, SequOOL, StroquOOL, Zooming and VROOM (PyXAB's defaults, VROOM's b = f_max = 1; POO and GPO over T-HOO, PyXAB's default base) are timed as DOO
and SOO: PyXAB for TIME_BUDGET seconds, the batched runs with both rules where
the algorithm has a ``pyxab`` switch (``-pyxab`` rows).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402,F401  (the project on the import path)

import fedpne_jax as fp  # noqa: E402
import objectives  # noqa: E402
from fedpne_jax.algorithms.trees import (  # noqa: E402  # noqa: E402
    doo,
    gpo,
    hct,
    hoo,
    pct,
    poo,
    sequool,
    soo,
    stosoo,
    stroquool,
    vhct,
    vpct,
    vroom,
    zooming,
)
from fedpne_jax.core.result import device_name  # noqa: E402
from tests.support.reference import FUNCTIONS  # noqa: E402

SIGMA = 0.1
REFERENCE_ROUNDS = {"hct": None, "hoo": 1000}     # None: the whole horizon
TIME_BUDGET = 30.0                                  # seconds of PyXAB per DOO / SOO reference


def _garland(point) -> float:
    x = float(point[0])
    return x * (1 - x) * (4 - math.sqrt(abs(math.sin(60 * x))))


def pyxab_rate(name: str, T: int, runs: int, rounds=None):
    """(pulls/s, mean regret over the timed rounds, label) of PyXAB's own algorithm, or None."""
    try:
        from importlib.metadata import version

        from PyXAB.algos.HCT import HCT
        from PyXAB.algos.HOO import T_HOO
    except ImportError:
        return None
    f_star = FUNCTIONS["garland"][3]
    rng = np.random.default_rng(0)
    np.random.seed(0)             # PyXAB's partition draws from NumPy's global generator
    rounds = rounds or T
    elapsed, regrets = 0.0, []
    for _ in range(runs):
        algo = (HCT(nu=1, rho=0.5, c=0.1, delta=0.01, domain=[[0.0, 1.0]]) if name == "hct"
                else T_HOO(nu=1, rho=0.5, rounds=T, domain=[[0.0, 1.0]]))
        regret = 0.0
        start = time.perf_counter()
        for t in range(1, rounds + 1):
            point = algo.pull(t)
            value = _garland(point)
            algo.receive_reward(t, value + SIGMA * rng.standard_normal())
            regret += f_star - value
        elapsed += time.perf_counter() - start
        regrets.append(regret)
    label = f"PyXAB {version('pyxab')} {'HCT' if name == 'hct' else 'T_HOO'}"
    if rounds < T:
        label += f" (first {rounds} of {T} rounds)"
    return runs * rounds / elapsed, float(np.mean(regrets)), label


def _pyxab_algorithm(name: str, T: int):
    """PyXAB's own algorithm ``name`` with its default parameters for T rounds on [0, 1]."""
    import importlib
    domain = [[0.0, 1.0]]
    if name == "hct":
        from PyXAB.algos.HCT import HCT
        return HCT(nu=1, rho=0.5, c=0.1, delta=0.01, domain=domain)
    if name == "hoo":
        from PyXAB.algos.HOO import T_HOO
        return T_HOO(nu=1, rho=0.5, rounds=T, domain=domain)
    cls = {"doo": "DOO", "soo": "SOO", "stosoo": "StoSOO", "vhct": "VHCT", "poo": "POO", "gpo": "GPO",
           "pct": "PCT", "vpct": "VPCT", "sequool": "SequOOL", "stroquool": "StroquOOL", "zooming": "Zooming",
           "vroom": "VROOM"}[name]
    algo = getattr(importlib.import_module(f"PyXAB.algos.{cls}"), cls)
    if name in ("poo", "gpo"):
        from PyXAB.algos.HOO import T_HOO
        return algo(rounds=T, domain=domain, algo=T_HOO)
    if name in ("pct", "vpct"):
        return algo(rounds=T, domain=domain)
    if name == "vroom":
        return algo(n=T, b=1.0, f_max=1.0, domain=domain)
    return algo(domain=domain) if name in ("vhct", "zooming") else algo(n=T, domain=domain)


def pyxab_budget_rate(name: str, T: int, budget: float):
    """(pulls/s, None, label) of PyXAB's own algorithm ``name`` (its default parameters): as many
    runs of T rounds as ``budget`` seconds allow (a run of a second or so varies by a factor of two
    between processes), or the first rounds of one run where a run takes longer; None without PyXAB."""
    try:
        from importlib.metadata import version

        _pyxab_algorithm(name, T)
    except ImportError:
        return None
    rng = np.random.default_rng(0)
    start, pulls, runs, t = time.perf_counter(), 0, 0, T
    while time.perf_counter() - start < budget:
        algo, t, runs = _pyxab_algorithm(name, T), 0, runs + 1
        while t < T and time.perf_counter() - start < budget:
            t += 1
            point = algo.pull(t)
            algo.receive_reward(t, _garland(point) + SIGMA * rng.standard_normal())
        pulls += t
    elapsed = time.perf_counter() - start
    detail = f" (first {t} of {T} rounds)" if runs == 1 and t < T else f" ({runs} runs)"
    return pulls / elapsed, None, f"PyXAB {version('pyxab')} {name.upper()}" + detail


def numpy_rate(name: str, T: int, runs: int):
    """(pulls/s, mean regret, label) of the NumPy reference (tests/reference_*.py, path updates)."""
    from tests.support import reference_hct, reference_hoo
    rng = np.random.default_rng(0)
    fn = reference_hct.hct if name == "hct" else reference_hoo.hoo
    start = time.perf_counter()
    regrets = [fn("garland", 1, T, noise="gaussian", sigma=SIGMA, rng=rng, full=False).final_regret
               for _ in range(runs)]
    return runs * T / (time.perf_counter() - start), float(np.mean(regrets)), f"NumPy reference ({name})"


def batched(name: str, config, objective, seeds: int, repeats: int) -> dict:
    first = fp.run(config, objective, seeds=seeds)       # compiles
    best = min(first.run_seconds, harness.best_run_seconds(lambda: fp.run(config, objective, seeds=seeds), repeats - 1)) \
        if repeats > 1 else first.run_seconds
    return dict(name=name, seeds=seeds, T=config.horizon, seconds=best, pulls_per_s=seeds * config.horizon / best,
                compile_seconds=first.compile_seconds, regret_mean=float(first.final_regret.mean()),
                nodes_mean=float(first.nodes.mean()), capacity=first.config["capacity"])


def rows(quick: bool, only: tuple = ()) -> list[dict]:
    """Every row, or with ``only`` the rows of those labels (``hct``, ``hct-pyxab``, ``soo-pyxab`` ...)."""
    T = 2_000 if quick else 10_000
    seed_counts = (1, 100) if quick else (1, 100, 1000)
    repeats = 1 if quick else 2
    objective = objectives.make_objective("garland", num_clients=1, heterogeneity="none")
    device = device_name()
    noise = f"gaussian:{SIGMA}"
    configs = {"doo": doo.DOOConfig(horizon=T, noise=noise)}
    for name, cls in (("soo", soo.SOOConfig), ("stosoo", stosoo.StoSOOConfig), ("vhct", vhct.VHCTConfig),
                      ("poo", poo.POOConfig), ("gpo", gpo.GPOConfig), ("pct", pct.PCTConfig),
                      ("vpct", vpct.VPCTConfig)):
        configs[name] = cls(horizon=T, noise=noise)
        configs[f"{name}-pyxab"] = cls(horizon=T, noise=noise, pyxab=True)
    configs["sequool"] = sequool.SequOOLConfig(horizon=T, noise=noise)
    configs["stroquool"] = stroquool.StroquOOLConfig(horizon=T, noise=noise)
    configs["zooming"] = zooming.ZoomingConfig(horizon=T, noise=noise)
    configs["vroom"] = vroom.VROOMConfig(horizon=T, noise=noise)
    unknown = sorted(set(only) - {"hct", "hct-pyxab", "hoo", *configs})
    if unknown:
        print(f"bench_trees.py: --only: no row {', '.join(unknown)}; the rows: hct, hct-pyxab, hoo, "
              f"{', '.join(configs)}", file=sys.stderr)
        raise SystemExit(2)
    out = []
    for name in ("hct", "hoo"):
        if only and name not in only and f"{name}-pyxab" not in only:
            continue
        rounds = REFERENCE_ROUNDS[name] if not quick else min(T, REFERENCE_ROUNDS[name] or T)
        runs = 1 if quick or name == "hoo" else 5
        ref = pyxab_rate(name, T, runs, rounds) or numpy_rate(name, T, runs)
        config = (hct.HCTConfig if name == "hct" else hoo.HOOConfig)(horizon=T, noise=f"gaussian:{SIGMA}")
        cases = [(name, config, s) for s in seed_counts]
        if name == "hct":
            cases.append(("hct-pyxab", config.replace(expand="pyxab"), seed_counts[-1]))
        for label, cfg, seeds in cases:
            if only and label not in only:
                continue
            row = batched(label, cfg, objective, seeds, repeats)
            row.update(reference=ref[2], reference_pulls_per_s=ref[0], ratio=row["pulls_per_s"] / ref[0],
                       device=device)
            if label == "hct-pyxab":
                row.update(reference_regret_mean=ref[1], reference_runs=runs)
            out.append(row)
    references = {}
    for label, config in configs.items():
        if only and label not in only:
            continue
        base = label.split("-")[0]
        if base not in references:
            references[base] = pyxab_budget_rate(base, T, 5.0 if quick else TIME_BUDGET)
        ref = references[base]
        # 100 and 1,000 seeds for every algorithm (the whole section takes about 25 minutes on 2 cores:
        # POO's 1,000-seed row alone takes about 3).
        for seeds in seed_counts[1:]:
            row = batched(label, config, objective, seeds, repeats)
            row.update(device=device)
            if ref is not None:
                row.update(reference=ref[2], reference_pulls_per_s=ref[0], ratio=row["pulls_per_s"] / ref[0])
            else:
                row.update(reference="PyXAB not installed", reference_pulls_per_s=float("nan"), ratio=float("nan"))
            out.append(row)
    return out


def table(rows_: list[dict]) -> str:
    lines = [f"{'name':12} {'seeds':>6} {'T':>6} {'seconds':>9} {'pulls/s':>12} {'ref pulls/s':>12} {'ratio':>8}  "
             f"{'compile s':>9}  reference"]
    for r in rows_:
        lines.append(f"{r['name']:12} {r['seeds']:6d} {r['T']:6d} {r['seconds']:9.3f} {r['pulls_per_s']:12.4g} "
                     f"{r['reference_pulls_per_s']:12.4g} {r['ratio']:8.1f}  {r['compile_seconds']:9.2f}  {r['reference']}")
    for r in rows_:
        if "reference_regret_mean" in r:
            lines.append(f"{r['name']}: mean regret R(T) {r['regret_mean']:.2f} over {r['seeds']} seeds; "
                         f"{r['reference']}: {r['reference_regret_mean']:.2f} over {r['reference_runs']} run(s)")
    return "\n".join(lines)


if __name__ == "__main__":
    labels = argparse.ArgumentParser(add_help=False)
    labels.add_argument("--only", default="", help="comma-separated row labels (default: every row)")
    known, rest = labels.parse_known_args()
    only = tuple(filter(None, known.only.split(",")))
    sys.exit(harness.main(__doc__, lambda quick: rows(quick, only), table, "bench_trees.json", rest))
