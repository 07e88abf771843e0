"""FN-UCB (Dai, Shu, Verma, Fan, Low, Jaillet, "Federated Neural Bandits", ICLR 2023) on grid arms.

As the authors' public code runs it (github.com/daizhongxiang/Federated-Neural-Bandits,
``run_fn_ucb.py``, the paper's App. E.5 setting), on the K^D grid arms of
:mod:`fedpne_jax.algorithms.arms`: a 20-wide ReLU network, neural-tangent features, communication
every round.  :func:`start`, :func:`select`, :func:`update` and :func:`finish` are shared by
``fp.run`` and the ask/tell :func:`steps`.

The rules, the exact reformulations (shared statistics, per-arm histories, whitened features in
product form), ``train_every`` and the other simplifications: docs/algorithms/arms.md, section
"FN-UCB in detail".
"""
from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.arms import arm_grid as arm_grid
from fedpne_jax.algorithms.arms.network import Net, average, features, forward, init_net, train
from fedpne_jax.core import checkpoints, measures
from fedpne_jax.core.algorithm import Algorithm, Style
from fedpne_jax.core.config import MAX_CLIENTS, BaselineConfig
from fedpne_jax.core.measures import Measures
from fedpne_jax.core.stepper import Space, Steps
from fedpne_jax.core.validation import check_int, check_real
from objectives.ordered import exact_sqrt, first_argmax, pairwise_sum

INIT_STREAM = 0x494E4954        # fold_in tags of the run key
NOISE_STREAM = 0x4E4F4953
MAX_WIDTH = 1024


@dataclasses.dataclass(frozen=True)
class FNUCBConfig(BaselineConfig):
    """FN-UCB with the public code's defaults.  ``arms``: grid points per dimension (None: the largest K
    with K^D <= 100).  ``train_every``: train every r-th history point (public code: 1).
    ``train_until``: no history or training from this round on (public code: 2000).
    ``alpha_delay``/``alpha_ramp``: alpha_t = clip((t - delay)/ramp, 0, 1) (public code: 3, 700)."""

    num_clients: int = 10
    arms: Optional[int] = None
    width: int = 20
    lam: float = 0.1
    nu: float = 0.1
    nu2: float = 0.1
    lr: float = 0.01
    train_steps: int = 30
    train_every: int = 1
    train_until: int = 2000
    alpha_delay: int = 3
    alpha_ramp: int = 700

    def __post_init__(self):
        super().__post_init__()
        check_int("num_clients (M)", self.num_clients, 1, MAX_CLIENTS)
        arm_grid.check_field(self.arms)
        arm_grid.check_noise_scale(self.noise_scale, self.noise)
        check_int("width", self.width, 1, MAX_WIDTH)
        check_real("lam", self.lam, low=0.0, magnitude=1e18)
        check_real("nu", self.nu, low=0.0, low_open=False, magnitude=1e18)
        check_real("nu2", self.nu2, low=0.0, low_open=False, magnitude=1e18)
        check_real("lr", self.lr, low=0.0, magnitude=1e18)
        check_int("train_steps", self.train_steps, 0, 2**20)
        check_int("train_every", self.train_every, 1, 2**30)
        check_int("train_until", self.train_until, 0, 2**31 - 1)
        check_int("alpha_delay", self.alpha_delay, 0, 2**30)
        check_int("alpha_ramp", self.alpha_ramp, 1, 2**30)


@dataclasses.dataclass(frozen=True)
class Static:
    """Shapes, and the round schedule: T and the training schedule decide which rounds train, a
    branch that must stay a branch (not a select computing both sides) when parameters are vmapped."""

    per_dim: int
    dim: int
    num_clients: int
    width: int
    checkpoints: int
    noise_kind: str
    horizon: int
    train_steps: int
    train_every: int
    train_until: int
    alpha_delay: int
    alpha_ramp: int

    @property
    def num_arms(self) -> int:
        return self.per_dim ** self.dim

    @property
    def num_params(self) -> int:
        return self.width * (self.dim + 2) + 1


class Params(NamedTuple):
    checkpoint_rounds: np.ndarray  # (C,) int32
    lam: np.float32
    nu: np.float32
    nu2: np.float32
    lr: np.float32
    noise_scale: np.float32


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Outputs(Measures):
    phases: jax.Array
    recommendation: jax.Array
    arms_pulled: jax.Array


