"""Errors about objectives, raised by the objectives themselves and by the simulator that runs them.

They live in the objectives package, the lowest layer, so that an objective can raise them without
importing the simulator; fedpne_jax.core.errors re-exports them.
"""
from __future__ import annotations


class ObjectiveError(ValueError):
    """The objective returned NaN/inf, or a value a reward model cannot use (Bernoulli outside [0, 1]),
    or a Python objective failed."""


class MissingExtra(RuntimeError):
    """An optional dependency (an extra of the package, e.g. ``plot`` or ``svm``) is not installed."""
