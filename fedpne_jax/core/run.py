"""Running any registered algorithm: seeds of one configuration, a grid of configurations, or
(configuration, seed) pairs; one executor for all.

The algorithm is found from the configuration's type (fedpne_jax.core.registry).  Every call derives
tables and static shapes on the host, compiles the vmapped ``run_single`` once per shape
(fedpne_jax.core.executor), runs it, and checks every run's flags: NaN/inf raises ObjectiveError
naming the objective and the seeds; a table that overflowed is grown through the algorithm's
``grow`` hook and exactly the affected runs are rerun.  Nothing is truncated or averaged silently.

Seeds, grids sharing one program, and how calls are cut to fit the memory budget:
docs/concepts/reproducibility.md and docs/guides/hosts.md, section "Devices".
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Callable, Sequence

import jax
import numpy as np

import objectives
from fedpne_jax.core import diagnostics, executor, host_devices, registry
from fedpne_jax.core.algorithm import Algorithm, describe
from fedpne_jax.core.algorithm import check_inputs as check_pair
from fedpne_jax.core.batch import Batch, prepare, stack_params  # noqa: F401  (stack_params: re-exported)
from fedpne_jax.core.errors import CapacityError, raise_for_objective
from fedpne_jax.core.grid import group_indices, per_config
from fedpne_jax.core.result import RunResult
from fedpne_jax.core.validation import is_real
from objectives import Objective


def check_inputs(config, objective) -> Algorithm:
    """The algorithm of ``config``, after every check a run can make before compiling (the
    objective's functions return one number per point: checked abstractly, once per objective)."""
    algorithm = registry.for_config(config)
    check_objective(objective)
    objective.check_shapes()
    check_pair(algorithm, config, objective)
    return algorithm


def check_objective(objective, named: bool = False) -> None:
    """TypeError naming ``objective`` unless it is an Objective (or, ``named``, a registered name)."""
    if isinstance(objective, Objective) or (named and isinstance(objective, str)):
        return
    name = " or the name of a registered objective (e.g. 'garland')" if named else ""
    raise TypeError(f"objective must be an objectives.Objective (see objectives.make_objective){name}, "
                    f"got {type(objective).__name__} {objective!r:.80}")


def resolve_objectives(configs: Sequence, objective) -> list:
    """Per configuration, the Objective to run on: ``objective`` itself, or, given a registered
    objective's name, that objective built as the command line builds it: for the configuration's
    num_clients (1 for an algorithm without the field) with the default heterogeneity for its noise
    (Bernoulli rewards need the synthetic functions without client shifts).  Configurations that
    need the same objective share one instance, hence one compiled program."""
    check_objective(objective, named=True)
    if isinstance(objective, Objective):
        return [objective] * len(configs)
    built: dict = {}
    out = []
    for config in configs:
        fields = {f.name for f in dataclasses.fields(config)} if dataclasses.is_dataclass(config) else set()
        clients = config.num_clients if "num_clients" in fields else 1
        heterogeneity = objectives.default_heterogeneity(objective, getattr(config, "noise_kind", None))
        key = (clients, heterogeneity)
        if key not in built:
            built[key] = objectives.make_objective(objective, num_clients=clients, heterogeneity=heterogeneity)
        out.append(built[key])
    return out


# An exabyte per device: a budget no machine has, and whose byte count still fits an int64.
MAX_MEMORY_GB = 2.0 ** 30


def memory_budget(memory_gb) -> int:
    """Bytes from ``memory_gb`` (None: executor.DEFAULT_MEMORY_GB, as for sweeps)."""
    if memory_gb is None:
        memory_gb = executor.DEFAULT_MEMORY_GB
    if not is_real(memory_gb) or not math.isfinite(memory_gb) or not 0 < memory_gb <= MAX_MEMORY_GB:
        raise ValueError(f"memory_gb must be a number of GiB per device in (0, 2^30], got {memory_gb!r}")
    return max(1, int(memory_gb * 2**30))


def check_host_memory(groups: Sequence[tuple[Batch, int]]) -> None:
    """ValueError, before anything is compiled or allocated, when the results of ``groups`` (each
    (batch, seeds per configuration)) need more bytes than the host has available, naming the figure:
    bytes per seed x seeds.  (The memory budget bounds one call's device buffers, which chunking keeps
    under it; the results are kept on the host, whose free memory is the limit.)"""
    runs = [len(batch.configs) * seeds for batch, seeds in groups]
    per_run = [batch.run_bytes(n) for (batch, _), n in zip(groups, runs)]
    total = sum(b * n for b, n in zip(per_run, runs))
    available = executor.available_memory()
    if available is None or total <= available:
        return
    seeds, configs = groups[0][1], sum(len(batch.configs) for batch, _ in groups)
    count = f"{seeds:,} seeds" if configs == 1 else f"{configs} configurations x {seeds:,} seeds"
    rate = f"{per_run[0]:,}" if len(set(per_run)) == 1 else f"{min(per_run):,} to {max(per_run):,}"
    limit = f"the {available / 2**30:.3g} GiB of memory this host has available"
    raise ValueError(f"{count}: the per-seed results alone need {rate} bytes per seed x {sum(runs):,} runs = "
                     f"{total:,} bytes ({total / 2**30:.3g} GiB), above {limit}; run fewer seeds per call "
                     f"(fp.run_sweep writes its results to disk chunk by chunk)")


def static_key(config, objective):
    """Configurations with equal keys run as one program (same algorithm, shapes and kinds)."""
    algorithm = registry.for_config(config)
    return algorithm.name, algorithm.make_static(config, objective, None)


def run(config, objective, seeds: int | Sequence[int] = 1, base_seed: int = 0, grow: bool = True,
        devices=None, memory_gb: float | None = None, stop: Callable[[], bool] | None = None,
        progress: Callable[[int, int, float], None] | None = None) -> RunResult:
    """Run the algorithm of ``config`` (any registered configuration, see :func:`fedpne_jax.make_config`)
    on ``objective`` for the given seeds.

    ``objective``: an :class:`objectives.Objective`, or a registered objective's name, built as the
    command line builds it (``objectives.make_objective(name, num_clients=<the config's
    num_clients, 1 for an algorithm without it>)``, with the default heterogeneity for the noise).
    ``seeds``: a count S (seed indices 0..S-1) or distinct seed indices.  ``grow``: when a table an
    algorithm sizes on the host overflows (Fed-PNE's node table), rerun the affected seeds with a
    larger one (else raise CapacityError).  ``devices``: 'all', a count or a list of devices to shard
    the seeds over (default: :func:`fedpne_jax.set_default_devices`, initially all).  ``memory_gb``:
    the budget of one call's XLA buffers per device (default 2, as for sweeps): more seeds than fit
    run in several calls, with the same numbers; results that alone exceed it are refused.
    ``stop``: asked before every call after the first; once it returns True no further call starts,
    and the result holds the seeds finished so far, marked ``partial`` (the command line's Ctrl-C).
    ``progress(runs done, runs in all, seconds of the call)`` is called after every call.
    """
    objective = resolve_objectives([config], objective)[0]
    algorithm = check_inputs(config, objective)
    count = executor.seed_count(seeds)
    base_seed = executor.check_base_seed(base_seed)
    budget = memory_budget(memory_gb)
    batch = prepare(algorithm, [config], objective, devices)
    check_host_memory([(batch, count)])
    ids = executor.seed_ids(seeds)
    result = _run_pairs(batch, np.zeros(ids.size, np.int64), ids, base_seed, grow, budget=budget, stop=stop,
                        progress=progress)[0]
    diagnostics.emit(result.warnings)
    return result


def run_grid(configs: Sequence, objective, seeds: int | Sequence[int] = 1, base_seed: int = 0, grow: bool = True,
             devices=None, memory_gb: float | None = None) -> list[RunResult]:
    """Every configuration of ``configs`` for the same seeds; result i equals ``run(configs[i], ...)``
    number for number.  Configurations are grouped by :func:`static_key` into the fewest compiled
    programs (any mix of algorithms); two that resolve to the same configuration are refused.  Build
    ``configs`` with :func:`fedpne_jax.grid_product`.  ``objective``, ``memory_gb``: as for :func:`run`
    (a name is built for each configuration's num_clients and noise)."""
    configs = list(configs)
    if not configs:
        raise ValueError("configs must hold at least one configuration")
    per_config = resolve_objectives(configs, objective)
    algorithms = [check_inputs(config, obj) for config, obj in zip(configs, per_config)]
    check_distinct(configs)
    count = executor.seed_count(seeds)
    base_seed = executor.check_base_seed(base_seed)
    budget = memory_budget(memory_gb)
    # A group shares one compiled program, so one objective: the objective is part of the key.
    keys = [(static_key(c, obj), id(obj)) for c, obj in zip(configs, per_config)]
    groups = group_indices(keys)
    batches = [prepare(algorithms[m[0]], [configs[i] for i in m], per_config[m[0]], devices) for m in groups]
    check_host_memory([(batch, count) for batch in batches])
    ids = executor.seed_ids(seeds)
    results: list = [None] * len(configs)
    for members, batch in zip(groups, batches):
        grid = np.repeat(np.arange(len(members)), ids.size)
        out = _run_pairs(batch, grid, np.tile(ids, len(members)), base_seed, grow, budget=budget)
        for i, result in zip(members, out):
            results[i] = result
    diagnostics.emit(w for result in results for w in result.warnings)
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
    ``seed_ids[j]`` of ``configs[grid_index[j]]``.  The configurations must
    share a :func:`static_key`.  Returns one RunResult per configuration holding its runs in the order
    given (None for a configuration without runs); compile and run seconds are shared out in
    proportion to the runs.  ``pad_to``: compute the first call with at least this many runs (see
    executor.execute), so that a sweep's calls of one group share one program.  ``check=False``
    skips the checks of the configurations (a sweep checks them once, not at every call)."""
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
    batch = prepare(registry.for_config(configs[0]), configs, objective, devices)
    results = _run_pairs(batch, grid_index, ids, base_seed, grow, pad_to)
    diagnostics.emit(w for result in results if result is not None for w in result.warnings)
    return results


def _run_pairs(batch: Batch, grid_index, ids, base_seed, grow, pad_to=None, budget=None, stop=None, progress=None):
    algorithm, configs, objective = batch.algorithm, batch.configs, batch.objective
    out, tables, compile_s, run_s, finished = _run_growing(
        batch, grid_index if batch.grid else None, ids, base_seed, grow, pad_to, budget, stop, progress)
    partial = not finished.all()
    if partial:              # stopped: only the finished runs make the results
        out = jax.tree.map(lambda a: a[finished], out)
        grid_index, ids = np.asarray(grid_index)[finished], ids[finished]

    def build(config, rows):
        share = rows.size / ids.size
        # A configuration holding every run (any single run) takes views, not copies, of the outputs.
        rows = slice(None) if rows.size == ids.size else rows
        name, resolved, metrics = describe(algorithm, config, tables, jax.tree.map(lambda a: a[rows], out))
        # Only a table sized from the parameters can be degenerate (a tree's grows with T, as asked).
        found = diagnostics.degenerate(metrics, config.horizon, resolved.get("capacity") if algorithm.grows else None)
        return RunResult.build(name, resolved, objective, ids[rows], base_seed, config.checkpoint_rounds,
                               out.curve[rows], out.final_regret[rows], metrics, compile_s * share, run_s * share,
                               partial=partial, warnings=found)

    return per_config(configs, grid_index, build)


def _run_growing(batch: Batch, grid_index, ids, base_seed, grow, pad_to, budget=None, stop=None, progress=None):
    """Execute all runs, in calls of the size :func:`_call_runs` gives for ``budget`` (None: one
    call), streaming each call's outputs into arrays for all runs, and rerun the runs whose tables
    overflowed with the larger ones the algorithm's ``grow`` gives (the runs still to come then
    start with them too).  ``stop()`` True before a call ends the loop there.  Returns (outputs for
    every run, final tables, compile s, run s, which runs finished)."""
    algorithm = batch.algorithm
    outputs = None
    pending = np.arange(ids.size)
    compile_s = run_s = 0.0
    size = None          # runs per call with the current tables
    while pending.size:
        if stop is not None and outputs is not None and stop():
            break
        if size is None:
            before = executor.compile_seconds()
            size = _call_runs(batch, pending.size, budget)
            compile_s += executor.compile_seconds() - before
            if size < pending.size:
                pad_to = size      # every call, the last one too, runs the program that was sized
        call, rest = pending[:size], pending[size:]
        out, c_s, r_s = batch.execute(base_seed, ids[call], None if grid_index is None else grid_index[call], pad_to)
        if not rest.size:
            pad_to = None      # reruns are a new shape anyway
        compile_s, run_s = compile_s + c_s, run_s + r_s
        raise_for_objective(batch.objective, out.flags, ids[call])
        if outputs is None:
            outputs = jax.tree.map(lambda a: np.empty((ids.size,) + a.shape[1:], a.dtype), out)
        done = out.flags == 0
        for full, part in zip(jax.tree.leaves(outputs), jax.tree.leaves(out)):
            full[call[done]] = part[done]
        failed = ~done
        pending = rest
        if progress is not None:
            progress(ids.size - pending.size - int(failed.sum()), ids.size, c_s + r_s)
        if not failed.any():
            continue
        seeds = ids[call[failed]]
        if algorithm.grow is None:
            raise CapacityError(f"{algorithm.name}: a fixed-size table overflowed (seeds {seeds[:10].tolist()}); "
                                f"this is a bug: tables are sized so that they cannot")
        batch = batch.with_tables(algorithm.grow(batch.tables, jax.tree.map(lambda a, failed=failed: a[failed], out),
                                                 grow, seeds))
        pending = np.concatenate([call[failed], rest])
        size, pad_to = None, None
    finished = np.ones(ids.size, bool)
    finished[pending] = False
    return outputs, batch.tables, compile_s, run_s, finished


def _call_runs(batch: Batch, runs: int, budget) -> int:
    """Runs per call: all of them without a budget (or eagerly, under jax.disable_jit), else what
    executor.fit_runs finds from XLA's memory analysis of the program (which the calls then run)."""
    if budget is None or jax.config.jax_disable_jit:  # type: ignore[attr-defined]  # a runtime flag attribute
        return runs
    n = len(host_devices.share(batch.devices, runs))
    size, need = executor.fit_runs(runs, budget, n, lambda R: executor.memory_bytes(batch.memory(R)))
    if need > budget:
        warnings.warn(f"{size // n} run(s) per device need {need:,} bytes, above the memory "
                      f"budget of {budget:,} bytes; running one per device per call", RuntimeWarning, stacklevel=4)
    return size


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
    return prepare(check_inputs(configs[0], objective), configs, objective, devices).memory(runs)
