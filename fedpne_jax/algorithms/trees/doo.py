"""DOO, the Deterministic Optimistic Optimization of Munos (NIPS 2011), with PyXAB's rules
(algos/DOO.py), as one policy of the tree skeleton.

A centralized baseline: every node evaluated once at its centre, the leaf with the largest
value + delta(h) expanded.  ``delta``: 'pyxab' (PyXAB's ``delta_init``, default) or 'geometric'
(Munos's c gamma^h).  The rules, the tournament that makes a round O(log T) and the differences from
PyXAB: docs/algorithms/trees.md, section "Each algorithm in detail", DOO.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.trees import family
from fedpne_jax.algorithms.trees.layout import COUNT, MAX_HEIGHT, MEAN, PARENT, U, as_bits, as_float, box_of, centre
from fedpne_jax.algorithms.trees.partition import expand
from fedpne_jax.algorithms.trees.policy import Last, TreeConfig, TreePolicy, TreeStatic, tree_static
from fedpne_jax.algorithms.trees.ranking import (
    RunningBest,
    Tournament,
    running_best,
    running_best_point,
    running_best_step,
    tournament,
    tournament_pop,
)
from fedpne_jax.core.algorithm import Style
from fedpne_jax.core.validation import check_choice, check_real

DELTAS = ("pyxab", "geometric")


@dataclasses.dataclass(frozen=True)
class DOOConfig(TreeConfig):
    """DOO's parameters (PyXAB's delta; c and gamma only for delta='geometric')."""

    delta: str = "pyxab"
    c: float = 1.0
    gamma: float = 0.5

    def __post_init__(self):
        super().__post_init__()
        check_choice("delta", self.delta, DELTAS)
        check_real("c", self.c, low=0.0, magnitude=1e30)
        check_real("gamma", self.gamma, low=0.0, high=1.0)

    @property
    def capacity(self) -> int:
        """Rows: the root and two children per expansion, one expansion per two rounds."""
        return self.horizon + 2



@dataclasses.dataclass(frozen=True)
class DOOStatic(TreeStatic):
    delta: str = "pyxab"


class DOOParams(NamedTuple):
    c: np.ndarray            # () delta of the root ('geometric')
    gamma: np.ndarray        # () delta's ratio per depth ('geometric')
    noise_scale: np.ndarray  # ()


def make_static(config: DOOConfig, objective, tables=None) -> DOOStatic:
    height = min((config.horizon + 1) // 2, MAX_HEIGHT)
    return tree_static(config, objective, config.capacity, height, cls=DOOStatic, delta=config.delta)


def make_params(config: DOOConfig, tables=None) -> DOOParams:
    real = np.dtype(config.precision)
    return DOOParams(c=np.asarray(config.c, real), gamma=np.asarray(config.gamma, real),
                     noise_scale=np.asarray(config.noise_scale, real))


class Choice(NamedTuple):
    node: jax.Array          # () int32 the row evaluated
    delta: jax.Array         # () its delta (U), read when it is selected


def _select(static: DOOStatic, params, table, extra, t):
    spec = static.tree
    node = jnp.minimum(t - 1, spec.capacity - 1)
    row = table.rows[node]
    return Choice(node, as_float(spec, row[U])), centre(spec, row)


def _child_deltas(static: DOOStatic, params: DOOParams, node_row):
    """A function of the two children's rows giving their delta: from their boxes ('pyxab') or
    their parent's delta times gamma ('geometric')."""
    spec = static.tree
    if static.delta == "geometric":
        own = jnp.where(node_row[PARENT] < 0, params.c, as_float(spec, node_row[U]))
        return lambda kids: jnp.broadcast_to(own * params.gamma, (2,))

    def layer(kids):
        box = box_of(spec, kids)[:, :, 0]                          # (2, 2): lo_0, hi_0 of each
        c = (box[:, 0] + box[:, 1]) / 2
        return jnp.broadcast_to(jnp.max(jnp.maximum((box[:, 0] - c) ** 2, (box[:, 1] - c) ** 2)), (2,))
    return layer


class Extra(NamedTuple):
    leaves: Tournament  # the evaluated leaves' b
    best: RunningBest   # the recommendation


def _init(static: DOOStatic, params, table, key) -> Extra:
    return Extra(tournament(static.tree), running_best(static.tree.dtype))


def _update(static: DOOStatic, params: DOOParams, table, extra: Extra, last: Last, t, active):
    """Keep round t's value; once every node is evaluated, expand the best leaf and give its children
    their delta (U).  b = value + U enters the tournament of leaves when a node is evaluated and
    leaves it when the node is expanded."""
    spec = static.tree
    node = last.choice.node
    # delta was written in an earlier round, so this add cannot be contracted with the product that
    # made it (XLA's CPU backend fuses a multiply and an add into an FMA where it sees both); and it
    # was read in the selection, so that every read of the table below feeds its one write (a read
    # XLA cannot order before the write makes it copy the whole table).
    b = last.reward + last.choice.delta
    row = table.rows[node]
    row = row.at[COUNT].set(1).at[MEAN].set(as_bits(spec, last.reward))
    grow = active & (t == table.size)
    leaves, best = tournament_pop(spec, extra.leaves, node, b, active, grow)
    extra = Extra(leaves, running_best_step(extra.best, node, last.reward, active))
    best_row = jnp.where(best == node, row, table.rows[best])
    table, overflow = expand(spec, table, best, grow, last.split_u, node_row=best_row,
                             child_u=_child_deltas(static, params, best_row), also=(node, row, active))
    return table, extra, overflow


POLICY = TreePolicy(select=_select, update=_update, recommend=running_best_point, root_expanded=False, init=_init)


ALGORITHM = family.algorithm("doo", DOOConfig, make_static, make_params, POLICY,
                           Style("DOO", "#6b6ecf", "d"))
run_single = ALGORITHM.run_single
