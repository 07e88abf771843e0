"""Gaussian-process posterior on a fixed candidate set, conditioned one observation at a time.

Shared by the kernel / Bayesian-optimisation baselines (KernelTS, GP-UCB, BO, BBO): the posterior
over the K candidates is a K-vector of means and the K x K covariance, and an observation is one
rank-one (Sherman-Morrison) step, O(K^2) whatever t is.  :func:`simulate` runs the rounds from values
computed up front (:func:`tables`); :func:`start`, :func:`round_words`, :func:`select`,
:func:`learn`, :func:`book` and :func:`finish` are also what the ask/tell steps
(:mod:`fedpne_jax.algorithms.gp.steps`) run on told values.

The update and why it is exact, batch invariance, the candidate sets and the picks of a batched
round: docs/algorithms/gp.md, section "The posterior"; float32 numerics: section "Numerics".
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.gp.kernels import kernel, mesh_indices, squared_distances
from fedpne_jax.core import blocks, checkpoints, measures, noise
from fedpne_jax.core.config import BaselineConfig
from fedpne_jax.core.counters import threefry_words, unit_floats
from fedpne_jax.core.measures import Measures
from fedpne_jax.core.validation import check_int, check_real
from objectives.ordered import compensated_add, exact_sqrt, first_argmax, pairwise_mean

KERNELS = ("exponential", "rbf", "matern52")
CANDIDATE_KINDS = ("shifted", "grid", "random")
MAX_CANDIDATES = 4096          # a run holds a K x K float32 matrix: 64 MiB per seed at this size
MAX_TRACE = 4096
GP_MAGNITUDE = 1e30            # real parameters become float32
# The kernels' prior variance is 1, and a noise variance under float32's resolution of 1 + lam is lost
# in the posterior of a candidate picked twice: at 1e-8 the runs of KernelTS, GP-UCB and BO stuck to
# candidate 0 (16 seeds, T = 200 on Garland), at 1e-7 none did.
MIN_NOISE_VAR = 1e-6
NOISE_WIDTH = 8                # noise is drawn for max(8, batch) slots; the first `batch` are used


def check_noise_var(name: str, value) -> None:
    """A GP's observation noise variance: finite, at least MIN_NOISE_VAR, a float32."""
    check_real(name, value, low=0.0, magnitude=GP_MAGNITUDE)
    if value < MIN_NOISE_VAR:
        raise ValueError(f"{name} must be >= {MIN_NOISE_VAR:g} (the prior variance is 1; a smaller noise variance "
                         f"is lost in float32 and the posterior breaks down), got {value!r}")


@dataclasses.dataclass(frozen=True)
class GPConfig(BaselineConfig):
    """Fields shared by the GP baselines (see the module docstring for their meaning).

    num_candidates: K; None picks :func:`default_candidates` for the objective's dimension.  With
    'grid' / 'shifted' candidates K must be n^D for an integer n.
    trace: also return the candidate indices chosen in the first ``trace`` rounds (metric
    ``choices``, -1 past T); 0 returns an empty array.
    """

    kernel: str = "exponential"
    lengthscale: float = 1.0
    candidates: str = "shifted"
    num_candidates: Optional[int] = None
    trace: int = 0

    def __post_init__(self):
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {self.kernel!r}")
        check_real("lengthscale", self.lengthscale, low=0.0, magnitude=GP_MAGNITUDE)
        if self.lengthscale < 1e-6:
            raise ValueError(f"lengthscale must be >= 1e-6 (unit-box coordinates), got {self.lengthscale!r}")
        if self.candidates not in CANDIDATE_KINDS:
            raise ValueError(f"candidates must be one of {CANDIDATE_KINDS}, got {self.candidates!r}")
        if self.num_candidates is not None:
            check_int("num_candidates", self.num_candidates, 1, MAX_CANDIDATES)
        check_int("trace", self.trace, 0, MAX_TRACE)
        super().__post_init__()


