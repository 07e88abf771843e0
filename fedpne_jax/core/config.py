"""What every algorithm's configuration shares: the noise string, the horizon and the checkpoints.

Every invalid value raises ``ValueError`` naming the parameter before anything is traced or compiled
(fedpne_jax.core.validation).  Each algorithm's own config (a frozen dataclass) lives beside it
under fedpne_jax/algorithms/.
"""
from __future__ import annotations

import dataclasses
import functools
import math

from fedpne_jax.core import checkpoints
from fedpne_jax.core.validation import check_int
from objectives.validation import MAX_CLIENTS as MAX_CLIENTS

NOISE_KINDS = ("gaussian", "bernoulli", "uniform", "none")
DEFAULT_NOISE_SCALE = 0.1
MAX_HORIZON = 2**31 - 2**17   # rounds are int32; n_h <= T + 1 and pull indices up to T + a chunk fit
MAX_NOISE_SCALE = 1e18        # its square must be a float32
PRECISIONS = ("float32", "float64")   # of the points, values and regret of the tree algorithms


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


def _arithmetic_refused(post_init):
    @functools.wraps(post_init)
    def checked(self):
        try:
            post_init(self)
        except ArithmeticError as err:
            given = [f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self)
                     if f.default is not dataclasses.MISSING and _differs(getattr(self, f.name), f.default)]
            raise ValueError(f"{', '.join(given) or 'the defaults'}: beyond what {type(self).__name__}'s "
                             f"formulas can compute in floating point ({err})") from None
    return checked


def _differs(value, default) -> bool:
    try:
        return bool(value != default)
    except (TypeError, ValueError):
        return True


class NoiseSpec:
    """What every algorithm's config derives from its fields: the noise kind and scale from its
    ``noise`` string, its checkpoint rounds from ``horizon`` and ``checkpoints``, and ``replace``."""

    noise: str             # fields of every config dataclass built on this (not a dataclass itself)
    horizon: int
    checkpoints: int

    def __init_subclass__(cls, **kwargs):
        # A value the field checks let through can still overflow or divide by zero in the formulas a
        # config derives from it (nu = 1e-200 squared is 0): refused as a bad parameter, like the rest,
        # and not a traceback.  Every config's own __post_init__ is wrapped, once, here.
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__post_init__")
        if own is not None:
            cls.__post_init__ = _arithmetic_refused(own)

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    @property
    def noise_kind(self) -> str:
        return parse_noise(self.noise)[0]

    @property
    def noise_scale(self) -> float:
        return parse_noise(self.noise)[1]

    @property
    def checkpoint_rounds(self):
        return checkpoints.rounds(self.horizon, self.checkpoints)


def check_noise(spec) -> None:
    """A noise string whose scale every algorithm can use (its square a float32)."""
    if parse_noise(spec)[1] > MAX_NOISE_SCALE:
        raise ValueError(f"noise scale must be <= {MAX_NOISE_SCALE:g} (its square must be a float32), got {spec!r}")


def check_checkpoints(checkpoints, horizon) -> None:
    """``checkpoints`` (C) is an integer in [1, horizon]: the checkpoints are C distinct rounds of the
    T a run has, so C > T could only repeat rounds (and cost C-sized curves for nothing)."""
    check_int("checkpoints", checkpoints, 1)
    if checkpoints > horizon:
        raise ValueError(f"checkpoints must be <= horizon (each checkpoint is a distinct round of the T rounds), "
                         f"got checkpoints={checkpoints!r}, horizon={horizon!r}")


@dataclasses.dataclass(frozen=True)
class BaselineConfig(NoiseSpec):
    """Fields every baseline has: the horizon T (rounds), the observation noise and the checkpoints
    (C <= T of them).

    Subclasses add their own fields (all with defaults) and call ``super().__post_init__()``.
    """

    horizon: int = 10_000
    noise: str = "gaussian:0.1"
    checkpoints: int = 100

    def __post_init__(self):
        check_int("horizon (T)", self.horizon, 1, MAX_HORIZON)
        check_noise(self.noise)
        check_checkpoints(self.checkpoints, self.horizon)

    def resolved(self) -> dict:
        """Every parameter with defaults filled in, as written to result files."""
        out = dataclasses.asdict(self)
        out.update(noise_kind=self.noise_kind, noise_scale=self.noise_scale)
        return out
