"""Fed1-UCB (Shi & Shen, "Federated Multi-armed Bandits", AAAI 2021) on the grid arms of App. E.

The paper's rules, as its public code (github.com/ShenGroup/FMAB, ``Fed1_UCB_CR.py``) runs them with
a fixed set of M clients: phased elimination, every client pulling every active arm f = ceil(kappa ln
T) times a phase, then commitment to the last arm.  :func:`plan`, :func:`upload`, :func:`advance`,
:func:`commit` and :func:`finish` are shared by ``fp.run`` and the ask/tell :func:`steps`.

The rules, the default sigma per noise, the exact sampling of a phase, the regret and the departures
from the public code: docs/algorithms/arms.md, section "Fed1-UCB in detail".
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.arms import arm_grid as arm_grid
from fedpne_jax.core import checkpoints, counters, measures
from fedpne_jax.core import pulls as pulls_lib
from fedpne_jax.core.algorithm import Algorithm, Style
from fedpne_jax.core.config import MAX_CLIENTS, BaselineConfig
from fedpne_jax.core.measures import Measures
from fedpne_jax.core.noise import subgaussian_scale
from fedpne_jax.core.stepper import Space, Steps
from fedpne_jax.core.validation import check_int, check_real
from objectives.ordered import exact_sqrt, first_argmax, inclusive_scan, pairwise_mean, prefix_min

NOISE_STREAM = 0x4E4F4953       # fold_in tag of the key of the phases' rewards
INT32_MAX = 2**31 - 1
PULL_CHUNK = 8                  # active arms drawn together (their means, or each of their pulls)


@dataclasses.dataclass(frozen=True)
class Fed1UCBConfig(BaselineConfig):
    """Fed1-UCB.  ``arms``: grid points per dimension (None: the largest K with K^D <= 100);
    ``kappa``: f = ceil(kappa ln T) pulls per arm per phase (paper: 1, public code: 10);
    ``sigma``: the sub-Gaussian scale in the elimination bound (None: derived from the noise)."""

    num_clients: int = 10
    arms: Optional[int] = None
    kappa: float = 1.0
    sigma: Optional[float] = None

    def __post_init__(self):
        super().__post_init__()
        check_int("num_clients (M)", self.num_clients, 1, MAX_CLIENTS)
        arm_grid.check_field(self.arms)
        arm_grid.check_noise_scale(self.noise_scale, self.noise)
        check_real("kappa", self.kappa, low=0.0)
        if self.kappa * math.log(max(self.horizon, 2)) > 2**24:
            raise ValueError(f"kappa: kappa ln T must be <= 2^24 pulls per arm per phase, got {self.kappa!r}")
        if self.sigma is not None:
            check_real("sigma", self.sigma, low=0.0, low_open=False)
            if self.sigma > 1e18:
                raise ValueError(f"sigma must be <= 1e18, got {self.sigma!r}")
        if self.num_clients * (self.horizon // self.pulls_per_phase + 1) > INT32_MAX:
            raise ValueError(f"num_clients * horizon / pulls_per_phase must stay below 2^31 (uploads are "
                             f"counted in int32), got M={self.num_clients}, T={self.horizon}")

    @property
    def pulls_per_phase(self) -> int:
        """f = max(1, ceil(kappa ln T))."""
        return max(1, math.ceil(self.kappa * math.log(self.horizon)))

    @property
    def sigma_value(self) -> float:
        if self.sigma is not None:
            return float(self.sigma)
        return subgaussian_scale(self.noise_kind, self.noise_scale)

    def resolved(self) -> dict:
        out = super().resolved()
        out.update(pulls_per_phase=self.pulls_per_phase, sigma=self.sigma_value)
        return out


@dataclasses.dataclass(frozen=True)
class Static:
    per_dim: int          # K grid points per dimension
    dim: int
    num_clients: int
    checkpoints: int
    noise_kind: str

    @property
    def num_arms(self) -> int:
        return self.per_dim ** self.dim

    @property
    def chunk(self) -> int:
        """Active arms drawn together."""
        return min(self.num_arms, PULL_CHUNK)

    @property
    def width(self) -> int:
        """A phase's pull order's length: K rounded up to whole chunks."""
        return -(-self.num_arms // self.chunk) * self.chunk


class Params(NamedTuple):
    horizon: np.ndarray            # () int32, T
    pulls: np.int32                # f
    checkpoint_rounds: np.ndarray  # (C,) int32
    noise_scale: np.float32
    bound: np.float32              # 4 sigma^2 ln T / M (B = sqrt(bound / n))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Outputs(Measures):
    phases: jax.Array
    uploads: jax.Array
    arms_left: jax.Array
    recommendation: jax.Array
    eliminated: jax.Array          # (K,) int32: the phase that eliminated each arm (0: never); tests read it


def check(config: Fed1UCBConfig, objective) -> None:
    total = arm_grid.check_total(config.arms, objective.dim)
    if total * config.pulls_per_phase > 2**30:
        raise ValueError(f"kappa: a phase of {total} arms x {config.pulls_per_phase} pulls exceeds 2^30 rounds; "
                         f"lower kappa or arms")


def make_static(config: Fed1UCBConfig, objective, tables=None) -> Static:
    return Static(per_dim=arm_grid.per_dim(config.arms, objective.dim), dim=objective.dim,
                  num_clients=config.num_clients, checkpoints=config.checkpoints, noise_kind=config.noise_kind)


def make_params(config: Fed1UCBConfig, tables=None) -> Params:
    bound = 4.0 * config.sigma_value ** 2 * math.log(config.horizon) / config.num_clients
    return Params(**checkpoints.schedule(config), pulls=np.int32(config.pulls_per_phase),
                  noise_scale=np.float32(config.noise_scale), bound=np.float32(bound))


def communicate(kind: str, key, scale, pulls, local, order, count, chunks, chunk: int, means, server, phase):
    """One phase's uploads and their average: every client's running mean of its rewards at each of the
    ``chunk * chunks`` first arms of ``order`` (the ``count`` active arms, then K as padding) gains
    this phase's mean of ``pulls`` rewards; returns the updated (K, M) means and (K,) server averages
    (rows of arms not drawn are left as they were).

    Gaussian or no noise: one draw of the mean, N(f_m(x), s^2 / f), exact in distribution, ``chunk``
    arms at a time, so a late phase with few active arms costs little (random bits dominate).
    Bernoulli and uniform noise: every pull, a block of pulls at a time (pulls.py), the arm's rank
    in ``order`` as its row."""
    f = pulls.astype(local.dtype)
    M = local.shape[1]
    if kind not in ("gaussian", "none"):
        words = counters.key_words(key)

        def block(j, b):
            values = jnp.take(local, order[j], axis=0)[:, None]
            r = [pulls_lib.rewards(kind, scale, None, values, u) for u in pulls_lib.block_uniforms(words, j, b, M, 1,
                                                                                                 local.dtype)]
            return pulls_lib.block_sum(r, (pulls_lib.block_offsets(b) < pulls)[:, None, :]), (), jnp.int32(0)

        sums, _, _ = pulls_lib.row_sums(jnp.minimum(count, chunks * chunk), pulls_lib.block_count(pulls), block,
                                        jnp.zeros((M,), local.dtype), (), order.shape[0])

    def one_chunk(c, carry):
        means, server = carry
        rows = jax.lax.dynamic_slice(order, (c * chunk,), (chunk,))
        if kind in ("gaussian", "none"):
            vals = jnp.take(local, rows, axis=0, mode="fill", fill_value=0.0)
            fresh = arm_grid.observe_flat(jax.random.fold_in(key, c), kind, scale / exact_sqrt(f), vals)
        else:
            fresh = jax.lax.dynamic_slice(sums, (c * chunk, 0), (chunk, M)) / f
        return upload(means, server, rows, fresh, phase)

    return jax.lax.fori_loop(0, chunks, one_chunk, (means, server))


def upload(means, server, rows, fresh, phase):
    """The server's side of phase ``phase``'s uploads at arms ``rows`` (K: none): each client's
    running mean (``means`` (K, M)) gains its phase mean ``fresh`` (len(rows), M) (every active arm
    has p f pulls), and the server averages the clients' means."""
    old = jnp.take(means, rows, axis=0, mode="fill", fill_value=0.0)
    new = old + (fresh - old) / phase.astype(old.dtype)
    return means.at[rows].set(new, mode="drop"), server.at[rows].set(pairwise_mean(new), mode="drop")


