"""Errors raised after a run, when a run's flags say its numbers cannot be trusted.

Compiled runs cannot raise; they set FLAG_* bits instead, and the host turns them into these errors.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from objectives.errors import MissingExtra, ObjectiveError

__all__ = ["FLAG_CAPACITY", "FLAG_DEPTH", "FLAG_NONFINITE", "FLAG_RANGE", "FLAG_ABOVE_F_STAR", "F_STAR_RTOL",
           "f_star_tolerance", "CapacityError", "ObjectiveError", "MissingExtra", "raise_for_objective"]

FLAG_CAPACITY = 1     # a node table overflowed
FLAG_DEPTH = 2        # a run went deeper than the host-computed tables
FLAG_NONFINITE = 4    # the objective returned NaN or inf at a point that was used
FLAG_RANGE = 8        # a value outside [0, 1] met Bernoulli rewards
FLAG_ABOVE_F_STAR = 16  # the global objective exceeded f* (beyond F_STAR_RTOL) at a pulled point
OBJECTIVE_FLAGS = FLAG_NONFINITE | FLAG_RANGE | FLAG_ABOVE_F_STAR

# How far a global value may lie above f* before it is flagged: F_STAR_RTOL * max(1, |f*|), in float32
# and float64 runs alike.  Built-in objectives reach 1.3e-6 of it by rounding alone (float32 means of
# BBOB instances whose f* was searched in float64), and float64 runs still read float32 data of the
# objectives, so a tighter float64 bound would flag rounding, not a wrong f*.
F_STAR_RTOL = 1e-5


def f_star_tolerance(f_star):
    """F_STAR_RTOL * max(1, |f*|): of a number on the host, of the run's traced f* inside a run."""
    return F_STAR_RTOL * jnp.maximum(1.0, jnp.abs(f_star))


class CapacityError(RuntimeError):
    """The node table was too small and growing it was disabled (or hit the maximum)."""


def raise_for_objective(objective, flags: np.ndarray, seed_ids: np.ndarray) -> None:
    """ObjectiveError naming the objective and the seeds whose runs saw bad values: NaN or inf, values
    outside [0, 1] under Bernoulli rewards, or a global value above f* (then regret would turn
    negative and every average over seeds would be biased)."""
    bad = np.asarray(flags) & OBJECTIVE_FLAGS
    if not np.any(bad):
        return
    for flag in (FLAG_NONFINITE, FLAG_RANGE, FLAG_ABOVE_F_STAR):
        if np.any(bad & flag):
            break
    which = np.asarray(seed_ids)[(bad & flag) != 0]
    seeds = f"seeds {which[:10].tolist()}{' ...' if which.size > 10 else ''}"
    if flag == FLAG_NONFINITE:
        what = f"returned NaN or inf ({seeds})"
    elif flag == FLAG_RANGE:
        what = f"returned values outside [0, 1], which Bernoulli rewards cannot use ({seeds})"
    else:
        f_star = objective.f_star
        what = (f"returned a global value above its f* = {f_star!r} by more than {F_STAR_RTOL:g} x max(1, |f*|) "
                f"= {float(f_star_tolerance(f_star)):.3g} at a point the run pulled ({seeds}; the runs keep "
                f"a flag, not the point: evaluate objective.value near their recommendations to find it); f* must "
                f"be the supremum of the global objective over the box, else regret turns negative")
    raise ObjectiveError(f"objective {objective.name!r} {what}; no result was produced")
