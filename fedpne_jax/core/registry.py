"""Every algorithm by name: ``run(name, config, objective, seeds)`` and ``config_type(name)``.

Fed-PNE and DP-Fed-PNE run through :func:`fedpne_jax.fedpne.run` (its node table grows on demand);
the baselines through :func:`fedpne_jax.baseline.run_algorithm`.  Baseline modules are imported on
first use.
"""
from __future__ import annotations

import importlib

from fedpne_jax.core.config import FedPNEConfig

BASELINES = {
    "hct": "fedpne_jax.algorithms.trees.hct",
    "hoo": "fedpne_jax.algorithms.trees.hoo",
    "fed1ucb": "fedpne_jax.algorithms.arms.fed1ucb",
    "kernelts": "fedpne_jax.algorithms.gp.kernelts",
    "gpucb": "fedpne_jax.algorithms.gp.gpucb",
    "bo": "fedpne_jax.algorithms.gp.bo",
    "bbo": "fedpne_jax.algorithms.gp.bbo",
    "fnucb": "fedpne_jax.algorithms.arms.fnucb",
}
NAMES = ("fedpne",) + tuple(BASELINES)


def baseline(name: str):
    """The :class:`fedpne_jax.baseline.Algorithm` of a baseline."""
    if name not in BASELINES:
        raise ValueError(f"algorithm must be one of {NAMES}, got {name!r}")
    return importlib.import_module(BASELINES[name]).ALGORITHM


def config_type(name: str) -> type:
    return FedPNEConfig if name == "fedpne" else baseline(name).config_type


def run(name: str, config, objective, seeds=1, base_seed: int = 0, **kwargs):
    if name == "fedpne":
        from fedpne_jax.algorithms.fedpne.engine import run as run_fedpne
        return run_fedpne(config, objective, seeds=seeds, base_seed=base_seed, **kwargs)
    from fedpne_jax.core.algorithm import run_algorithm
    return run_algorithm(baseline(name), config, objective, seeds=seeds, base_seed=base_seed, **kwargs)


def parse_value(text: str):
    """A command-line or sweep-file value: int, float, bool, none, else the string itself.  The config's
    own validation then rejects a value of the wrong kind, naming the parameter."""
    low = text.strip().lower()
    if low in ("none", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip()


def make_config(name: str, **options):
    """The config of algorithm ``name`` from keyword options; an option the algorithm does not have
    raises ValueError listing the ones it has."""
    import dataclasses

    cls = config_type(name)
    fields = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(options) - set(fields))
    if unknown:
        raise ValueError(f"algorithm {name!r} has no parameter {', '.join(map(repr, unknown))}; "
                         f"its parameters are {', '.join(fields)}")
    return cls(**options)
