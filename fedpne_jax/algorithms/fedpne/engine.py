"""The Fed-PNE engine: S seeds x M clients in one compiled, vmapped call.

``run(config, objective, seeds)`` is the public entry point.  It derives tables and static shapes on
the host, compiles ``run_batch`` once per shape (cached), runs it, and checks every seed's flags: a
node table that overflowed is grown and the affected seeds rerun (results do not depend on the
capacity), a table that may not grow raises CapacityError, and NaN/inf from the objective raises
ObjectiveError naming the objective and the seeds.  Nothing is ever truncated or averaged silently.

``run_grid(configs, ...)`` runs configurations that differ only in scalar hyper-parameters in one
program (their tables stacked along a grid axis); ``run_pairs`` runs any (configuration, seed) pairs
of one such group (a sweep's calls).  All three share the growth loop above.

Seed i runs with key fold_in(key(base_seed), i), so its numbers do not depend on which or how many
seeds run beside it, on the grid it runs in, nor on the devices.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.core import executor as driver
from fedpne_jax.algorithms.fedpne import phase as phase_lib
from fedpne_jax.core.executor import seed_key, trace_count  # noqa: F401  (public names)
from fedpne_jax.core.config import FedPNEConfig
from fedpne_jax.core.errors import CapacityError, raise_for_objective
from fedpne_jax.core.grid import group_indices, per_config
from fedpne_jax.algorithms.fedpne.plan import (MAX_CAPACITY, Params, Static, check_feasible, depth_limit, initial_capacity,
                               make_params, make_static)
from fedpne_jax.core.result import RunResult


class RunOutput(NamedTuple):
    final_regret: jax.Array    # R(T) / M
    curve: jax.Array           # (C,) R / M at the checkpoint rounds
    phases: jax.Array
    uploads: jax.Array         # sum_p |K^p| over uploaded phases (per client)
    depth: jax.Array
    recommendation: jax.Array  # (D,)
    max_active: jax.Array
    flags: jax.Array


def run_single(static: Static, params: Params, objective, key) -> RunOutput:
    """One seed of Fed-PNE: phases until round T (or until a flag stops the run)."""
    partition_key, sample_key = run_keys(key)
    state = phase_lib.init_state(static, objective, partition_key)

    def body(s):
        s = phase_lib.expand_until_ready(static, params, s)
        after = phase_lib.run_phase(static, params, objective, sample_key, s)
        return jax.tree.map(lambda a, b: jnp.where(s.flags == 0, a, b), after, s)

    state = jax.lax.while_loop(lambda s: (s.t < static.horizon) & (s.flags == 0), body, state)
    return RunOutput(state.regret, state.curve, state.phases, state.uploads, state.depth_pulled,
                     state.recommendation, state.max_active, state.flags)


def run_keys(key):
    """(partition key, sampling key) of a run: the partition never shares randomness with rewards."""
    return jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)


def run_batch(static: Static, params: Params, objective, base_seed, seed_ids) -> RunOutput:
    """All seeds ``seed_ids`` of one configuration, vmapped."""
    return driver.batch(run_single, static, params, objective, base_seed, seed_ids)


def compiled_memory(config: FedPNEConfig, objective, seeds: int, capacity: int | None = None, devices=None):
    """XLA's memory statistics (arguments, outputs, temporaries, peak) of the program that runs
    ``seeds`` seeds of ``config``, compiling it if needed; for benchmarks and capacity planning.
    With several devices: one device's share."""
    check_inputs(config, objective)
    depth = depth_limit(config)
    static = make_static(config, objective, capacity or initial_capacity(config), depth)
    return driver.memory(run_single, static, make_params(config, depth), objective, seeds, devices=devices)


def pairs_memory(configs: Sequence[FedPNEConfig], objective, runs: int, devices=None) -> int:
    """Bytes one device needs for a :func:`run_pairs` call of ``runs`` runs of these configurations
    (which must share a static key), from XLA's memory analysis of the very program that call
    compiles (so sizing a sweep's chunks costs no extra compilation when the size fits)."""
    configs = list(configs)
    depth = max(depth_limit(c) for c in configs)
    capacity = max(initial_capacity(c) for c in configs)
    static = make_static(configs[0], objective, capacity, depth)
    single = len(configs) == 1
    params = make_params(configs[0], depth) if single else stack_params(configs, depth)
    stats = driver.memory(run_single, static, params, objective, runs, grid=not single, devices=devices)
    return driver.memory_bytes(stats)


