"""Hyper-parameter grids for any algorithm: many configurations, one compiled program per shape.

Scalar hyper-parameters are data (each algorithm's ``Params``), so configurations that differ only in
them run in one program: their Params are stacked along a grid axis and every run reads its own grid
point, vmapped together with the seeds (and sharded over devices like any batch).  Configurations that
differ in what decides the program (shapes, kinds: the algorithm's static key) form separate groups,
one compilation each.

    configs = fp.grid_product(fp.FedPNEConfig(num_clients=10), c=[0.05, 0.1, 0.2], rho=[0.5, 0.75])
    results = fp.run_grid(configs, objective, seeds=500)     # one compilation

Result i equals ``fp.run(configs[i], objective, seeds)`` number for number (fedpne_jax/core/run.py).
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Sequence

import numpy as np


def product(base, **values) -> list:
    """Configurations ``base.replace(**point)`` for every point of the Cartesian product of ``values``
    (keyword order; the last keyword varies fastest).  A name that is not a field of ``base`` is
    refused by name, with the fields there are (ValueError), before any configuration is built."""
    if dataclasses.is_dataclass(base):
        fields = [f.name for f in dataclasses.fields(base) if f.init]
        unknown = [name for name in values if name not in fields]
        if unknown:
            raise ValueError(f"{type(base).__name__} has no parameter {unknown[0]!r}; its parameters are "
                             f"{', '.join(fields)}")
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
