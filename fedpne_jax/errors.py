"""Errors the engine raises after a run, when a run's flags say its numbers cannot be trusted."""


class CapacityError(RuntimeError):
    """The node table was too small and growing it was disabled (or hit the maximum)."""


class ObjectiveError(ValueError):
    """The objective returned NaN/inf, or a value a reward model cannot use (Bernoulli outside [0, 1])."""
