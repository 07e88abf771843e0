"""The result of a batch of runs, and its JSON form (a contract other tools rely on)."""
from __future__ import annotations

import dataclasses
import json
import platform
from importlib import metadata

import jax
import numpy as np


@dataclasses.dataclass(frozen=True)
class RunResult:
    """Per-seed metrics of one configuration.

    Regret is the per-client average cumulative regret R(t)/M, R(t) = sum_{s<=t} sum_m (f* - f(x_m,s))
    with f the global objective at the point client m pulled.
    """

    config: dict                 # every resolved parameter
    objective: str
    seeds: np.ndarray            # (S,) seed indices
    base_seed: int
    checkpoints: np.ndarray      # (C,) rounds
    curves: np.ndarray           # (S, C) R/M at the checkpoints
    final_regret: np.ndarray     # (S,) R(T)/M
    phases: np.ndarray           # (S,) communication rounds (uploaded phases)
    uploads: np.ndarray          # (S,) uploaded scalars sum_p M |K^p|
    depth: np.ndarray            # (S,) depth of the last phase that pulled
    recommendation: np.ndarray   # (S, D) centre of the best node of the last completed phase
    max_active: np.ndarray       # (S,) largest active set
    capacity: int
    compile_seconds: float
    run_seconds: float

    @classmethod
    def from_outputs(cls, config, objective, ids, base_seed, out, static, compile_seconds, run_seconds):
        resolved = config.resolved()
        resolved.update(objective=objective.name, dim=objective.dim, lo=list(objective.lo),
                        hi=list(objective.hi), f_star=objective.f_star, capacity=static.capacity,
                        depth_limit=static.depth)
        return cls(config=resolved, objective=objective.name, seeds=np.asarray(ids), base_seed=base_seed,
                   checkpoints=static.checkpoint_rounds.astype(np.int64),
                   curves=np.asarray(out.curve, np.float64), final_regret=np.asarray(out.final_regret, np.float64),
                   phases=np.asarray(out.phases, np.int64),
                   uploads=np.asarray(out.uploads, np.int64) * config.num_clients,
                   depth=np.asarray(out.depth, np.int64), recommendation=np.asarray(out.recommendation, np.float64),
                   max_active=np.asarray(out.max_active, np.int64), capacity=static.capacity,
                   compile_seconds=float(compile_seconds), run_seconds=float(run_seconds))

    @property
    def num_seeds(self) -> int:
        return int(self.seeds.size)

    @property
    def regret_mean(self) -> np.ndarray:
        return self.curves.mean(axis=0)

    @property
    def regret_std(self) -> np.ndarray:
        return self.curves.std(axis=0, ddof=1) if self.num_seeds > 1 else np.zeros_like(self.regret_mean)

    @property
    def runs_per_second(self) -> float:
        return self.num_seeds / self.run_seconds if self.run_seconds > 0 else float("inf")

    def summary(self) -> str:
        f = self.final_regret
        std = f.std(ddof=1) if f.size > 1 else 0.0
        return "\n".join([
            f"Fed-PNE{' (DP)' if self.config['dp'] else ''} on {self.objective}: M={self.config['num_clients']} "
            f"T={self.config['horizon']} seeds={self.num_seeds} device={device_name()}",
            f"  final per-client regret R(T)/M: {f.mean():.6g} ± {std:.4g} (mean ± std over seeds)",
            f"  phases (communication rounds): {self.phases.mean():.3g} (min {self.phases.min()}, "
            f"max {self.phases.max()})",
            f"  uploaded scalars: {self.uploads.mean():.6g}   depth reached: {self.depth.mean():.3g} "
            f"(max {self.depth.max()})",
            f"  compile {self.compile_seconds:.3f} s, run {self.run_seconds:.3f} s, "
            f"{self.runs_per_second:.1f} runs/s (capacity {self.capacity})",
        ])

    def to_dict(self) -> dict:
        return {
            "algorithm": "dp-fedpne" if self.config["dp"] else "fedpne",
            "config": self.config,
            "versions": versions(),
            "device": device_name(),
            "seeds": self.seeds.tolist(),
            "base_seed": self.base_seed,
            "checkpoints": self.checkpoints.tolist(),
            "regret_mean": self.regret_mean.tolist(),
            "regret_std": self.regret_std.tolist(),
            "per_seed": {
                "final_regret": self.final_regret.tolist(),
                "phases": self.phases.tolist(),
                "uploads": self.uploads.tolist(),
                "depth": self.depth.tolist(),
                "recommendation": self.recommendation.tolist(),
                "curves": self.curves.tolist(),
            },
            "timing": {"compile_seconds": self.compile_seconds, "run_seconds": self.run_seconds,
                       "runs_per_second": self.runs_per_second},
        }

    def write_json(self, path) -> None:
        with open(path, "w") as fh:
            json.dump(self.to_dict(), fh, indent=1)


def versions() -> dict:
    from fedpne_jax import __version__
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
