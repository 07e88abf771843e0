"""A configuration's host plan, derived once: its depth tables, depth bound, first phase and table
sizes, and from them the dynamic :class:`Params` pytree and the static shapes.

Everything that depends on the depth h is tabulated here in float64 and exact integers, so the
compiled program only indexes tables.  This keeps tau_h = ceil(c^2 L rho^(-2h) / nu1^2) exact (a
float32 ceil can land on the wrong integer) and lets a grid of hyper-parameters be a stacked Params
pytree vmapped together with the seeds.  :func:`plan` is cached per configuration: validation,
capacity sizing, params and static all read the same tables instead of walking tau_h again.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import numpy as np

from fedpne_jax.algorithms.fedpne import evaluation
from fedpne_jax.algorithms.fedpne.config import MAX_CAPACITY, FedPNEConfig
from fedpne_jax.core import checkpoints
from fedpne_jax.core.errors import FLAG_CAPACITY, FLAG_DEPTH, CapacityError
from fedpne_jax.core.split import longest_dims

TAU_SATURATION = 2**62    # above M (T + 1) for any int32 horizon and M, so n_h saturates at T + 1
INT32_MAX = 2**31 - 1
MAX_DEPTH = 4096


class Params(NamedTuple):
    """Dynamic inputs of the compiled run: data, not structure, so configurations that differ only in
    these numbers share one compiled program."""

    tau: np.ndarray          # (H+1,) int32, tau_h clipped to M + 1 (only tau <= 1 and M // tau matter)
    n_pulls: np.ndarray      # (H+1,) int32, n_h = ceil(tau_h / M) clipped to T + 1
    conf: np.ndarray         # (H+1,) float, b_h = c sqrt(L / (M n_h))
    smooth: np.ndarray       # (H+1,) float, nu1 rho^h
    noise_scale: np.ndarray  # () float, sigma of gaussian noise or a of uniform noise
    dp_var: np.ndarray       # () float, sigma_dp^2 (0 without DP)
    horizon: np.ndarray            # () int32, T: data, so that a study over horizons compiles once
    checkpoint_rounds: np.ndarray  # (C,) int32


def tau_at(config: FedPNEConfig, h: int) -> int:
    """tau_h = ceil(c^2 L rho^(-2h) / nu1^2) as a Python int, saturating at TAU_SATURATION."""
    log_scale = 2 * math.log(config.c_value) + math.log(config.log_term) - 2 * math.log(config.nu)
    if log_scale - 2.0 * h * math.log(config.rho) >= math.log(TAU_SATURATION):
        return TAU_SATURATION
    return math.ceil(config.c_value ** 2 * config.log_term / config.nu ** 2 * config.rho ** (-2 * h))


def n_from_tau(tau: int, config: FedPNEConfig) -> int:
    return min(-(-tau // config.num_clients), config.horizon + 1)


# How much a node table grows when a run overflows it (at least; more where the demand seen is larger).
GROWTH = 4


@dataclasses.dataclass(frozen=True)
class Plan:
    """The host tables of one configuration (see :func:`plan`)."""

    config: FedPNEConfig
    taus: tuple             # tau_h for h = 0.. until it saturates (or a probe depth of 100,000)
    depth_limit: int        # an upper bound on the depth of any phase a run can start
    first_phase: int        # |K^1| after the initial expansions (some size above MAX_CAPACITY if larger)

    def tau(self, h: int) -> int:
        return self.taus[h] if h < len(self.taus) else tau_at(self.config, h)

    @property
    def initial_capacity(self) -> int:
        """A node-table capacity that fits typical runs: room for all children of the first phase.
        Runs that need more are detected (overflow flag) and rerun with a larger table."""
        return self.start_capacity(iterative=False)

    def start_capacity(self, iterative: bool) -> int:
        """:attr:`initial_capacity`, GROWTH times larger on an iterative objective (a model fit or a
        simulation per evaluation, see core.blocks), unless the config fixes it: the table a first
        overflow would give, since a rerun repeats every fit of the runs that overflowed while rows no
        phase pulls cost no evaluation.  Every Fed-PNE run of the gallery's landmine, digits and COVID
        studies (M = 1 to 10, D = 2 and 3) needed 27 to 64 nodes, and so ran twice from 16."""
        if self.config.capacity is not None:
            return self.config.capacity
        need = self.config.k * self.first_phase
        return int(min(MAX_CAPACITY, (GROWTH if iterative else 1) * max(8 * self.config.k, 1 << (need - 1).bit_length())))

    def check(self) -> None:
        """Configurations no node table can hold, refused before compiling."""
        config = self.config
        if self.first_phase > MAX_CAPACITY:
            raise ValueError(f"rho={config.rho}, c={config.c_value}: tau_h <= 1 (or |K| tau_h <= M) down to a depth "
                             f"where the first phase alone has more than {MAX_CAPACITY} nodes; raise c or lower rho")
        if self.depth_limit > MAX_DEPTH:
            raise ValueError(f"rho={config.rho}: the run could reach depth {self.depth_limit} > {MAX_DEPTH}; lower rho")


@functools.lru_cache(maxsize=4096)
def plan(config: FedPNEConfig) -> Plan:
    """The plan of ``config``, computed once.

    depth_limit: with g1 the first depth where tau > 1 and h_c the deepest depth whose phase can
    complete with rounds left (n_h <= T - 1), a phase started right after one at depth h_prev <= h_c
    (or at the root) expands only while |K| tau_h <= M with |K| >= k^(h - h_prev) and tau_h >= 2, or
    while tau_h <= 1; hence h <= max(g1, h_c + 1) + log_k(M / 2) + 1.  The engine still flags any
    depth beyond this bound, so an error in it could never truncate a run silently.
    """
    probe = 64
    while True:
        taus = [tau_at(config, h) for h in range(probe + 1)]
        if taus[-1] >= TAU_SATURATION or probe > 100_000:
            break
        probe *= 2
    g1 = next((h for h, t in enumerate(taus) if t > 1), len(taus))
    h_c = max((h for h, t in enumerate(taus) if n_from_tau(t, config) <= config.horizon - 1), default=-1)
    spread = int(math.floor(math.log(max(config.num_clients / 2.0, 1.0), config.k) + 1e-9))
    depth = max(g1, h_c + 1, 0) + spread + 2
    tau = lambda h: taus[h] if h < len(taus) else tau_at(config, h)
    size, h = 1, 0
    while tau(h) <= 1 or size * tau(h) <= config.num_clients:
        size, h = size * config.k, h + 1
        if size > MAX_CAPACITY:
            break
    return Plan(config=config, taus=tuple(taus), depth_limit=depth, first_phase=size)


def digits_per_word(k: int) -> int:
    """Base-k digits an int32 word holds with room for one more multiply-add (k^s <= 2^31 - 1)."""
    s = 0
    while k ** (s + 1) <= INT32_MAX:
        s += 1
    return s


class Tables(NamedTuple):
    """The sizes a batch's program is compiled with: node-table rows and the depth the tables cover."""
    capacity: int
    depth: int


