"""Hyper-parameter grids for any algorithm: many configurations, one compiled program per shape.

Scalar hyper-parameters are data (each algorithm's ``Params``), so configurations that differ only in
them run in one program: their Params are stacked along a grid axis and every run reads its own grid
point, vmapped together with the seeds (and sharded over devices like any batch).  Configurations that
differ in what decides the program (shapes, kinds: the algorithm's static key) form separate groups,
one compilation each.

    configs = grid.product(fp.FedPNEConfig(num_clients=10), c=[0.05, 0.1, 0.2], rho=[0.5, 0.75])
    results = grid.run_grid("fedpne", configs, objective, seeds=500)     # one compilation

Result i equals ``algorithms.run(name, configs[i], objective, seeds)`` number for number.
"""
from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from fedpne_jax.core import registry as algorithms, executor as driver


def product(base, **values) -> list:
    """Configurations ``base.replace(**point)`` for every point of the Cartesian product of ``values``
    (keyword order; the last keyword varies fastest)."""
    return [base.replace(**point) for point in points(**values)]


def points(**values) -> list[dict]:
    """The grid points of ``values`` (name -> list of values) as dicts, in :func:`product`'s order."""
    names = list(values)
    for name, options in values.items():
        if isinstance(options, (str, bytes)) or not hasattr(options, "__iter__"):
            raise ValueError(f"grid values of {name!r} must be a list, got {options!r}")
        options = list(options)
        if not options:
            raise ValueError(f"grid values of {name!r} must not be empty")
        if len({repr(v) for v in options}) != len(options):
            raise ValueError(f"grid values of {name!r} repeat a value: {options!r}")
    return [dict(zip(names, combo)) for combo in itertools.product(*(list(values[n]) for n in names))]


def group_indices(keys: Sequence) -> list[list[int]]:
    """Indices of equal keys, groups in order of first appearance."""
    groups: dict = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def per_config(configs: Sequence, grid_index, build) -> list:
    """``build(config, rows)`` for each configuration, rows the indices of its runs in the batch (None
    for a configuration without runs): how one batch of (configuration, seed) runs becomes results."""
    grid_index = np.asarray(grid_index)
    results = []
    for g, config in enumerate(configs):
        rows = np.flatnonzero(grid_index == g)
        results.append(build(config, rows) if rows.size else None)
    return results


def _is_fedpne(name: str) -> bool:
    return name in ("fedpne", "dp-fedpne")


def check_inputs(name: str, config, objective) -> None:
    """The algorithm's own checks of a (config, objective) pair, before anything compiles."""
    if _is_fedpne(name):
        from fedpne_jax.algorithms.fedpne import engine as fedpne
        fedpne.check_inputs(config, objective)
    else:
        from fedpne_jax.core import algorithm as baseline
        baseline.check_inputs(algorithms.baseline(name), config, objective)


def static_key(name: str, config, objective):
    """Configurations with equal keys share one compiled program (see the algorithm's make_static)."""
    if _is_fedpne(name):
        from fedpne_jax.algorithms.fedpne import engine as fedpne
        return ("fedpne", fedpne.static_key(config, objective))
    return (name, algorithms.baseline(name).make_static(config, objective))


def run_pairs(name: str, configs: Sequence, objective, grid_index, seed_ids, base_seed: int = 0,
              devices=None, pad_to: int | None = None, check: bool = True) -> list:
    """Runs given as (configuration, seed) pairs of one static group, in one compiled program: run j is
    seed ``seed_ids[j]`` of ``configs[grid_index[j]]``.  One RunResult per configuration (None for one
    without runs); see :func:`fedpne_jax.fedpne.run_pairs` for Fed-PNE's node-table growth.
    ``check=False``: the configurations were checked already (see :func:`check_inputs`)."""
    configs = list(configs)
    if _is_fedpne(name):
        from fedpne_jax.algorithms.fedpne import engine as fedpne
        return fedpne.run_pairs(configs, objective, grid_index, seed_ids, base_seed, devices=devices, pad_to=pad_to,
                                check=check)
    return _baseline_pairs(name, configs, objective, grid_index, seed_ids, base_seed, devices, pad_to, check)


def _baseline_pairs(name, configs, objective, grid_index, seed_ids, base_seed, devices, pad_to, check=True):
    from fedpne_jax.core import algorithm as baseline

    for config in configs if check else ():
        check_inputs(name, config, objective)
    if check and len({static_key(name, c, objective) for c in configs}) > 1:
        raise ValueError(f"{name}: the configurations differ in what decides the compiled program; use run_grid")
    return baseline.run_pairs(algorithms.baseline(name), configs, objective, grid_index, seed_ids, base_seed,
                              devices, pad_to)


def run_grid(name: str, configs: Sequence, objective, seeds=1, base_seed: int = 0, devices=None) -> list:
    """Every configuration for the same seeds, grouped into the fewest compiled programs; result i
    equals ``algorithms.run(name, configs[i], objective, seeds, base_seed)`` number for number."""
    configs = list(configs)
    if not configs:
        raise ValueError("configs must hold at least one configuration")
    if _is_fedpne(name):
        from fedpne_jax.algorithms.fedpne import engine as fedpne
        return fedpne.run_grid(configs, objective, seeds, base_seed, devices=devices)
    for config in configs:
        check_inputs(name, config, objective)
    ids = driver.seed_ids(seeds)
    results: list = [None] * len(configs)
    for members in group_indices([static_key(name, c, objective) for c in configs]):
        grid_index = np.repeat(np.arange(len(members)), ids.size)
        out = _baseline_pairs(name, [configs[i] for i in members], objective, grid_index,
                              np.tile(ids, len(members)), base_seed, devices, None, check=False)
        for i, result in zip(members, out):
            results[i] = result
    return results


def pairs_memory(name: str, configs: Sequence, objective, runs: int, devices=None) -> int:
    """Bytes one device needs for a :func:`run_pairs` call of ``runs`` runs of these configurations
    (XLA's memory analysis of the program that call uses; compiling it here is not wasted)."""
    configs = list(configs)
    if _is_fedpne(name):
        from fedpne_jax.algorithms.fedpne import engine as fedpne
        return fedpne.pairs_memory(configs, objective, runs, devices=devices)
    from fedpne_jax.core import algorithm as baseline

    algorithm = algorithms.baseline(name)
    single = len(configs) == 1
    params = algorithm.make_params(configs[0]) if single else baseline._stack([algorithm.make_params(c) for c in configs])
    stats = driver.memory(algorithm.run_single, algorithm.make_static(configs[0], objective), params, objective,
                          runs, grid=not single, devices=devices)
    return driver.memory_bytes(stats)
