"""One run of Fed-PNE (DP-Fed-PNE when the config sets dp_epsilon): phases until round T.

The shared executor (fedpne_jax/core/run.py) vmaps ``run_single`` over seeds and grids, compiles it
once per shape, shards it over devices and grows the node table when a run flags an overflow (see
plan.grow); ``report`` turns the stacked outputs into a result.  ``evaluation_run`` runs seeds at one
table size and also returns the objective evaluations they performed (benchmarks, tests).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.fedpne import evaluation, plan
from fedpne_jax.algorithms.fedpne import phase as phase_lib
from fedpne_jax.algorithms.fedpne.config import FedPNEConfig
from fedpne_jax.algorithms.fedpne.plan import Params, Static, Tables
from fedpne_jax.core import checkpoints, executor, measures
from fedpne_jax.core.errors import raise_for_objective
from fedpne_jax.core.measures import Measures


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Outputs(Measures):
    """The measures (curve and final regret: R / M; best-so-far regret NaN with uniform points),
    then Fed-PNE's own."""

    phases: jax.Array
    uploads: jax.Array         # sum_p |K^p| over uploaded phases (per client)
    depth: jax.Array
    recommendation: jax.Array  # (D,)
    max_active: jax.Array
    evaluations: jax.Array     # (4,) objective evaluations (evaluation.counts); not a reported metric


def run_single(static: Static, params: Params, objective, key) -> Outputs:
    """One seed of Fed-PNE: phases until round T (or until a flag stops the run)."""
    partition_key, sample_key = run_keys(key)
    # The centre is also the recommendation before the first phase completes: one evaluation for both.
    gap = checkpoints.centre_gap(objective, static.float_dtype)
    scale = checkpoints.target_scale(objective, static.float_dtype, gap)
    state = phase_lib.init_state(static, objective, partition_key, scale, gap)

    def body(s):
        s = phase_lib.write_span(static, s)
        s = phase_lib.expand_until_ready(static, params, s)
        after = phase_lib.run_phase(static, params, objective, sample_key, s)
        go = phase_lib.runs(params, s)
        return jax.tree.map(lambda a, b: jnp.where(go, a, b), after, s)

    state = jax.lax.while_loop(lambda s: phase_lib.runs(params, s), body, state)
    return finish(static, state, scale)


def finish(static: Static, state: phase_lib.RunState, scale) -> Outputs:
    """A run's outputs once its last phase is done (its checkpoints written); ``scale``: the
    best-so-far targets' scale."""
    state = phase_lib.write_span(static, state)
    return Outputs(curve=state.curve, final_regret=state.regret, flags=state.flags, best_curve=state.best_curve,
                   hits=state.best.hits, target_scale=scale, simple_curve=state.simple_curve, phases=state.phases,
                   uploads=state.uploads, depth=state.depth_pulled, recommendation=state.recommendation,
                   max_active=state.max_active, evaluations=state.evaluations)


def run_keys(key):
    """(partition key, sampling key) of a run: the partition never shares randomness with rewards."""
    return jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)


METRICS = measures.metrics(("phases", "uploads", "depth", "recommendation", "max_active"))


def describe(config: FedPNEConfig, tables: Tables, out: Outputs) -> tuple[str, dict, dict]:
    """(result name, resolved config, per-seed metrics) of one configuration's stacked outputs.
    Uploads are counted per client by the engine and reported over all M clients."""
    resolved = config.resolved()
    resolved.update(capacity=tables.capacity, depth_limit=tables.depth)
    metrics = dict(phases=np.asarray(out.phases, np.int64),
                   uploads=np.asarray(out.uploads, np.int64) * config.num_clients,
                   depth=np.asarray(out.depth, np.int64),
                   recommendation=np.asarray(out.recommendation, np.float64),
                   max_active=np.asarray(out.max_active, np.int64))
    metrics.update({m: np.asarray(getattr(out, m), np.int64 if m == "hits" else np.float64) for m in measures.REPORTED})
    return ("dp-fedpne" if config.dp else "fedpne"), resolved, metrics


def evaluation_run(config: FedPNEConfig, objective, seeds: int = 1, base_seed: int = 0,
                   eval_block: int | None = None) -> dict:
    """Seeds of ``config`` with the objective evaluations every run performed (evaluation.counts) and
    the raw outputs, for benchmarks and tests: fp.run reports neither.  All seeds run at one node-table
    capacity, the initial one grown (plan.grow) until no run overflows it; seconds are those of the
    last call.  ``eval_block`` overrides the rows evaluated per trip (0: every row of the table at every
    evaluation call, the closed-form path).
    Returns dict(outputs, compile_seconds, run_seconds, eval_block, capacity) and evaluation.counts's keys."""
    tables = plan.tables([config], objective)
    ids = np.arange(seeds, dtype=np.int64)
    while True:
        static = plan.make_static(config, objective, tables)
        if eval_block is not None:
            static = dataclasses.replace(static, eval_block=eval_block)
        out, compile_s, run_s = executor.execute(run_single, static, plan.make_params(config, tables), objective,
                                                 base_seed, ids)
        raise_for_objective(objective, out.flags, ids)
        failed = out.flags != 0
        if not failed.any():
            break
        tables = plan.grow(tables, out._make(a[failed] for a in out), True, ids[failed])
    return dict(outputs=out, compile_seconds=compile_s, run_seconds=run_s, eval_block=static.eval_block,
                capacity=tables.capacity, **evaluation.counts(out.evaluations, config.num_clients, tables.capacity))