def check(config: FNUCBConfig, objective) -> None:
    arm_grid.check_total(config.arms, objective.dim)


def make_static(config: FNUCBConfig, objective, tables=None) -> Static:
    return Static(per_dim=arm_grid.per_dim(config.arms, objective.dim), dim=objective.dim,
                  num_clients=config.num_clients, width=config.width, checkpoints=config.checkpoints,
                  noise_kind=config.noise_kind, horizon=config.horizon, train_steps=config.train_steps,
                  train_every=config.train_every, train_until=config.train_until, alpha_delay=config.alpha_delay,
                  alpha_ramp=config.alpha_ramp)


def make_params(config: FNUCBConfig, tables=None) -> Params:
    f32 = np.float32
    return Params(checkpoint_rounds=np.asarray(config.checkpoint_rounds, np.int32), lam=f32(config.lam),
                  nu=f32(config.nu), nu2=f32(config.nu2), lr=f32(config.lr), noise_scale=f32(config.noise_scale))


# ---------------------------------------------------------------- confidence widths

def whitened_update(w, k, scale):
    """V <- V + scale g_k g_k^T on whitened features w (..., K, p) (rows L^-1 g_j; one V per leading
    index, ``scale`` (...)).  Returns (w, v = L^-1 g_k, c), v and c for :func:`whitened_reward`."""
    v = w[..., k, :]
    r = jnp.sqrt(1.0 + scale * pairwise_sum(v * v))
    c = scale / (r * (1.0 + r))
    u = pairwise_sum(w * v[..., None, :])
    return w - (c[..., None] * u)[..., None] * v[..., None, :], v, c


def whitened_reward(b, v, c, reward_sum):
    """The whitened reward vector L^-1 B (p,) after B gains reward_sum g_k (v, c from whitened_update)."""
    y = b + reward_sum * v
    return y - (c * pairwise_sum(v * y)) * v


def ucb_terms(w, b):
    """From whitened features w (2, K, p) (by V_bar, by V_local) and L_bar^-1 B: (||g_k||^2_{V_bar^-1},
    <g_k, V_bar^-1 B>, ||g_k||^2_{V_local^-1}), each (K,)."""
    sums = pairwise_sum(jnp.concatenate([w[:1] * w[:1], w[:1] * b, w[1:] * w[1:]]))
    return sums[0], sums[1], sums[2]


# ---------------------------------------------------------------- one run

class _State(NamedTuple):
    w: jax.Array           # (2, K, p) features whitened by V_bar and by V_local
    b: jax.Array           # (p,) L_bar^-1 B_sync
    nets: Net              # clients' networks (leading axis M)
    agg_values: jax.Array  # (K,) f(x_k; theta_agg)
    counts: jax.Array      # (K,) history points per arm
    sums: jax.Array        # (M, K) history reward sums per client and arm
    pulls: jax.Array       # (K,) int32
    regret: jax.Array
    curve: jax.Array
    best: checkpoints.Best
    best_curve: jax.Array
    simple_curve: jax.Array


def start(static: Static, params: Params, key, points, lo, hi):
    """(X, the state before round 0): X (K, D) the arms ``points`` rescaled to [0, 1]^D, the
    network's initial weights from ``key``."""
    X = arm_grid.unit(points, lo, hi)
    K, M = static.num_arms, static.num_clients
    cps = params.checkpoint_rounds
    theta0 = init_net(jax.random.fold_in(key, INIT_STREAM), static.dim, static.width)
    w0 = features(theta0, X) / exact_sqrt(params.lam)
    return X, _State(w=jnp.stack([w0, w0]), b=jnp.zeros(w0.shape[1], jnp.float32),
                     nets=jax.tree.map(lambda x: jnp.broadcast_to(x, (M,) + x.shape), theta0),
                     agg_values=forward(theta0, X), counts=jnp.zeros(K, jnp.float32),
                     sums=jnp.zeros((M, K), jnp.float32), pulls=jnp.zeros(K, jnp.int32),
                     regret=jnp.float32(0.0), curve=jnp.zeros(cps.shape, jnp.float32),
                     best=checkpoints.best_start(jnp.float32), best_curve=jnp.zeros(cps.shape, jnp.float32),
                     simple_curve=jnp.zeros(cps.shape, jnp.float32))


