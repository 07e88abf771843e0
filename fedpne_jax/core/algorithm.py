"""What every baseline shares: its configuration's common fields and the batched runner.

A baseline is one module (``fedpne_jax/algorithms/<family>/<name>.py``) exposing an :class:`Algorithm`:

* ``config_type``: a frozen dataclass subclassing :class:`BaselineConfig` whose ``__post_init__``
  validates every field (``ValueError`` naming it) before anything is traced;
* ``make_static(config, objective) -> Static``: a frozen, hashable dataclass of everything that
  decides the compiled program (shapes, kinds, capacities);
* ``make_params(config) -> Params``: a NamedTuple of numpy scalars/arrays, the dynamic
  hyper-parameters (data, not structure, so a grid of them can share one program);
* ``run_single(static, params, objective, key) -> outputs``: one run, a NamedTuple with at least
  ``curve`` (C,), ``final_regret`` () and ``flags`` () int32 (errors.FLAG_* bits), plus the fields named
  in ``metrics``.

:func:`run_algorithm` vmaps ``run_single`` over seeds through :mod:`fedpne_jax.driver` (the same
keys, compile cache, sharding and x64 handling as Fed-PNE) and returns a :class:`RunResult`;
:func:`run_pairs` runs (configuration, seed) pairs of a hyper-parameter grid in one program.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Sequence

import jax
import numpy as np

from fedpne_jax.core import checkpoints, executor as driver
from fedpne_jax.core.config import MAX_HORIZON, NoiseSpec, parse_noise
from fedpne_jax.core.errors import FLAG_CAPACITY, CapacityError, raise_for_objective
from fedpne_jax.core.result import RunResult


@dataclasses.dataclass(frozen=True)
class BaselineConfig(NoiseSpec):
    """Fields every baseline has: the horizon T (rounds), the observation noise and the checkpoints.

    Subclasses add their own fields (all with defaults) and call ``super().__post_init__()``.
    """

    horizon: int = 10_000
    noise: str = "gaussian:0.1"
    checkpoints: int = 100

    def __post_init__(self):
        if isinstance(self.horizon, bool) or not isinstance(self.horizon, int) or not 1 <= self.horizon <= MAX_HORIZON:
            raise ValueError(f"horizon (T) must be an integer in [1, {MAX_HORIZON}], got {self.horizon!r}")
        if parse_noise(self.noise)[1] > 1e18:
            raise ValueError(f"noise scale must be <= 1e18 (its square must be a float32), got {self.noise!r}")
        if isinstance(self.checkpoints, bool) or not isinstance(self.checkpoints, int) or self.checkpoints < 1:
            raise ValueError(f"checkpoints must be an integer >= 1, got {self.checkpoints!r}")

    @property
    def checkpoint_rounds(self):
        return checkpoints.rounds(self.horizon, self.checkpoints)

    def resolved(self) -> dict:
        """Every parameter with defaults filled in, as written to result files."""
        out = dataclasses.asdict(self)
        out.update(noise_kind=self.noise_kind, noise_scale=self.noise_scale)
        return out


@dataclasses.dataclass(frozen=True)
class Algorithm:
    name: str
    config_type: type
    make_static: Callable
    make_params: Callable
    run_single: Callable
    metrics: tuple = ()
    federated: bool = False      # runs on M clients (config.num_clients must equal the objective's)
    check: Optional[Callable] = None   # (config, objective) -> None: further checks before compiling


def check_inputs(algorithm: Algorithm, config, objective) -> None:
    if not isinstance(config, algorithm.config_type):
        raise ValueError(f"config must be a {algorithm.config_type.__name__} for algorithm {algorithm.name!r}, "
                         f"got {type(config).__name__}")
    if algorithm.federated and config.num_clients != objective.num_clients:
        raise ValueError(f"num_clients: the config has M={config.num_clients} but objective "
                         f"{objective.name!r} was built for {objective.num_clients} clients")
    if config.noise_kind == "bernoulli" and not 0.0 < objective.f_star <= 1.0:
        raise ValueError(f"noise 'bernoulli' needs objective values in [0, 1]; objective {objective.name!r} "
                         f"has f* = {objective.f_star}")
    if algorithm.check is not None:
        algorithm.check(config, objective)


def run_algorithm(algorithm: Algorithm, config, objective, seeds: int | Sequence[int] = 1,
                  base_seed: int = 0, devices=None) -> RunResult:
    """Run a baseline for the given seeds (a count S, or seed indices) in one compiled call."""
    check_inputs(algorithm, config, objective)
    ids = driver.seed_ids(seeds)
    return run_pairs(algorithm, [config], objective, np.zeros(ids.size, np.int64), ids, base_seed, devices)[0]


def _stack(tables: list):
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *tables)


def run_pairs(algorithm: Algorithm, configs: Sequence, objective, grid_index, seed_ids, base_seed: int = 0,
              devices=None, pad_to: int | None = None) -> list:
    """Runs given as (configuration, seed) pairs in one compiled program: run j is seed ``seed_ids[j]``
    of ``configs[grid_index[j]]`` (checked configurations sharing one ``make_static``; their Params are
    stacked along a grid axis).  One RunResult per configuration (None for one without runs), with
    compile and run seconds shared out in proportion to the runs."""
    grid_index, ids = np.asarray(grid_index, np.int64), driver.seed_ids(seed_ids)
    base_seed = driver.check_base_seed(base_seed)
    single = len(configs) == 1
    params = algorithm.make_params(configs[0]) if single else _stack([algorithm.make_params(c) for c in configs])
    out, compile_s, run_s = driver.execute(algorithm.run_single, algorithm.make_static(configs[0], objective), params,
                                           objective, base_seed, ids, grid_index=None if single else grid_index,
                                           devices=devices, pad_to=pad_to)
    raise_for_objective(objective.name, out.flags, ids)
    if (out.flags & FLAG_CAPACITY).any():
        raise CapacityError(f"{algorithm.name}: a fixed-size table overflowed (seeds "
                            f"{ids[(out.flags & FLAG_CAPACITY) != 0][:10].tolist()}); this is a bug: "
                            f"tables are sized so that they cannot")
    from fedpne_jax.core.grid import per_config

    def build(config, rows):
        share = rows.size / ids.size
        metrics = {m: np.asarray(getattr(out, m))[rows] for m in algorithm.metrics}
        return RunResult.build(algorithm.name, config.resolved(), objective, ids[rows], base_seed,
                               config.checkpoint_rounds, np.asarray(out.curve)[rows],
                               np.asarray(out.final_regret)[rows], metrics, compile_s * share, run_s * share)

    return per_config(configs, grid_index, build)
