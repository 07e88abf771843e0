"""One run of Fed-PNE (DP-Fed-PNE when the config sets dp_epsilon): phases until round T.

The shared executor (fedpne_jax/core/run.py) vmaps ``run_single`` over seeds and grids, compiles it
once per shape, shards it over devices and grows the node table when a run flags an overflow (see
plan.grow); ``report`` turns the stacked outputs into a result.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.fedpne import phase as phase_lib
from fedpne_jax.algorithms.fedpne.config import FedPNEConfig
from fedpne_jax.algorithms.fedpne.plan import Params, Static, Tables


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


METRICS = ("phases", "uploads", "depth", "recommendation", "max_active")


def report(config: FedPNEConfig, sizes: Tables, out: RunOutput) -> tuple[str, dict, dict]:
    """(result name, resolved config, per-seed metrics) of one configuration's stacked outputs.
    Uploads are counted per client by the engine and reported over all M clients."""
    resolved = config.resolved()
    resolved.update(capacity=sizes.capacity, depth_limit=sizes.depth)
    metrics = dict(phases=np.asarray(out.phases, np.int64),
                   uploads=np.asarray(out.uploads, np.int64) * config.num_clients,
                   depth=np.asarray(out.depth, np.int64),
                   recommendation=np.asarray(out.recommendation, np.float64),
                   max_active=np.asarray(out.max_active, np.int64))
    return ("dp-fedpne" if config.dp else "fedpne"), resolved, metrics
