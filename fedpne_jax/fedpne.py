"""The Fed-PNE engine: S seeds x M clients in one compiled, vmapped call.

``run(config, objective, seeds)`` is the public entry point.  It derives tables and static shapes on
the host, compiles ``run_batch`` once per shape (cached), runs it, and checks every seed's flags: a
node table that overflowed is grown and the affected seeds rerun (results do not depend on the
capacity), a table that may not grow raises CapacityError, and NaN/inf from the objective raises
ObjectiveError naming the objective and the seeds.  Nothing is ever truncated or averaged silently.

Seed i runs with key fold_in(key(base_seed), i), so its numbers do not depend on which or how many
seeds run beside it.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax import driver, phase as phase_lib
from fedpne_jax.driver import seed_key, trace_count  # noqa: F401  (public names)
from fedpne_jax.config import FedPNEConfig
from fedpne_jax.errors import CapacityError, raise_for_objective
from fedpne_jax.params import (MAX_CAPACITY, Params, Static, check_feasible, depth_limit, initial_capacity,
                               make_params, make_static)
from fedpne_jax.result import RunResult


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


def compiled_memory(config: FedPNEConfig, objective, seeds: int, capacity: int | None = None):
    """XLA's memory statistics (arguments, outputs, temporaries, peak) of the program that runs
    ``seeds`` seeds of ``config``, compiling it if needed; for benchmarks and capacity planning."""
    check_inputs(config, objective)
    depth = depth_limit(config)
    static = make_static(config, objective, capacity or initial_capacity(config), depth, seeds=seeds)
    return driver.memory(run_single, static, make_params(config, depth), objective, seeds)


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


def run(config: FedPNEConfig, objective, seeds: int | Sequence[int] = 1, base_seed: int = 0,
        grow: bool = True) -> RunResult:
    """Run Fed-PNE (DP-Fed-PNE when config.dp_epsilon is set) for the given seeds.

    ``seeds``: a count S (seed indices 0..S-1) or explicit seed indices.  ``grow``: when a node
    table overflows, rerun the affected seeds with a capacity of at least twice their demand (else
    raise CapacityError).
    """
    check_inputs(config, objective)
    ids = driver.seed_ids(seeds)
    base_seed = driver.check_base_seed(base_seed)
    depth = depth_limit(config)
    capacity = initial_capacity(config)
    params = make_params(config, depth)
    outputs: dict[int, tuple] = {}
    pending = ids
    compile_s = run_s = 0.0
    while pending.size:
        static = make_static(config, objective, capacity, depth, seeds=pending.size)
        out, c_s, r_s = driver.execute(run_single, static, params, objective, base_seed, pending)
        compile_s, run_s = compile_s + c_s, run_s + r_s
        raise_for_objective(objective.name, out.flags, pending)
        for i, seed in enumerate(pending):
            if out.flags[i] == 0:
                outputs[int(seed)] = jax.tree.map(lambda a: a[i], out)
        failed = out.flags != 0
        pending = pending[failed]
        if not pending.size:
            break
        if np.any(out.flags[failed] & phase_lib.FLAG_DEPTH):
            depth *= 2
            params = make_params(config, depth)
        if np.any(out.flags[failed] & phase_lib.FLAG_CAPACITY):
            if not grow:
                raise CapacityError(
                    f"node table of capacity {capacity} overflowed in {pending.size} seed(s) "
                    f"(e.g. seed {int(pending[0])}); rerun with grow=True or a larger capacity")
            if capacity >= MAX_CAPACITY:
                raise CapacityError(f"node table would need more than {MAX_CAPACITY} nodes "
                                    f"(seed {int(pending[0])}); the configuration keeps too many nodes active")
            # Grow past the largest demand seen, with room for the phases after it.
            demand = int(out.max_active[failed].max())
            capacity = min(MAX_CAPACITY, max(4 * capacity, 1 << (demand - 1).bit_length()))
    stacked = jax.tree.map(lambda *xs: np.stack(xs), *[outputs[int(s)] for s in ids])
    return RunResult.from_outputs(config, objective, ids, int(base_seed), stacked,
                                  make_static(config, objective, capacity, depth),
                                  compile_seconds=compile_s, run_seconds=run_s)
