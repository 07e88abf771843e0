"""Command line: ``fedpne run``, ``sweep``, ``reproduce``, ``plot``, ``report`` and ``export`` (also
``python -m fedpne_jax ...``)."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import sys
import tempfile
import threading
import time
import warnings

import jax

import objectives
from fedpne_jax.core import compile_cache, host_devices, registry, sharding
from fedpne_jax.core.config import NOISE_KINDS, parse_noise
from fedpne_jax.core.errors import CapacityError, MissingExtra, ObjectiveError
from fedpne_jax.core.files import WriteError
from fedpne_jax.core.run import run
from fedpne_jax.core.validation import is_seed, is_seed_count
from fedpne_jax.experiments import sweep as sweep_lib
from fedpne_jax.experiments import workers
from fedpne_jax.experiments.export import FORMATS, export
from fedpne_jax.experiments.load import load_sweep
from fedpne_jax.experiments.report import report
from fedpne_jax.experiments.runner import run_sweep
from fedpne_jax.flower import cli as flower_cli  # imports no Flower module until a run needs it
from fedpne_jax.paper import figures
from fedpne_jax.paper.plot import plot_results
from fedpne_jax.paper.reproduce import reproduce

# Options that map one-to-one onto config fields of the same name; None means "not given", so the
# algorithm's own default applies (horizon, noise and checkpoints: the command line's, below), an
# option an algorithm does not have can be refused, and one also given with --set is noticed.
CONFIG_OPTIONS = ("nu", "rho", "c", "c1", "delta", "k", "split", "pull", "sampling", "dp_epsilon", "dp_delta",
                  "capacity", "horizon", "noise", "checkpoints")
DEFAULT_NOISE = "gaussian:0.1"
DEFAULT_CHECKPOINTS = 100

# Exit statuses: 0 done; 2 refused input, or an output that could not be written (a message on
# stderr says which and where); 130 interrupted by Ctrl-C (128 + SIGINT, as shells report it).
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130
REPEAT_SECONDS = 1.0      # a second SIGINT sooner than this after the first repeats it (see run_interruptibly)
INTERRUPTED = {
    "run": "interrupted; no result was written",
    "sweep": "interrupted; finished chunks are kept, rerun the same command to resume",
    "reproduce": "interrupted; finished chunks are kept, rerun the same command to resume",
    "plot": "interrupted",
    "report": "interrupted; files already written are complete",
    "export": "interrupted; nothing was written",
    "flower": "interrupted; every process it started is stopped, the state of the last step is kept",
}
FALLBACK = "fedpne-result-{stamp}.json"     # where a finished run goes when --output cannot be written


class _Defaults(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows an option's default unless it is None ("not given"), whose meaning its help states; the
    description and examples keep their line breaks."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def _run_parser(sub):
    p = sub.add_parser("run", help="run an algorithm (Fed-PNE by default) for a batch of seeds",
                       formatter_class=_Defaults,
                       description="Run one algorithm on one objective for a batch of seeds in one compiled call,\n"
                                   "print the final regret (mean and std over seeds) and timings, and optionally\n"
                                   "write the per-seed results as JSON.",
                       epilog="examples:\n  fedpne run                                   # Fed-PNE on Garland, "
                              "M = 10, T = 10^4, 100 seeds\n  fedpne run --algorithm hct --objective bbob-f7 --dim 5 "
                              "--seeds 50 --output hct.json\n  fedpne run --algorithm gpucb --help-params    "
                              "# the parameters --set can change")
    p.add_argument("--algorithm", default="fedpne",
                   help=f"a registered algorithm: {', '.join(registry.NAMES)} (and those --plugin registers)")
    p.add_argument("--objective", default="garland", help="a registered objective, e.g. garland, doublesine, "
                   "himmelblau, ackley, rastrigin, landmine, landmine-sklearn, covid, digits, bbob-f1 ... bbob-f24 "
                   "(and those --plugin registers)")
    p.add_argument("--dim", type=int, default=None, help="dimension (ackley, rastrigin, bbob-*)")
    p.add_argument("--instance", type=int, default=None, help="COCO's instance number of a bbob-* objective (1)")
    p.add_argument("--clients", type=int, default=None, help="M (default: the objective's, 10 for synthetic ones)")
    p.add_argument("--horizon", type=int, default=None, help="T, rounds per client (default: the objective's, "
                   "10000 for synthetic ones)")
    p.add_argument("--seeds", type=int, default=None, help="number of runs (seed indices 0..S-1; default: the "
                   "objective's, 100 for synthetic ones)")
    p.add_argument("--seed", type=int, default=0, help="base seed: seed i uses fold_in(key(seed), i)")
    p.add_argument("--nu", type=float, default=None,
                   help="smoothness constant nu (the node's width bound nu rho^h); Fed-PNE: 1")
    p.add_argument("--rho", type=float, default=None, help="Fed-PNE: 0.5")
    p.add_argument("--c", type=float, default=None, help="Fed-PNE: 0.1 (x sqrt(1 + 4 sigma_dp^2) under DP)")
    p.add_argument("--c1", type=float, default=None, help="Fed-PNE: 1")
    p.add_argument("--delta", type=float, default=None, help="Fed-PNE: 1/M")
    p.add_argument("--k", type=int, default=None, help="Fed-PNE: 2")
    p.add_argument("--split", default=None, help="Fed-PNE: random (or longest)")
    p.add_argument("--noise", default=None, help=f"one of {NOISE_KINDS}, e.g. gaussian:0.1, uniform:0.1 "
                   f"(default: {DEFAULT_NOISE})")
    p.add_argument("--pull", default=None, help="Fed-PNE: centre (or uniform)")
    p.add_argument("--sampling", default=None, help="Fed-PNE: auto (or aggregate, client, explicit)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="any other parameter of the algorithm's config (repeatable), e.g. --set kappa=10")
    p.add_argument("--heterogeneity", default=None,
                   help="synthetic and BBOB objectives: none, shift or fourier (BBOB also instances); real ones: "
                        "intrinsic or none (default: the objective's; none with bernoulli noise on synthetic ones)")
    p.add_argument("--objective-seed", type=int, default=0, help="key of the client heterogeneity")
    p.add_argument("--amplitude", type=float, default=None, help="strength of the 'fourier' heterogeneity")
    p.add_argument("--dp-epsilon", type=float, default=None, help="DP-Fed-PNE's privacy budget epsilon (off)")
    p.add_argument("--dp-delta", type=float, default=None, help="DP-Fed-PNE's delta (with --dp-epsilon)")
    p.add_argument("--help-params", action="store_true",
                   help="list the parameters of --algorithm (what --set takes) with their defaults, and exit")
    p.add_argument("--checkpoints", type=int, default=None,
                   help=f"regret checkpoints, evenly spaced, the last at T (default: {DEFAULT_CHECKPOINTS})")
    p.add_argument("--capacity", type=int, default=None, help="initial node-table capacity (default: from config)")
    p.add_argument("--no-grow", action="store_true", help="fail instead of growing a full node table")
    p.add_argument("--memory-gb", type=float, default=None,
                   help="memory budget per device for one call's XLA buffers (default 2); more seeds run in "
                        "several calls, with the same numbers")
    p.add_argument("--output", default=None, help="write the result as JSON to this file (- for standard output)")
    _plugin_option(p)
    _device_options(p)
    return p


def _plugin_option(p):
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                   help="import MODULE (a dotted name or a .py file) first, which registers algorithms or "
                        "objectives (repeatable)")


def _device_options(p):
    p.add_argument("--devices", default="all",
                   help="shard the runs over all visible devices or the first N (results do not depend on it)")
    g = p.add_argument_group("multi-host (jax.distributed.initialize; run the same command in every process)")
    g.add_argument("--distributed", action="store_true",
                   help="call jax.distributed.initialize() first (arguments below, or detected from SLURM/MPI)")
    g.add_argument("--coordinator", default=None, help="HOST:PORT of process 0")
    g.add_argument("--num-processes", type=int, default=None, help="how many processes take part")
    g.add_argument("--process-id", type=int, default=None, help="this process's index, 0 .. num-processes - 1")


def _sweep_parser(sub):
    p = sub.add_parser("sweep", help="run a sweep (objectives x algorithms x M x T x grid x seeds) into a folder",
                       formatter_class=_Defaults,
                       description="Run a sweep described by a TOML/JSON file (see fedpne_jax.experiments.sweep) and/or the "
                                   "options below into a results folder; rerunning finishes an interrupted sweep.")
    p.add_argument("file", nargs="?", default=None, help="sweep definition (.toml or .json)")
    p.add_argument("--out", required=True, help="results folder (created; a rerun resumes it)")
    p.add_argument("--memory-gb", type=float, default=2.0,
                   help="memory budget per device for one call's XLA buffers; sizes the chunks")
    p.add_argument("--chunk-runs", type=int, default=None, help="runs per call instead of sizing from --memory-gb")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--overwrite", action="store_true",
                   help="discard results of a different definition in --out instead of refusing")
    p.add_argument("--repair", action="store_true",
                   help="rebuild index.json from the chunk files that verify (keeps chunks written but never "
                        "indexed); a missing or damaged index is rebuilt anyway")
    p.add_argument("--objectives", default=None, help="comma-separated, e.g. garland,doublesine")
    p.add_argument("--algorithms", default=None, help="comma-separated, e.g. fedpne")
    p.add_argument("--clients", default=None, help="comma-separated M values")
    p.add_argument("--horizon", default=None, help="comma-separated T values")
    p.add_argument("--seeds", type=int, default=None, help="number of seeds")
    p.add_argument("--seed", type=int, default=None, help="base seed")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="a fixed parameter (repeatable)")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="a swept parameter (repeatable; the product is swept)")
    p.add_argument("--share-programs", action="store_true",
                   help="the sweep's BBOB functions share one compiled program per algorithm and dimension (the "
                        "file's share_programs = true; values within 2 float32 ulps of separate programs)")
    _plugin_option(p)
    _device_options(p)
    return p


def _reproduce_parser(sub):
    lines = [f"  {name:14s} {f.paper or 'new'}: {' '.join(f.title.split())}" for name, f in figures.FIGURES.items()]
    p = sub.add_parser("reproduce", help="run the sweeps of a figure of the paper (or a new study) and plot it",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Run the sweeps a figure needs (resumable: a rerun finishes them), then write "
                                   "OUT/figures/FIGURE.{png,json,csv} and OUT/SUMMARY.md.\n\nfigures:\n"
                                   + "\n".join(lines))
    galleries = [name for name in figures.NAMES if name not in figures.ALL]
    p.add_argument("figures", nargs="+", metavar="FIGURE",
                   help=f"figure names, or all (every figure but {', '.join(galleries)}, which run by name)")
    p.add_argument("--quick", action="store_true", help="small T and few seeds: every figure in minutes")
    p.add_argument("--seeds", type=int, default=None, help="seeds of every study (default: the study's, "
                   "100 where runs are cheap)")
    p.add_argument("--out", default="results", help="results folder (sweeps/, figures/, SUMMARY.md)")
    p.add_argument("--memory-gb", type=float, default=None, help="memory budget per device for one call")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plot", action="store_true", help="write the data and summary only")
    p.add_argument("--overwrite", action="store_true",
                   help="rerun a study whose sweep folder holds another definition instead of refusing")
    p.add_argument("--devices", default="all", help="shard the runs over all visible devices or the first N")
    p.add_argument("--jobs", default=workers.AUTO, metavar="N",
                   help=f"studies computed at once, each in a process of its own, longest first (default {workers.AUTO}: "
                        f"one per core up to {workers.MAX_AUTO} on a CPU, 1 on accelerators; the numbers are the same "
                        f"for any N)")
    _plugin_option(p)
    return p


def _plot_parser(sub):
    p = sub.add_parser("plot", help="regret curves of run results (--output JSON) and sweep folders, one axes",
                       formatter_class=_Defaults)
    p.add_argument("results", nargs="+", metavar="RESULTS", help="'fedpne run --output' files or sweep folders")
    p.add_argument("--out", default="regret.png",
                   help="file to write: PNG, or the format its extension names (.pdf, .svg)")
    p.add_argument("--title", default=None, help="the figure's title (none by default)")
    p.add_argument("--band", default="std", choices=("std", "stderr"), help="shaded band: ±1 std or ±1 s.e.")
    p.add_argument("--logx", action="store_true", help="log x-axis")
    p.add_argument("--logy", action="store_true", help="log y-axis")
    return p


def _report_parser(sub):
    p = sub.add_parser("report", help="benchmark report of run results and sweep folders: fixed-budget and "
                                      "fixed-target tables (ERT), runtime ECDFs, ranks, win rates, REPORT.md",
                       formatter_class=_Defaults)
    p.add_argument("results", nargs="+", metavar="RESULTS", help="'fedpne run --output' files or sweep folders")
    p.add_argument("--out", default="report", help="folder to write (created if missing)")
    p.add_argument("--budgets", type=_int_list, default=None,
                   help="rounds of the fixed-budget table, e.g. 100,1000 (default: the checkpoints about 10 %%, "
                        "50 %% and 100 %% of the way through the shortest run)")
    p.add_argument("--no-plots", action="store_true", help="tables and REPORT.md only (no matplotlib needed)")
    return p


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected rounds separated by commas, e.g. 100,1000, got {text!r}") from None
    return values


def _export_parser(sub):
    p = sub.add_parser("export", help="run results and sweep folders as one tidy CSV (a row per configuration, "
                                      "seed and checkpoint) or as IOHprofiler data for IOHanalyzer",
                       formatter_class=_Defaults)
    p.add_argument("results", nargs="+", metavar="RESULTS", help="'fedpne run --output' files or sweep folders")
    p.add_argument("--format", default="csv", choices=FORMATS,
                   help="csv: one file; ioh: a folder of IOHprofiler data (the ioh extra)")
    p.add_argument("--out", default=None, help="csv: the file to write ('-': standard output; default runs.csv); "
                                               "ioh: a new or empty folder (default ioh-data)")
    return p


def cmd_export(args) -> int:
    out = args.out if args.out is not None else ("ioh-data" if args.format == "ioh" else "runs.csv")
    if args.format == "ioh":
        check_output_folder("--out", out)
        runs = export(args.results, out, fmt="ioh")
        print(f"wrote {runs:,} runs of IOHprofiler data to {out}")
        return 0
    check_output_file("--out", out)
    rows = export(args.results, out, fmt=args.format)
    if out != "-":
        print(f"wrote {rows:,} rows to {out}")
    return 0


def cmd_report(args) -> int:
    check_output_folder("--out", args.out)
    written = report(args.results, args.out, budgets=args.budgets, plots=not args.no_plots)
    print(f"wrote {len(written)} files to {args.out}; start with {written['REPORT.md']}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fedpne", description="Federated X-armed bandits in JAX",
                                     epilog=f"exit status: 0 done; {EXIT_ERROR} invalid input, or an output that "
                                            f"could not be written (a message says which); {EXIT_INTERRUPTED} "
                                            f"interrupted (Ctrl-C).  Compiled programs are kept in "
                                            f"{compile_cache.default_root()} for the next run; "
                                            f"{compile_cache.ENV}=DIR or =off to change that.  On a CPU every "
                                            f"core is a device and runs share them; {host_devices.ENV}=N or "
                                            f"=off to change that")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    _sweep_parser(sub)
    _reproduce_parser(sub)
    _plot_parser(sub)
    _report_parser(sub)
    _export_parser(sub)
    flower_cli.add_parser(sub, _run_parser, _Defaults)
    return parser


def cmd_flower(args) -> int:
    return flower_cli.command(args, check_output_file, describe_params)


def cmd_reproduce(args) -> int:
    check_output_folder("--out", args.out)
    reproduce(args.figures, out=args.out, quick=args.quick, seeds=args.seeds, progress=not args.no_progress,
              memory_gb=args.memory_gb, devices=_devices(args.devices), plot=not args.no_plot, overwrite=args.overwrite,
              jobs=args.jobs)
    return 0


def check_output_file(option: str, path: str) -> None:
    """An output file's path is checked before anything runs: a run must not finish only to fail
    writing its output.  (A write can still fail later, e.g. on a full disk; see keep_result.)"""
    if not path:
        raise ValueError(f"{option}: the path is empty")
    if path == "-":                                   # standard output
        return
    if os.path.isdir(path):
        raise ValueError(f"{option}: {path!r} is a folder; give a file name")
    target = os.path.realpath(path)                   # a symlink's target is what gets written
    if os.path.exists(target) and not os.path.isfile(target):
        # A device or FIFO is written in place: only its own permission matters.
        if not os.access(target, os.W_OK):
            raise ValueError(f"{option}: {path!r} is not writable")
        return
    folder = os.path.dirname(target)
    if not os.path.exists(folder):
        raise ValueError(f"{option}: the folder of {path!r} does not exist")
    if not os.path.isdir(folder):
        raise ValueError(f"{option}: the folder of {path!r} is a file")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{option}: the folder of {path!r} is not writable")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise ValueError(f"{option}: {path!r} is read-only")


def check_output_folder(option: str, path: str) -> None:
    """An output folder (created if missing) is checked before anything runs, like an output file."""
    if not path:
        raise ValueError(f"{option}: the path is empty")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{option}: {path!r} is a file, not a folder")
    existing = os.path.abspath(path)
    while not os.path.exists(existing):          # the folders that will be created need a writable parent
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ValueError(f"{option}: {path!r} cannot be created: {existing!r} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{option}: {path!r} is not writable" if existing == os.path.abspath(path)
                         else f"{option}: {path!r} cannot be created: {existing!r} is not writable")


def cmd_plot(args) -> int:
    check_output_file("--out", args.out)
    path = plot_results(args.results, args.out, title=args.title, band=args.band,
                        xscale="log" if args.logx else "linear", yscale="log" if args.logy else "linear")
    print(f"wrote {path}")
    return 0


def run_options(args) -> dict:
    """{config field: value} of the options and --set settings the user gave (no defaults).  A
    parameter given both as an option and with --set is refused: neither may silently win."""
    given = {name: getattr(args, name) for name in CONFIG_OPTIONS if getattr(args, name) is not None}
    flags = {name: (f"--{name.replace('_', '-')}", value) for name, value in given.items()}
    if args.clients is not None:
        flags["num_clients"] = ("--clients", args.clients)
    settings = registry.parse_settings(args.set)
    for field, (item, _) in settings.items():
        if field in flags:
            flag, value = flags[field]
            raise ValueError(f"{flag} {value} and --set {item} both set {field}; give it once")
    given.update({field: value for field, (_, value) in settings.items()})
    return given


def run_config(args, options: dict, num_clients: int):
    """The algorithm's config from the options the user gave (:func:`run_options`); the rest keep
    the algorithm's defaults, except those the command line defines (horizon, noise, checkpoints)."""
    options = dict(options)
    options.setdefault("noise", DEFAULT_NOISE)
    # C <= T: a short run gets one checkpoint per round rather than a refusal of the default
    options.setdefault("checkpoints", min(DEFAULT_CHECKPOINTS, options["horizon"]))
    fields = {f.name for f in dataclasses.fields(registry.config_type(args.algorithm))}
    if "num_clients" in fields:
        options["num_clients"] = num_clients
    return registry.make_config(args.algorithm, **options)


