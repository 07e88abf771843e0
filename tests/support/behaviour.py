"""A fixed set of runs (every algorithm; Fed-PNE with each sampler, DP, random splits; a grid; a
sweep) and their per-seed outputs: recorded in tests/data/behaviour.npz by
``python scripts/record_behaviour.py --write`` and compared bit for bit by tests/test_behaviour.py."""
from __future__ import annotations

import os
import tempfile

import numpy as np

import fedpne_jax as fp
import objectives
from fedpne_jax.core import checkpoints

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "behaviour.npz")
SEEDS = 3
M = 3

FEDPNE = {
    "aggregate": dict(noise="gaussian:0.3"),
    "client-bernoulli": dict(noise="bernoulli", sampling="client"),
    "explicit-centre": dict(noise="uniform:0.3"),
    "explicit-points": dict(noise="uniform:0.3", pull="uniform"),
    "explicit-gaussian": dict(noise="gaussian:0.3", sampling="explicit"),
    "dp": dict(noise="gaussian:0.1", dp_epsilon=4.0, dp_delta=0.05),
    "random-split": dict(noise="gaussian:0.3", split="random", k=3),
}
BASELINES = {
    "hct": dict(horizon=400, noise="gaussian:0.3"),
    "hoo": dict(horizon=300, noise="uniform:0.3"),
    "fed1ucb": dict(horizon=3000, noise="uniform:0.3", num_clients=M, arms=20),
    "fed1ucb-gaussian": dict(horizon=3000, noise="gaussian:0.3", num_clients=M, arms=20),
    "fnucb": dict(horizon=60, noise="gaussian:0.3", num_clients=M),
    "kernelts": dict(horizon=200, noise="gaussian:0.3"),
    "gpucb": dict(horizon=200, noise="gaussian:0.3"),
    "bo": dict(horizon=100, noise="gaussian:0.3"),
    "bbo": dict(horizon=100, noise="gaussian:0.3", num_clients=M),
}


# Measures added after the recording (tests/test_measures.py checks them against NumPy): kept out, so
# that the AMD-recorded fixture stays as it was written.
ADDED_METRICS = set(checkpoints.MEASURES)


def _objective(heterogeneity="shift"):
    return objectives.make_objective("garland", num_clients=M, heterogeneity=heterogeneity)


def _store(out: dict, name: str, result) -> None:
    out[f"{name}/final_regret"] = result.final_regret
    out[f"{name}/curves"] = result.curves
    for metric, value in result.metrics.items():
        if metric not in ADDED_METRICS:
            out[f"{name}/{metric}"] = np.asarray(value)


def collect() -> dict:
    out: dict = {}
    for name, kw in FEDPNE.items():
        config = fp.FedPNEConfig(num_clients=M, horizon=3000, checkpoints=7, **kw)
        objective = _objective("none" if kw["noise"] == "bernoulli" else "shift")
        _store(out, f"fedpne/{name}", fp.run(config, objective, seeds=SEEDS, base_seed=2))
    base = fp.FedPNEConfig(num_clients=M, horizon=3000, checkpoints=7)
    for i, result in enumerate(fp.run_grid(fp.grid_product(base, c=[0.05, 0.2], rho=[0.5, 0.7]), _objective(),
                                           seeds=SEEDS, base_seed=2)):
        _store(out, f"grid/{i}", result)
    for name, kw in BASELINES.items():
        algorithm = name.partition("-")[0]
        config = fp.make_config(algorithm, checkpoints=7, **kw)
        _store(out, f"baseline/{name}", fp.run(config, _objective(), seeds=SEEDS, base_seed=2))
    definition = {"objectives": [{"name": "garland"}], "algorithms": ["fedpne", "hct"], "clients": [M],
                  "horizon": [500], "seeds": SEEDS, "base_seed": 4, "params": {"checkpoints": 5},
                  "fedpne": {"grid": {"c": [0.1, 0.3]}}}
    with tempfile.TemporaryDirectory() as folder:
        fp.run_sweep(definition, folder, progress=False)
        res = fp.load_sweep(folder)
        out["sweep/final_regret"] = res.final_regret
        out["sweep/curves"] = res.curves
    return out


def compare(recorded, current) -> list[str]:
    problems = [f"{k}: missing now" for k in recorded if k not in current]
    problems += [f"{k}: not recorded" for k in current if k not in recorded]
    for k in recorded:
        if k in current and not np.array_equal(np.asarray(recorded[k]), np.asarray(current[k])):
            problems.append(f"{k}: differs")
    return problems
