"""The contract every algorithm implements, Fed-PNE and the baselines alike.

An algorithm is one :class:`Algorithm` value, registered with :func:`fedpne_jax.register`
(:mod:`fedpne_jax.core.registry`); each hook's signature is a ``Protocol`` below: ``config_type``
(a frozen, validated dataclass), ``make_static`` (what decides the compiled program),
``make_params`` (the dynamic hyper-parameters, data), ``run_single`` (one run: ``curve``,
``final_regret``, ``flags`` and the :class:`Outputs` ``metrics``), and the optional ``check``,
``tables`` / ``grow`` (host-sized tables a run may outgrow), ``describe`` (:func:`describe`
applies it), ``steps`` (ask/tell, :mod:`fedpne_jax.core.stepper`) and ``styles``.

What each hook must do, and how the executor reruns runs that overflow their tables:
docs/guides/own-algorithm.md, section "Write your own algorithm".
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Hashable, Optional, Protocol, Sequence

import jax
import numpy as np


class Outputs(Protocol):
    """What ``run_single`` returns for one run: a pytree with at least these fields (and the
    algorithm's ``metrics``).  The built-in families return :class:`fedpne_jax.core.measures.Measures`
    subclasses, which carry every shared measure."""

    @property
    def curve(self) -> jax.Array: ...            # (C,) regret at the config's checkpoint rounds

    @property
    def final_regret(self) -> jax.Array: ...     # ()

    @property
    def flags(self) -> jax.Array: ...            # () int32, fedpne_jax.core.errors.FLAG_* bits


# The hooks' parameters are positional-only: the package always passes them by position, so an
# algorithm may name them as it likes.

class MakeStatic(Protocol):
    def __call__(self, config: Any, objective: Any, tables: Any, /) -> Hashable: ...


class MakeParams(Protocol):
    def __call__(self, config: Any, tables: Any, /) -> Any: ...


class RunSingle(Protocol):
    def __call__(self, static: Any, params: Any, objective: Any, key: Any, /) -> Outputs: ...


class Check(Protocol):
    def __call__(self, config: Any, objective: Any, /) -> None: ...


class Tables(Protocol):
    def __call__(self, configs: Sequence[Any], objective: Any, /) -> Any: ...


class Grow(Protocol):
    def __call__(self, tables: Any, failed: Any, allowed: bool, seeds: Any, /) -> Any: ...


class MakeSteps(Protocol):
    """``steps(static, params, space) -> fedpne_jax.core.stepper.Steps``: the rules of ``run_single``
    cut at the evaluation, for ask/tell (``space``: a fedpne_jax.core.stepper.Space)."""
    def __call__(self, static: Any, params: Any, space: Any, /) -> Any: ...


class Describe(Protocol):
    def __call__(self, config: Any, tables: Any, outputs: Any, /) -> tuple[str, dict, dict]: ...


@dataclasses.dataclass(frozen=True)
class Style:
    label: str
    colour: str
    marker: str


@dataclasses.dataclass(frozen=True)
class Algorithm:
    name: str
    config_type: type[Any]
    make_static: MakeStatic
    make_params: MakeParams
    run_single: RunSingle
    metrics: tuple = ()
    federated: bool = False      # runs on M clients (config.num_clients must equal the objective's)
    check: Optional[Check] = None
    tables: Optional[Tables] = None
    grow: Optional[Grow] = None
    describe: Optional[Describe] = None
    styles: tuple = ()           # (result name, Style) pairs; the first is the algorithm's own
    steps: Optional[MakeSteps] = None    # ask/tell (fp.stepper, fp.Optimizer); None: fp.run only

    @property
    def grows(self) -> bool:
        """Whether its runs may outgrow tables sized on the host (and so take grow=False)."""
        return self.grow is not None

    def initial_tables(self, configs, objective):
        """The tables a batch of ``configs`` on ``objective`` starts with: the ``tables`` hook's, or
        None (fixed)."""
        if self.tables is None:
            return None
        if _positional_parameters(self.tables) < 2:
            return self.tables(configs)
        return self.tables(configs, objective)


def _positional_parameters(fn) -> int:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):      # a callable without a readable signature: the current form
        return 2
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return 2
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters)


def describe(algorithm: Algorithm, config, tables, outputs) -> tuple[str, dict, dict]:
    """(result name, resolved config, per-seed metrics) of one configuration's outputs: the
    algorithm's ``describe`` hook, or its name, ``config.resolved()`` and its ``metrics`` outputs."""
    if algorithm.describe is not None:
        return algorithm.describe(config, tables, outputs)
    return algorithm.name, config.resolved(), {m: np.asarray(getattr(outputs, m)) for m in algorithm.metrics}


def check_inputs(algorithm: Algorithm, config: Any, objective: Any) -> None:
    """Errors a run of ``config`` on ``objective`` can detect before compiling."""
    if not isinstance(config, algorithm.config_type):
        raise ValueError(f"config must be a {algorithm.config_type.__name__} for algorithm {algorithm.name!r}, "
                         f"got {type(config).__name__}")
    if algorithm.federated and config.num_clients != objective.num_clients:
        raise ValueError(f"num_clients: the config has M={config.num_clients} but objective "
                         f"{objective.name!r} was built for {objective.num_clients} clients")
    if config.noise_kind == "bernoulli":
        why = objective.outside_unit_interval()
        if why is not None:
            raise ValueError(f"noise 'bernoulli' needs objective values in [0, 1]; objective {objective.name!r} {why}")
    if algorithm.check is not None:
        algorithm.check(config, objective)
