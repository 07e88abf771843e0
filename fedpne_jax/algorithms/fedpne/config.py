"""The user-facing run configuration of Fed-PNE and DP-Fed-PNE, validated on the host.

Every invalid value raises ``ValueError`` naming the parameter before anything is traced or compiled.
Scalar hyper-parameters (nu, rho, c, c1, delta, noise scale, dp_epsilon, dp_delta) end up as data in
the Params of fedpne_jax/algorithms/fedpne/plan.py; the rest decides array shapes and program structure.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

from fedpne_jax.core.config import (
    MAX_CLIENTS,
    MAX_HORIZON,
    PRECISIONS,
    NoiseSpec,
    check_checkpoints,
    check_noise,
    parse_noise,
)
from fedpne_jax.core.split import SPLITS
from fedpne_jax.core.validation import check_choice, check_int, check_real

PULLS = ("centre", "uniform")
SAMPLINGS = ("auto", "aggregate", "client", "explicit")
DEFAULT_C = 0.1
MAX_K = 256                   # k * capacity stays far below 2^31
MAX_CAPACITY = 2**22          # the largest node table a run may grow to
FLOAT32_MAX = 3.0e38


@dataclasses.dataclass(frozen=True)
class FedPNEConfig(NoiseSpec):
    """One Fed-PNE (or DP-Fed-PNE, when ``dp_epsilon`` is set) configuration.

    Defaults are the paper's (App. E): nu = 1, rho = 0.5, c = 0.1, c1 = 1, delta = 1/M, k = 2,
    random binary partition.  ``c=None`` means 0.1, multiplied by sqrt(1 + 4 sigma_dp^2) under DP
    (Lemma D.4's scaling); an explicit ``c`` is used as given.

    sampling: how a node's mean reward is drawn.  'aggregate' draws the server's mean over clients
    directly (exact for Gaussian or no noise with centre pulls; O(nodes) per phase); 'client' draws
    each client's mean of n pulls exactly (Gaussian, Bernoulli via Binomial); 'explicit' simulates
    every pull, a block of pulls at a time (needed for uniform noise or uniform pull points; see
    fedpne_jax/core/pulls.py); 'auto' picks the cheapest exact one.
    """

    num_clients: int = 10
    horizon: int = 10_000
    k: int = 2
    split: str = "random"
    nu: float = 1.0
    rho: float = 0.5
    c: Optional[float] = None
    c1: float = 1.0
    delta: Optional[float] = None
    noise: str = "gaussian:0.1"
    pull: str = "centre"
    sampling: str = "auto"
    dp_epsilon: Optional[float] = None
    dp_delta: Optional[float] = None
    checkpoints: int = 100
    capacity: Optional[int] = None
    precision: str = "float32"

    def __post_init__(self):
        check_int("num_clients (M)", self.num_clients, 1, MAX_CLIENTS)
        check_int("horizon (T)", self.horizon, 1, MAX_HORIZON)
        check_int("k", self.k, 2, MAX_K)
        check_choice("split", self.split, SPLITS)
        check_real("nu", self.nu, low=0.0)
        check_real("rho", self.rho, low=0.0, high=1.0)
        if self.c is not None:
            check_real("c", self.c, low=0.0)
        check_real("c1", self.c1, low=0.0)
        if self.delta is not None:
            check_real("delta", self.delta, low=0.0, high=1.0, high_open=False)
        check_noise(self.noise)
        kind = parse_noise(self.noise)[0]
        if self.pull not in PULLS:
            raise ValueError(f"pull must be one of {PULLS}, got {self.pull!r}")
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS}, got {self.sampling!r}")
        if self.dp_epsilon is not None:
            check_real("dp_epsilon", self.dp_epsilon, low=0.0)
            if self.dp_delta is None:
                raise ValueError("dp_delta must be set when dp_epsilon is (DP-Fed-PNE needs both)")
        if self.dp_delta is not None:
            check_real("dp_delta", self.dp_delta, low=0.0, high=1.0)
            if self.dp_epsilon is None:
                raise ValueError("dp_epsilon must be set when dp_delta is (DP-Fed-PNE needs both)")
        check_int("checkpoints", self.checkpoints, 1)      # C <= T is checked after L, which T = 1 fails first
        if self.capacity is not None:
            check_int("capacity", self.capacity, self.k, MAX_CAPACITY)
        check_choice("precision", self.precision, PRECISIONS)
        if self.resolved_sampling == "aggregate" and not (kind in ("gaussian", "none") and self.pull == "centre"):
            raise ValueError("sampling 'aggregate' is exact only for gaussian or no noise with centre pulls; "
                             f"got noise={self.noise!r}, pull={self.pull!r}")
        if self.resolved_sampling == "client" and (kind == "uniform" or self.pull == "uniform"):
            raise ValueError("sampling 'client' cannot draw uniform noise or uniform pull points exactly; "
                             "use sampling 'explicit'")
        if self.log_term <= 0:
            raise ValueError(f"c1*T/delta must exceed 1 so that L = log(c1*T/delta) > 0; got c1={self.c1}, "
                             f"horizon={self.horizon}, delta={self.delta_value}")
        check_checkpoints(self.checkpoints, self.horizon)
        try:
            sigma2 = self.dp_sigma2
        except (OverflowError, ZeroDivisionError):
            sigma2 = math.inf
        if not sigma2 < FLOAT32_MAX:
            raise ValueError(f"dp_epsilon={self.dp_epsilon} gives sigma_dp^2 = 2 log(1.25/dp_delta)/eps^2 beyond float32")
        try:
            log_scale = 2 * math.log(self.c_value) + math.log(self.log_term) - 2 * math.log(self.nu)
        except (OverflowError, ValueError, ZeroDivisionError):
            log_scale = math.nan
        if not abs(log_scale) < 700:
            raise ValueError(f"c, nu, c1 and delta must keep c^2 L / nu^2 (L = log(c1 T / delta)) within float64 "
                             f"range, got c={self.c_value}, nu={self.nu}, c1={self.c1}, delta={self.delta_value}")

    @property
    def dp(self) -> bool:
        return self.dp_epsilon is not None

    @property
    def dp_sigma2(self) -> float:
        """sigma_dp^2 = 2 log(1.25/delta_dp) / eps^2 (Theorem D.1); 0 without DP."""
        if self.dp_epsilon is None or self.dp_delta is None:     # both or neither (__post_init__)
            return 0.0
        return 2.0 * math.log(1.25 / self.dp_delta) / self.dp_epsilon ** 2

    @property
    def c_value(self) -> float:
        if self.c is not None:
            return float(self.c)
        return DEFAULT_C * math.sqrt(1.0 + 4.0 * self.dp_sigma2)

    @property
    def delta_value(self) -> float:
        return float(self.delta) if self.delta is not None else 1.0 / self.num_clients

    @property
    def log_term(self) -> float:
        """L = log(c1 T / delta)."""
        return math.log(self.c1 * self.horizon / self.delta_value)

    @property
    def resolved_sampling(self) -> str:
        if self.sampling != "auto":
            return self.sampling
        kind = parse_noise(self.noise)[0]
        if self.pull == "uniform" or kind == "uniform":
            return "explicit"
        return "aggregate" if kind in ("gaussian", "none") else "client"

    def resolved(self) -> dict:
        """Every parameter with defaults filled in, as written to result files."""
        out = dataclasses.asdict(self)
        out.update(c=self.c_value, delta=self.delta_value, noise_kind=self.noise_kind,
                   noise_scale=self.noise_scale, sampling=self.resolved_sampling,
                   dp=self.dp, dp_sigma2=self.dp_sigma2, log_term=self.log_term)
        return out
