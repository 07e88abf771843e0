"""Errors raised after a run, when a run's flags say its numbers cannot be trusted.

Compiled runs cannot raise; they set FLAG_* bits instead, and the host turns them into these errors.
"""
from __future__ import annotations

import numpy as np

from objectives.errors import MissingExtra, ObjectiveError

__all__ = ["FLAG_CAPACITY", "FLAG_DEPTH", "FLAG_NONFINITE", "FLAG_RANGE", "CapacityError", "ObjectiveError",
           "MissingExtra", "raise_for_objective"]

FLAG_CAPACITY = 1     # a node table overflowed
FLAG_DEPTH = 2        # a run went deeper than the host-computed tables
FLAG_NONFINITE = 4    # the objective returned NaN or inf at a point that was used
FLAG_RANGE = 8        # a value outside [0, 1] met Bernoulli rewards


class CapacityError(RuntimeError):
    """The node table was too small and growing it was disabled (or hit the maximum)."""


def raise_for_objective(name: str, flags: np.ndarray, seed_ids: np.ndarray) -> None:
    """ObjectiveError naming the objective and the seeds whose runs saw bad values."""
    bad = np.asarray(flags) & (FLAG_NONFINITE | FLAG_RANGE)
    if np.any(bad):
        which = np.asarray(seed_ids)[bad != 0]
        what = ("returned NaN or inf" if np.any(bad & FLAG_NONFINITE)
                else "returned values outside [0, 1], which Bernoulli rewards cannot use")
        raise ObjectiveError(f"objective {name!r} {what} (seeds {which[:10].tolist()}"
                             f"{' ...' if which.size > 10 else ''}); no result was produced")
