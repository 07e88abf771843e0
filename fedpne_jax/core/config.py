"""The user-facing run configuration of Fed-PNE and DP-Fed-PNE, validated on the host.

Every invalid value raises ``ValueError`` naming the parameter before anything is traced or compiled.
Scalar hyper-parameters (nu, rho, c, c1, delta, noise scale, dp_epsilon, dp_delta) end up as data in
:class:`fedpne_jax.params.Params`; the rest decides array shapes and program structure.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

NOISE_KINDS = ("gaussian", "bernoulli", "uniform", "none")
SPLITS = ("random", "longest")
PULLS = ("centre", "uniform")
SAMPLINGS = ("auto", "aggregate", "client", "explicit")
PRECISIONS = ("float32", "float64")
DEFAULT_NOISE_SCALE = 0.1
DEFAULT_C = 0.1
MAX_HORIZON = 2**31 - 2**17   # rounds are int32; n_h <= T + 1 and pull indices up to T + a chunk fit
MAX_CLIENTS = 2**20
MAX_K = 256                   # k * capacity stays far below 2^31
FLOAT32_MAX = 3.0e38


def parse_noise(spec: str) -> tuple[str, float]:
    """'gaussian:0.1' -> ('gaussian', 0.1); 'bernoulli' and 'none' take no scale."""
    if not isinstance(spec, str):
        raise ValueError(f"noise must be a string such as 'gaussian:0.1', got {spec!r}")
    kind, _, scale = spec.partition(":")
    kind = kind.strip().lower()
    if kind not in NOISE_KINDS:
        raise ValueError(f"noise must be one of {NOISE_KINDS} (e.g. 'gaussian:0.1'), got {spec!r}")
    if kind in ("bernoulli", "none"):
        if scale:
            raise ValueError(f"noise {kind!r} takes no scale, got {spec!r}")
        return kind, 0.0
    try:
        value = float(scale) if scale else DEFAULT_NOISE_SCALE
    except ValueError:
        raise ValueError(f"noise scale must be a number, got {spec!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"noise scale must be finite and >= 0, got {spec!r}")
    return kind, value


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_real(name: str, value, low=None, high=None, low_open=True, high_open=True):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and (value >= high if high_open else value > high):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got {value!r}")


class NoiseSpec:
    """What every algorithm's config derives from its ``noise`` string (and its ``replace``)."""

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    @property
    def noise_kind(self) -> str:
        return parse_noise(self.noise)[0]

    @property
    def noise_scale(self) -> float:
        return parse_noise(self.noise)[1]


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
        if not _is_int(self.num_clients) or not 1 <= self.num_clients <= MAX_CLIENTS:
            raise ValueError(f"num_clients (M) must be an integer in [1, {MAX_CLIENTS}], got {self.num_clients!r}")
        if not _is_int(self.horizon) or self.horizon < 1:
            raise ValueError(f"horizon (T) must be an integer >= 1, got {self.horizon!r}")
        if self.horizon > MAX_HORIZON:
            raise ValueError(f"horizon (T) must be <= {MAX_HORIZON}, got {self.horizon!r}")
        if not _is_int(self.k) or not 2 <= self.k <= MAX_K:
            raise ValueError(f"k must be an integer in [2, {MAX_K}], got {self.k!r}")
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {self.split!r}")
        _check_real("nu", self.nu, low=0.0)
        _check_real("rho", self.rho, low=0.0, high=1.0)
        if self.c is not None:
            _check_real("c", self.c, low=0.0)
        _check_real("c1", self.c1, low=0.0)
        if self.delta is not None:
            _check_real("delta", self.delta, low=0.0, high=1.0, high_open=False)
        kind, scale = parse_noise(self.noise)
        if scale > 1e18:
            raise ValueError(f"noise scale must be <= 1e18 (its square must be a float32), got {self.noise!r}")
        if self.pull not in PULLS:
            raise ValueError(f"pull must be one of {PULLS}, got {self.pull!r}")
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS}, got {self.sampling!r}")
        if self.dp_epsilon is not None:
            _check_real("dp_epsilon", self.dp_epsilon, low=0.0)
            if self.dp_delta is None:
                raise ValueError("dp_delta must be set when dp_epsilon is (DP-Fed-PNE needs both)")
        if self.dp_delta is not None:
            _check_real("dp_delta", self.dp_delta, low=0.0, high=1.0)
            if self.dp_epsilon is None:
                raise ValueError("dp_epsilon must be set when dp_delta is (DP-Fed-PNE needs both)")
        if not _is_int(self.checkpoints) or self.checkpoints < 1:
            raise ValueError(f"checkpoints must be an integer >= 1, got {self.checkpoints!r}")
        from fedpne_jax.algorithms.fedpne.plan import MAX_CAPACITY
        if self.capacity is not None and (not _is_int(self.capacity) or not self.k <= self.capacity <= MAX_CAPACITY):
            raise ValueError(f"capacity must be an integer in [k, {MAX_CAPACITY}], got {self.capacity!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.resolved_sampling == "aggregate" and not (kind in ("gaussian", "none") and self.pull == "centre"):
            raise ValueError("sampling 'aggregate' is exact only for gaussian or no noise with centre pulls; "
                             f"got noise={self.noise!r}, pull={self.pull!r}")
        if self.resolved_sampling == "client" and (kind == "uniform" or self.pull == "uniform"):
            raise ValueError("sampling 'client' cannot draw uniform noise or uniform pull points exactly; "
                             "use sampling 'explicit'")
        if self.log_term <= 0:
            raise ValueError(f"c1*T/delta must exceed 1 so that L = log(c1*T/delta) > 0; got c1={self.c1}, "
                             f"horizon={self.horizon}, delta={self.delta_value}")
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
            raise ValueError(f"c and nu must keep c^2 L / nu^2 within float64 range, got c={self.c_value}, nu={self.nu}")

    @property
    def dp(self) -> bool:
        return self.dp_epsilon is not None

    @property
    def dp_sigma2(self) -> float:
        """sigma_dp^2 = 2 log(1.25/delta_dp) / eps^2 (Theorem D.1); 0 without DP."""
        if not self.dp:
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
