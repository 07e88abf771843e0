"""Objective values at many points, a block at a time where each evaluation is a model fit or a
simulation.

:func:`kind` reads an objective's functions: closed-form ones are evaluated on every point in one
call (that costs next to nothing), host-evaluated ones too (the host evaluates a call's distinct
points, and one call per site keeps it fast).  An iterative objective (a while or scan: landmine's
SVM, digits' MLP training, covid's ODE) costs a fit per (point, client), and evaluating hundreds of
points in one batch is slower per point than a few at a time: a vmapped loop runs until its slowest
lane is done (one hard landmine point made a batch of 20 points 3.7 times slower per point than
batches of 10 and 40), and the working set of a batch of fits outgrows the caches (digits: 2,080
evaluations/s at 16 points, 570 at 125).  So :func:`at_rows` evaluates such points a block at a
time, in a loop.

Values do not depend on the block: the engine already relies on an objective giving a point the same
bits alone and in any batch, and the real objectives are written so (see their modules).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

# Points per trip when every point of a set is needed (an arm grid, a candidate set): under vmap a
# trip holds this many points of every seed of a device.  The gallery's KernelTS on landmine (100
# candidates, M = 4, 5 seeds a device) ran in 14.1 s with one point a trip, 23.0 s with four and
# 35.3 s with all in one call; on digits (125 candidates, M = 10, 4 seeds) in 6.0, 5.0 and 17.2 s.
POINTS_PER_TRIP = 1

_LOOPS = frozenset({"while", "scan"})
_HOST = frozenset({"pure_callback", "io_callback", "callback"})


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
    hold zeros (the caller reads none of them)."""
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


def every_point(objective, fn, x):
    """``fn``'s values (a tuple of (K, ...) arrays) at all K points ``x`` (K, D): one call, or on a
    CPU :data:`POINTS_PER_TRIP` points at a time for an iterative objective.  Elsewhere one call: a
    GPU runs a batch of fits as wide kernels, and a loop of K trips would launch every step's kernels
    K times over."""
    one_call = lambda points: tuple(fn(points))
    if kind(objective) != "iterative":
        return one_call(x)
    K = x.shape[0]
    blocked = lambda points: at_rows(min(POINTS_PER_TRIP, K), K, fn, points, jnp.int32(K))[0]
    return jax.lax.platform_dependent(x, cpu=blocked, default=one_call)