def select(static: Static, params: Params, t, s: _State):
    """Round t's arm (every client pulls it)."""
    alpha = jnp.clip((t - static.alpha_delay).astype(jnp.float32) / jnp.float32(static.alpha_ramp), 0.0, 1.0)
    sqrt_lam = jnp.sqrt(params.lam)
    q, mean, q_local = ucb_terms(s.w, s.b)
    ucb_b = mean + params.nu * sqrt_lam * jnp.sqrt(jnp.maximum(q, 0.0))
    ucb_a = s.agg_values + params.nu2 * sqrt_lam * jnp.sqrt(jnp.maximum(q_local, 0.0))
    return first_argmax(jnp.where(alpha > 0, alpha * ucb_a + (1.0 - alpha) * ucb_b, ucb_b))


def update(static: Static, params: Params, t, s: _State, k, rewards, gap_k, gap, X, goals, live=None) -> _State:
    """``s`` after round t: arm k pulled, the clients' rewards ``rewards`` (M,), its regret ``gap_k``
    (f* - f(x_k)); ``gap`` (K,) f* - f of the arms, read at the most pulled one (pulled by then).
    ``live`` (an ask/tell run's): unless it holds, nothing is written (a scale of 0 leaves the
    whitened features as they are; the training branch still depends on t alone)."""
    M, delay, until = static.num_clients, static.alpha_delay, static.train_until
    gate = (lambda new, old: new) if live is None else (lambda new, old: jnp.where(live, new, old))
    scales = jnp.array([M, 1.0], jnp.float32)      # V_bar gains every client's pull, V_local one
    reward_sum = pairwise_sum(rewards)
    if live is not None:
        scales, reward_sum = jnp.where(live, scales, 0.0), jnp.where(live, reward_sum, 0.0)
    w, v, c = whitened_update(s.w, k, scales)
    b = whitened_reward(s.b, v[0], c[0], reward_sum)

    in_history = (t >= delay) & (t < until)
    written = in_history if live is None else in_history & live
    counts = s.counts.at[k].add(jnp.where(written, 1.0, 0.0))
    sums = s.sums.at[:, k].add(jnp.where(written, rewards, 0.0))
    n = t - delay + 1

    def trained():
        nets = train(s.nets, X, counts, sums, n.astype(jnp.float32), static.train_steps, params.lr,
                     params.lam / n.astype(jnp.float32))
        return nets, forward(average(nets), X)

    # t is the loop index (the step), the same for every run, so this stays a branch under vmap.
    nets, agg_values = jax.lax.cond(in_history & (n % static.train_every == 0), trained,
                                    lambda: (s.nets, s.agg_values))
    regret = s.regret + gap_k
    pulls = s.pulls.at[k].add(1)
    cps = params.checkpoint_rounds
    simple_curve = checkpoints.record(s.simple_curve, cps, t + 1, gap[first_argmax(pulls)])
    best, best_curve = checkpoints.record_best(s.best, s.best_curve, cps, t + 1, gap_k, goals)
    small = jax.tree.map(gate, (nets, agg_values, pulls, regret, checkpoints.record(s.curve, cps, t + 1, regret),
                                best, best_curve, simple_curve),
                         (s.nets, s.agg_values, s.pulls, s.regret, s.curve, s.best, s.best_curve, s.simple_curve))
    nets, agg_values, pulls, regret, curve, best, best_curve, simple_curve = small
    return _State(w=w, b=b, nets=nets, agg_values=agg_values, counts=counts, sums=sums, pulls=pulls, regret=regret,
                  curve=curve, best=best, best_curve=best_curve, simple_curve=simple_curve)


def finish(static: Static, s: _State, points, scale, flags) -> Outputs:
    pulled = s.pulls > 0
    return Outputs(curve=s.curve, final_regret=s.regret, flags=flags, phases=jnp.int32(static.horizon),
                   recommendation=points[first_argmax(s.pulls)], arms_pulled=jnp.sum(pulled, dtype=jnp.int32),
                   best_curve=s.best_curve, hits=s.best.hits, target_scale=scale, simple_curve=s.simple_curve)


