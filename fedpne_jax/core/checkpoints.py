"""Regret checkpoints: the C evenly spaced rounds at which every algorithm records its regret."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np


def rounds(horizon: int, count: int) -> np.ndarray:
    """ceil(c T / C) for c = 1..C (int32); the last is T.  Computed in int64 so c T cannot overflow."""
    c = np.arange(1, count + 1, dtype=np.int64)
    return ((c * horizon + count - 1) // count).astype(np.int32)


def record(curve, checkpoint_rounds, t, regret):
    """``curve`` with ``regret`` written at the checkpoints equal to round t (one-round-at-a-time
    algorithms call this once per round; several checkpoints can share a round when C > T)."""
    return jnp.where(jnp.asarray(checkpoint_rounds) == t, regret, curve)
