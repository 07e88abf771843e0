"""The type checks of user-facing numbers: ``is_int``, ``is_real`` and the objective seed's range
(``SEED_MAX``, :func:`check_seed`).

They live here, in the lowest layer, so that an objective and the simulator judge a value alike
(fedpne_jax.core.validation re-exports them instead of keeping a copy) without the objectives
importing the simulator.  NumPy integer and floating scalars are accepted wherever Python ones are
(a value read from an array is as good as a literal); booleans are refused where a number is meant,
since True silently becoming 1 hides a mistaken argument.
"""
from __future__ import annotations

import numpy as np

# The largest int32: the top of the seed range make_objective accepts, named so the bound and its
# check are one definition.
SEED_MAX = 2**31 - 1
# The most clients any configuration accepts (an objective's per-client data is built on the host).
MAX_CLIENTS = 2**20


def is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def check_seed(seed) -> int:
    """``seed`` as a Python int, or ValueError unless it is an integer in [0, SEED_MAX]."""
    if not is_int(seed) or not 0 <= seed <= SEED_MAX:
        raise ValueError(f"seed must be an int in [0, 2^31 - 1], got {seed!r}")
    return int(seed)