def recommend(active, server):
    """The active arm with the largest server mean (the first on ties; arm 0 before any upload)."""
    return first_argmax(jnp.where(active, server, -jnp.inf))


class _State(NamedTuple):
    t: jax.Array            # rounds done
    regret: jax.Array       # R(t) (per client)
    curve: jax.Array        # (C,)
    best: checkpoints.Best
    best_curve: jax.Array   # (C,)
    simple_curve: jax.Array  # (C,)
    active: jax.Array       # (K,) bool
    means: jax.Array        # (K, M) clients' running means over all completed phases
    server: jax.Array       # (K,) server means (of the active arms) after the last completed phase
    phases: jax.Array       # completed phases (communication rounds)
    uploads: jax.Array      # scalars uploaded, sum over phases of M |active|
    pulled: jax.Array       # (K,) bool, arms pulled at least once
    eliminated: jax.Array   # (K,) int32


def start(static: Static, params: Params) -> _State:
    K, M = static.num_arms, static.num_clients
    cps = params.checkpoint_rounds
    return _State(t=jnp.int32(0), regret=jnp.float32(0.0), curve=jnp.zeros(cps.shape, jnp.float32),
                  best=checkpoints.best_start(jnp.float32), best_curve=jnp.zeros(cps.shape, jnp.float32),
                  simple_curve=jnp.zeros(cps.shape, jnp.float32), active=jnp.ones(K, bool),
                  means=jnp.zeros((K, M), jnp.float32), server=jnp.zeros(K, jnp.float32), phases=jnp.int32(0),
                  uploads=jnp.int32(0), pulled=jnp.zeros(K, bool), eliminated=jnp.zeros(K, jnp.int32))


