"""Made-up sweep results for the figure tests: every label and shape of a study's real sweep, no run."""
from __future__ import annotations

import numpy as np

from fedpne_jax.experiments import sweep as sweep_lib
from fedpne_jax.experiments.load import SweepResults
from fedpne_jax.paper import studies


def fake_results(study: str, seed: int = 0, quick: bool = True) -> SweepResults:
    """A study's SweepResults (its quick or full definition) with made-up numbers.  Final regret of
    configuration i is 10 + i plus seed noise; uploads are M * (100 + i)."""
    sw = sweep_lib.load(studies.STUDIES[study].definition(quick=quick))
    rng = np.random.default_rng(seed)
    N, S, C = len(sw.entries), 3, 5
    horizons = np.array([e.labels["horizon"] for e in sw.entries])
    final = 10.0 + np.arange(N)[:, None] + rng.random((N, S))
    M = np.array([e.objective["num_clients"] for e in sw.entries])
    metrics = {"phases": np.tile(np.arange(N)[:, None] + 1, (1, S)),
               "uploads": (M * (100 + np.arange(N)))[:, None] * np.ones((1, S), np.int64)}
    return SweepResults(path=f"fake/{study}", hash="0", definition=sw.definition,
                        configs=[e.labels for e in sw.entries], config_ids=[e.id for e in sw.entries],
                        resolved=[{} for _ in sw.entries], algorithms=[e.algorithm for e in sw.entries],
                        seeds=np.arange(S), checkpoints=np.outer(horizons, np.arange(1, C + 1)) // C,
                        curves=final[:, :, None] * np.arange(1, C + 1) / C, final_regret=final,
                        metrics=metrics, done=np.ones((N, S), bool))
