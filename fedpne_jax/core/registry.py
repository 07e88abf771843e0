"""Every algorithm by name, and by the type of its configuration.

``ALGORITHMS`` maps each registered name to its :class:`~fedpne_jax.core.algorithm.Algorithm`;
:func:`make_config` builds a configuration from a name and keyword options, :func:`for_config`
finds the algorithm a configuration belongs to, :func:`style` gives a result name's label, colour
and marker.
"""
from __future__ import annotations

import dataclasses

from fedpne_jax.algorithms.arms import fed1ucb, fnucb
from fedpne_jax.algorithms.fedpne import ALGORITHM as FEDPNE
from fedpne_jax.algorithms.gp import bbo, bo, gpucb, kernelts
from fedpne_jax.algorithms.trees import hct, hoo
from fedpne_jax.core.algorithm import Algorithm, Style

ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    FEDPNE, hct.ALGORITHM, hoo.ALGORITHM, fed1ucb.ALGORITHM, kernelts.ALGORITHM, gpucb.ALGORITHM, bo.ALGORITHM,
    bbo.ALGORITHM, fnucb.ALGORITHM)}
NAMES = tuple(ALGORITHMS)
_BY_TYPE = {a.config_type: a for a in ALGORITHMS.values()}
_STYLES = {result: s for a in ALGORITHMS.values() for result, s in a.styles}


def get(name: str) -> Algorithm:
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {NAMES}, got {name!r}")
    return ALGORITHMS[name]


def for_config(config) -> Algorithm:
    """The algorithm whose configuration type ``config`` is."""
    algorithm = _BY_TYPE.get(type(config))
    if algorithm is None:
        raise ValueError(f"config must be the configuration of a registered algorithm ({', '.join(NAMES)}; "
                         f"see fedpne_jax.make_config), got {type(config).__name__}")
    return algorithm


def config_type(name: str) -> type:
    return get(name).config_type


def make_config(name: str, **options):
    """The config of algorithm ``name`` from keyword options; an option the algorithm does not have
    raises ValueError listing the ones it has."""
    cls = config_type(name)
    fields = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(options) - set(fields))
    if unknown:
        raise ValueError(f"algorithm {name!r} has no parameter {', '.join(map(repr, unknown))}; "
                         f"its parameters are {', '.join(fields)}")
    return cls(**options)


def style(result_name: str) -> Style | None:
    """The label, colour and marker of a result name (an algorithm's, or a variant such as dp-fedpne);
    None for a name no algorithm reports under."""
    return _STYLES.get(result_name)


def label(result_name: str) -> str:
    """How results and plots name a result name's algorithm ("Fed-PNE (DP)" for dp-fedpne)."""
    s = style(result_name)
    return s.label if s is not None else result_name


def parse_value(text: str):
    """A command-line or sweep-file value: int, float, bool, none, else the string itself.  The config's
    own validation then rejects a value of the wrong kind, naming the parameter."""
    low = text.strip().lower()
    if low in ("none", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip()