def default_candidates(kind: str, dim: int) -> int:
    """K when num_candidates is None: 100 points in 1-D, a 20 x 20 mesh in 2-D, and
    max(2, floor(400^(1/D)))^D beyond (343 in 3-D, 256 in 4-D, 2^D from 6-D on); 'random'
    candidates: 100 in 1-D, 400 otherwise."""
    if kind == "random":
        return 100 if dim == 1 else 400
    n = 100 if dim == 1 else 20 if dim == 2 else max(2, int(math.floor(400 ** (1.0 / dim) + 1e-9)))
    return n ** dim


def resolve_candidates(config: GPConfig, dim: int) -> tuple[int, int]:
    """(K, n per dimension; 0 for random candidates); ValueError naming num_candidates if the
    mesh cannot have K points."""
    K = default_candidates(config.candidates, dim) if config.num_candidates is None else config.num_candidates
    if config.candidates == "random":
        return K, 0
    near = max(1, int(round(K ** (1.0 / dim))))
    n = next((m for m in (near - 1, near, near + 1) if m >= 1 and m ** dim == K), None)
    if n is None:
        raise ValueError(f"num_candidates: candidates={config.candidates!r} is an n^D mesh, so K must be "
                         f"an integer power n^{dim} (D={dim}), got {K}; use candidates='random' for any K")
    if K > MAX_CANDIDATES:
        raise ValueError(f"num_candidates: the default {config.candidates!r} mesh in D={dim} has "
                         f"{K} > {MAX_CANDIDATES} points; set num_candidates or use candidates='random'")
    return K, n


def check(config: GPConfig, objective) -> None:
    resolve_candidates(config, objective.dim)


@dataclasses.dataclass(frozen=True)
class Static:
    """What decides a GP baseline's program: shapes and kinds (all hashable)."""

    num_candidates: int          # K
    per_dim: int                 # n with K = n^D (0 for random candidates)
    dim: int
    candidates: str
    kernel: str
    noise_kind: str
    num_checkpoints: int
    trace: int
    batch: int = 1               # points chosen per round (M for BBO)


def make_static(config: GPConfig, objective, tables=None, batch: int = 1) -> Static:
    K, n = resolve_candidates(config, objective.dim)
    return Static(num_candidates=K, per_dim=n, dim=objective.dim, candidates=config.candidates,
                  kernel=config.kernel, noise_kind=config.noise_kind, num_checkpoints=config.checkpoints,
                  trace=config.trace, batch=batch)


def common_params(config: GPConfig) -> dict:
    """The dynamic fields every GP baseline has (the horizon is data: one program serves every T)."""
    return dict(**checkpoints.schedule(config),
                noise_scale=np.float32(config.noise_scale),
                lengthscale=np.float32(config.lengthscale))


# ------------------------------------------------------------------ randomness
#
# Every random number of a run is a word of Threefry-2x32 keyed by the run's key, in counter mode:
# the n words of round t (t = 0: the candidates) encrypt the blocks (t, 0), ..., (t, ceil(n/2) - 1).
# A round draws all its words (noise first, then the policy's) in one call: each threefry call site
# costs ~0.3 s of compile time, and fold_in + uniform per purpose would put five in the loop body.

