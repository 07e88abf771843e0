"""Values computed once and stored, where XLA's CPU backend would recompute them for every element
that reads them.

XLA fuses a cheap producer (adds, multiplies, slices, selects) into each consumer, even one that
broadcasts it: an outer product x (n,) by v (k,) then recomputes v's whole expression for each of its
n k elements.  In the digits objective's training step that made the back-propagated vector, a
10-term sum over the output layer with its hidden-layer mask (itself the tail of a 64-term sum), cost
64 times over: 60 % of a step.  No HLO-level hint stops it on CPU (``optimization_barrier`` is
removed before fusion), but XLA never fuses into or out of a conditional, so a conditional's results
are stored.

A conditional's predicate must be unbatched, or ``vmap`` turns it into a select of both branches
(computed, and fused, as before): ``live`` is any runtime boolean, the same for every lane and true
(a loop counter ``k >= 0``), which XLA cannot fold.  Elsewhere than on a CPU a conditional costs a
round trip to the host, and fusions are the device's own business, so there ``fn`` is called as it is.
The values are the same either way: the same expressions, fused among themselves as before.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def stored(live, fn, *args):
    """``fn(*args)``, computed once and stored on a CPU (see the module's docstring); ``live`` must be
    true, unbatched and not a constant."""
    def skipped(*a):
        return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(fn, *a))

    def on_cpu(*a):
        return jax.lax.cond(live, fn, skipped, *a)

    return jax.lax.platform_dependent(*args, cpu=on_cpu, default=fn)
