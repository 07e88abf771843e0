"""``fedpne sweep``: a sweep (objectives x algorithms x M x T x grid x seeds) run into a results folder;
a rerun resumes it.  The command line's lists and KEY=VALUE settings become a sweep definition, on
top of a file's when one is given, in :func:`from_options`.
"""
from __future__ import annotations

import os
import sys

import jax

from fedpne_jax.cli.common import (
    Defaults,
    check_output_folder,
    device_options,
    devices,
    memory_gb,
    plugin_option,
    whole_number,
)
from fedpne_jax.core import registry
from fedpne_jax.experiments import store
from fedpne_jax.experiments import sweep as sweep_lib
from fedpne_jax.experiments.load import load_sweep
from fedpne_jax.experiments.runner import run_sweep
from fedpne_jax.experiments.sweep import SweepError

NAME = "sweep"
INTERRUPTED = "interrupted; finished chunks are kept, rerun the same command to resume"


def add_parser(sub):
    p = sub.add_parser("sweep", help="run a sweep (objectives x algorithms x M x T x grid x seeds) into a folder",
                       formatter_class=Defaults,
                       description="Run a sweep described by a TOML/JSON file (see fedpne_jax.experiments.sweep) and/or the "
                                   "options below into a results folder; rerunning finishes an interrupted sweep.")
    p.add_argument("file", nargs="?", default=None, help="sweep definition (.toml or .json)")
    p.add_argument("--out", required=True, help="results folder (created; a rerun resumes it)")
    p.add_argument("--memory-gb", type=memory_gb, default=2.0,
                   help="memory budget per device for one call's XLA buffers; sizes the chunks")
    p.add_argument("--chunk-runs", type=whole_number, default=None, help="runs per call instead of sizing from --memory-gb")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--overwrite", action="store_true",
                   help="discard results of a different definition in --out instead of refusing (this definition's are resumed)")
    p.add_argument("--repair", action="store_true",
                   help="rebuild index.json from the chunk files that verify (keeps chunks written but never "
                        "indexed); a missing or damaged index is rebuilt anyway")
    p.add_argument("--objectives", default=None, help="comma-separated, e.g. garland,doublesine")
    p.add_argument("--algorithms", default=None, help="comma-separated, e.g. fedpne")
    p.add_argument("--clients", default=None, help="comma-separated M values")
    p.add_argument("--horizon", default=None, help="comma-separated T values")
    p.add_argument("--seeds", type=whole_number, default=None, help="number of seeds")
    p.add_argument("--seed", type=whole_number, default=None, help="base seed")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="a fixed parameter (repeatable)")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="a swept parameter (repeatable; the product is swept)")
    p.add_argument("--share-programs", action="store_true",
                   help="the sweep's BBOB functions share one compiled program per algorithm and dimension (the "
                        "file's share_programs = true; values within 2 float32 ulps of separate programs)")
    plugin_option(p)
    device_options(p)
    return p


def command(args) -> int:
    check_output_folder("--out", args.out)
    if args.file is None and args.objectives is None:
        raise ValueError("sweep: give a sweep file (TOML or JSON) or at least --objectives; nothing would be "
                         "swept but the defaults (garland, fedpne, 100 seeds)")
    if args.file is not None and not args.file.strip():     # an unset variable in `fedpne sweep "$F"`
        raise ValueError("sweep: the sweep file's path is empty")
    base = sweep_lib.read(args.file) if args.file is not None else None
    raw = from_options(objectives=args.objectives, algorithms=args.algorithms, clients=args.clients,
                                 horizon=args.horizon, seeds=args.seeds, base_seed=args.seed, params=args.param,
                                 grid=args.grid, base=base, plugins=args.plugin,
                                 share_programs=args.share_programs or None)
    try:
        report = run_sweep(raw, args.out, memory_gb=args.memory_gb, devices=devices(args.devices),
                           progress=not args.no_progress, chunk_runs=args.chunk_runs, overwrite=args.overwrite,
                           repair=args.repair)
    except SweepError as err:
        missing = [p for p in recorded_plugins(args.out) if p not in raw.get("plugins", [])]
        if not missing:
            raise
        # Resuming without the --plugin the sweep was made with: its algorithms and objectives are
        # unknown, and the list of built-in ones would not say why.
        raise SweepError(f"{err}; the sweep in {args.out} was made with "
                         f"{' '.join('--plugin ' + p for p in missing)}: give the same to resume it") from None
    if jax.process_index() == 0:
        for warning in report.warnings:
            print(f"fedpne: warning: {warning}", file=sys.stderr)
        print(report.summary())
        if report.configs <= 50:
            print(load_sweep(args.out).table())
        else:
            print(f"read the results with fedpne_jax.load_sweep({args.out!r})")
    return 0


