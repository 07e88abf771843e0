"""Objective values at the rows of the node table that a phase pulls, and a count of what they cost.

A phase pulls rows [0, used) of the node table and nothing reads a value at any other row.  A
closed-form or host-evaluated objective is evaluated on every row in one call, an iterative one at
the pulled rows only, BLOCK rows at a time (``block_rows``, from
:func:`fedpne_jax.core.blocks.kind`); every estimate reports ``evaluated``, which :func:`counts`
turns into evaluations on the host.

Why values do not depend on the block, the last-bit difference between the two paths, and the
four counters: docs/algorithms/fedpne.md, section "Evaluating the pulled rows".
"""
from __future__ import annotations

import numpy as np

from fedpne_jax.core import pulls as pulls_lib
from fedpne_jax.core.blocks import kind

# Rows per trip for iterative objectives.  Phases of the real objectives' default runs pull a few to
# a few dozen rows (landmine, M = 4, T = 500: 4, 8, 16, 20; digits, M = 5, T = 300: 4, 8, 16, 15),
# and a trip lasts as long as its slowest fit: fewer rows beside it, fewer discarded.  Landmine's
# 4 seeds with blocks of 4, 8, 16 and 32 rows ran in 8.1, 11.1, 18.1 and 28.6 s (2 shared CPU cores,
# best of 3; engine.evaluation_run with eval_block set); evaluating every row took about 40 s.
BLOCK = 4


def iterative(objective) -> bool:
    """Whether ``objective`` is evaluated by an iterative program (core.blocks.kind).  A box given to
    ask/tell (core.stepper.BoxObjective) has no functions: its clients evaluate, the run never does."""
    return getattr(objective, "global_fn", None) is not None and kind(objective) == "iterative"


def block_rows(objective, capacity: int) -> int:
    """Rows per trip of ``objective``'s evaluations in a table of ``capacity`` rows; 0: every row in
    one call (closed-form or host-evaluated objectives)."""
    return min(BLOCK, capacity) if iterative(objective) else 0


def counts(evaluated, num_clients: int, capacity: int) -> dict:
    """Evaluations, as int64 arrays, from the counters ``evaluated`` (..., 4) of runs' outputs:

    * ``global_points``: points at which the global objective was evaluated;
    * ``local_pairs``: (point, client) pairs at which a local objective was;
    * ``total``: both in (point, client) evaluations: a global value is the mean of the M local
      ones (the real objectives compute it so), so a global point counts M;
    * ``every_row_total``: ``total`` had every row of the table been evaluated at every call (the
      closed-form path; pull blocks are the same on both paths)."""
    e = np.asarray(evaluated, np.int64)
    M, per_block = num_clients, pulls_lib.PULL_BLOCK * num_clients
    glob = e[..., 0] + e[..., 2] * per_block
    local = e[..., 1] * M + e[..., 2] * per_block
    sites = np.maximum((e[..., 0] > 0).astype(np.int64) + (e[..., 1] > 0), 1)
    every_row = e[..., 3] * capacity * M * sites + e[..., 2] * per_block * (M + 1)
    return dict(global_points=glob, local_pairs=local, total=glob * M + local, every_row_total=every_row)
