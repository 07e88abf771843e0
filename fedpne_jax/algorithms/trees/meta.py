"""What the meta-algorithms POO and GPO (poo.py, gpo.py, pct.py) share: the base tree algorithms
they run, instances of a base with their own parameters and clocks, and their host-side sizing.

A base is one :class:`Base` entry of :data:`BASES`: ``hct``, ``hoo`` (T-HOO) and ``vhct`` (GPO over
VHCT is VPCT, vpct.py).  How an instance keeps its own clock and refreshes, and how the instances'
tables are sized and their params stacked: docs/algorithms/trees.md, section "Each algorithm in detail", "POO and GPO: instances and sizing".
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from fedpne_jax.algorithms.trees import hct, hoo, vhct
from fedpne_jax.algorithms.trees.descent import path_of
from fedpne_jax.algorithms.trees.layout import CHILD, COUNT, TreeSpec, check_height, make_spec
from fedpne_jax.algorithms.trees.policy import TreePolicy

MAX_INSTANCES = 1024


def _hct_config(budget: int, horizon: int, nu: float, rho: float, pyxab: bool, fields: dict):
    # HCT is anytime: the budget only sizes its table and threshold tables.
    return hct.HCTConfig(horizon=budget, nu=nu, rho=rho, expand="pyxab" if pyxab else "leaf", **fields)


def _vhct_config(budget: int, horizon: int, nu: float, rho: float, pyxab: bool, fields: dict):
    # As HCT: anytime, the budget sizes its tables; pyxab: PyXAB's VHCT rules (its variance floor,
    # thresholds read in the selection, re-expansion).
    return vhct.VHCTConfig(horizon=budget, nu=nu, rho=rho, pyxab=pyxab, **fields)


def _hoo_config(budget: int, horizon: int, nu: float, rho: float, pyxab: bool, fields: dict):
    # T-HOO's n (in U and the depth limit): PyXAB's wrappers give every instance the whole horizon,
    # the papers run an instance for its own budget.
    return hoo.HOOConfig(horizon=horizon if pyxab else budget, nu=nu, rho=rho, **fields)


def pulled_only(spec: TreeSpec, rows):
    """Evaluations of each row's point when only the pulled node is credited (HCT, VHCT): its count."""
    return rows[:, COUNT].astype(jnp.int32)


def along_path(spec: TreeSpec, rows):
    """Evaluations of each row's point when the whole path is credited (T-HOO): its count less its
    children's (a node's children exist only after its own evaluation)."""
    child = rows[:, CHILD].astype(jnp.int32)
    c = jnp.maximum(child, 0)
    count = rows[:, COUNT].astype(jnp.int32)
    return count - jnp.where(child >= 0, count[c] + count[c + 1], 0)


@dataclasses.dataclass(frozen=True)
class Base:
    """A base tree algorithm of POO and GPO."""

    name: str
    module: Any              # make_static, make_params, POLICY
    make_config: Callable    # (budget, horizon, nu, rho, pyxab, fields) -> the instance's config
    evaluations: Callable    # (spec, rows) -> (capacity,) int32 evaluations of each row's point

    @property
    def policy(self) -> TreePolicy:
        return self.module.POLICY


BASES = {
    "hct": Base("hct", hct, _hct_config, pulled_only),
    "hoo": Base("hoo", hoo, _hoo_config, along_path),
    "vhct": Base("vhct", vhct, _vhct_config, pulled_only),
}


def base_configs(config, base: Base, rhos, budgets) -> tuple:
    """The instances' configs (budgets below 1 count as 1: such an instance never runs), with the
    meta config's split, precision and noise; a refusal names the meta config's fields."""
    fields = dict(split=config.split, precision=config.precision, noise=config.noise, checkpoints=1)
    out = []
    for rho, budget in zip(rhos, budgets):
        try:
            out.append(base.make_config(max(int(budget), 1), config.horizon, config.numax, float(rho), config.pyxab,
                                        fields))
        except ValueError as err:
            raise ValueError(f"numax, rhomax, horizon: the instance of base {base.name!r} with nu={config.numax}, "
                             f"rho={rho!r} and budget {budget} is refused: {err}") from None
    return tuple(out)


