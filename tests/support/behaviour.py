"""A fixed set of runs (every algorithm; Fed-PNE with each sampler, DP, random splits in 1-D and 2-D; a grid; a
sweep) and their per-seed outputs: recorded in tests/data/behaviour.npz by
``python scripts/record_behaviour.py --write`` and compared bit for bit by tests/test_behaviour.py."""
from __future__ import annotations

import os
import tempfile

import numpy as np

import fedpne_jax as fp
import objectives
from fedpne_jax.core import measures

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "behaviour.npz")
SEEDS = 3
M = 3
# The options every recorded run of Fed-PNE, and of the baselines, shares (tests/support/contract.py
# runs the same configurations).
RECORDED_SHAPE = {"fedpne": dict(num_clients=M, horizon=3000, checkpoints=7), "baseline": dict(checkpoints=7)}

FEDPNE = {
    "aggregate": dict(noise="gaussian:0.3"),
    "client-bernoulli": dict(noise="bernoulli", sampling="client"),
    "explicit-centre": dict(noise="uniform:0.3"),
    "explicit-points": dict(noise="uniform:0.3", pull="uniform"),
    "explicit-gaussian": dict(noise="gaussian:0.3", sampling="explicit"),
    "dp": dict(noise="gaussian:0.1", dp_epsilon=4.0, dp_delta=0.05),
    "random-split": dict(noise="gaussian:0.3", split="random", k=3),
    # On a 2-D objective (TWO_D), where a random split has a dimension to choose.
    "random-split-2d": dict(noise="gaussian:0.3", split="random", k=3),
}
TWO_D = "himmelblau"
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
ADDED_METRICS = set(measures.REPORTED)


def recorded_objective(heterogeneity="shift", name="garland"):
    return objectives.make_objective(name, num_clients=M, heterogeneity=heterogeneity)


BASE_SEED = 2
# The runs of one algorithm's own recorded configuration: tests/test_contract.py runs and checks
# these (its batch is this run); tests/test_behaviour.py checks the others.
OWN = {"fedpne": "fedpne/aggregate", **{name: f"baseline/{name}" for name in BASELINES if "-" not in name}}


def config(run: str):
    """The configuration of the recorded run "fedpne/<sampler>" or "baseline/<name>"."""
    family, _, name = run.partition("/")
    if family == "fedpne":
        return fp.FedPNEConfig(**RECORDED_SHAPE["fedpne"], **FEDPNE[name])
    return fp.make_config(name.partition("-")[0], **RECORDED_SHAPE["baseline"], **BASELINES[name])


def objective(name: str):
    """The objective of the recorded run ``name``: Garland (no heterogeneity under Bernoulli noise,
    whose means must lie in [0, 1]), or TWO_D for a run whose name ends in '-2d'."""
    heterogeneity = "none" if config(name).noise == "bernoulli" else "shift"
    return recorded_objective(heterogeneity, TWO_D if name.endswith("-2d") else "garland")


def run(name: str):
    return fp.run(config(name), objective(name), seeds=SEEDS, base_seed=BASE_SEED)


def stored(name: str, result) -> dict:
    """What the fixture holds of a run, under its name."""
    out = {f"{name}/final_regret": result.final_regret, f"{name}/curves": result.curves}
    out.update({f"{name}/{metric}": np.asarray(value) for metric, value in result.metrics.items()
                if metric not in ADDED_METRICS})
    return out


def runs() -> list[str]:
    return [f"fedpne/{name}" for name in FEDPNE] + [f"baseline/{name}" for name in BASELINES]


def parts() -> list[str]:
    """The fixture's parts, each checked on its own: every run, the grid and the sweep."""
    return runs() + ["grid", "sweep"]


def part_of(key: str) -> str:
    """The part a fixture array belongs to ("fedpne/dp/curves" -> "fedpne/dp", "grid/2/curves" -> "grid")."""
    head = key.partition("/")[0]
    return head if head in ("grid", "sweep") else key.rpartition("/")[0]


def collect_part(part: str) -> dict:
    """The arrays of one part of the fixture, computed now."""
    if part == "grid":
        base = fp.FedPNEConfig(**RECORDED_SHAPE["fedpne"])
        configs = fp.grid_product(base, c=[0.05, 0.2], rho=[0.5, 0.7])
        out: dict = {}
        for i, result in enumerate(fp.run_grid(configs, recorded_objective(), seeds=SEEDS, base_seed=BASE_SEED)):
            out.update(stored(f"grid/{i}", result))
        return out
    if part == "sweep":
        definition = {"objectives": [{"name": "garland"}], "algorithms": ["fedpne", "hct"], "clients": [M],
                      "horizon": [500], "seeds": SEEDS, "base_seed": 4, "params": {"checkpoints": 5},
                      "fedpne": {"grid": {"c": [0.1, 0.3]}}}
        with tempfile.TemporaryDirectory() as folder:
            fp.run_sweep(definition, folder, progress=False)
            res = fp.load_sweep(folder)
            return {"sweep/final_regret": res.final_regret, "sweep/curves": res.curves}
    return stored(part, run(part))


def collect(skip: tuple = ()) -> dict:
    """Every recorded array, but those of the parts named in ``skip``."""
    out: dict = {}
    for part in parts():
        if part not in skip:
            out.update(collect_part(part))
    return out


def recorded(skip: tuple = ()) -> dict:
    """The fixture's arrays, but those of the parts named in ``skip``."""
    with np.load(FIXTURE) as data:
        out = {k.replace("__", "/"): data[k] for k in data.files}
    return {k: v for k, v in out.items() if part_of(k) not in skip}


def compare(recorded, current) -> list[str]:
    problems = [f"{k}: missing now" for k in recorded if k not in current]
    problems += [f"{k}: not recorded" for k in current if k not in recorded]
    for k in recorded:
        if k in current and not np.array_equal(np.asarray(recorded[k]), np.asarray(current[k])):
            problems.append(f"{k}: differs")
    return problems
