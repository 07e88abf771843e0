"""A prepared batch: one call's algorithm, tables, static shapes, parameters and devices, resolved
once from its configurations and objective and then passed down to everything the call does (the
host-memory check, sizing calls from XLA's memory analysis, execution, growth after an overflow).

Only the tables change during a call: an algorithm's ``grow`` hook enlarges them after an overflow,
and :meth:`Batch.with_tables` gives the batch for the larger ones.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

import jax
import numpy as np

from fedpne_jax.core import executor, sharding
from fedpne_jax.core.algorithm import Algorithm


def stack_params(algorithm: Algorithm, configs: Sequence, tables):
    """The Params of every configuration, stacked along a leading grid axis."""
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]),
                        *[algorithm.make_params(c, tables) for c in configs])


def _params(algorithm: Algorithm, configs: Sequence, tables):
    # One configuration runs with plain (unstacked) params: the program every single run has used.
    return algorithm.make_params(configs[0], tables) if len(configs) == 1 else stack_params(algorithm, configs, tables)


@dataclasses.dataclass(frozen=True, eq=False)
class Batch:
    algorithm: Algorithm
    configs: tuple          # sharing one static key, so one compiled program
    objective: Any
    devices: tuple          # selected once (sharding.select_devices)
    tables: Any
    static: Any
    params: Any             # one configuration's Params, or all of them stacked along a grid axis

    @property
    def grid(self) -> bool:
        """Whether the params are stacked, each run reading its own grid point."""
        return len(self.configs) > 1

    def with_tables(self, tables) -> Batch:
        return dataclasses.replace(self, tables=tables,
                                   static=self.algorithm.make_static(self.configs[0], self.objective, tables),
                                   params=_params(self.algorithm, self.configs, tables))

    def execute(self, base_seed: int, ids: np.ndarray, grid_index=None, pad_to: int | None = None):
        """(outputs, compile seconds, run seconds) of these runs: see executor.execute."""
        return executor.execute(self.algorithm.run_single, self.static, self.params, self.objective, base_seed, ids,
                                grid_index=grid_index, devices=self.devices, pad_to=pad_to)

    def memory(self, runs: int):
        """XLA's memory statistics of the program :meth:`execute` runs for ``runs`` runs (one device's share)."""
        return executor.memory(self.algorithm.run_single, self.static, self.params, self.objective, runs,
                               grid=self.grid, devices=self.devices)

    def run_bytes(self, runs: int | None = None) -> int:
        """Host bytes one run keeps until its result is built: its outputs (the arrays calls stream
        into), the result's 8-byte copies of them (curves and metrics become float64 / int64) and its
        seed and grid indices.  From the outputs' shapes, traced, not compiled, as for a call of
        ``runs`` runs (which then reuses the trace)."""
        shapes = executor.output_shapes(self.algorithm.run_single, self.static,
                                        self.algorithm.make_params(self.configs[0], self.tables), self.objective,
                                        self.devices, runs)
        return sum(math.prod(s.shape) * (s.dtype.itemsize + 8) for s in jax.tree.leaves(shapes)) + 16


def prepare(algorithm: Algorithm, configs: Sequence, objective, devices=None) -> Batch:
    """The batch of ``configs`` (which share a static key) on ``objective`` at the algorithm's initial
    tables, on the devices of the spec ``devices`` (see sharding.select_devices)."""
    configs = tuple(configs)
    tables = algorithm.initial_tables(list(configs), objective)
    return Batch(algorithm, configs, objective, sharding.select_devices(devices), tables,
                 algorithm.make_static(configs[0], objective, tables), _params(algorithm, configs, tables))
