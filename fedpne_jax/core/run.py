"""Running any registered algorithm: seeds of one configuration, a grid of configurations, or
(configuration, seed) pairs; one executor for all.

The algorithm is found from the configuration's type (fedpne_jax.core.registry).  Every call
derives tables and static shapes on the host, compiles the vmapped ``run_single`` once per shape
(fedpne_jax.core.executor), runs it, and checks every run's flags: NaN/inf from the objective raises
ObjectiveError naming the objective and the seeds; a table that overflowed is grown through the
algorithm's ``grow`` hook and exactly the affected runs are rerun (results do not depend on table
sizes).  Nothing is ever truncated or averaged silently.

Seed i runs with key fold_in(key(base_seed), i), so its numbers do not depend on which or how many
seeds run beside it, on the grid it runs in, nor on the devices.  Configurations that differ only in
scalar hyper-parameters (data, the algorithm's Params) share one compiled program: their Params are
stacked along a grid axis and every run reads its own grid point.
"""
from __future__ import annotations

from typing import Sequence

import jax
import numpy as np

from fedpne_jax.core import executor, registry
from fedpne_jax.core.algorithm import Algorithm, check_inputs as check_pair
from fedpne_jax.core.errors import CapacityError, raise_for_objective
from fedpne_jax.core.grid import group_indices, per_config
from fedpne_jax.core.result import RunResult


def check_inputs(config, objective) -> Algorithm:
    """The algorithm of ``config``, after every check a run can make before compiling."""
    algorithm = registry.for_config(config)
    check_pair(algorithm, config, objective)
    return algorithm


def static_key(config, objective):
    """Configurations with equal keys run as one program (same algorithm, shapes and kinds)."""
    algorithm = registry.for_config(config)
    return algorithm.name, algorithm.make_static(config, objective, None)


def run(config, objective, seeds: int | Sequence[int] = 1, base_seed: int = 0, grow: bool = True,
        devices=None) -> RunResult:
    """Run the algorithm of ``config`` (any registered configuration, see :func:`fedpne_jax.make_config`)
    on ``objective`` for the given seeds.

    ``seeds``: a count S (seed indices 0..S-1) or distinct seed indices.  ``grow``: when a table an
    algorithm sizes on the host overflows (Fed-PNE's node table), rerun the affected seeds with a
    larger one (else raise CapacityError).  ``devices``: 'all', a count or a list of devices to shard
    the seeds over (default: :func:`fedpne_jax.set_default_devices`, initially all).
    """
    check_inputs(config, objective)
    ids = executor.seed_ids(seeds)
    base_seed = executor.check_base_seed(base_seed)
    return _run_pairs([config], objective, np.zeros(ids.size, np.int64), ids, base_seed, grow, devices)[0]


def run_grid(configs: Sequence, objective, seeds: int | Sequence[int] = 1, base_seed: int = 0, grow: bool = True,
             devices=None) -> list[RunResult]:
    """Every configuration of ``configs`` for the same seeds; result i equals ``run(configs[i], ...)``
    number for number.  Configurations are grouped by :func:`static_key` into the fewest compiled
    programs (any mix of algorithms); two that resolve to the same configuration are refused.  Build
    ``configs`` with :func:`fedpne_jax.grid_product`."""
    configs = list(configs)
    if not configs:
        raise ValueError("configs must hold at least one configuration")
    for config in configs:
        check_inputs(config, objective)
    check_distinct(configs)
    ids = executor.seed_ids(seeds)
    base_seed = executor.check_base_seed(base_seed)
    results: list = [None] * len(configs)
    for members in group_indices([static_key(c, objective) for c in configs]):
        grid = np.repeat(np.arange(len(members)), ids.size)
        out = _run_pairs([configs[i] for i in members], objective, grid, np.tile(ids, len(members)), base_seed,
                         grow, devices)
        for i, result in zip(members, out):
            results[i] = result
    return results


def check_distinct(configs: Sequence) -> None:
    """ValueError naming the first two configurations that are the same once resolved (equal
    resolved parameters, the noise compared as its kind and scale, so 'gaussian:0.1' equals
    'gaussian:0.10'): a grid would run the same runs twice and count them as two points."""
    seen: dict = {}
    for i, config in enumerate(configs):
        key = _resolved_key(config)
        if key in seen:
            j = seen[key]
            noise = (f": noise {configs[j].noise!r} and {config.noise!r} are the same noise"
                     if getattr(config, "noise", None) != getattr(configs[j], "noise", None) else "")
            raise ValueError(f"configs {j} and {i} are the same configuration{noise}; a grid would run it twice; "
                             f"give each configuration once")
        seen[key] = i


def _resolved_key(config):
    resolved = dict(config.resolved())
    resolved.pop("noise", None)       # kept as noise_kind and noise_scale
    return type(config), _hashable(resolved)


