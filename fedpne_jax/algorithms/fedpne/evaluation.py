"""Objective values at the rows of the node table that a phase pulls, and a count of what they cost.

A phase pulls rows [0, used) of the node table (used <= count <= capacity; the rest is padding, or
nodes a phase cut at T never reaches), and nothing reads a value at any other row: regret, the
checkpoints' partial regret and the flags are masked by the pulls, and estimates of unpulled rows
are read only in a phase that completes, where every active row is pulled.

How the rows are evaluated depends on the objective (``block_rows``, decided once per objective):

* a closed-form objective (no loop in its functions, e.g. Garland or BBOB) is evaluated on every row
  in one call: that costs next to nothing, and a loop with its dynamic slices would cost more than
  the rows it skips;
* an objective evaluated on the host (objectives.python: a callback in its functions) is too: the
  host evaluates only the distinct points of a call, and one call per site and phase for the whole
  batch is what keeps it fast;
* an iterative objective (a while or scan: landmine's SVM, digits' MLP training, covid's ODE) costs
  a model fit or a simulation per (point, client), so only the pulled rows are evaluated, BLOCK rows
  at a time, in a loop of ceil(used / BLOCK) trips.  Under vmap the loop runs until the lane with the
  most pulled rows is done; the others' extra trips are discarded.

Values do not depend on the block or the capacity: the engine already relies on an objective giving
a point the same bits alone and in any batch (a run repeated with a larger table evaluates it in a
larger batch), and the real objectives are written so (see their modules).  The two paths can differ
in the last bit of regret for objectives whose value ends in a product: with every row evaluated in
one call, XLA may fuse that product with f* - f into one FMA; a value leaving the loop never is.

Counting: every estimate reports ``evaluated``, int32 (4,): rows evaluated at the global site (none
where the global values are combined from the local ones, objectives.averages), rows at the local
site (one row: all M clients), pull blocks whose points were evaluated (PULL_BLOCK
points per client, at both sites), and evaluation calls at the node centres (one per phase; with
every row evaluated each costs ``capacity`` rows per site).  Small units keep a run's totals within
int32; :func:`counts` turns them into evaluations on the host.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.core import pulls as pulls_lib

# Rows per trip for iterative objectives.  Phases of the real objectives' default runs pull a few to
# a few dozen rows (landmine, M = 4, T = 500: 4, 8, 16, 20; digits, M = 5, T = 300: 4, 8, 16, 15),
# and a trip lasts as long as its slowest fit: fewer rows beside it, fewer discarded.  Landmine's
# 4 seeds with blocks of 4, 8, 16 and 32 rows ran in 8.1, 11.1, 18.1 and 28.6 s (2 shared CPU cores,
# best of 3; engine.evaluation_run with eval_block set); evaluating every row took about 40 s.
BLOCK = 4

_LOOPS = frozenset({"while", "scan"})
_HOST = frozenset({"pure_callback", "io_callback", "callback"})


def block_rows(objective, capacity: int) -> int:
    """Rows per trip of ``objective``'s evaluations in a table of ``capacity`` rows; 0: every row in
    one call (closed-form or host-evaluated objectives)."""
    return min(BLOCK, capacity) if kind(objective) == "iterative" else 0


def kind(objective) -> str:
    """'closed' (no loop), 'host' (a host callback) or 'iterative' (a loop), from the functions' jaxprs."""
    leaves, treedef = jax.tree.flatten(objective.data)
    avals = tuple((tuple(np.shape(x)), str(jnp.result_type(x))) for x in leaves)
    return _kind(objective.global_fn, objective.local_fn, objective.dim, treedef, avals)


@functools.lru_cache(maxsize=256)
def _kind(global_fn, local_fn, dim, treedef, avals) -> str:
    data = jax.tree.unflatten(treedef, [jax.ShapeDtypeStruct(s, d) for s, d in avals])
    x = jax.ShapeDtypeStruct((dim,), jnp.float32)
    names: set = set()
    _primitives(jax.make_jaxpr(global_fn)(data, x).jaxpr, names)
    _primitives(jax.make_jaxpr(lambda d, p: local_fn(d, p, jnp.int32(0)))(data, x).jaxpr, names)
    if names & _HOST:
        return "host"
    return "iterative" if names & _LOOPS else "closed"


def _primitives(jaxpr, names: set) -> None:
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive.name)
        for value in eqn.params.values():
            for sub in (value if isinstance(value, (tuple, list)) else (value,)):
                if hasattr(sub, "eqns"):
                    _primitives(sub, names)
                elif hasattr(sub, "jaxpr") and hasattr(sub.jaxpr, "eqns"):
                    _primitives(sub.jaxpr, names)


def at_rows(block: int, capacity: int, fn, x, used):
    """(the values ``fn`` returns at the rows of ``x``, rows evaluated).

    ``fn``: a function of points (B, D) returning a tuple of (B, ...) arrays.  ``block`` 0: every row in one call.
    Otherwise rows [0, ceil(used / block) block) are evaluated a block at a time and the other rows
    hold zeros (no reader looks at them, see the module's docstring)."""
    if block == 0:
        return tuple(fn(x)), jnp.int32(capacity)
    blocks = -(-capacity // block)
    # Extra rows of the last block repeat the table's last row: a point of the box (a point outside
    # it could cost an iterative objective its longest fit, or fail).
    padded = jnp.pad(x, ((0, blocks * block - capacity), (0, 0)), mode="edge")
    shapes = jax.eval_shape(lambda p: tuple(fn(p)), padded[:block])
    init = tuple(jnp.zeros((blocks * block,) + s.shape[1:], s.dtype) for s in shapes)
    trips = used // block + (used % block > 0).astype(jnp.int32)

    def body(carry):
        i, outs = carry
        points = jax.lax.dynamic_slice_in_dim(padded, i * block, block)
        values = tuple(fn(points))
        return i + 1, tuple(jax.lax.dynamic_update_slice_in_dim(o, v, i * block, 0) for o, v in zip(outs, values))

    _, outs = jax.lax.while_loop(lambda c: c[0] < trips, body, (jnp.int32(0), init))
    return tuple(o[:capacity] for o in outs), trips * block


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
