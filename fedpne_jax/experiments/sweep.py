"""A sweep: objectives x algorithms x M x T x hyper-parameter grid x seeds, from a TOML or JSON file.

Top-level keys ``objectives``, ``algorithms``, ``clients``, ``horizon``, ``seeds``, ``base_seed``,
``heterogeneity``, ``objective_seed``, ``plugins`` and ``share_programs`` (:func:`shared_with`);
tables ``[params]`` and ``[grid]`` (the fields of the algorithms' configs; a grid is a Cartesian
product), and per algorithm ``[NAME.params]`` and ``[NAME.grid]``.  Configurations are ordered
objective, algorithm, M, T, then the grid (keys in alphabetical order, the last varying fastest),
and the normalised definition is hashed: a results folder holds exactly one definition.

The format in full, with every default and rule: docs/guides/sweeps.md, section "The sweep file in
full".
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tomllib
from typing import Any

import numpy as np

import objectives
from fedpne_jax.core import registry
from fedpne_jax.core.files import WriteError
from fedpne_jax.core.grid import points as grid_points
from fedpne_jax.core.validation import is_int, is_real, is_seed, is_seed_count

FORMAT = "fedpne-sweep/1"
TOP_KEYS = {"objectives", "algorithms", "clients", "horizon", "seeds", "base_seed", "heterogeneity",
            "objective_seed", "params", "grid", "plugins", "share_programs"}
RESERVED = {"num_clients": "clients", "horizon": "horizon"}
DEFAULT_CHECKPOINTS = 100    # every config's default; a sweep whose shortest horizon is below it uses that


class SweepError(ValueError):
    """An invalid sweep definition, or a results folder that holds another sweep."""


class SweepWriteError(WriteError, SweepError):
    """A file of a results folder could not be written (disk full, read-only folder, ...): a
    SweepError, so that whatever reports bad sweeps reports this too, and an OSError naming the file."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """One configuration of a sweep (one row of the loader's config axis)."""

    index: int
    id: str              # stable identity: hash of algorithm, objective and every resolved parameter
    algorithm: str
    objective: dict      # name, dim, heterogeneity, seed, num_clients (objectives.make_objective's arguments)
    options: dict        # the config's keyword arguments
    labels: dict         # what the sweep varies: objective, algorithm, num_clients, horizon, grid keys
    config: Any          # the algorithm's config, validated

    def make_objective(self, shared_with=None):
        """The entry's objective (``shared_with``: see :func:`objectives.make_objective`)."""
        o = self.objective
        return objectives.make_objective(o["name"], num_clients=o["num_clients"], heterogeneity=o["heterogeneity"],
                                         seed=o["seed"], dim=o["dim"], amplitude=o.get("amplitude"),
                                         instance=o.get("instance"), shared_with=shared_with)


# Objective kinds whose functions can share one program (objectives.make_objective's shared_with).
SHAREABLE = ("bbob", "synthetic")


def shared_kinds(definition: dict) -> tuple:
    """The objective kinds whose functions share programs under a normalised definition's
    ``share_programs``: true is the BBOB functions (what it has always meant)."""
    share = definition.get("share_programs", False)
    return ("bbob",) if share is True else tuple(share or ())


def shared_with(sweep: "Sweep", entry: Entry) -> tuple | None:
    """What ``entry``'s objective is built with as ``shared_with`` (see :func:`objectives.make_objective`):
    when ``share_programs`` names its kind, an entry gets the names of the sweep's functions of that
    kind that one program can hold (every BBOB function; the synthetic functions on its box and
    dimension), so that they compile one program per algorithm and dimension instead of one per
    function; None when it is alone or its kind is not named.  Off by default: values then agree with
    an objective built alone to float32 rounding, not always to the last bit."""
    own = _share_group(entry)
    if own[0] not in shared_kinds(sweep.definition):
        return None
    names = sorted({e.objective["name"] for e in sweep.entries if _share_group(e) == own})
    return tuple(names) if len(names) > 1 else None


def share_kind(name: str) -> str | None:
    """The kind of SHAREABLE objective ``name`` is, None if it shares no program: the built-in BBOB and
    synthetic functions."""
    return "bbob" if name in objectives.BBOB_REGISTRY else "synthetic" if name in objectives.REGISTRY else None


def _share_group(entry: Entry) -> tuple:
    """(kind, ...) equal for the entries whose functions can share a program: BBOB functions whatever
    their dimension (their programs differ by dimension anyway), synthetic ones of one box and
    dimension; (None,) for the others."""
    name = entry.objective["name"]
    kind = share_kind(name)
    if kind != "synthetic":
        return (kind,)
    s = objectives.REGISTRY[name]
    return (kind, s.lo, s.hi, entry.objective.get("dim") or s.default_dim)


@dataclasses.dataclass(frozen=True)
class Sweep:
    definition: dict     # normalised
    hash: str
    entries: tuple

    @property
    def seed_ids(self):
        s = self.definition["seeds"]
        return np.arange(s, dtype=np.int64) if isinstance(s, int) else np.asarray(s, np.int64)

    @property
    def base_seed(self) -> int:
        return self.definition["base_seed"]

    @property
    def num_runs(self) -> int:
        return len(self.entries) * len(self.seed_ids)


def read(path) -> dict:
    """A definition dict from a .toml or .json file: a non-empty table/object."""
    path = os.fspath(path)
    try:
        if path.lower().endswith(".json"):
            with open(path) as fh:
                raw = json.load(fh)
        else:
            with open(path, "rb") as fh:
                raw = tomllib.load(fh)
    except FileNotFoundError:
        raise SweepError(f"sweep file {path!r} does not exist") from None
    except (ValueError, OSError) as err:      # tomllib.TOMLDecodeError and JSONDecodeError are ValueErrors
        raise SweepError(f"sweep file {path!r}: {err}") from None
    # An empty file or `null` would otherwise fall back to every default and start the default
    # sweep, hours of work nobody asked for.
    if not isinstance(raw, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number",
                type(None): "null"}.get(type(raw), type(raw).__name__)
        raise SweepError(f"sweep file {path!r} must hold a table/object of sweep keys, got {kind}")
    if not raw:
        raise SweepError(f"sweep file {path!r} defines nothing (it is empty); "
                         f"name at least the objectives, see fedpne_jax/experiments/sweep.py")
    return raw


def load(source) -> Sweep:
    """A :class:`Sweep` from a definition dict, a path to a TOML/JSON file, or a Sweep."""
    if isinstance(source, Sweep):
        return source
    raw = read(source) if isinstance(source, (str, os.PathLike)) else source
    definition = normalise(raw)
    return Sweep(definition, definition_hash(definition), tuple(expand(definition)))


def _list(raw: dict, key: str, default):
    value = raw.get(key, default)
    if not isinstance(value, list):
        value = [value]
    if not value:
        raise SweepError(f"sweep: {key} must not be empty")
    if len({json.dumps(canonical(v), sort_keys=True) for v in value}) != len(value):
        raise SweepError(f"sweep: {key} repeats a value: {value!r}")
    return value


def _int_list(raw, key, default):
    values = _list(raw, key, default)
    for v in values:
        if not is_int(v) or v < 1:
            raise SweepError(f"sweep: {key} must be positive integers, got {v!r}")
    return values


def _table(raw: dict, key: str, where: str = "") -> dict:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise SweepError(f"sweep: {where}{key} must be a table of parameter = value, got {value!r}")
    for name in value:
        if name in RESERVED:
            raise SweepError(f"sweep: set {name} with the top-level key {RESERVED[name]!r}, not in {where}{key}")
    return dict(value)


def _grid(raw: dict, where: str = "") -> dict:
    grid = _table(raw, "grid", where)
    for name, values in grid.items():
        if not isinstance(values, list) or not values:
            raise SweepError(f"sweep: {where}grid.{name} must be a non-empty list, got {values!r}")
        if len({json.dumps(canonical(v)) for v in values}) != len(values):
            raise SweepError(f"sweep: {where}grid.{name} repeats a value: {values!r}")
        if name == "checkpoints" and len(values) > 1:
            raise SweepError("sweep: checkpoints cannot be swept (every configuration's curve has the same length)")
    return grid


def _plain(value):
    """NumPy scalars and arrays in a definition from Python as the numbers and lists they hold: the
    definition is stored as JSON and hashed by value, and ``np.int64(50)`` must be 50 in both."""
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def normalise(raw: dict) -> dict:
    """The definition with defaults filled in and everything checked that needs no config."""
    if not isinstance(raw, dict):
        raise SweepError(f"sweep definition must be a table/object, got {type(raw).__name__}")
    raw = _plain(raw)
    plugins = _plugins(raw)
    names = [a for a in _list(raw, "algorithms", ["fedpne"])]
    for name in names:
        try:
            registry.get(name)
        except ValueError as err:
            raise SweepError(f"sweep: {err}") from None
    unknown = sorted(set(raw) - TOP_KEYS - set(names))
    if unknown:
        raise SweepError(f"sweep: unknown key(s) {', '.join(map(repr, unknown))}; the keys are "
                         f"{', '.join(sorted(TOP_KEYS))} and a table per algorithm")
    heterogeneity = raw.get("heterogeneity")
    objective_seed = raw.get("objective_seed", 0)
    if not is_int(objective_seed):
        raise SweepError(f"sweep: objective_seed must be an integer, got {objective_seed!r}")
    objective_list = []
    for item in _list(raw, "objectives", ["garland"]):
        objective_list.append(_objective(item, heterogeneity, objective_seed))
    if len({json.dumps(o, sort_keys=True) for o in objective_list}) != len(objective_list):
        raise SweepError("sweep: objectives repeats an objective")
    seeds = raw.get("seeds", 100)
    if isinstance(seeds, list):
        if not seeds or any(not is_seed(s) for s in seeds) \
                or len(set(seeds)) != len(seeds):
            raise SweepError(f"sweep: seeds must be a count or a list of distinct int32 seed indices, got {seeds!r}")
    elif not is_seed_count(seeds):
        raise SweepError(f"sweep: seeds must be a count >= 1 or a list of seed indices, got {seeds!r}")
    base_seed = raw.get("base_seed", 0)
    if not is_seed(base_seed):
        raise SweepError(f"sweep: base_seed must be an int in [0, 2^31 - 1], got {base_seed!r}")
    per_algorithm = {}
    for name in names:
        if name in raw:
            table = raw[name]
            if not isinstance(table, dict) or set(table) - {"params", "grid"}:
                raise SweepError(f"sweep: the table {name!r} may hold only 'params' and 'grid', got {table!r}")
            per_algorithm[name] = {"params": _table(table, "params", f"{name}."),
                                   "grid": _grid(table, f"{name}.")}
    _fixed_or_swept("", _table(raw, "params"), _grid(raw))
    for name, table in per_algorithm.items():
        _fixed_or_swept(f"{name}.", table["params"], table["grid"])
    out = {
        "format": FORMAT,
        "objectives": objective_list,
        "algorithms": names,
        "clients": _int_list(raw, "clients", [10]),
        "horizon": _int_list(raw, "horizon", [10_000]),
        "seeds": seeds,
        "base_seed": base_seed,
        "params": _table(raw, "params"),
        "grid": _grid(raw),
        "per_algorithm": per_algorithm,
    }
    if plugins:              # absent when empty, so definitions without plugins keep their hashes
        out["plugins"] = plugins
    share = raw.get("share_programs", False)
    if isinstance(share, bool):
        kinds = ["bbob"] if share else []
    elif isinstance(share, list) and share and all(isinstance(k, str) and k in SHAREABLE for k in share):
        kinds = sorted(set(share))
    else:
        raise SweepError(f"sweep: share_programs must be true (the BBOB functions), false or a list of objective "
                         f"kinds from {list(SHAREABLE)}, got {share!r}")
    # Absent when false, and true for the BBOB functions alone, for the same reason.
    if kinds:
        out["share_programs"] = True if kinds == ["bbob"] else kinds
    return out


def _plugins(raw: dict) -> list:
    """The definition's plugins, imported now: a resumed sweep whose plugin is missing is refused here,
    naming it, before any result is read or written."""
    plugins = raw.get("plugins", [])
    if not isinstance(plugins, list) or any(not isinstance(p, str) or not p.strip() for p in plugins):
        raise SweepError(f"sweep: plugins must be a list of module names or .py files, got {plugins!r}")
    for plugin in plugins:
        try:
            registry.load_plugin(plugin)
        except registry.PluginError as err:
            raise SweepError(f"sweep: plugins: {err}") from None
    return list(dict.fromkeys(plugins))


def _objective(item, heterogeneity, seed) -> dict:
    if isinstance(item, str):
        item = {"name": item}
    if not isinstance(item, dict) or "name" not in item or set(item) - {"name", "dim", "heterogeneity", "seed",
                                                                         "amplitude", "instance"}:
        raise SweepError(f"sweep: an objective is a name or a table with name and optionally dim, heterogeneity, "
                         f"seed, amplitude, instance; got {item!r}")
    name = item["name"]
    try:
        spec = objectives.spec(name)
    except ValueError as err:
        raise SweepError(f"sweep: {err}") from None
    dim = item.get("dim", spec.default_dim)
    het = item.get("heterogeneity", heterogeneity)
    if het is not None and spec.heterogeneities and het not in spec.heterogeneities:
        raise SweepError(f"sweep: heterogeneity of {name!r} must be one of {spec.heterogeneities}, got {het!r}")
    out = {"name": name, "dim": dim, "heterogeneity": het, "seed": item.get("seed", seed)}
    if "amplitude" in item:
        # Only the 'fourier' heterogeneity has an amplitude; left out otherwise, so definitions
        # without one keep their hash.
        amplitude = item["amplitude"]
        if het != "fourier":
            raise SweepError(f"sweep: amplitude applies to heterogeneity 'fourier' only, got {het!r} for {name!r}")
        if not is_real(amplitude) or not amplitude >= 0:
            raise SweepError(f"sweep: amplitude of {name!r} must be a number >= 0, got {amplitude!r}")
        out["amplitude"] = amplitude
    if "instance" in item:
        # Left out unless given, so definitions without one keep their hash.
        instance = item["instance"]
        if spec.kind != "bbob":
            raise SweepError(f"sweep: instance applies to the bbob-* objectives only, got it for {name!r}")
        if not is_int(instance) or instance < 1:
            raise SweepError(f"sweep: instance of {name!r} must be an integer >= 1, got {instance!r}")
        out["instance"] = instance
    return out


def canonical(value):
    """Numbers compared by value (1 and 1.0 hash alike), mappings by content, for hashing."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return repr(value)


def digest(value) -> str:
    return hashlib.sha256(json.dumps(canonical(value), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def definition_hash(definition: dict) -> str:
    return digest(definition)


def _has_field(cls, name: str) -> bool:
    return any(f.name == name for f in dataclasses.fields(cls))


def expand(definition: dict) -> list[Entry]:
    """Every configuration of a normalised definition, validated (errors name the configuration)."""

    entries: list[Entry] = []
    seen: dict = {}
    for objective in definition["objectives"]:
        for name in definition["algorithms"]:
            extra = definition["per_algorithm"].get(name, {"params": {}, "grid": {}})
            fixed = dict(definition["params"], **extra["params"])
            sweep = dict(definition["grid"], **extra["grid"])
            for key in sweep:
                fixed.pop(key, None)
            shortest = min(definition["horizon"])
            if "checkpoints" not in fixed and "checkpoints" not in sweep and shortest < DEFAULT_CHECKPOINTS:
                # C <= T and one C for the whole sweep: horizons below the default get one per round
                fixed["checkpoints"] = shortest
            cls = registry.config_type(name)
            federated = _has_field(cls, "num_clients")
            for M in (definition["clients"] if federated else [1]):
                for T in definition["horizon"]:
                    for point in grid_points(**{k: sweep[k] for k in sorted(sweep)}):
                        entries.append(_entry(len(entries), name, objective, M, T, fixed, point, federated))
                        if entries[-1].id in seen:
                            raise SweepError(f"sweep: configurations {seen[entries[-1].id]} and {len(entries) - 1} are "
                                             f"the same ({entries[-1].labels})")
                        seen[entries[-1].id] = len(entries) - 1
    checkpoints = {e.config.checkpoints for e in entries}
    if len(checkpoints) > 1:
        raise SweepError(f"sweep: every configuration must have the same number of checkpoints, got "
                         f"{sorted(checkpoints)}")
    return entries


def _entry(index, name, objective, M, T, fixed, point, federated) -> Entry:
    options = dict(fixed, **point, horizon=T)
    if federated:
        options["num_clients"] = M
    labels = {"objective": objective["name"], "algorithm": name, "num_clients": M if federated else None,
              "horizon": T, **point}
    if "amplitude" in objective:
        labels["amplitude"] = objective["amplitude"]
    if objective["name"].startswith("bbob-"):
        # A BBOB sweep crosses functions with dimensions and instances: say which one a run had.
        labels.update(dim=objective["dim"], instance=objective.get("instance", 1))
    try:
        config = registry.make_config(name, **options)
    except (ValueError, TypeError) as err:
        raise SweepError(f"sweep configuration {index} ({_describe(labels)}): {err}") from None
    het = objective["heterogeneity"]
    if het is None:
        het = objectives.default_heterogeneity(objective["name"], config.noise_kind)
    spec = dict(objective, heterogeneity=het, num_clients=M)
    identity = {"algorithm": name, "objective": spec, "config": config.resolved()}
    return Entry(index=index, id=digest(identity)[:16], algorithm=name, objective=spec, options=options,
                 labels=labels, config=config)


def _describe(labels: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in labels.items() if v is not None)


def _fixed_or_swept(prefix: str, params: dict, grid: dict) -> None:
    """A key both fixed and swept in one table is refused: either silently winning would hide a
    mistake.  (A table of an algorithm may sweep what the top-level params fix: the more specific
    table wins for that algorithm.)"""
    both = sorted(set(params) & set(grid))
    if both:
        raise SweepError(f"sweep: {prefix}params and {prefix}grid both set {both[0]}; give it once (a fixed value "
                         f"in params, or the values to sweep in grid)")