def run_single(static: Static, params: Params, objective, key) -> Outputs:
    points, values, local = arm_grid.run_arms(key, objective, static.per_dim)
    X, init = start(static, params, key, points, objective.lo, objective.hi)
    gap = jnp.float32(objective.f_star) - values
    scale = checkpoints.target_scale(objective, jnp.float32)
    goals = checkpoints.targets(scale)
    noise_key = jax.random.fold_in(key, NOISE_STREAM)

    def round_(t, s: _State) -> _State:
        k = select(static, params, t, s)
        rewards = arm_grid.observe_flat(jax.random.fold_in(noise_key, t), static.noise_kind, params.noise_scale,
                                        local[k])
        return update(static, params, t, s, k, rewards, gap[k], gap, X, goals)

    s = jax.lax.fori_loop(0, static.horizon, round_, init)
    flags = arm_grid.flags(static.noise_kind, values, local, s.pulls > 0, objective.f_star)
    return finish(static, s, points, scale, flags)


# ---------------------------------------------------------------- ask/tell

class Run(NamedTuple):
    state: _State
    k: jax.Array            # the asked round's arm
    points: jax.Array       # (K, D) the arms
    X: jax.Array            # (K, D) rescaled to [0, 1]^D
    gap: jax.Array          # (K,) f* - f booked at each arm when it was last told (NaN before)
    flags: jax.Array        # () int32 the told values' flags
    scale: jax.Array        # the best-so-far targets' scale
    space: Any              # the space's Objective as data (None for a box), as fp.run passes it


def steps(static: Static, params: Params, space: Space) -> Steps:
    """A step is a round: every client pulls the round's arm once ((M, 1) slots) and tells its
    reward.  The rules are :func:`run_single`'s (start, select, update, finish), so a run told the
    clients' noise-free local values is ``fp.run``'s, bit for bit."""
    K, M, T = static.num_arms, static.num_clients, static.horizon
    dtype = jnp.float32
    f_star = space.f_star_as(dtype)

    def init(key):
        points = arm_grid.arms(key, space.lo, space.hi, static.per_dim)
        X, s = start(static, params, key, points, space.lo, space.hi)
        return Run(s, jnp.int32(0), points, X, jnp.full(K, jnp.nan, dtype), jnp.int32(0), space.target_scale(dtype),
                   space.objective)

    def ask(step, run: Run):
        k = select(static, params, step, run.state)
        return (jnp.broadcast_to(run.points[k], (M, 1, static.dim)), jnp.ones((M, 1), jnp.int32),
                run._replace(k=k))

    def tell(step, run: Run, points, counts, values, valid):
        live = valid & (step < T)
        k = run.k
        rewards = jnp.where(live, values[:, 0], 0.0)
        f = arm_grid.booked(run.space, run.points[k][None], values)
        gap_k = f_star - f[0]
        gap = run.gap.at[jnp.where(live, k, K)].set(gap_k, mode="drop")
        flags = run.flags | jnp.where(live, arm_grid.flags(static.noise_kind, f, values.T, jnp.ones(1, bool),
                                                           None if run.space is None else space.f_star), 0)
        s = update(static, params, step, run.state, k, rewards, gap_k, gap, run.X, checkpoints.targets(run.scale),
                   live)
        return run._replace(state=s, gap=gap, flags=flags)

    def recommend(step, run: Run):
        return run.points[first_argmax(run.state.pulls)]

    def done(step, run: Run):
        return step >= T

    def outputs(step, run: Run):
        return finish(static, run.state, run.points, run.scale, run.flags)

    def failed(run: Run):
        return jnp.bool_(False)

    return Steps(init, ask, tell, recommend, done, outputs, failed, (M, 1))


ALGORITHM = Algorithm(name="fnucb", config_type=FNUCBConfig, make_static=make_static, make_params=make_params,
                      run_single=run_single, metrics=measures.metrics(("phases", "recommendation", "arms_pulled")),
                      federated=True, check=check, steps=steps,
                      styles=(("fnucb", Style("FN-UCB", "#bcbd22", "<")),))
