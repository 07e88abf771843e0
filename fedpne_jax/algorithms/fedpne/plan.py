"""Per-run numbers derived on the host: the dynamic :class:`Params` pytree and the static shapes.

Everything that depends on the depth h is tabulated here in float64 and exact integers, so the
compiled program only indexes tables.  This keeps tau_h = ceil(c^2 L rho^(-2h) / nu1^2) exact (a
float32 ceil can land on the wrong integer) and lets a grid of hyper-parameters be a stacked Params
pytree vmapped together with the seeds.
"""
from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from fedpne_jax.core import checkpoints
from fedpne_jax.core.config import FedPNEConfig

TAU_SATURATION = 2**62    # above M (T + 1) for any int32 horizon and M, so n_h saturates at T + 1
MAX_CAPACITY = 2**22      # the largest node table a run may grow to
INT32_MAX = 2**31 - 1


class Params(NamedTuple):
    """Dynamic inputs of the compiled run: data, not structure, so configurations that differ only in
    these numbers share one compiled program."""

    tau: np.ndarray          # (H+1,) int32, tau_h clipped to M + 1 (only tau <= 1 and M // tau matter)
    n_pulls: np.ndarray      # (H+1,) int32, n_h = ceil(tau_h / M) clipped to T + 1
    conf: np.ndarray         # (H+1,) float, b_h = c sqrt(L / (M n_h))
    smooth: np.ndarray       # (H+1,) float, nu1 rho^h
    noise_scale: np.ndarray  # () float, sigma of gaussian noise or a of uniform noise
    dp_var: np.ndarray       # () float, sigma_dp^2 (0 without DP)


def tau_at(config: FedPNEConfig, h: int) -> int:
    """tau_h = ceil(c^2 L rho^(-2h) / nu1^2) as a Python int, saturating at TAU_SATURATION."""
    log_scale = 2 * math.log(config.c_value) + math.log(config.log_term) - 2 * math.log(config.nu)
    if log_scale - 2.0 * h * math.log(config.rho) >= math.log(TAU_SATURATION):
        return TAU_SATURATION
    return math.ceil(config.c_value ** 2 * config.log_term / config.nu ** 2 * config.rho ** (-2 * h))


def tau_table(config: FedPNEConfig, depth_limit: int) -> list[int]:
    """tau_h for h = 0..depth_limit (beyond any n_h <= T once saturated)."""
    return [tau_at(config, h) for h in range(depth_limit + 1)]


def n_from_tau(tau: int, config: FedPNEConfig) -> int:
    return min(-(-tau // config.num_clients), config.horizon + 1)


def depth_limit(config: FedPNEConfig) -> int:
    """An upper bound on the depth of any phase a run can start.

    With g1 the first depth where tau > 1 and h_c the deepest depth whose phase can complete with
    rounds left (n_h <= T - 1): a phase started right after one at depth h_prev <= h_c (or at the
    root) expands only while |K| tau_h <= M with |K| >= k^(h - h_prev) and tau_h >= 2, or while
    tau_h <= 1; hence h <= max(g1, h_c + 1) + log_k(M / 2) + 1.  The engine still flags any depth
    beyond this bound, so an error in it could never truncate a run silently.
    """
    probe = 64
    while True:
        taus = tau_table(config, probe)
        if taus[-1] >= TAU_SATURATION or probe > 100_000:
            break
        probe *= 2
    g1 = next((h for h, t in enumerate(taus) if t > 1), len(taus))
    h_c = max((h for h, t in enumerate(taus) if n_from_tau(t, config) <= config.horizon - 1), default=-1)
    spread = int(math.floor(math.log(max(config.num_clients / 2.0, 1.0), config.k) + 1e-9))
    return max(g1, h_c + 1, 0) + spread + 2


def first_phase_size(config: FedPNEConfig, limit: int) -> int:
    """|K^1| after the initial expansions (every node survives them); stops counting once it
    exceeds ``limit`` (the result is then some size above the limit)."""
    size, h = 1, 0
    while tau_at(config, h) <= 1 or size * tau_at(config, h) <= config.num_clients:
        size, h = size * config.k, h + 1
        if size > limit:
            break
    return size


MAX_DEPTH = 4096


def check_feasible(config: FedPNEConfig) -> None:
    """Configurations no node table can hold, refused before compiling."""
    if first_phase_size(config, MAX_CAPACITY) > MAX_CAPACITY:
        raise ValueError(f"rho={config.rho}, c={config.c_value}: tau_h <= 1 (or |K| tau_h <= M) down to a depth "
                         f"where the first phase alone has more than {MAX_CAPACITY} nodes; raise c or lower rho")
    depth = depth_limit(config)
    if depth > MAX_DEPTH:
        raise ValueError(f"rho={config.rho}: the run could reach depth {depth} > {MAX_DEPTH}; lower rho")


def initial_capacity(config: FedPNEConfig) -> int:
    """A node-table capacity that fits typical runs: room for all children of the first phase.

    Runs that need more are detected (overflow flag) and rerun with a larger table.
    """
    if config.capacity is not None:
        return config.capacity
    need = config.k * first_phase_size(config, MAX_CAPACITY)
    return int(min(MAX_CAPACITY, max(8 * config.k, 1 << (need - 1).bit_length())))


def digits_per_word(k: int) -> int:
    """Base-k digits an int32 word holds with room for one more multiply-add (k^s <= 2^31 - 1)."""
    s = 0
    while k ** (s + 1) <= INT32_MAX:
        s += 1
    return s


def longest_split_dims(lo, hi, k: int, depth: int) -> tuple[int, ...]:
    """Split dimension per depth for split='longest', decided in exact rational arithmetic.

    Every node of one depth has been split the same number of times along each dimension (the rule
    is deterministic), so one dimension per depth describes the whole partition; exact arithmetic
    makes ties (lowest index wins) reliable for any k and box.
    """
    widths = [Fraction(float(b)) - Fraction(float(a)) for a, b in zip(lo, hi)]
    levels = [0] * len(widths)
    dims = []
    for _ in range(depth + 1):
        sides = [w / Fraction(k) ** e for w, e in zip(widths, levels)]
        d = max(range(len(sides)), key=lambda i: (sides[i], -i))
        dims.append(d)
        levels[d] += 1
    return tuple(dims)


def make_params(config: FedPNEConfig, depth: int) -> Params:
    """Tables for depths 0..depth (``depth`` >= :func:`depth_limit` of every config in a batch)."""
    taus = tau_table(config, depth)
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
    )


@dataclasses.dataclass(frozen=True)
class Static:
    """Everything that decides the compiled program: shapes, kinds and capacities."""

    num_clients: int
    horizon: int
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

    @property
    def float_dtype(self) -> np.dtype:
        return np.dtype(self.real)

    @property
    def checkpoint_rounds(self) -> np.ndarray:
        """C evenly spaced rounds ceil(c T / C), c = 1..C; the last is T."""
        return checkpoints.rounds(self.horizon, self.checkpoints)


def make_static(config: FedPNEConfig, objective, capacity: int, depth: int) -> Static:
    digits = digits_per_word(config.k)
    split_dims = (longest_split_dims(objective.lo, objective.hi, config.k, depth)
                  if config.split == "longest" else ())
    return Static(
        num_clients=config.num_clients, horizon=config.horizon, k=config.k, dim=objective.dim,
        split=config.split, noise_kind=config.noise_kind, pull=config.pull,
        sampling=config.resolved_sampling, dp=config.dp, checkpoints=config.checkpoints,
        capacity=capacity, depth=depth, digits=digits, words=-(-(depth + 1) // digits),
        split_dims=split_dims, real=config.precision)
