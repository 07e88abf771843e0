"""Record (or check) the per-seed outputs of a fixed set of runs: every algorithm, Fed-PNE with each
sampler, DP, a grid and a sweep.

    python scripts/record_behaviour.py --write    # tests/data/behaviour.npz, from the current code
    python scripts/record_behaviour.py            # compare the current code against it, bit for bit

tests/test_behaviour.py runs the comparison in the suite: a refactoring that changes any number of
these runs (a different draw, a different summation order) fails it.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import fedpne_jax as fp  # noqa: E402
import objectives  # noqa: E402

FIXTURE = os.path.join(ROOT, "tests", "data", "behaviour.npz")
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


def _objective(heterogeneity="shift"):
    return objectives.make_objective("garland", num_clients=M, heterogeneity=heterogeneity)


def _store(out: dict, name: str, result) -> None:
    out[f"{name}/final_regret"] = result.final_regret
    out[f"{name}/curves"] = result.curves
    for metric, value in result.metrics.items():
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="record the fixture from the current code")
    args = ap.parse_args(argv)
    current = collect()
    if args.write:
        os.makedirs(os.path.dirname(FIXTURE), exist_ok=True)
        np.savez_compressed(FIXTURE, **{k.replace("/", "__"): v for k, v in current.items()})
        print(f"wrote {len(current)} arrays to {FIXTURE}")
        return 0
    with np.load(FIXTURE) as data:
        recorded = {k.replace("__", "/"): data[k] for k in data.files}
    problems = compare(recorded, current)
    print("\n".join(problems) if problems else f"all {len(recorded)} arrays are identical")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