def _hashable(value):
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, np.ndarray):
        return tuple(_hashable(v) for v in value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value


def run_pairs(configs: Sequence, objective, grid_index, seed_ids, base_seed: int = 0, grow: bool = True,
              devices=None, pad_to: int | None = None, check: bool = True) -> list[RunResult | None]:
    """Runs given as (configuration, seed) pairs, all in one compiled program: run j is seed
    ``seed_ids[j]`` of ``configs[grid_index[j]]``.  The configurations must share a :func:`static_key`.
    Returns one RunResult per configuration holding its runs in the order given (None for a
    configuration without runs); compile and run seconds are shared out in proportion to the runs.
    ``pad_to``: compute the first call with at least this many runs (see executor.execute), so that a
    sweep's calls of one group share one program.  ``check=False`` skips the checks of the
    configurations (a sweep checks them once, not at every call)."""
    configs = list(configs)
    if check:
        for config in configs:
            check_inputs(config, objective)
        if len({static_key(c, objective) for c in configs}) > 1:
            raise ValueError("run_pairs: the configurations differ in shapes or kinds (algorithm, M, T, k, "
                             "checkpoints, noise or pull kind, sampling, DP, split, precision, ...); use run_grid, "
                             "which groups them")
    grid_index = np.asarray(grid_index, np.int64)
    ids = np.asarray(seed_ids, np.int64)
    if grid_index.shape != ids.shape or ids.ndim != 1 or ids.size == 0:
        raise ValueError("grid_index and seed_ids must be non-empty 1-D arrays of equal length")
    if np.any(grid_index < 0) or np.any(grid_index >= len(configs)):
        raise ValueError(f"grid_index must lie in [0, {len(configs)})")
    executor.seed_ids(ids, distinct=False)      # a pair may repeat here: each run depends on its pair alone
    base_seed = executor.check_base_seed(base_seed)
    return _run_pairs(configs, objective, grid_index, ids, base_seed, grow, devices, pad_to)


def stack_params(algorithm: Algorithm, configs: Sequence, tables):
    """The Params of every configuration, stacked along a leading grid axis."""
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]),
                        *[algorithm.make_params(c, tables) for c in configs])


def _params(algorithm, configs, tables, single: bool):
    # One configuration runs with plain (unstacked) params: the program every single run has used.
    return algorithm.make_params(configs[0], tables) if single else stack_params(algorithm, configs, tables)


def _run_pairs(configs, objective, grid_index, ids, base_seed, grow, devices, pad_to=None):
    algorithm = registry.for_config(configs[0])
    single = len(configs) == 1
    out, tables, compile_s, run_s = _run_growing(algorithm, configs, objective, None if single else grid_index,
                                                 ids, base_seed, grow, devices, pad_to)

    def build(config, rows):
        share = rows.size / ids.size
        name, resolved, metrics = algorithm.describe(config, tables, jax.tree.map(lambda a: a[rows], out))
        return RunResult.build(name, resolved, objective, ids[rows], base_seed, config.checkpoint_rounds,
                               out.curve[rows], out.final_regret[rows], metrics, compile_s * share, run_s * share)

    return per_config(configs, grid_index, build)


def _run_growing(algorithm, configs, objective, grid_index, ids, base_seed, grow, devices, pad_to):
    """Execute all runs, rerunning those whose tables overflowed with the larger ones the algorithm's
    ``grow`` gives.  Returns (outputs for every run, final tables, compile s, run s)."""
    tables = algorithm.tables(configs) if algorithm.tables is not None else None
    outputs = None
    pending = np.arange(ids.size)
    compile_s = run_s = 0.0
    while pending.size:
        static = algorithm.make_static(configs[0], objective, tables)
        params = _params(algorithm, configs, tables, grid_index is None)
        out, c_s, r_s = executor.execute(algorithm.run_single, static, params, objective, base_seed, ids[pending],
                                         grid_index=None if grid_index is None else grid_index[pending],
                                         devices=devices, pad_to=pad_to)
        pad_to = None      # reruns are a new shape anyway
        compile_s, run_s = compile_s + c_s, run_s + r_s
        raise_for_objective(objective, out.flags, ids[pending])
        if outputs is None:
            outputs = jax.tree.map(lambda a: np.zeros((ids.size,) + a.shape[1:], a.dtype), out)
        done = out.flags == 0
        for full, part in zip(outputs, out):
            full[pending[done]] = part[done]
        failed = ~done
        if not failed.any():
            break
        seeds = ids[pending[failed]]
        if algorithm.grow is None:
            raise CapacityError(f"{algorithm.name}: a fixed-size table overflowed (seeds {seeds[:10].tolist()}); "
                                f"this is a bug: tables are sized so that they cannot")
        tables = algorithm.grow(tables, jax.tree.map(lambda a: a[failed], out), grow, seeds)
        pending = pending[failed]
    return outputs, tables, compile_s, run_s


def compiled_memory(config, objective, seeds: int, devices=None):
    """XLA's memory statistics (arguments, outputs, temporaries, peak) of the program that runs
    ``seeds`` seeds of ``config`` at its initial tables, compiling it if needed; for benchmarks and
    capacity planning.  With several devices: one device's share."""
    return _memory([config], objective, seeds, devices)


def pairs_memory(configs: Sequence, objective, runs: int, devices=None) -> int:
    """Bytes one device needs for a :func:`run_pairs` call of ``runs`` runs of these configurations
    (which must share a static key), from XLA's memory analysis of the very program that call
    compiles (so sizing a sweep's chunks costs no extra compilation when the size fits)."""
    return executor.memory_bytes(_memory(list(configs), objective, runs, devices))


def _memory(configs, objective, runs, devices):
    algorithm = check_inputs(configs[0], objective)
    tables = algorithm.tables(configs) if algorithm.tables is not None else None
    single = len(configs) == 1
    return executor.memory(algorithm.run_single, algorithm.make_static(configs[0], objective, tables),
                           _params(algorithm, configs, tables, single), objective, runs, grid=not single,
                           devices=devices)
