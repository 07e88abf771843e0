"""Warnings about legal but degenerate runs: settings that run, and say so, rather than being refused.

Two cases, read from a configuration's finished runs:

* **The root is never left.**  An algorithm that reports the depth of its tree (Fed-PNE, HCT, HOO,
  DOO, SOO, ...) and reaches depth 0 in every seed over T >= 2 rounds pulled the root, one point,
  for the whole run: its parameters (c, nu, rho and the like) set an expansion threshold that T
  rounds cannot reach.  A regret curve of such a run says nothing about the algorithm.
* **The node table is large.**  A run whose table (Fed-PNE's node table, sized on the host from the
  first phase and grown when a run outgrows it) holds more than :data:`LARGE_TABLE` rows keeps that
  many nodes per run in memory and touches them every phase: the configuration keeps very many nodes
  active (a large k, a small rho or nu).

Each warning is one line, kept in :attr:`RunResult.warnings` and its JSON (``"warnings"``), raised
as a :class:`DegenerateRunWarning` by the Python API and printed on stderr by the command line.
"""
from __future__ import annotations

import warnings

import numpy as np

LARGE_TABLE = 65_536      # rows per run above which a grown node table is reported


class DegenerateRunWarning(RuntimeWarning):
    """A run that is legal but degenerate (see :mod:`fedpne_jax.core.diagnostics`)."""


def degenerate(metrics: dict, horizon: int, capacity) -> tuple[str, ...]:
    """The warnings of one configuration's runs: ``metrics`` per seed, ``capacity`` the rows of the
    node table its runs ended with (None: the algorithm has no such table)."""
    found = []
    depth = metrics.get("depth")
    if depth is not None and horizon >= 2 and np.size(depth) and not np.any(np.asarray(depth) > 0):
        found.append(f"no run left the root in T={horizon:,} rounds (depth 0 in every seed): the root was pulled "
                     f"in every round, so the regret says nothing about the algorithm; the expansion threshold its "
                     f"parameters set (e.g. a large c or a small nu) needs more rounds than T")
    if capacity is not None and capacity > LARGE_TABLE:
        found.append(f"the node table holds {capacity:,} rows per run (above {LARGE_TABLE:,}): the configuration "
                     f"keeps very many nodes active (e.g. a large k or a small rho), which costs memory and time in "
                     f"proportion")
    return tuple(found)


def emit(messages, stacklevel: int = 3) -> None:
    """Each message as a :class:`DegenerateRunWarning` (from the caller's caller by default: the
    user's call of the Python API)."""
    for message in messages:
        warnings.warn(message, DegenerateRunWarning, stacklevel=stacklevel)