def recorded_plugins(folder: str) -> list[str]:
    """The plugins recorded in the definition of the sweep in ``folder`` (none if it holds no
    readable one: the sweep itself then says what is wrong with the folder)."""
    try:
        plugins = store.read_json(os.path.join(folder, store.SWEEP_FILE))["definition"].get("plugins", [])
    except (OSError, SweepError, KeyError, TypeError, AttributeError):
        return []
    return [p for p in plugins if isinstance(p, str)] if isinstance(plugins, list) else []


def from_options(objectives=None, algorithms=None, clients=None, horizon=None, seeds=None, base_seed=None,
                 params=(), grid=(), base: dict | None = None, plugins=(), share_programs=None) -> dict:
    """A definition dict from command-line lists (``params``: "key=value" strings, ``grid``:
    "key=v1,v2,..." strings, ``plugins``: modules added to the definition's, so that a resumed sweep
    imports them again, ``share_programs``: the key of that name, when not None), on top of ``base``
    (a file's definition) when given."""
    raw = dict(base or {})
    if share_programs is not None:
        raw["share_programs"] = share_programs
    if plugins:
        earlier = raw.get("plugins", [])
        raw["plugins"] = list(dict.fromkeys((earlier if isinstance(earlier, list) else [earlier]) + list(plugins)))
    for key, value in [("objectives", objectives), ("algorithms", algorithms), ("clients", clients),
                       ("horizon", horizon)]:
        if value is not None:
            raw[key] = [registry.parse_value(v) for v in value.split(",")] if isinstance(value, str) else list(value)
    if seeds is not None:
        raw["seeds"] = seeds
    if base_seed is not None:
        raw["base_seed"] = base_seed
    # A key given twice, or both fixed and swept, is refused rather than letting the last one win.
    given: dict = {}
    for option, items in (("--param", params), ("--grid", grid)):
        for item in items:
            key, value = _key_value(item, option)
            if key in given:
                raise SweepError(f"{given[key]} and {option} {item} both set {key}; give it once (a fixed value "
                                 f"with --param, or the values to sweep with --grid)")
            given[key] = f"{option} {item}"
            # An option overrides the file's key, fixed or swept at the top level; a file's algorithm
            # table would override the option for its algorithm, so that is refused.
            for name, table in raw.items():
                if isinstance(table, dict) and {"params", "grid"} & set(table) and name not in ("params", "grid") \
                        and any(key in (table.get(part) or {}) for part in ("params", "grid")):
                    raise SweepError(f"{option} {item} and the file's table {name!r} both set {key}; set it in one "
                                     f"place")
            params, grid_ = dict(raw.get("params") or {}), dict(raw.get("grid") or {})
            if option == "--param":
                params[key] = registry.parse_value(value)
                grid_.pop(key, None)
            else:
                grid_[key] = [registry.parse_value(v) for v in value.split(",")]
                params.pop(key, None)
            raw["params"], raw["grid"] = params, grid_
    return raw


def _key_value(item: str, option: str):
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise SweepError(f"{option} takes KEY=VALUE, got {item!r}")
    return key.strip(), value
