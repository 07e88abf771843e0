"""The measures every built-in family reports, as one value: each family's outputs subclass
:class:`Measures` and add their own metrics.  A new measure is a field here; the families' books
record it, and results, sweeps and reports carry it by name (:data:`REPORTED`).  A plugin's outputs
need only ``curve``, ``final_regret`` and ``flags`` (:class:`fedpne_jax.core.algorithm.Outputs`)."""
from __future__ import annotations

import dataclasses

import jax


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Measures:
    """One run's shared measures (a pytree: a batch of runs stacks them on a leading axis)."""

    curve: jax.Array           # (C,) cumulative regret at the checkpoint rounds
    final_regret: jax.Array    # () cumulative regret after round T
    flags: jax.Array           # () int32 fedpne_jax.core.errors.FLAG_* bits
    best_curve: jax.Array      # (C,) best-so-far regret at the checkpoints
    hits: jax.Array            # (51,) int32 first round the best-so-far regret reached each target, 0: not
    target_scale: jax.Array    # () the targets' scale (checkpoints.target_scale)
    simple_curve: jax.Array    # (C,) simple regret f* - f(recommendation) at the checkpoints


# curve and final_regret are a result's own columns, and flags stop a run: the others are metrics.
REPORTED = tuple(f.name for f in dataclasses.fields(Measures) if f.name not in ("curve", "final_regret", "flags"))


def metrics(own: tuple) -> tuple:
    """A family's metrics: its ``own`` outputs, then the shared measures."""
    return tuple(own) + REPORTED
