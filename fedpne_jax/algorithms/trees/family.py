"""The registry entry of a tree algorithm: its policy run by the round loop (driver.run) for ``fp.run``,
and the same policy cut at the evaluation (steps.py) for ask/tell."""
from __future__ import annotations

from typing import Callable

from fedpne_jax.algorithms.trees import steps
from fedpne_jax.algorithms.trees.descent import grow_path, path_tables
from fedpne_jax.algorithms.trees.driver import METRICS, run
from fedpne_jax.algorithms.trees.partition import check_objective
from fedpne_jax.algorithms.trees.policy import TreePolicy
from fedpne_jax.core.algorithm import Algorithm, Style


def algorithm(name: str, config_type, make_static: Callable, make_params: Callable, policy: TreePolicy,
              style: Style, descends: bool = False) -> Algorithm:
    """The registry entry of a tree algorithm: its ``run_single`` is :func:`run` with ``policy``, its
    metrics :data:`METRICS`, and its one check that the objective suits the config's split.
    ``descends``: its rounds descend and update paths (:func:`descend`, :func:`update_path`), whose
    buffers start at :func:`start_path` rows and grow (:class:`PathTables`; its ``make_static``
    passes ``path_of(tables, height)``)."""
    def run_single(static, params, objective, key):
        return run(static, params, objective, key, policy)

    return Algorithm(name=name, config_type=config_type, make_static=make_static, make_params=make_params,
                     run_single=run_single, metrics=METRICS, steps=steps.hook(policy),
                     check=lambda config, objective: check_objective(config.split, objective),
                     styles=((name, style),), tables=path_tables if descends else None,
                     grow=grow_path if descends else None)
