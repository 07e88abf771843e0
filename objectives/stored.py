"""Values computed once and stored, where XLA's CPU backend would recompute them for every element
that reads them.

XLA fuses a cheap producer into each consumer, even one that broadcasts it; nothing stops that on a
CPU but a conditional, whose results are stored.  The conditional's predicate ``live`` must be
unbatched; elsewhere than on a CPU ``fn`` is called as it is.  The values are the same either way.

Why (digits' training step) and how: docs/guides/paper-figures.md, section "The objectives in detail", "Values stored against XLA's fusion".
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