def tables(configs, objective=None) -> Tables:
    """Where a batch of configurations starts: the largest start capacity (:meth:`Plan.start_capacity`)
    and depth limit."""
    plans = [plan(c) for c in configs]
    iterative = objective is not None and evaluation.iterative(objective)
    return Tables(capacity=max(p.start_capacity(iterative) for p in plans), depth=max(p.depth_limit for p in plans))


def grow(tables: Tables, failed, allowed: bool, seeds) -> Tables:
    """Larger tables for the runs ``failed`` (their outputs) that overflowed ``tables``.

    Depth tables double; a node table grows past the largest demand seen, with room for the phases
    after it, or CapacityError when growing is not ``allowed`` or the table is at MAX_CAPACITY.
    ``failed`` without outputs (an array: a stepper's runs, core.stepper.Stepper.grown, whose failure
    is a node table's overflow, steps.py) grows the node table GROWTH times."""
    capacity, depth = tables
    # (an array's own ``flags`` attribute is numpy's, hence the test on max_active)
    outputs = hasattr(failed, "max_active")
    flags = failed.flags if outputs else np.asarray(FLAG_CAPACITY)
    if np.any(flags & FLAG_DEPTH):
        depth *= 2
    if np.any(flags & FLAG_CAPACITY):
        if not allowed:
            raise CapacityError(f"node table of capacity {capacity} overflowed in {len(seeds)} seed(s) "
                                f"(e.g. seed {int(seeds[0])}); rerun with grow=True or a larger capacity")
        if capacity >= MAX_CAPACITY:
            raise CapacityError(f"node table would need more than {MAX_CAPACITY} nodes (seed {int(seeds[0])}); "
                                f"the configuration keeps too many nodes active")
        demand = int(np.max(failed.max_active)) if outputs else 1
        capacity = min(MAX_CAPACITY, max(GROWTH * capacity, 1 << (demand - 1).bit_length()))
    return Tables(capacity, depth)


