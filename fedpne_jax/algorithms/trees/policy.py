"""What a tree algorithm supplies to the driver: its config, its static choices and its rules.

:class:`TreeConfig` is the fields every tree algorithm's config shares (the split rule and the
precision), :class:`TreeStatic` what decides its program (:func:`tree_static` builds it, the table's
shape included).  :class:`TreePolicy` is an algorithm's rules, a frozen dataclass of plain
functions: ``select`` (round t's node and the point evaluated), ``update`` (credit the reward in
:class:`Last` and apply the expansion rule; nothing changes unless ``active``), and the optional
``init`` (the policy's own state), ``refresh`` (run at the rounds 2^k, or every ``refresh_every``
rounds, between the selection and the update) and ``recommend`` (default :func:`next_selection`,
PyXAB's ``get_last_point``).  :func:`parallel` runs N instances of a policy side by side (POO, GPO).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from fedpne_jax.algorithms.trees.layout import TreeSpec, make_spec
from fedpne_jax.algorithms.trees.rounds import chunk_size
from fedpne_jax.core.config import PRECISIONS, BaselineConfig
from fedpne_jax.core.split import SPLITS
from fedpne_jax.core.validation import check_choice


@dataclasses.dataclass(frozen=True)
class TreeConfig(BaselineConfig):
    """The fields every tree algorithm's config has beside the horizon, noise and checkpoints: the
    partition's split rule and the precision of its boxes, values and regret."""

    split: str = "random"
    precision: str = "float32"

    def __post_init__(self):
        super().__post_init__()
        check_choice("split", self.split, SPLITS)
        check_choice("precision", self.precision, PRECISIONS)

    @property
    def capacity(self) -> int:
        """Rows of the node table, sized on the host so that no run can outgrow it (each algorithm's)."""
        raise NotImplementedError

    def resolved(self) -> dict:
        out = super().resolved()
        out.update(capacity=self.capacity)
        return out


@dataclasses.dataclass(frozen=True)
class TreeStatic:
    """What decides a tree algorithm's program (algorithms with more static choices subclass it)."""

    horizon: int
    checkpoint_rounds: tuple
    noise_kind: str
    tree: TreeSpec
    real: str
    chunk: int               # rounds per draw of reward uniforms
    trace: bool = False      # tests: also return every pulled point
    instances: int = 1       # > 1: a leading instance axis on the table (see :func:`parallel`)


def tree_static(config, objective, capacity: int, height: int, cls: Any = TreeStatic, path: Optional[int] = None,
                **fields) -> Any:
    """The static (a ``cls``, TreeStatic or a subclass) of a config with ``horizon``, ``noise``,
    ``checkpoints``, ``split`` and ``precision``; ``path``: rows of its descents' path buffers
    (:func:`path_of`; default the whole height bound)."""
    return cls(horizon=config.horizon, checkpoint_rounds=tuple(int(r) for r in config.checkpoint_rounds),
               noise_kind=config.noise_kind,
               tree=make_spec(capacity, height, objective, config.split, config.precision, path),
               real=config.precision, chunk=chunk_size(config.horizon), **fields)


def next_selection(static, params, table, extra, last):
    """The default ``recommend`` hook, PyXAB's ``get_last_point``: the point of the next round's
    selection (after the loop, round T + 1's)."""
    return last.point


@dataclasses.dataclass(frozen=True)
class TreePolicy:
    """An algorithm's rules (plain functions, closed over nothing dynamic)."""

    select: Callable
    update: Callable
    init: Callable = lambda static, params, table, key: ()
    refresh: Optional[Callable] = None
    refresh_every: int = 0          # > 0: refresh at rounds k * refresh_every instead of 2^k
    recommend: Callable = next_selection
    root_expanded: bool = True


class Last(NamedTuple):
    """A round's selection, kept for its update in the next loop body."""
    choice: Any           # the policy's choice (e.g. :class:`Descent`)
    reward: jax.Array     # ()
    split_u: jax.Array    # () the round's split uniform
    point: jax.Array      # (D,) the point evaluated (after the loop: round T + 1's selection)


def parallel(policy: TreePolicy, schedule: Callable) -> TreePolicy:
    """N instances of ``policy`` side by side (POO, GPO), for a static with ``instances`` = N: the
    table, ``extra`` and ``params.instances`` (the instances' own params, stacked) carry a leading
    (N,) axis, and every hook of ``policy`` is vmapped over it.  Round t evaluates the point of
    instance ``schedule(static, params, t)``; the other instances select too (a vmapped selection
    costs what N do) but update with active=False, so they write nothing.  The recommendation is
    round T + 1's scheduled point."""
    def init_each(static, params, tables, keys):
        return jax.vmap(lambda p, tb, k: policy.init(static, p, tb, k))(params.instances, tables, keys)

    def select_each(static, params, tables, extras, t):
        choices, points = jax.vmap(lambda p, tb, ex: policy.select(static, p, tb, ex, t))(params.instances, tables,
                                                                                         extras)
        i = schedule(static, params, t)
        return (i, choices), points[i]

    def update_each(static, params, tables, extras, last, t, active):
        i, choices = last.choice

        def one(j, p, tb, ex, choice):
            return policy.update(static, p, tb, ex, last._replace(choice=choice), t, active & (j == i))

        n = static.instances
        tables, extras, overflow = jax.vmap(one)(jnp.arange(n), params.instances, tables, extras, choices)
        return tables, extras, jnp.any(overflow)

    def refresh_each(static, params, k, tables, extras):
        return jax.vmap(lambda p, tb, ex: policy.refresh(static, p, k, tb, ex))(params.instances, tables, extras)

    return TreePolicy(select=select_each, update=update_each, init=init_each,
                      refresh=None if policy.refresh is None else refresh_each,
                      refresh_every=policy.refresh_every,
                      root_expanded=policy.root_expanded)
