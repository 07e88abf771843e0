"""Ask/tell for Fed-PNE and DP-Fed-PNE: :func:`engine.run_single`'s phase loop cut at the clients.

A step is a phase (Algorithms 1-2): ``ask`` asks each of the M clients to pull every node of K at
its centre, ``tell`` takes the clients' means and does all that run_phase does after its estimate
(phase.conclude).  :func:`privatize` is DP-Fed-PNE's client-side noise.  Only centre pulls are asked.

What ask and tell hold, when a told run equals ``fp.run``'s bit for bit, the regret booked with a
box, and a table that overflows (``Stepper.grown()``): docs/algorithms/fedpne.md, section "Ask and
tell".
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from fedpne_jax.algorithms.fedpne import engine, phase
from fedpne_jax.algorithms.fedpne import sampling as rewards
from fedpne_jax.algorithms.fedpne.plan import Params, Static
from fedpne_jax.core.errors import FLAG_CAPACITY
from fedpne_jax.core.stepper import Space, Steps


class Run(NamedTuple):
    state: phase.RunState  # the phase loop's state; after an ask, the asked phase's K
    scale: jax.Array       # the best-so-far targets' scale
    space: Any             # the space's Objective as data (None for a box), as fp.run passes it


def privatize(config, means, counts, key):
    """Client-side privacy of DP-Fed-PNE (Appendix D, Algorithm DP-Fed-PNE: client, line 8): the
    client adds independent N(0, sigma^2) noise to each reward, sigma^2 = 2 log(1.25 / dp_delta) /
    dp_epsilon^2 (``config.dp_sigma2``), before taking its mean; for a mean of n rewards that is
    N(0, sigma^2 / n), drawn here as one normal per mean.

    ``means``: a client's (or all clients') means of their rewards, of ``counts`` (same shape, >= 0)
    pulls each; slots with count 0 are returned unchanged.  ``key``: a JAX PRNG key.  A config without
    DP (``dp_epsilon`` None) returns ``means`` unchanged.  Traceable (jit, vmap)."""
    means = jnp.asarray(means)
    if not getattr(config, "dp", False):
        return means
    return _privatize(jnp.asarray(config.dp_sigma2, means.dtype), means, counts, key)


def _privatize(dp_var, means, counts, key):
    n = jnp.maximum(jnp.asarray(counts), 1).astype(means.dtype)
    z = jax.random.normal(key, means.shape, means.dtype)
    return jnp.where(jnp.asarray(counts) > 0, means + rewards.gaussian_mean_noise(dp_var, n, z), means)


def steps(static: Static, params: Params, space: Space) -> Steps:
    if static.pull != "centre":
        raise ValueError(f"pull={static.pull!r}: ask/tell asks the nodes' centres; use pull='centre'")
    dtype = static.float_dtype
    f_star = space.f_star_as(dtype)
    M, B = static.num_clients, static.capacity

    def init(key):
        partition_key, _ = engine.run_keys(key)
        scale = space.target_scale(dtype)
        state = phase.init_state(static, space, partition_key, scale, space.centre_gap(dtype))
        return Run(state, scale, space.objective)

    def schedule(s: phase.RunState) -> phase.Schedule:
        return phase.schedule(static, params, space.lo, space.hi, s)

    def ask(step, run: Run):
        s = phase.expand_until_ready(static, params, phase.write_span(static, run.state))
        sched = schedule(s)
        counts = jnp.where(phase.runs(params, s), sched.pulls, 0)
        points = jnp.broadcast_to(sched.centre, (M,) + sched.centre.shape)
        return points, jnp.broadcast_to(counts, (M, B)), run._replace(state=s)

    def tell(step, run: Run, points, counts, values, valid):
        s = run.state
        sched = schedule(s)
        est = rewards.told_estimate(static, run.space, sched.centre, sched.pulls, values, f_star)
        after = phase.conclude(static, params, run.space, s, sched, est)
        # As run_single keeps a phase only while the run goes on; conclude writes no table (the
        # node table is the asked one in both), so this gates the phase's own writes.
        go = valid & phase.runs(params, s)
        return run._replace(state=jax.tree.map(lambda a, b: jnp.where(go, a, b), after, s))

    def recommend(step, run: Run):
        return run.state.recommendation

    def done(step, run: Run):
        return ~phase.runs(params, run.state)

    def outputs(step, run: Run):
        return engine.finish(static, run.state, run.scale)

    def failed(run: Run):
        # FLAG_DEPTH guards plan's proven depth bound: a bug, reported as a flag, not grown past.
        return (run.state.flags & FLAG_CAPACITY) != 0

    private = None
    if static.dp:
        def private(values, counts, key):
            return _privatize(params.dp_var, values, counts, key)

    return Steps(init, ask, tell, recommend, done, outputs, failed, (M, B), private)