def check_inputs(config: FedPNEConfig, objective) -> None:
    """Errors a run can detect before compiling."""
    if not isinstance(config, FedPNEConfig):
        raise ValueError(f"config must be a FedPNEConfig, got {type(config).__name__}")
    if objective.num_clients != config.num_clients:
        raise ValueError(f"num_clients: the config has M={config.num_clients} but objective "
                         f"{objective.name!r} was built for {objective.num_clients} clients")
    check_feasible(config)
    if config.noise_kind == "bernoulli":
        if not 0.0 < objective.f_star <= 1.0:
            raise ValueError(f"noise 'bernoulli' needs objective values in [0, 1]; objective {objective.name!r} "
                             f"has f* = {objective.f_star}")
        shift = objective.data.get("shift") if isinstance(objective.data, dict) else None
        if shift is not None and np.any(np.asarray(shift) != 0):
            raise ValueError(f"noise 'bernoulli' needs values in [0, 1], but objective {objective.name!r} has "
                             f"'shift' heterogeneity (N(0, 1) client shifts); use heterogeneity 'none'")


def static_key(config: FedPNEConfig, objective) -> Static:
    """What decides a configuration's compiled program apart from the table sizes: configurations with
    equal keys can run as one grid (same M, T, k, D, checkpoints, noise and pull kind, sampling, DP on
    or off, split, precision)."""
    return make_static(config, objective, capacity=1, depth=0)


def stack_params(configs: Sequence[FedPNEConfig], depth: int) -> Params:
    """The Params of every configuration, stacked along a leading grid axis (tables to ``depth``)."""
    tables = [make_params(c, depth) for c in configs]
    return Params(*[np.stack(field) for field in zip(*tables)])


def run(config: FedPNEConfig, objective, seeds: int | Sequence[int] = 1, base_seed: int = 0,
        grow: bool = True, devices=None) -> RunResult:
    """Run Fed-PNE (DP-Fed-PNE when config.dp_epsilon is set) for the given seeds.

    ``seeds``: a count S (seed indices 0..S-1) or explicit seed indices.  ``grow``: when a node
    table overflows, rerun the affected seeds with a capacity of at least twice their demand (else
    raise CapacityError).  ``devices``: 'all', a count or a list of devices to shard the seeds over
    (default: :func:`fedpne_jax.sharding.set_default_devices`, initially all).
    """
    check_inputs(config, objective)
    ids = driver.seed_ids(seeds)
    base_seed = driver.check_base_seed(base_seed)
    return _run_pairs([config], objective, np.zeros(ids.size, np.int64), ids, base_seed, grow, devices)[0]


def run_grid(configs: Sequence[FedPNEConfig], objective, seeds: int | Sequence[int] = 1, base_seed: int = 0,
             grow: bool = True, devices=None) -> list[RunResult]:
    """Every configuration of ``configs`` for the same seeds; result i equals ``run(configs[i], ...)``
    number for number.

    Configurations that differ only in scalar hyper-parameters (c, c1, delta, rho, nu, the noise
    scale, dp_epsilon, dp_delta, capacity) share one compiled program: their tables are stacked and
    vmapped together with the seeds.  Configurations that differ in shapes or kinds run as separate
    groups, one program each.  Build ``configs`` with :func:`fedpne_jax.grid.product`.
    """
    configs = list(configs)
    if not configs:
        raise ValueError("configs must hold at least one FedPNEConfig")
    for config in configs:
        check_inputs(config, objective)
    ids = driver.seed_ids(seeds)
    base_seed = driver.check_base_seed(base_seed)
    results: list = [None] * len(configs)
    for members in group_indices([static_key(c, objective) for c in configs]):
        grid = np.repeat(np.arange(len(members)), ids.size)
        out = _run_pairs([configs[i] for i in members], objective, grid, np.tile(ids, len(members)), base_seed,
                         grow, devices)
        for i, result in zip(members, out):
            results[i] = result
    return results


