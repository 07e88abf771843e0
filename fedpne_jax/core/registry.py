"""Every algorithm by name and by the type of its configuration: an open registry.

An algorithm joins with :func:`register` (the built-in ones do so when ``fedpne_jax.algorithms`` is
imported, which ``import fedpne_jax`` does), or from an installed package through an entry point in
the group ``fedpne_jax.algorithms`` whose name is the algorithm's name and whose value is an
:class:`~fedpne_jax.core.algorithm.Algorithm` or a callable returning one.  Entry points load
lazily: the first time their name is looked up, or when every name is listed.  From then on a
registered algorithm is the same as a built-in one everywhere (``make_config``, ``run``,
``run_grid``, sweeps, the command line, plots and labels).

This module imports no algorithm: the registry sits below them, and they register themselves.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import functools
import importlib
import importlib.metadata
import importlib.util
import os
import sys
import warnings
from typing import Any

from fedpne_jax.core.algorithm import Algorithm, Style

ENTRY_POINT_GROUP = "fedpne_jax.algorithms"

_ALGORITHMS: dict[str, Algorithm] = {}
_BY_TYPE: dict[type, Algorithm] = {}
_STYLES: dict[str, Style] = {}
_OWNER: dict[str, str] = {}          # result name -> the algorithm that reports under it
_LOADED_ENTRY_POINTS: set[str] = set()
_LOADED_FILES: set[str] = set()     # plugin files already executed (a second run would register copies)


class PluginError(ValueError):
    """A plugin (module or entry point) could not be loaded or did not provide an algorithm."""


def register(algorithm: Algorithm) -> Algorithm:
    """Add ``algorithm`` to the registry and return it.  Registering the same value again does
    nothing; a different value under a taken name, configuration type or result name raises
    ValueError naming it."""
    if not isinstance(algorithm, Algorithm):
        raise TypeError(f"register takes a fedpne_jax.Algorithm, got {type(algorithm).__name__}")
    name = algorithm.name
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"algorithm name must be a non-empty string without surrounding spaces, got {name!r}")
    if not (isinstance(algorithm.config_type, type) and dataclasses.is_dataclass(algorithm.config_type)):
        raise TypeError(f"algorithm {name!r}: config_type must be a dataclass type, got {algorithm.config_type!r}")
    existing = _ALGORITHMS.get(name)
    if existing is not None:
        if existing == algorithm:
            return existing
        raise ValueError(f"algorithm name {name!r} is already registered (by {_origin(existing)}); "
                         f"give the new algorithm another name")
    other = _BY_TYPE.get(algorithm.config_type)
    if other is not None:
        raise ValueError(f"algorithm {name!r}: its config_type {algorithm.config_type.__name__} already belongs "
                         f"to algorithm {other.name!r}; each algorithm needs its own configuration class")
    # An algorithm without styles reports under its own name, unstyled.
    result_names = [result_name for result_name, _ in algorithm.styles] or [name]
    for result_name in result_names:
        if result_name in _OWNER:
            raise ValueError(f"algorithm {name!r}: result name {result_name!r} is already reported by algorithm "
                             f"{_OWNER[result_name]!r}")
    _ALGORITHMS[name] = algorithm
    _BY_TYPE[algorithm.config_type] = algorithm
    _OWNER.update(dict.fromkeys(result_names, name))
    _STYLES.update(algorithm.styles)
    return algorithm


def _origin(algorithm: Algorithm) -> str:
    module = getattr(algorithm.run_single, "__module__", None)
    return f"module {module}" if module else "another registration"


@functools.cache
def _installed() -> tuple:
    """The group's entry points, read once per process: reading them scans every installed
    distribution (about 8 ms here), and every listing of the names asks (a quick gallery asked 313
    times, 2.5 s).  A package installed later is seen by the next process, as with pytest's plugins."""
    return tuple(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def _entry_points(name: str | None = None):
    return [ep for ep in _installed() if name is None or ep.name == name]


def _load_entry_point(ep) -> None:
    if ep.name in _LOADED_ENTRY_POINTS:
        return
    _LOADED_ENTRY_POINTS.add(ep.name)
    where = f"entry point {ep.name!r} ({ep.value}) in group {ENTRY_POINT_GROUP!r}"
    try:
        value = ep.load()
        algorithm = value if isinstance(value, Algorithm) else value() if callable(value) else value
    except Exception as err:
        raise PluginError(f"{where} could not be loaded: {type(err).__name__}: {err}") from err
    if not isinstance(algorithm, Algorithm):
        raise PluginError(f"{where} gave {type(algorithm).__name__}, not a fedpne_jax.Algorithm")
    if algorithm.name != ep.name:
        raise PluginError(f"{where} gave algorithm {algorithm.name!r}; the entry point's name must be the "
                          f"algorithm's name")
    register(algorithm)


def _load_all_entry_points() -> None:
    for ep in _entry_points():
        if ep.name in _ALGORITHMS and ep.name not in _LOADED_ENTRY_POINTS:
            continue
        try:
            _load_entry_point(ep)
        except (PluginError, ValueError) as err:
            # Listing every name must not fail because of one broken, unrelated plugin; asking for
            # that plugin by name raises (get).
            warnings.warn(str(err), RuntimeWarning, stacklevel=3)


def load_plugin(module: str) -> None:
    """Import ``module`` (a dotted name, or a path to a .py file), which registers algorithms or
    objectives when imported: the ``--plugin`` option and a sweep file's ``plugins``."""
    if not isinstance(module, str) or not module.strip():
        raise PluginError(f"plugin must be a module name or a .py file, got {module!r}")
    try:
        if module.endswith(".py"):
            path = os.path.realpath(module)
            if path in _LOADED_FILES:
                return
            if not os.path.isfile(path):
                raise ImportError(f"no such file: {module}")
            name = "fedpne_plugin_" + "".join(c if c.isalnum() else "_" for c in path)
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"not a Python module: {module}")
            loaded = importlib.util.module_from_spec(spec)
            sys.modules[name] = loaded       # as an import would: its dataclasses and pickles find it
            try:
                spec.loader.exec_module(loaded)
            except BaseException:
                del sys.modules[name]
                raise
            _LOADED_FILES.add(path)
        else:
            importlib.import_module(module)
    except Exception as err:
        raise PluginError(f"plugin {module!r} could not be imported: {type(err).__name__}: {err}") from err