def make_params(config: FedPNEConfig, tables: Tables) -> Params:
    """Tables for depths 0..tables.depth (at least the depth limit of every config in a batch)."""
    depth = tables.depth
    taus = [plan(config).tau(h) for h in range(depth + 1)]
    n = [n_from_tau(t, config) for t in taus]
    M, L = config.num_clients, config.log_term
    conf = [config.c_value * math.sqrt(L / (M * ni)) for ni in n]
    smooth = [config.nu * config.rho ** h for h in range(depth + 1)]
    real = np.dtype(config.precision)
    return Params(
        tau=np.asarray([min(t, M + 1) for t in taus], np.int32),
        n_pulls=np.asarray(n, np.int32),
        conf=np.asarray(conf, real),
        smooth=np.asarray(smooth, real),
        noise_scale=np.asarray(config.noise_scale, real),
        dp_var=np.asarray(config.dp_sigma2, real),
        **checkpoints.schedule(config),
    )


@dataclasses.dataclass(frozen=True)
class Static:
    """Everything that decides the compiled program: shapes, kinds and capacities."""

    num_clients: int
    k: int
    dim: int
    split: str
    noise_kind: str
    pull: str
    sampling: str
    dp: bool
    checkpoints: int
    capacity: int
    depth: int              # tables cover depths 0..depth
    digits: int             # base-k digits per int32 word of a cell coordinate
    words: int              # int32 words per cell coordinate
    split_dims: tuple       # per depth, for split='longest' (empty otherwise)
    real: str               # 'float32' or 'float64': points, values, estimates and regret
    eval_block: int         # rows per trip of the objective's evaluations; 0: all rows at once (evaluation.py)

    @property
    def float_dtype(self) -> np.dtype:
        return np.dtype(self.real)


def make_static(config: FedPNEConfig, objective, tables: Tables | None) -> Static:
    """``tables`` None: the static with the table sizes left out (capacity 1, depth 0), which is what
    configurations must share to run as one grid."""
    capacity, depth = tables if tables is not None else (1, 0)
    digits = digits_per_word(config.k)
    split_dims = longest_dims(objective.lo, objective.hi, config.k, depth) if config.split == "longest" else ()
    return Static(
        num_clients=config.num_clients, k=config.k, dim=objective.dim,
        split=config.split, noise_kind=config.noise_kind, pull=config.pull,
        sampling=config.resolved_sampling, dp=config.dp, checkpoints=config.checkpoints,
        capacity=capacity, depth=depth, digits=digits, words=-(-(depth + 1) // digits),
        split_dims=split_dims, real=config.precision, eval_block=evaluation.block_rows(objective, capacity))