def in_phases(params: Params, s: _State):
    """Whether the next rounds are a phase (more than one arm active), not the commitment."""
    return (s.t < params.horizon) & (jnp.sum(s.active, dtype=jnp.int32) > 1)


class Phase(NamedTuple):
    active: jax.Array       # active arms
    order: jax.Array        # (width,) the active arms in pull order, then K
    end: jax.Array          # its last round (cut at T)
    complete: jax.Array     # it fits before T: it uploads and eliminates


def plan(static: Static, params: Params, s: _State) -> Phase:
    """The phase that starts after round s.t."""
    count = jnp.sum(s.active, dtype=jnp.int32)
    order = jnp.nonzero(s.active, size=static.width, fill_value=static.num_arms)[0]
    length = count * params.pulls
    remaining = params.horizon - s.t
    return Phase(count, order, s.t + jnp.minimum(length, remaining), length <= remaining)


def rank_pulls(static: Static, params: Params, s: _State, ph: Phase):
    """(K,) each client's pulls of the arm of each rank of ``ph.order`` in the rounds s.t + 1 .. T at
    most: a phase's f per active arm (fewer in a phase cut at T), or, with one arm left, T - s.t of it."""
    f, T = params.pulls, params.horizon
    ranks = jnp.arange(static.num_arms, dtype=jnp.int32)
    phase = jnp.clip(ph.end - s.t - ranks * f, 0, f)
    return jnp.where(in_phases(params, s), phase, jnp.where(ranks == 0, T - s.t, 0))