def names() -> tuple[str, ...]:
    """Every registered name, installed entry points included (in registration order)."""
    _load_all_entry_points()
    return tuple(_ALGORITHMS)


class _Names(collections.abc.Sequence):
    """``fp.ALGORITHMS``: a live, read-only view of the registered names (a tuple when printed or
    compared); it grows when an algorithm is registered."""

    def __getitem__(self, i):
        return names()[i]

    def __len__(self) -> int:
        return len(names())

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and (name in _ALGORITHMS or name in names())

    def __eq__(self, other) -> bool:
        return isinstance(other, collections.abc.Sequence) and tuple(self) == tuple(other)

    def __hash__(self):
        return hash(names())

    def __repr__(self) -> str:
        return repr(names())


NAMES = _Names()


def get(name: str) -> Algorithm:
    """The algorithm registered as ``name`` (loading an installed entry point of that name if needed)."""
    if isinstance(name, str) and name not in _ALGORITHMS:
        for ep in _entry_points(name):
            _load_entry_point(ep)
    if not isinstance(name, str) or name not in _ALGORITHMS:
        raise ValueError(f"algorithm must be one of {names()} (or one registered with fedpne_jax.register, "
                         f"an installed plugin or --plugin), got {name!r}")
    return _ALGORITHMS[name]


def for_config(config) -> Algorithm:
    """The algorithm whose configuration type ``config`` is."""
    algorithm = _BY_TYPE.get(type(config))
    if algorithm is None:
        raise ValueError(f"config must be the configuration of a registered algorithm ({', '.join(names())}; "
                         f"see fedpne_jax.make_config and fedpne_jax.register), got {type(config).__name__}")
    return algorithm


def config_type(name: str) -> type:
    return get(name).config_type


def make_config(name: str, **options: Any) -> Any:
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
    None for a name no algorithm reports under with a style of its own."""
    if result_name not in _STYLES and isinstance(result_name, str) and result_name not in _ALGORITHMS:
        for ep in _entry_points(result_name):
            try:
                _load_entry_point(ep)
            except ValueError:
                return None
    return _STYLES.get(result_name)


def label(result_name: str) -> str:
    """How results and plots name a result name's algorithm ("Fed-PNE (DP)" for dp-fedpne)."""
    s = style(result_name)
    return s.label if s is not None else result_name


def parse_settings(items, option: str = "--set") -> dict:
    """KEY=VALUE strings as {key: (item, parsed value)} (see :func:`parse_value`), for the command
    line's ``--set`` and Flower's run config ``set`` (``option`` names it in messages); a key given
    twice is refused, as silently keeping the last would hide a typo."""
    out: dict = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ValueError(f"{option} expects KEY=VALUE, got {item!r}")
        if key in out:
            raise ValueError(f"{option} {out[key][0]} and {option} {item} both set {key}; give it once")
        out[key] = (item, parse_value(value))
    return out


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
