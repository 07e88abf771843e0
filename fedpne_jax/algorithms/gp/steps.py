"""Ask/tell for the GP baselines (KernelTS, GP-UCB, BO, BBO): :func:`gp.simulate`'s round cut at the
evaluation.

A step is a round t = step + 1: ``ask`` is the policy's picks (:func:`gp.select`): one point for a
centralized algorithm (slots (1, 1)), pick m to client m for BBO (slots (M, 1), client m evaluates
its local objective); ``tell`` conditions the covariance on the picks (:func:`gp.condition_many`),
the mean and the policy's state on the told values (:func:`gp.learn`) and books the round
(:func:`gp.book`).  The round's draws are its words of the run's counter-mode stream
(:func:`gp.round_words`), so a run told the objective's noise-free values is ``fp.run``'s run of the
same key, bit for bit.

The book: with an Objective, the regret f* - f of the objective's noise-free global values at the
asked points, read from the table ``fp.run`` books from (:func:`gp.tables`, computed once at
``init``: the same K values, the same FMA); with a box, f* minus the told values, and no simple
regret (NaN: the recommendation's value is never told).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from fedpne_jax.algorithms.gp import gp
from fedpne_jax.core import checkpoints, noise
from fedpne_jax.core.stepper import Space, Steps


class Run(NamedTuple):
    carry: gp.Carry        # the round loop's state
    picks: gp.Picks        # the asked round's picks
    points: jax.Array      # (K, D) the candidates in the box
    key: jax.Array         # the run's key (round words)
    gaps: Any              # (K,) f* - f at the candidates, f the global values (None for a box)
    f_flags: Any           # (K,) int32 f's flags (noise.value_flags; None for a box)
    flags: jax.Array       # () int32
    scale: jax.Array       # the best-so-far targets' scale
    space: Any             # the space's Objective as data (None for a box), as fp.run passes it


def steps(static: gp.Static, params, space: Space, policy: gp.Policy, reward_values: Callable,
          federated: bool) -> Steps:
    K, B = static.num_candidates, static.batch
    slots = (B, 1) if federated else (1, B)
    f32 = jnp.float32
    f_star = space.f_star_as(f32)

    def init(key):
        points, carry = gp.start(static, params, space, key, policy)
        picks = gp.Picks(jnp.zeros((B,), jnp.int32), jnp.zeros((B, K), f32), jnp.zeros((B, K), f32),
                         jnp.ones((B,), f32), carry.extra)
        gaps = f_flags = None
        if space.objective is not None:
            # The table's flags rather than f: a stored f kept XLA from contracting f* - f as fp.run's
            # program does, and the gaps differed in their last bit.
            gaps, f, _ = gp.tables(space.objective, points, reward_values, f_star)
            f_flags = jax.vmap(lambda v: noise.value_flags(static.noise_kind, v, True, rewards=False,
                                                           f_star=space.objective.f_star))(f)
        return Run(carry, picks, points, key, gaps, f_flags, jnp.int32(0), space.target_scale(f32), space.objective)

    def ask(step, run: Run):
        t = step + 1
        _, draws = gp.round_words(static, policy, run.key, t)
        picks = gp.select(static, params, policy, run.carry, t, draws)
        points = run.points[picks.js].reshape(slots + (static.dim,))
        return points, jnp.ones(slots, jnp.int32), run._replace(picks=picks)

    def tell(step, run: Run, points, counts, values, valid):
        t = step + 1
        pulling = valid & (t <= params.horizon)
        p, carry = run.picks, run.carry
        y = values.reshape(B).astype(f32)
        # A stale tell conditions on nothing: Sigma - 0 0^T is Sigma, bit for bit, and costs no select
        # of the K x K matrix.
        cov = gp.condition_many(carry.cov, jnp.where(pulling, p.hs, 0.0))
        mean, extra = gp.learn(params, policy, carry.mean, p, y)
        flags = noise.value_flags(static.noise_kind, y, pulling)
        if run.space is None:
            gaps, gap_at = f_star - y, lambda j: jnp.full((), jnp.nan, f32)
        else:
            gaps, gap_at = run.gaps[p.js], lambda j: run.gaps[j]
            flags = flags | jnp.where(pulling, jnp.bitwise_or.reduce(run.f_flags[p.js]), 0)
        new = gp.book(static, params, policy, carry, t, mean, cov, extra, p.js, gaps, gap_at,
                      checkpoints.targets(run.scale))
        kept = jax.tree.map(lambda n, o: jnp.where(pulling, n, o), new._replace(cov=None), carry._replace(cov=None))
        return run._replace(carry=kept._replace(cov=cov), flags=run.flags | flags)

    def recommend(step, run: Run):
        c = run.carry
        return run.points[policy.recommend(params, gp.model(c.mean, c.cov, jnp.any(c.observed, axis=1)), c.extra)]

    def done(step, run: Run):
        return step >= params.horizon

    def outputs(step, run: Run):
        return gp.finish(params, policy, run.carry, run.points, run.flags, run.scale)

    def failed(run: Run):
        return jnp.bool_(False)

    return Steps(init, ask, tell, recommend, done, outputs, failed, slots)


def hook(policy: gp.Policy, reward_values: Callable, federated: bool = False):
    """The ``steps`` hook of a GP baseline with ``policy`` observing ``reward_values``
    (gp.global_rewards, or gp.local_rewards for BBO's clients)."""
    def make(static, params, space):
        return steps(static, params, space, policy, reward_values, federated)
    return make