def advance(static: Static, params: Params, s: _State, ph: Phase, gap_rank, gap, means, server, goals) -> _State:
    """``s`` after phase ``ph``: its regret (``gap_rank`` (K,): f* - f of the arm of each rank of
    ``ph.order``, 0 past the active ones) booked, and, if it completed, the clients' means and the
    server's (``means``, ``server``, after :func:`upload`) read by the elimination.  ``gap`` (K,): f* - f
    of the arms, read at the recommendations (arms pulled by then)."""
    f, cps = params.pulls, params.checkpoint_rounds
    K, M = static.num_arms, static.num_clients
    count, order, end, complete = ph
    # Regret: arm order[j] is pulled in rounds t + j f + 1 .. t + (j + 1) f.  blocks[j] is the regret
    # of the first j + 1 blocks.  (The selects keep products and sums out of one FMA; see
    # arms.no_contraction.)
    blocks = inclusive_scan(jnp.where(jnp.arange(K) < count, gap_rank * f.astype(gap_rank.dtype), 0.0))

    def regret_until(r):
        """Regret of this phase's rounds s.t < round <= r, for rounds r (any shape)."""
        d = jnp.clip(r - s.t, 0, end - s.t)
        j = d // f
        part = d - j * f
        before = jnp.where(j > 0, blocks[jnp.clip(j - 1, 0, K - 1)], 0.0)
        return before + jnp.where(part > 0, part.astype(gap_rank.dtype) * gap_rank[jnp.minimum(j, K - 1)], 0.0)

    inside = checkpoints.within(cps, s.t, end)
    curve = jnp.where(inside, s.regret + regret_until(cps), s.curve)
    regret = s.regret + regret_until(end)

    # Best-so-far: the smallest gap of the blocks begun by round r (a min, exact in any order).
    firsts = prefix_min(jnp.where(jnp.arange(K) < count, gap_rank, jnp.inf))

    def best_until(r):
        return jnp.minimum(s.best.value, firsts[jnp.minimum((jnp.clip(r - s.t, 1, end - s.t) - 1) // f, K - 1)])

    begun = (end - s.t + f - 1) // f
    first = jnp.searchsorted(-firsts, -goals, side="left").astype(jnp.int32)     # (51,) block reaching it
    hits = jnp.where((s.best.hits == checkpoints.NOT_REACHED) & (first < begun), s.t + first * f + 1, s.best.hits)
    so_far = checkpoints.Best(best_until(end), hits)
    best_curve = jnp.where(inside, best_until(cps), s.best_curve)
    started = jnp.arange(static.width) * f < end - s.t                  # blocks that began before the end
    pulled = s.pulled.at[order].max(started, mode="drop")

    # Elimination (complete phases only).
    p = s.phases + 1
    bound = jnp.sqrt(params.bound / (p * f).astype(server.dtype))
    best = jnp.max(jnp.where(s.active, server, -jnp.inf))
    keep = jnp.where(complete, s.active & ~(server + bound < best - bound), s.active)
    # The recommendation changes when the phase completes, after its last round.
    before, after = gap[recommend(s.active, s.server)], gap[recommend(keep, server)]
    simple_curve = checkpoints.record_span(s.simple_curve, cps, s.t, end, before, jnp.where(complete, after, before))
    return _State(t=end, regret=regret, curve=curve, best=so_far, best_curve=best_curve,
                  simple_curve=simple_curve, active=keep, means=means, server=server,
                  phases=jnp.where(complete, p, s.phases),
                  uploads=jnp.where(complete, s.uploads + M * count, s.uploads), pulled=pulled,
                  eliminated=jnp.where(s.active & ~keep, p, s.eliminated))


def commit(static: Static, params: Params, s: _State, gap, goals) -> _State:
    """``s`` at T after the commitment: the last arm pulled from round s.t + 1 on (nothing happens if
    the phases ended at T).  ``gap`` (K,): f* - f of the arms (read at the active one)."""
    T, cps, K = params.horizon, params.checkpoint_rounds, static.num_arms
    last = jnp.argmax(s.active)
    committed = s.t < T
    # (the select keeps XLA from fusing the product and the sum into an FMA; see arms.no_contraction)
    tail = lambda r: s.regret + jnp.where(r > s.t, (r - s.t).astype(jnp.float32) * gap[last], 0.0)
    committed_best = checkpoints.best_step(s.best, s.t + 1, gap[last], goals, committed)
    return s._replace(t=jnp.maximum(s.t, T), regret=tail(T), curve=jnp.where(cps > s.t, tail(cps), s.curve),
                      best=committed_best, best_curve=jnp.where(cps > s.t, committed_best.value, s.best_curve),
                      pulled=s.pulled | (committed & (jnp.arange(K) == last)),
                      simple_curve=jnp.where(cps > s.t, gap[recommend(s.active, s.server)], s.simple_curve))


def finish(s: _State, points, scale, flags) -> Outputs:
    """The Outputs of a run ended at T (after :func:`commit`)."""
    return Outputs(curve=s.curve, final_regret=s.regret, flags=flags, phases=s.phases, uploads=s.uploads,
                   arms_left=jnp.sum(s.active, dtype=jnp.int32), recommendation=points[recommend(s.active, s.server)],
                   eliminated=s.eliminated, best_curve=s.best_curve, hits=s.best.hits, target_scale=scale,
                   simple_curve=s.simple_curve)


def run_single(static: Static, params: Params, objective, key) -> Outputs:
    points, values, local = arm_grid.run_arms(key, objective, static.per_dim)
    gap = jnp.float32(objective.f_star) - values
    scale = checkpoints.target_scale(objective, jnp.float32)
    goals = checkpoints.targets(scale)
    f = params.pulls
    noise_key = jax.random.fold_in(key, NOISE_STREAM)
    K, chunk = static.num_arms, static.chunk

    def phase(s: _State) -> _State:
        ph = plan(static, params, s)
        gap_rank = jnp.take(gap, ph.order[:K], mode="fill", fill_value=0.0)
        p = s.phases + 1
        chunks = jnp.where(ph.complete, -(-ph.active // chunk), 0)
        means, server = communicate(static.noise_kind, jax.random.fold_in(noise_key, p), params.noise_scale, f,
                                    local, ph.order, ph.active, chunks, chunk, s.means, s.server, p)
        return advance(static, params, s, ph, gap_rank, gap, means, server, goals)

    s = jax.lax.while_loop(lambda s: in_phases(params, s), phase, start(static, params))
    s = commit(static, params, s, gap, goals)
    return finish(s, points, scale, arm_grid.flags(static.noise_kind, values, local, s.pulled, objective.f_star))


# ---------------------------------------------------------------- ask/tell

class Run(NamedTuple):
    state: _State
    points: jax.Array       # (K, D) the arms
    gap: jax.Array          # (K,) f* - f booked at each arm when it was last told (NaN before)
    flags: jax.Array        # () int32 the told values' flags
    scale: jax.Array        # the best-so-far targets' scale
    space: Any              # the space's Objective as data (None for a box), as fp.run passes it


def steps(static: Static, params: Params, space: Space) -> Steps:
    """A step is a phase: every client pulls each active arm f times (``counts`` f, or fewer in a
    phase cut at T; (M, K) slots, the active arms in pull order), and tells its mean of them; once one
    arm is left, the commitment: every client pulls it until T.  The rules are :func:`run_single`'s
    (plan, upload, advance, commit, finish), so a run told the clients' noise-free local values is
    ``fp.run``'s, bit for bit."""
    K, M = static.num_arms, static.num_clients
    T = params.horizon
    dtype = jnp.float32
    f_star = space.f_star_as(dtype)

    def init(key):
        scale = space.target_scale(dtype)
        points = arm_grid.arms(key, space.lo, space.hi, static.per_dim)
        return Run(start(static, params), points, jnp.full(K, jnp.nan, dtype), jnp.int32(0), scale, space.objective)

    def query(run: Run):
        s = run.state
        ph = plan(static, params, s)
        rows = ph.order[:K]
        return ph, rows, rank_pulls(static, params, s, ph)

    def ask(step, run: Run):
        _, rows, pulls = query(run)
        points = run.points[jnp.minimum(rows, K - 1)]
        return (jnp.broadcast_to(points, (M,) + points.shape), jnp.broadcast_to(pulls, (M, K)).astype(jnp.int32),
                run)

    def tell(step, run: Run, points, counts, values, valid):
        s = run.state
        ph, rows, pulls = query(run)
        live = valid & (s.t < T)
        told = pulls > 0
        f = arm_grid.booked(run.space, run.points[jnp.minimum(rows, K - 1)], values)
        gap_rank = jnp.where(told, f_star - f, 0.0)
        gap = run.gap.at[jnp.where(live & told, rows, K)].set(gap_rank, mode="drop")
        flags = run.flags | jnp.where(live, arm_grid.flags(static.noise_kind, f, values.T, told,
                                                           None if run.space is None else space.f_star), 0)
        goals = checkpoints.targets(run.scale)
        phase = in_phases(params, s)
        # Only a complete phase uploads; a stale tell uploads nowhere (rows K are dropped).
        uploaded = jnp.where(live & phase & ph.complete, rows, K)
        means, server = upload(s.means, s.server, uploaded, values.T, s.phases + 1)
        new = jax.lax.cond(phase, lambda: advance(static, params, s, ph, gap_rank, gap, means, server, goals),
                           lambda: commit(static, params, s, gap, goals))
        new = jax.tree.map(lambda a, b: jnp.where(live, a, b), new._replace(means=s.means, server=s.server), s)
        return run._replace(state=new._replace(means=means, server=server), gap=gap, flags=flags)

    def recommend_(step, run: Run):
        return run.points[recommend(run.state.active, run.state.server)]

    def done(step, run: Run):
        return run.state.t >= T

    def outputs(step, run: Run):
        return finish(run.state, run.points, run.scale, run.flags)

    def failed(run: Run):
        return jnp.bool_(False)

    return Steps(init, ask, tell, recommend_, done, outputs, failed, (M, K))


ALGORITHM = Algorithm(name="fed1ucb", config_type=Fed1UCBConfig, make_static=make_static,
                      make_params=make_params, run_single=run_single,
                      metrics=measures.metrics(("phases", "uploads", "arms_left", "recommendation")),
                      federated=True, check=check, steps=steps,
                      styles=(("fed1ucb", Style("Fed1-UCB", "#2ca02c", "^")),))