def cmd_run(args) -> int:
    if args.output is not None:
        check_output_file("--output", args.output)
    algorithm = registry.get(args.algorithm)
    if args.help_params:
        print(describe_params(algorithm))
        return 0
    if not is_seed(args.objective_seed):
        raise ValueError(f"--objective-seed must be an integer in [0, 2^31 - 1], got {args.objective_seed}")
    if args.no_grow and not algorithm.grows:
        raise ValueError(f"--no-grow: algorithm {args.algorithm!r} has no table that grows (its tables have a "
                         f"fixed size)")
    if args.seeds is not None and not is_seed_count(args.seeds):
        raise ValueError(f"--seeds must be an integer in [1, 2^31] (seed indices are int32), got {args.seeds}")
    options = run_options(args)
    heterogeneity = args.heterogeneity or objectives.default_heterogeneity(
        args.objective, parse_noise(options.get("noise", DEFAULT_NOISE))[0])
    clients, horizon = objectives.default_size(args.objective)
    # --set num_clients=M sizes the objective as --clients M would (and an algorithm without the
    # field refuses it in make_config).
    clients = args.clients if args.clients is not None else options.get("num_clients", clients)
    options.setdefault("horizon", horizon)
    config = run_config(args, options, clients)
    objective = objectives.make_objective(args.objective, num_clients=clients,
                                          heterogeneity=heterogeneity, seed=args.objective_seed, dim=args.dim,
                                          instance=args.instance,
                                          **({} if args.amplitude is None else {"amplitude": args.amplitude}))
    seeds = args.seeds if args.seeds is not None else objectives.default_seeds(args.objective)
    interrupted, result = run_interruptibly(
        lambda stop, progress: run(config, objective, seeds=seeds, base_seed=args.seed, devices=_devices(args.devices),
                                   grow=not args.no_grow, memory_gb=args.memory_gb, stop=stop, progress=progress))
    if jax.process_index() != 0:      # multi-host: every process holds the whole result; one reports it
        return 0
    # From here on the result exists: a Ctrl-C waits until it is written (a KeyboardInterrupt while the
    # summary prints or the JSON is written would lose it).
    with deferred_interrupts() as deferred:
        if interrupted:
            return keep_interrupted(result, args.output)
        # With --output - the JSON goes to standard output alone, so the summary goes to stderr.
        report = sys.stderr if args.output == "-" else sys.stdout
        print(result.summary(), file=report)
        if args.output is not None:
            try:
                result.write_json(args.output)
            except OSError as err:
                return keep_result(result, args.output, err)
            if args.output != "-":
                print(f"  wrote {args.output}")
    if deferred.count:
        print(f"fedpne: interrupted after the result was {'written' if args.output else 'printed'}",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0


class _Deferred:
    count = 0


@contextlib.contextmanager
def deferred_interrupts():
    """SIGINT counted, not raised, inside the block (the result being written); the caller reads
    ``count`` after it.  Outside the main thread no handler can be set and nothing changes."""
    deferred = _Deferred()

    def on_interrupt(signum, frame):
        deferred.count += 1
        print("fedpne: interrupted; the result is being written first", file=sys.stderr, flush=True)

    try:
        previous = signal.signal(signal.SIGINT, on_interrupt)
    except ValueError:
        previous = None
    try:
        yield deferred
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def run_interruptibly(compute) -> tuple[bool, object]:
    """``compute(stop, progress)`` in a worker thread, so that Ctrl-C is answered at once: the first
    says that the run stops after the call in flight (a compiled call cannot be cut), and how long
    calls have taken; the second exits at once.  Returns (interrupted, what compute returned).

    SIGINT gets a handler of its own that raises nothing: a KeyboardInterrupt raised where Python
    cannot deliver it (inside a garbage-collector callback, say) is dropped, and the run would then
    never hear of the Ctrl-C."""
    box: dict = {}
    stopping, finished = threading.Event(), threading.Event()
    calls: list = []
    started = time.monotonic()

    def work():
        try:
            box["value"] = compute(stopping.is_set, lambda done, total, seconds: calls.append((done, total, seconds)))
        except BaseException as err:            # re-raised in the main thread, where the CLI reports it
            box["error"] = err
        finally:
            finished.set()

    first: list = []

    def on_interrupt(signum, frame):
        if stopping.is_set():
            # One keypress or `timeout -s INT` can arrive as two signals: a second within
            # REPEAT_SECONDS of the first is the same request, not a request to exit now.
            if time.monotonic() - first[0] < REPEAT_SECONDS:
                return
            print(f"fedpne: {INTERRUPTED['run']}; exiting now", file=sys.stderr, flush=True)
            os._exit(EXIT_INTERRUPTED)
            return
        stopping.set()
        first.append(time.monotonic())
        elapsed = time.monotonic() - started
        if calls:
            done, total, seconds = calls[-1]
            expect = (f"{done:,} of {total:,} runs are done; a call takes about {seconds:.1f} s "
                      f"(this one has run {elapsed - sum(c[2] for c in calls):.1f} s)")
        else:
            expect = f"this is the first call, compilation included; it has run {elapsed:.1f} s"
        print(f"fedpne: stopping after the call in flight ({expect}); press Ctrl-C again to exit now",
              file=sys.stderr, flush=True)

    try:
        previous = signal.signal(signal.SIGINT, on_interrupt)
    except ValueError:                          # not the main thread: no handler can be set here
        previous = None
    worker = threading.Thread(target=work, name="fedpne-run", daemon=True)
    worker.start()
    try:
        # An event, not Thread.join: short waits let the main thread run the handler promptly.
        while not finished.wait(0.1):
            pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if "error" in box:
        raise box["error"]
    return stopping.is_set(), box.get("value")


def keep_interrupted(result, output) -> int:
    """After a Ctrl-C the finished runs are written to --output (marked partial), else said lost."""
    done = f"{result.num_seeds:,} seed(s)" + (" (all of them)" if not result.partial else "")
    if output is None:
        print(f"fedpne: interrupted; the {done} that finished were not kept (no --output)", file=sys.stderr)
        return EXIT_INTERRUPTED
    try:
        result.write_json(output)
    except OSError as err:
        keep_result(result, output, err)
        return EXIT_INTERRUPTED
    print(f"fedpne: interrupted; the {done} that finished are in {output}"
          + (", marked partial" if result.partial else ""), file=sys.stderr)
    return EXIT_INTERRUPTED


def describe_params(algorithm) -> str:
    """The parameters of ``algorithm``'s config with their defaults: what ``--set KEY=VALUE`` takes."""
    lines = [f"parameters of {algorithm.name!r} (set with --set KEY=VALUE, or the options of the same name):"]
    for f in dataclasses.fields(algorithm.config_type):
        default = f.default if f.default is not dataclasses.MISSING else "(required)"
        lines.append(f"  {f.name:<16} {default!r}")
    doc = (algorithm.config_type.__doc__ or "").strip()
    return "\n".join(lines + ([f"\n{doc}"] if doc else []))


def keep_result(result, path: str, err: OSError) -> int:
    """The run finished but --output could not be written (checked before the run, so the disk
    filled up or the folder changed meanwhile): keep the numbers in a fallback file rather than
    lose minutes or hours of computing, in the working directory or else the temporary folder."""
    print(f"fedpne: error: --output: could not write {path!r}: {describe_os_error(err)}", file=sys.stderr)
    name = FALLBACK.format(stamp=time.strftime("%Y%m%d-%H%M%S"))
    folders = []
    for folder in (os.curdir, tempfile.gettempdir()):
        try:
            folder = os.path.abspath(folder)
        except OSError:                              # the working directory was removed
            continue
        if folder not in folders:
            folders.append(folder)
    for folder in folders:
        fallback = _unused(os.path.join(folder, name))
        try:
            result.write_json(fallback)
        except OSError as again:
            print(f"fedpne: error: could not write the result to {fallback!r} either: {describe_os_error(again)}",
                  file=sys.stderr)
            continue
        print(f"fedpne: the result is kept in {fallback}", file=sys.stderr)
        return EXIT_ERROR
    print("fedpne: error: the result could not be written anywhere; only the summary above remains",
          file=sys.stderr)
    return EXIT_ERROR


def _unused(path: str) -> str:
    """``path``, or ``stem-2.json``, ``stem-3.json``... if it exists: a fallback never replaces a file."""
    stem, ext = os.path.splitext(path)
    n = 1
    while os.path.exists(path):
        n += 1
        path = f"{stem}-{n}{ext}"
    return path


def describe_os_error(err: OSError, where: str | None = None) -> str:
    """An OSError as one line naming the path: its own file name, else ``where`` (a write to an open
    file, e.g. on a full disk, raises without one)."""
    if isinstance(err, WriteError) and isinstance(err.__cause__, OSError):
        # The atomic writer's error: report the system's reason, not its sentence around it.
        err, where = err.__cause__, where if err.__cause__.filename else None
    what = err.strerror or str(err) or type(err).__name__
    names = [n for n in (err.filename, err.filename2) if n is not None]
    if names:
        return f"{what}: {', '.join(map(repr, names))}"
    return f"{what} (writing {where!r})" if where else what


def _devices(spec: str):
    return sharding.select_devices(spec)


def cmd_sweep(args) -> int:
    check_output_folder("--out", args.out)
    if args.file is None and args.objectives is None:
        raise ValueError("sweep: give a sweep file (TOML or JSON) or at least --objectives; nothing would be "
                         "swept but the defaults (garland, fedpne, 100 seeds)")
    base = sweep_lib.read(args.file) if args.file else None
    raw = sweep_lib.from_options(objectives=args.objectives, algorithms=args.algorithms, clients=args.clients,
                                 horizon=args.horizon, seeds=args.seeds, base_seed=args.seed, params=args.param,
                                 grid=args.grid, base=base, plugins=args.plugin,
                                 share_programs=args.share_programs or None)
    report = run_sweep(raw, args.out, memory_gb=args.memory_gb, devices=_devices(args.devices),
                       progress=not args.no_progress, chunk_runs=args.chunk_runs, overwrite=args.overwrite,
                       repair=args.repair)
    if jax.process_index() == 0:
        for warning in report.warnings:
            print(f"fedpne: warning: {warning}", file=sys.stderr)
        print(report.summary())
        if report.configs <= 50:
            print(load_sweep(args.out).table())
        else:
            print(f"read the results with fedpne_jax.load_sweep({args.out!r})")
    return 0


def load_plugins(argv) -> None:
    """Import every --plugin module before the parser is built, so that its algorithms and objectives
    are named in the help and accepted like built-in ones."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--plugin", action="append", default=[])
    known, _ = pre.parse_known_args(argv)
    for module in known.plugin:
        registry.load_plugin(module)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as the command line's other messages are: one line on stderr, without the source
    line the Python default prints (a degenerate run, a memory budget too small for one run)."""
    print(f"fedpne: warning: {message}", file=sys.stderr)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        # Before a plugin's import can create JAX's backends, which fix the device count.
        host_devices.enable()
    except ValueError as err:
        print(f"fedpne: error: {err}", file=sys.stderr)
        return EXIT_ERROR
    try:
        load_plugins(argv)
    except registry.PluginError as err:
        print(f"fedpne: error: --plugin: {err}", file=sys.stderr)
        return EXIT_ERROR
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "distributed", False):
            sharding.initialize(args.coordinator, args.num_processes, args.process_id)
        else:
            stray = [f"--{name.replace('_', '-')}" for name in ("coordinator", "num_processes", "process_id")
                     if getattr(args, name, None) is not None]
            if stray:
                raise ValueError(f"{', '.join(stray)} without --distributed would be ignored; add --distributed "
                                 f"or leave {'them' if len(stray) > 1 else 'it'} out")
        commands = {"run": cmd_run, "sweep": cmd_sweep, "reproduce": cmd_reproduce, "plot": cmd_plot,
                    "report": cmd_report, "export": cmd_export, "flower": cmd_flower}
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            compile_cache.enable()
            return commands[args.command](args)
    except (ValueError, MissingExtra, CapacityError, ObjectiveError, workers.WorkerError) as err:
        print(f"fedpne: error: {err}", file=sys.stderr)
    except OSError as err:
        # A file that could not be read or written (a full disk during a sweep, a folder made
        # read-only meanwhile): the message names it, the folder's finished files stay valid.
        where = getattr(args, "out", None) or getattr(args, "output", None)
        print(f"fedpne: error: {describe_os_error(err, where)}", file=sys.stderr)
    except MemoryError as err:
        detail = f" ({err})" if str(err) else ""
        print(f"fedpne: error: out of host memory{detail}; use fewer seeds, clients or rounds", file=sys.stderr)
    except KeyboardInterrupt:
        print(f"fedpne: {INTERRUPTED[args.command]}", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
