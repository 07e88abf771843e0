"""``fedpne run``: one algorithm on one objective for a batch of seeds, its summary printed and its
result optionally written as JSON.  The run computes in a worker thread so that Ctrl-C is answered at
once (:func:`run_interruptibly`), and a finished result that cannot be written where asked is kept
in a fallback file (:func:`keep_result`).
"""
from __future__ import annotations

import dataclasses
import os
import signal
import sys
import tempfile
import threading
import time
from typing import Any

import jax

import objectives
from fedpne_jax.cli.common import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    Defaults,
    check_output_file,
    deferred_interrupts,
    describe_os_error,
    describe_params,
    device_options,
    devices,
    memory_gb,
    plugin_option,
    whole_number,
)
from fedpne_jax.core import registry
from fedpne_jax.core.config import NOISE_KINDS, parse_noise
from fedpne_jax.core.run import run
from fedpne_jax.core.validation import is_seed, is_seed_count

NAME = "run"
INTERRUPTED = "interrupted; no result was written"

# Options that map one-to-one onto config fields of the same name; None means "not given", so the
# algorithm's own default applies (horizon, noise and checkpoints: the command line's, below), an
# option an algorithm does not have can be refused, and one also given with --set is noticed.
CONFIG_OPTIONS = ("nu", "rho", "c", "c1", "delta", "k", "split", "pull", "sampling", "dp_epsilon", "dp_delta",
                  "capacity", "horizon", "noise", "checkpoints")
DEFAULT_NOISE = "gaussian:0.1"
DEFAULT_CHECKPOINTS = 100
REPEAT_SECONDS = 1.0      # a second SIGINT sooner than this after the first repeats it (see run_interruptibly)
FALLBACK = "fedpne-result-{stamp}.json"     # where a finished run goes when --output cannot be written


def add_parser(sub):
    p = sub.add_parser("run", help="run an algorithm (Fed-PNE by default) for a batch of seeds",
                       formatter_class=Defaults,
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
    p.add_argument("--dim", type=whole_number, default=None, help="dimension (ackley, rastrigin, bbob-*)")
    p.add_argument("--instance", type=whole_number, default=None, help="COCO's instance number of a bbob-* objective (1)")
    p.add_argument("--clients", type=whole_number, default=None, help="M (default: the objective's, 10 for synthetic ones)")
    p.add_argument("--horizon", type=whole_number, default=None, help="T, rounds per client (default: the objective's, "
                   "10000 for synthetic ones)")
    p.add_argument("--seeds", type=whole_number, default=None, help="number of runs (seed indices 0..S-1; default: the "
                   "objective's, 100 for synthetic ones)")
    p.add_argument("--seed", type=whole_number, default=0, help="base seed: seed i uses fold_in(key(seed), i)")
    p.add_argument("--nu", type=float, default=None,
                   help="smoothness constant nu (the node's width bound nu rho^h); Fed-PNE: 1")
    p.add_argument("--rho", type=float, default=None, help="Fed-PNE: 0.5")
    p.add_argument("--c", type=float, default=None, help="Fed-PNE: 0.1 (x sqrt(1 + 4 sigma_dp^2) under DP)")
    p.add_argument("--c1", type=float, default=None, help="Fed-PNE: 1")
    p.add_argument("--delta", type=float, default=None, help="Fed-PNE: 1/M")
    p.add_argument("--k", type=whole_number, default=None, help="Fed-PNE: 2")
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
    p.add_argument("--objective-seed", type=whole_number, default=0, help="key of the client heterogeneity")
    p.add_argument("--amplitude", type=float, default=None, help="strength of the 'fourier' heterogeneity")
    p.add_argument("--dp-epsilon", type=float, default=None, help="DP-Fed-PNE's privacy budget epsilon (off)")
    p.add_argument("--dp-delta", type=float, default=None, help="DP-Fed-PNE's delta (with --dp-epsilon)")
    p.add_argument("--help-params", action="store_true",
                   help="list the parameters of --algorithm (what --set takes) with their defaults, and exit")
    p.add_argument("--checkpoints", type=whole_number, default=None,
                   help=f"regret checkpoints, evenly spaced, the last at T (default: {DEFAULT_CHECKPOINTS})")
    p.add_argument("--capacity", type=whole_number, default=None, help="initial node-table capacity (default: from config)")
    p.add_argument("--no-grow", action="store_true", help="fail instead of growing a full node table")
    p.add_argument("--memory-gb", type=memory_gb, default=None,
                   help="memory budget per device for one call's XLA buffers (default 2); more seeds run in "
                        "several calls, with the same numbers")
    p.add_argument("--output", default=None, help="write the result as JSON to this file (- for standard output)")
    plugin_option(p)
    device_options(p)
    return p


def command(args) -> int:
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
        lambda stop, progress: run(config, objective, seeds=seeds, base_seed=args.seed, devices=devices(args.devices),
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
                # A Ctrl-C that ended a wait for a FIFO's reader: the result is kept, and the exit says why.
                code = keep_result(result, args.output, err)
                return EXIT_INTERRUPTED if deferred.count else code
            if args.output != "-":
                print(f"  wrote {args.output}")
    if deferred.count:
        print(f"fedpne: interrupted after the result was {'written' if args.output else 'printed'}",
              file=sys.stderr)
        return EXIT_INTERRUPTED
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


def run_interruptibly(compute) -> tuple[bool, Any]:
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
            print(f"fedpne: {INTERRUPTED}; exiting now", file=sys.stderr, flush=True)
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