def words(key, t, n: int):
    """The n random uint32 words of round t (1-based; 0 = the candidates) of the run with key ``key``."""
    return threefry_words(key, t, (n + 1) // 2)[:n]


# ------------------------------------------------------------------ candidates

def unit_candidates(static: Static, key):
    """(K, D) candidates in [0, 1)^D from the run's key (see the module docstring)."""
    K, D = static.num_candidates, static.dim
    if static.candidates == "random":
        return unit_floats(words(key, 0, K * D)).reshape(K, D)
    offset = (jnp.full((D,), 0.5, jnp.float32) if static.candidates == "grid"
              else unit_floats(words(key, 0, D)))
    return (mesh_indices(static).astype(jnp.float32) + offset) * jnp.float32(1.0 / static.per_dim)


def to_box(objective, unit):
    lo = jnp.asarray(objective.lo, jnp.float32)
    hi = jnp.asarray(objective.hi, jnp.float32)
    return lo + (hi - lo) * unit


def candidate_points(static: Static, objective, key):
    """The run's candidates in the objective's box, (K, D) float32 (tests hand them to the reference)."""
    return to_box(objective, unit_candidates(static, key))


# ------------------------------------------------------------------ the posterior

def variances(cov):
    """Posterior variances sigma_t^2 on the candidates (rounding can leave tiny negatives: clamped)."""
    return jnp.maximum(jnp.diagonal(cov), 0.0)


def condition_cov(cov, j, noise_var):
    """Sigma conditioned on one observation at candidate j: (new Sigma, c = Sigma[:, j], d)."""
    c = cov[:, j]
    d = c[j] + noise_var
    h = c / exact_sqrt(d)
    return cov - h[:, None] * h[None, :], c, d


# The most rank-one terms one pass over Sigma subtracts (condition_many), and the most picks whose
# terms :func:`column` subtracts in one kernel: BBO's round of M = 10 picks reads and writes Sigma once
# instead of ten times (its runs took a tenth of the time at K = 400 on a 2-core CPU, a third at K = 100).
GROUP = 16


def column(cov, hs, b, j):
    """Column j of Sigma conditioned on a round's first b picks, whose factors h (condition_cov's) are
    rows 0..b-1 of ``hs``: Sigma's column less their rank-one terms, one at a time and in pick order,
    each product and subtraction as :func:`condition_many` makes it, so the values are those of the
    conditioned matrix bit for bit."""
    B = hs.shape[0]
    if B > GROUP:
        return jax.lax.fori_loop(0, b, lambda i, c: c - hs[i] * hs[i, j], cov[:, j])
    c = cov[:, j]
    for i in range(B - 1):                  # unrolled into one kernel; rows b.. are not picked yet
        c = jnp.where(i < b, c - hs[i] * hs[i, j], c)
    return c


def condition_many(cov, hs):
    """Sigma conditioned on a round's picks at once: Sigma - h_1 h_1^T - h_2 h_2^T - ..., every element
    the same sequence of subtractions as one :func:`condition_cov` per pick (so the same bits),
    ceil(B / GROUP) passes over the matrix instead of B."""
    B, K = hs.shape
    groups = -(-B // GROUP)
    size = -(-B // groups)                          # 40 picks: 3 groups of 14, the last padded
    rows = jnp.concatenate([hs, jnp.zeros((groups * size - B, K), hs.dtype)]) if groups * size > B else hs

    def group(g, cov):
        block = jax.lax.dynamic_slice_in_dim(rows, g * size, size)
        for i in range(size):
            step = cov - block[i][:, None] * block[i][None, :]
            cov = step if groups * size == B else jnp.where(g * size + i < B, step, cov)
        return cov

    return group(0, cov) if groups == 1 else jax.lax.fori_loop(0, groups, group, cov)


def condition_mean(mean, c, d, j, y):
    """The mean's half of the rank-one step (c, d from :func:`condition_cov` before the update)."""
    return mean + c * ((y - mean[j]) / d)


# ------------------------------------------------------------------ the rounds

def observe(kind: str, scale, u, values):
    """Noisy observations of ``values`` (B,) from 2 max(NOISE_WIDTH, B) uniforms ``u``, by
    noise.reward (the noise model of noise.observe, which draws its own uniforms from a key).

    Why not noise.observe itself: one Gaussian draw per seed (B = 1) compiled to code whose FMA
    contraction differs between a seed alone and in a batch (17 of 128 draws differed in the last
    bit), which a vector of 8 does not; and its (2, n) uniform draw is a further threefry call
    site (~0.7 s of compile time each program).
    """
    B = values.shape[0]
    width = u.shape[0] // 2
    padded = jnp.zeros((width,), jnp.float32).at[:B].set(values)
    gauss_var = scale * scale if kind == "gaussian" else None
    return noise.reward(kind, scale, gauss_var, padded, u[:width], u[width:])[:B]


def noise_words(batch: int) -> int:
    return 2 * max(NOISE_WIDTH, batch)


class Model(NamedTuple):
    """What a policy sees when it picks: the posterior mean at the last feedback, the posterior
    variances conditioned on everything chosen so far (clamped at 0), the covariance, and which
    candidates have been observed.  ``cov`` is the covariance at the start of the round: a round's
    picks condition it all at once when they are done (:func:`condition_many`), and only ``var``
    holds the earlier picks of the round."""

    mean: jax.Array              # (K,)
    var: jax.Array               # (K,)
    cov: jax.Array               # (K, K)
    observed: jax.Array          # (K,) bool


def model(mean, cov, observed) -> Model:
    """The Model of a covariance with no picks pending."""
    return Model(mean=mean, var=variances(cov), cov=cov, observed=observed)


@dataclasses.dataclass(frozen=True)
class Policy:
    """An algorithm's rules (plain functions, closed over nothing dynamic).

    noise_var(params) -> lam: the noise variance of the GP model.
    init(static, params) -> extra: the algorithm's own state (any pytree).
    num_words(static) -> n: random uint32 words the policy needs per round.
    draw(static, words) -> draws: its randomness of a round, from those words.
    choose(static, params, model, extra, t, b, draws) -> j: the b-th candidate of round t.
    on_choice(params, extra, var_j) -> extra: after a pick (var_j: its variance before the pick).
    on_observation(params, extra, c, d, j, y) -> extra: after conditioning the mean on (j, y).
    recommend(params, model, extra) -> j: the candidate reported at the end.
    """

    noise_var: Callable
    init: Callable
    choose: Callable
    num_words: Callable = lambda static: 0
    draw: Callable = lambda static, w: ()
    on_choice: Callable = lambda params, extra, var_j: extra
    on_observation: Callable = lambda params, extra, c, d, j, y: extra
    recommend: Callable = lambda params, model, extra: first_argmax(model.mean)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Outputs(Measures):
    """The measures (regret: the per-client average for BBO; best-so-far: over every pick of a
    round), then the family's own."""

    recommendation: jax.Array    # (D,) the recommended candidate
    distinct: jax.Array          # () int32: how many distinct candidates were evaluated
    choices: jax.Array           # (trace,) or (trace, M) int32 candidate indices, -1 past T


class Carry(NamedTuple):
    """What a run carries from one round to the next: the posterior and the book."""

    mean: Any
    cov: Any
    extra: Any
    observed: Any                # (K, B) bool: candidate evaluated by pick slot b
    regret: Any                  # (total, compensation)
    curve: Any
    best: Any                    # checkpoints.Best
    best_curve: Any
    simple_curve: Any
    choices: Any


class Picks(NamedTuple):
    """A round's picks before their values: what conditioning the posterior on them needs."""

    js: Any                      # (B,) int32 candidate indices, in pick order
    hs: Any                      # (B, K) the factors h of their rank-one terms (condition_cov)
    cols: Any                    # (B, K) their columns c of Sigma, each conditioned on the earlier picks
    dens: Any                    # (B,) their denominators d
    extra: Any                   # the policy's state after the picks (on_choice)


def start(static: Static, params, box, key, policy: Policy):
    """(the run's candidates in ``box``'s [lo, hi] (K, D), the Carry before round 1)."""
    K, B = static.num_candidates, static.batch
    unit = unit_candidates(static, key)
    kmat = kernel(static.kernel, squared_distances(static, unit), params.lengthscale)
    trace_shape = (static.trace,) if B == 1 else (static.trace, B)
    zeros = jnp.zeros((static.num_checkpoints,), jnp.float32)
    carry = Carry(mean=jnp.zeros((K,), jnp.float32), cov=kmat, extra=policy.init(static, params),
                  observed=jnp.zeros((K, B), bool), regret=(jnp.float32(0.0), jnp.float32(0.0)), curve=zeros,
                  best=checkpoints.best_start(jnp.float32), best_curve=zeros, simple_curve=zeros,
                  choices=jnp.full(trace_shape, -1, jnp.int32))
    return to_box(box, unit), carry


def round_words(static: Static, policy: Policy, key, t):
    """(the noise's uniforms, the policy's draws) of round t (1-based)."""
    n_noise = noise_words(static.batch)
    w = words(key, t, n_noise + policy.num_words(static))
    return unit_floats(w[:n_noise]), policy.draw(static, w[n_noise:])


def select(static: Static, params, policy: Policy, carry: Carry, t, draws) -> Picks:
    """Round t's picks: pick b sees the variances conditioned on picks 0..b-1 at once (the covariance
    takes them all when the round's picks are done: :func:`condition_many`), the mean of the last
    feedback."""
    K, B = static.num_candidates, static.batch
    lam = policy.noise_var(params)
    observed = jnp.any(carry.observed, axis=1)

    def pick(b, state):
        diag, extra, js, hs, cols, dens = state
        var = jnp.maximum(diag, 0.0)
        j = policy.choose(static, params, Model(carry.mean, var, carry.cov, observed), extra, t, b,
                          draws).astype(jnp.int32)
        c = column(carry.cov, hs, b, j)
        d = c[j] + lam
        h = c / exact_sqrt(d)
        extra = policy.on_choice(params, extra, var[j])
        return diag - h * h, extra, js.at[b].set(j), hs.at[b].set(h), cols.at[b].set(c), dens.at[b].set(d)

    state = (jnp.diagonal(carry.cov), carry.extra, jnp.zeros((B,), jnp.int32), jnp.zeros((B, K), jnp.float32),
             jnp.zeros((B, K), jnp.float32), jnp.ones((B,), jnp.float32))
    _, extra, js, hs, cols, dens = pick(0, state) if B == 1 else jax.lax.fori_loop(0, B, pick, state)
    return Picks(js, hs, cols, dens, extra)


def learn(params, policy: Policy, mean, picks: Picks, y):
    """(mean, the policy's state) conditioned on the picks' values y (B,), in pick order."""
    def one(b, me):
        mean, extra = me
        p = picks
        return (condition_mean(mean, p.cols[b], p.dens[b], p.js[b], y[b]),
                policy.on_observation(params, extra, p.cols[b], p.dens[b], p.js[b], y[b]))

    B = picks.js.shape[0]
    return one(0, (mean, picks.extra)) if B == 1 else jax.lax.fori_loop(0, B, one, (mean, picks.extra))


def tables(objective, points, reward_values: Callable, f_star=None):
    """(f* - f, f, rewards) at the K candidates: f the global values (K,), rewards (K, B) what the
    pick slots observe (``reward_values``, see :func:`simulate`); f* the objective's unless given.
    A stepper books regret from the same table rather than at its asked points: f may end in a
    product that XLA's CPU backend contracts with f* - f into an FMA here, and might not in a
    subtraction at a few points."""
    f, rewards = (v.astype(jnp.float32) for v in reward_values(objective, points))
    return jnp.float32(objective.f_star if f_star is None else f_star) - f, f, rewards


def book(static: Static, params, policy: Policy, carry: Carry, t, mean, cov, extra, js, gaps, gap_at, goals) -> Carry:
    """The Carry after round t: the posterior (mean, cov, extra) and the book of its picks ``js``
    with regrets ``gaps`` (B,); ``gap_at(j)``: the regret of candidate j (the recommendation's)."""
    B = static.batch
    regret = compensated_add(carry.regret, gaps[0] if B == 1 else pairwise_mean(gaps))
    curve = checkpoints.record(carry.curve, params.checkpoint_rounds, t, regret[0])
    best, best_curve = checkpoints.record_best(carry.best, carry.best_curve, params.checkpoint_rounds, t,
                                               gaps[0] if B == 1 else jnp.min(gaps), goals)
    observed = carry.observed.at[js, jnp.arange(B, dtype=jnp.int32)].set(True)
    # The recommendation after round t (argmax over the K candidates, small beside the round's
    # K x K update), so that every checkpoint has its simple regret.
    simple = gap_at(policy.recommend(params, model(mean, cov, jnp.any(observed, axis=1)), extra))
    simple_curve = checkpoints.record(carry.simple_curve, params.checkpoint_rounds, t, simple)
    choices = carry.choices
    if static.trace:
        row = jnp.minimum(t - 1, static.trace - 1)
        choices = choices.at[row].set(jnp.where(t <= static.trace, js if B > 1 else js[0], choices[row]))
    return Carry(mean, cov, extra, observed, regret, curve, best, best_curve, simple_curve, choices)


def finish(params, policy: Policy, carry: Carry, points, flags, scale) -> Outputs:
    observed = jnp.any(carry.observed, axis=1)
    best = policy.recommend(params, model(carry.mean, carry.cov, observed), carry.extra)
    return Outputs(curve=carry.curve, final_regret=carry.regret[0], flags=flags.astype(jnp.int32),
                   recommendation=points[best], distinct=jnp.sum(observed.astype(jnp.int32)),
                   best_curve=carry.best_curve, hits=carry.best.hits, target_scale=scale,
                   simple_curve=carry.simple_curve, choices=carry.choices)


def simulate(static: Static, params, objective, key, policy: Policy, reward_values: Callable) -> Outputs:
    """One run of ``params.horizon`` rounds, every candidate evaluated up front.

    reward_values(objective, points) -> ((K,) global values, (K, B) values the B pick slots observe
    at each candidate: the global objective for centralized algorithms, client b's local objective
    for BBO).  Regret of a round is the mean over the B picks of f* - f(x) with f the global objective.
    """
    B = static.batch
    points, carry = start(static, params, objective, key, policy)
    gaps, f_global, rewards = tables(objective, points, reward_values)
    scale = checkpoints.target_scale(objective, jnp.float32)
    goals = checkpoints.targets(scale)
    slots = jnp.arange(B, dtype=jnp.int32)

    def round_(t, carry: Carry) -> Carry:
        u, draws = round_words(static, policy, key, t)
        picks = select(static, params, policy, carry, t, draws)
        cov = condition_many(carry.cov, picks.hs)
        y = observe(static.noise_kind, params.noise_scale, u, rewards[picks.js, slots])
        mean, extra = learn(params, policy, carry.mean, picks, y)
        return book(static, params, policy, carry, t, mean, cov, extra, picks.js, gaps[picks.js],
                    lambda j: gaps[j], goals)

    carry = jax.lax.fori_loop(jnp.int32(1), params.horizon + 1, round_, carry)
    observed = jnp.any(carry.observed, axis=1)
    flags = noise.value_flags(static.noise_kind, f_global, observed, rewards=False, f_star=objective.f_star) \
        | noise.value_flags(static.noise_kind, rewards, carry.observed)
    return finish(params, policy, carry, points, flags, scale)


def global_rewards(objective, points):
    """Centralized algorithms observe the global objective: (K,), (K, 1)."""
    g = blocks.every_point(objective, lambda p: (objective.value(p),), points)[0]
    return g, g[:, None]


def local_rewards(objective, points):
    """BBO's pick slot m is client m, which observes its local objective: (K,), (K, M)."""
    return blocks.every_point(objective, objective.values_and_locals, points)


METRICS = measures.metrics(("recommendation", "distinct", "choices"))
