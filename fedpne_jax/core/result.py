"""The result of a batch of runs, and its JSON form (a contract other tools rely on)."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
from importlib import metadata

import jax
import numpy as np

from fedpne_jax.core import registry
from fedpne_jax.core.files import write_atomic
from fedpne_jax.core.version import __version__


@dataclasses.dataclass(frozen=True)
class RunResult:
    """Per-seed results of one algorithm on one configuration.

    Regret is cumulative, R(t) = sum_{s<=t} (f* - f(x_s)) with f the global objective at the point
    pulled in round s.  Federated algorithms report the per-client average R(t)/M,
    R(t) = sum_{s<=t} sum_m (f* - f(x_m,s)); centralized ones pull once per round, so their curves
    compare with the federated per-client averages round for round.

    ``metrics`` holds the algorithm's other per-seed numbers (Fed-PNE: phases, uploads, depth,
    recommendation, max_active); they are also attributes (``result.phases``).
    """

    algorithm: str               # "fedpne", "dp-fedpne", "hct", ...
    config: dict                 # every resolved parameter, with the objective's name, box and f*
    objective: str
    seeds: np.ndarray            # (S,) seed indices
    base_seed: int
    checkpoints: np.ndarray      # (C,) rounds
    curves: np.ndarray           # (S, C) regret at the checkpoints
    final_regret: np.ndarray     # (S,) regret at round T
    metrics: dict                # name -> (S, ...) array
    compile_seconds: float
    run_seconds: float
    # label, colour and marker, kept with the numbers: a result file names its algorithm's style even
    # where that algorithm (a plugin) is not installed
    style: dict | None = None
    partial: bool = False        # stopped early (Ctrl-C): ``seeds`` lists the runs that finished
    warnings: tuple = ()         # one line each: legal but degenerate runs (fedpne_jax.core.diagnostics)

    def __getattr__(self, name):
        metrics = self.__dict__.get("metrics") or {}
        if name in metrics:
            return metrics[name]
        raise AttributeError(f"{type(self).__name__} has no attribute or metric {name!r}")

    @classmethod
    def build(cls, algorithm, resolved: dict, objective, ids, base_seed, checkpoint_rounds, curves,
              final_regret, metrics, compile_seconds, run_seconds, partial: bool = False, warnings=()):
        resolved = dict(resolved, objective=objective.name, dim=objective.dim, lo=list(objective.lo),
                        hi=list(objective.hi), f_star=objective.f_star)
        return cls(algorithm=algorithm, config=resolved, objective=objective.name, seeds=np.asarray(ids),
                   base_seed=int(base_seed), checkpoints=np.asarray(checkpoint_rounds, np.int64),
                   curves=np.asarray(curves, np.float64), final_regret=np.asarray(final_regret, np.float64),
                   metrics={k: np.asarray(v) for k, v in metrics.items()},
                   compile_seconds=float(compile_seconds), run_seconds=float(run_seconds),
                   style=_style(algorithm), partial=bool(partial), warnings=tuple(warnings))

    @property
    def label(self) -> str:
        """The algorithm's label in summaries and plots ("Fed-PNE (DP)" for dp-fedpne)."""
        return (self.style or {}).get("label") or registry.label(self.algorithm)

    @property
    def capacity(self):
        return self.config.get("capacity")

    @property
    def num_seeds(self) -> int:
        return int(self.seeds.size)

    @property
    def regret_mean(self) -> np.ndarray:
        return self.curves.mean(axis=0)

    @property
    def regret_std(self) -> np.ndarray:
        """(C,) std over seeds (ddof = 1); NaN with one seed, where it is undefined (0 would claim
        the run has no spread)."""
        return self.curves.std(axis=0, ddof=1) if self.num_seeds > 1 else np.full_like(self.regret_mean, np.nan)

    @property
    def final_std(self) -> float:
        """Std over seeds of the final regret (ddof = 1); NaN with one seed."""
        return float(self.final_regret.std(ddof=1)) if self.num_seeds > 1 else math.nan

    @property
    def runs_per_second(self) -> float:
        return self.num_seeds / self.run_seconds if self.run_seconds > 0 else float("inf")

    def summary(self) -> str:
        f = self.final_regret
        std = "n/a" if math.isnan(self.final_std) else f"{self.final_std:.4g}"
        c = self.config
        clients = f"M={c['num_clients']} " if "num_clients" in c else ""
        kind = "per-client regret R(T)/M" if "num_clients" in c else "regret R(T)"
        partial = " (partial: the run was stopped)" if self.partial else ""
        lines = [f"{self.label} on {self.objective}: {clients}T={c['horizon']} seeds={self.num_seeds}{partial} "
                 f"device={device_name()}",
                 f"  final {kind}: {f.mean():.6g} ± {std} (mean ± std over seeds)"]
        m = self.metrics
        if "phases" in m:
            lines.append(f"  phases (communication rounds): {m['phases'].mean():.3g} (min {m['phases'].min()}, "
                         f"max {m['phases'].max()})")
        if "uploads" in m:
            lines.append(f"  uploaded scalars: {m['uploads'].mean():.6g}" + (
                f"   depth reached: {m['depth'].mean():.3g} (max {m['depth'].max()})" if "depth" in m else ""))
        lines.append(f"  compile {self.compile_seconds:.3f} s, run {self.run_seconds:.3f} s, "
                     f"{self.runs_per_second:.1f} runs/s" + (f" (capacity {self.capacity})" if self.capacity else ""))
        return "\n".join(lines)

    def to_dict(self) -> dict:
        per_seed = {"final_regret": self.final_regret.tolist()}
        per_seed.update({k: v.tolist() for k, v in self.metrics.items() if k != "max_active"})
        per_seed["curves"] = self.curves.tolist()
        return {
            "algorithm": self.algorithm,
            "style": self.style,
            "config": self.config,
            "versions": versions(),
            "device": device_name(),
            "seeds": self.seeds.tolist(),
            "partial": self.partial,
            "warnings": list(self.warnings),
            "base_seed": self.base_seed,
            "checkpoints": self.checkpoints.tolist(),
            "regret_mean": self.regret_mean.tolist(),
            "regret_std": [None if math.isnan(v) else v for v in self.regret_std.tolist()],  # JSON has no NaN
            "per_seed": per_seed,
            "timing": {"compile_seconds": self.compile_seconds, "run_seconds": self.run_seconds,
                       "runs_per_second": self.runs_per_second},
        }

    def write_json(self, path) -> None:
        """Write :meth:`to_dict` to ``path`` (see :func:`fedpne_jax.core.files.write_atomic`): a regular
        file atomically, so whatever fails (a full disk, a kill) it holds either its old content or the
        whole new file; a device, a FIFO or ``-`` (standard output) in place."""
        text = json.dumps(self.to_dict(), indent=1).encode()
        write_atomic(os.fspath(path), lambda fh: fh.write(text))


def _style(result_name: str) -> dict | None:
    s = registry.style(result_name)
    return None if s is None else {"label": s.label, "colour": s.colour, "marker": s.marker}


def versions() -> dict:
    return {"fedpne_jax": __version__, "jax": jax.__version__, "jaxlib": metadata.version("jaxlib"),
            "numpy": np.__version__, "optax": _version("optax"), "python": platform.python_version()}


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def device_name() -> str:
    d = jax.devices()[0]
    return f"{d.platform}:{getattr(d, 'device_kind', '')} x{jax.device_count()}"
