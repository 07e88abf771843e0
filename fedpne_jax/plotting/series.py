"""A figure's series as numbers: the mean, std and standard error of runs at each x.

Every figure (the paper's, the report's, ``fedpne plot``'s) summarises its runs with :func:`stats`,
which refuses NaN and inf: a figure must never average a failed run away.
"""
from __future__ import annotations

import math

import numpy as np


def stats(values, axis: int = 0):
    """Mean, std (ddof = 1; 0 for one run) and standard error over ``axis``, and the count.  NaN is an
    error: a figure must never average a failed run away."""
    values = np.asarray(values, np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError("a figure's data hold NaN or inf (an unfinished or failed run)")
    n = values.shape[axis]
    mean = values.mean(axis=axis)
    std = values.std(axis=axis, ddof=1) if n > 1 else np.zeros_like(mean)
    return mean, std, std / math.sqrt(n), n