def run_pairs(configs: Sequence[FedPNEConfig], objective, grid_index, seed_ids, base_seed: int = 0,
              grow: bool = True, devices=None, pad_to: int | None = None, check: bool = True) -> list[RunResult | None]:
    """Runs given as (configuration, seed) pairs, all in one compiled program: run j is seed
    ``seed_ids[j]`` of ``configs[grid_index[j]]``.  The configurations must share a
    :func:`static_key`.  Returns one RunResult per configuration holding its runs in the order given
    (None for a configuration without runs); compile and run seconds are shared out in proportion to
    the runs.  ``pad_to``: compute the first call with at least this many runs (see driver.execute),
    so that a sweep's calls of one group share one program.  ``check=False`` skips the checks of
    the configurations (a sweep checks them once, not at every call).

    A node table that overflows in some runs is grown and only those runs are rerun (results do not
    depend on the capacity); the table starts at the largest initial capacity of the configurations
    and the depth tables at their largest depth limit.
    """
    configs = list(configs)
    for config in configs if check else ():
        check_inputs(config, objective)
    keys = {static_key(c, objective) for c in configs} if check else ()
    if len(keys) > 1:
        raise ValueError("run_pairs: the configurations differ in shapes or kinds (M, T, k, checkpoints, noise "
                         "or pull kind, sampling, DP, split, precision); use run_grid, which groups them")
    grid_index = np.asarray(grid_index, np.int64)
    ids = np.asarray(seed_ids, np.int64)
    if grid_index.shape != ids.shape or ids.ndim != 1 or ids.size == 0:
        raise ValueError("grid_index and seed_ids must be non-empty 1-D arrays of equal length")
    if np.any(grid_index < 0) or np.any(grid_index >= len(configs)):
        raise ValueError(f"grid_index must lie in [0, {len(configs)})")
    driver.seed_ids(ids)
    base_seed = driver.check_base_seed(base_seed)
    return _run_pairs(configs, objective, grid_index, ids, base_seed, grow, devices, pad_to)


def _run_pairs(configs, objective, grid_index, ids, base_seed, grow, devices, pad_to=None):
    # One configuration runs with plain (unstacked) params: the program every single run has used.
    single = len(configs) == 1
    depth = max(depth_limit(c) for c in configs)
    capacity = max(initial_capacity(c) for c in configs)
    out, capacity, depth, compile_s, run_s = _run_growing(
        configs, objective, None if single else grid_index, ids, base_seed, grow, devices, pad_to, depth, capacity)

    def build(config, rows):
        share = rows.size / ids.size
        return RunResult.from_outputs(config, objective, ids[rows], base_seed, jax.tree.map(lambda a: a[rows], out),
                                      make_static(config, objective, capacity, depth),
                                      compile_seconds=compile_s * share, run_seconds=run_s * share)

    return per_config(configs, grid_index, build)


def _run_growing(configs, objective, grid_index, ids, base_seed, grow, devices, pad_to, depth, capacity):
    """Execute all runs, rerunning those whose node table (or depth tables) overflowed with larger ones.
    Returns (outputs for every run, final capacity, final depth, compile s, run s)."""
    def params_for(depth):
        return make_params(configs[0], depth) if grid_index is None else stack_params(configs, depth)

    params = params_for(depth)
    outputs = None
    pending = np.arange(ids.size)
    compile_s = run_s = 0.0
    while pending.size:
        static = make_static(configs[0], objective, capacity, depth)
        out, c_s, r_s = driver.execute(run_single, static, params, objective, base_seed, ids[pending],
                                       grid_index=None if grid_index is None else grid_index[pending],
                                       devices=devices, pad_to=pad_to)
        pad_to = None      # reruns are a new shape anyway
        compile_s, run_s = compile_s + c_s, run_s + r_s
        raise_for_objective(objective.name, out.flags, ids[pending])
        if outputs is None:
            outputs = jax.tree.map(lambda a: np.zeros((ids.size,) + a.shape[1:], a.dtype), out)
        done = out.flags == 0
        for full, part in zip(outputs, out):
            full[pending[done]] = part[done]
        failed = ~done
        flags = out.flags[failed]
        pending = pending[failed]
        if not pending.size:
            break
        if np.any(flags & phase_lib.FLAG_DEPTH):
            depth *= 2
            params = params_for(depth)
        if np.any(flags & phase_lib.FLAG_CAPACITY):
            if not grow:
                raise CapacityError(
                    f"node table of capacity {capacity} overflowed in {pending.size} seed(s) "
                    f"(e.g. seed {int(ids[pending[0]])}); rerun with grow=True or a larger capacity")
            if capacity >= MAX_CAPACITY:
                raise CapacityError(f"node table would need more than {MAX_CAPACITY} nodes "
                                    f"(seed {int(ids[pending[0]])}); the configuration keeps too many nodes active")
            # Grow past the largest demand seen, with room for the phases after it.
            demand = int(out.max_active[failed].max())
            capacity = min(MAX_CAPACITY, max(4 * capacity, 1 << (demand - 1).bit_length()))
    return outputs, capacity, depth, compile_s, run_s