def capacity(configs, budgets) -> int:
    return max(min(c.capacity, 3 + 2 * int(u)) for c, u in zip(configs, budgets))


def instance_static(base: Base, configs, budgets, objective, config, tables=None):
    """(the base's static with the common tree spec, capacity, height) of the instances; ``tables``:
    the wrapper's :class:`PathTables`."""
    statics = [base.module.make_static(c, objective) for c in configs]
    height = max(min(s.tree.height, 1 + int(u)) for s, u in zip(statics, budgets))
    cap = capacity(configs, budgets)
    check_height(height, f"rhomax={config.rhomax}, horizon={config.horizon}")
    spec = make_spec(cap, height, objective, config.split, config.precision, path_of(tables, height))
    return dataclasses.replace(statics[0], tree=spec), cap, height


def stack(params: list):
    """The instances' params stacked on a leading axis, each array padded to the largest shape with
    its last entries."""
    def pad(*leaves):
        arrays = [np.asarray(x) for x in leaves]
        shape = tuple(max(s) for s in zip(*(a.shape for a in arrays)))
        return np.stack([np.pad(a, [(0, n - d) for n, d in zip(shape, a.shape)], mode="edge") if a.ndim else a
                         for a in arrays])
    return jax.tree.map(pad, *params)


def pick(tree_, i):
    """Entry i of every array of a stacked pytree."""
    return jax.tree.map(lambda a: a[i], tree_)


def keep(on, new, old):
    """``new`` where ``on`` (a scalar, or one flag per entry of a leading axis), else ``old``."""
    def select(a, b):
        flag = jnp.reshape(on, jnp.shape(on) + (1,) * (jnp.ndim(a) - jnp.ndim(on)))
        return jnp.where(flag, a, b)
    return jax.tree.map(select, new, old)


def refresh_due(policy: TreePolicy, s):
    """(whether local round s refreshes, its k) under the base's rule: s = 2^k, or s = k * every."""
    s = jnp.asarray(s, jnp.int32)
    if policy.refresh_every:
        return s % policy.refresh_every == 0, s // policy.refresh_every
    return (s > 0) & ((s & (s - 1)) == 0), 31 - jax.lax.clz(jnp.maximum(s, 1))


def refresh(policy: TreePolicy, static, params, table, extra, s, on):
    """The base's refresh of one instance's table and extra at its local round s when due and
    ``on``.  ``on`` and s must not differ between the runs of a batch: a batched predicate would run
    the branch, a pass over the table, in every round."""
    hook = policy.refresh
    if hook is None:
        return table, extra
    due, k = refresh_due(policy, s)
    return jax.lax.cond(on & due, lambda operand: hook(static, params, k, *operand), lambda operand: operand,
                        (table, extra))


def first_best(values, where):
    """The first index of the largest of ``values`` where ``where`` holds (np.argmax's tie rule; 0
    when none holds).  Max and min are exact in any order, so the choice does not depend on the
    batch."""
    n = values.shape[0]
    v = jnp.where(where, values, -jnp.inf)
    top = jnp.max(v)
    first = jnp.min(jnp.where(where & (v == top), jnp.arange(n, dtype=jnp.int32), n))
    return jnp.where(first < n, first, 0).astype(jnp.int32)


def dmax(rhomax: float) -> float:
    """D_max = ln 2 / ln(1/rhomax) (binary partition, K = 2), in PyXAB's numpy arithmetic."""
    return float(np.log(2) / np.log(1 / rhomax))


def log_ratio(n) -> float:
    """ln(n / ln n) in IEEE arithmetic, as PyXAB's numpy evaluates it: -inf at n = 0, +inf at n = 1."""
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.float64(n)
        return float(np.log(x / np.log(x)))


def check_bool(name: str, value) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
