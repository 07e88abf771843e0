"""``fedpne flower local``: ``fedpne run``'s options, one run with real Flower clients on this machine.

``fedpne flower local --clients 3 --seeds S OPTIONS`` and ``fedpne run --clients 3 --seeds S OPTIONS``
describe the same runs (seed indices 0..S-1 of base seed --seed; S = 1 by default here); the result JSON (--output) is ``fedpne run``'s with
a ``flower`` entry (wire statistics, lost clients).  See :mod:`fedpne_jax.flower.local` for the
processes and :mod:`fedpne_jax.flower.server` for the fault behaviour.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile

from fedpne_jax.core import registry
from fedpne_jax.flower import local, spec

# fedpne run's options that do not apply to a Flower deployment's run.
SKIPPED = {"help", "devices", "distributed", "coordinator", "num_processes", "process_id", "memory_gb",
           "no_grow", "plugin"}
OPTION_KEYS = {"nu": "nu", "rho": "rho", "c": "c", "c1": "c1", "delta": "delta", "k": "k", "split": "split",
               "noise": "noise", "pull": "pull", "sampling": "sampling", "dp_epsilon": "dp-epsilon",
               "dp_delta": "dp-delta", "checkpoints": "checkpoints", "capacity": "capacity"}


def add_parser(sub, run_parser, formatter) -> None:
    """The ``flower`` command with its ``local`` subcommand, whose options are ``run_parser``'s (the
    parser of ``fedpne run``) except those that do not apply, plus the deployment's own."""
    p = sub.add_parser("flower", help="Fed-PNE with real clients on Flower's deployment engine",
                       description="Run Fed-PNE (or any algorithm with ask/tell steps) with real Flower clients.")
    commands = p.add_subparsers(dest="flower_command", required=True)
    local = commands.add_parser(
        "local", help="a SuperLink and N SuperNodes on this machine, one run, every process stopped after",
        formatter_class=formatter,
        description="Start a Flower SuperLink and N SuperNodes (partition-id 0..N-1) on free localhost ports,\n"
                    "submit the run (as flwr run does), stream its log, write the result JSON (fedpne run's, with\n"
                    "the wire statistics), and stop every process started, also on an error or Ctrl-C.\n"
                    "The server saves its state after every step: the same command again resumes it.",
        epilog="examples:\n  fedpne flower local --clients 3 --horizon 1000 --noise none --output run.json\n"
               "  fedpne flower local --clients 4 --function flower_landmine.task:auc --lo=-4,-2 --hi 1,1 "
               "--horizon 200 --noise none")
    donor = argparse.ArgumentParser(add_help=False)
    run = run_parser(donor.add_subparsers())
    for action in run._actions:
        if action.dest not in SKIPPED:
            local._add_action(action)
    g = local.add_argument_group("Flower")
    g.add_argument("--tls", action="store_true", help="TLS on every connection, with certificates made for this run")
    g.add_argument("--auth", action="store_true",
                   help="SuperNode authentication (with TLS): only SuperNodes whose key, made for this run, is "
                        "registered with the SuperLink may join")
    g.add_argument("--simulation", action="store_true",
                   help="Flower's simulation engine (Ray, pip install 'flwr[simulation]') instead of SuperNode "
                        "processes: the ClientApps run as Ray actors in the SuperLink's simulation process")
    g.add_argument("--function", default=None, metavar="MODULE:FUNCTION",
                   help="the clients' own objective, function(partition_id, points) -> values, instead of "
                        "--objective (MODULE importable from here)")
    g.add_argument("--lo", default=None, help="with --function: the box's lower corner, e.g. -4,-2")
    g.add_argument("--hi", default=None, help="with --function: the box's upper corner, e.g. 1,1")
    g.add_argument("--f-star", type=float, default=None, help="with --function: the optimum's value, when known")
    g.add_argument("--state", default=None,
                   help="state file, saved after every step (default: the user's cache folder, one per problem)")
    g.add_argument("--fresh", action="store_true", help="start over instead of resuming a saved state")
    g.add_argument("--client-timeout", type=float, default=300.0, help="seconds to wait for a step's replies")
    g.add_argument("--node-timeout", type=float, default=300.0, help="seconds to wait for the SuperNodes to join")
    g.add_argument("--on-client-loss", default="stop", choices=spec.ON_CLIENT_LOSS,
                   help="a client that does not answer: stop (state kept) or continue with the others")
    g.add_argument("--isolation", default="warm", choices=("warm", "subprocess"),
                   help="warm: one long-lived ClientApp executor per SuperNode (fedpne_jax.flower.warm); "
                        "subprocess: Flower's own, a new process per message (seconds of imports each)")
    g.add_argument("--nodes-per-executor", type=int, default=1, metavar="K",
                   help="warm: each ClientApp executor serves K SuperNodes, one app call at a time (about 300 "
                        "MB resident an executor and 140 MB a SuperNode: for many clients on one machine)")
    g.add_argument("--timeout", type=float, default=None, help="give up the whole run after this many seconds")
    g.add_argument("--workdir", default=None,
                   help="keep the processes' logs, certificates and app here (default: a temporary folder)")


def run_config(args) -> dict:
    """Flower's run config of the command line's options (None: not given)."""
    options = {key: getattr(args, dest) for dest, key in OPTION_KEYS.items()}
    if args.set:
        options["set"] = ";".join(args.set)
    options.update({"algorithm": args.algorithm, "objective": args.objective, "clients": args.clients,
                    "horizon": args.horizon, "seed": args.seed, "seeds": args.seeds,
                    "heterogeneity": args.heterogeneity,
                    "objective-seed": args.objective_seed, "dim": args.dim, "instance": args.instance,
                    "amplitude": args.amplitude, "function": args.function, "lo": args.lo, "hi": args.hi,
                    "f-star": args.f_star, "client-timeout": args.client_timeout,
                    "node-timeout": args.node_timeout, "on-client-loss": args.on_client_loss,
                    "resume": not args.fresh})
    return {k: v for k, v in options.items() if v is not None}


def command(args, check_output_file, describe_params) -> int:
    if args.help_params:
        print(describe_params(registry.get(args.algorithm)))
        return 0
    if args.output is not None:
        check_output_file("--output", args.output)
    if args.nodes_per_executor < 1:
        raise ValueError(f"--nodes-per-executor must be at least 1, got {args.nodes_per_executor}")
    if args.nodes_per_executor > 1 and (args.isolation != "warm" or args.simulation):
        raise ValueError("--nodes-per-executor shares warm executors: it needs --isolation warm and no --simulation")
    if args.timeout is not None and not args.timeout > 0:
        raise ValueError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    config = run_config(args)
    # Bad options are refused before any process starts: the problem, the server's settings, and the
    # objective itself (its heterogeneity, amplitude, seed and size are checked where it is made).
    try:
        problem = spec.problem(config)
        spec.server_settings(config)
        problem.objective()
    except ValueError as err:       # each key is the option of the same name
        raise ValueError(re.sub(r"run config '([\w-]+)'", r"--\1", str(err))) from None
    with tempfile.TemporaryDirectory(prefix="fedpne-flower-out-") as scratch:
        output = os.path.abspath(args.output) if args.output not in (None, "-") else os.path.join(scratch, "r.json")
        state = os.path.abspath(args.state) if args.state else spec.default_paths(problem)[0]
        config.update(output=output, state=state)
        report = sys.stderr if args.output == "-" else sys.stdout
        status = local.run_local(problem.num_clients, spec.run_config_of(config), tls=args.tls, auth=args.auth,
                                 simulation=args.simulation, out=report, timeout=args.timeout, workdir=args.workdir,
                                 isolation=args.isolation, nodes_per_executor=args.nodes_per_executor)
        if not status.get("ok"):
            raise ValueError(f"the Flower run failed: {status.get('message')}")
        with open(output) as fh:
            data = json.load(fh)
        flower = data["flower"]
        finals = data["per_seed"]["final_regret"]
        regret = f"final regret {finals[0]:.6g}" if len(finals) == 1 else \
            f"mean final regret {sum(finals) / len(finals):.6g} over {len(finals)} seeds"
        print(f"{problem.algorithm} over Flower, {problem.num_clients} clients: {regret}, "
              f"{flower['steps']} steps, "
              f"{flower['sent_bytes']} B sent, {flower['received_bytes']} B received "
              f"(paper's uploads: {flower['paper_uploads']} floats); state {state}", file=report)
        if args.output == "-":
            json.dump(data, sys.stdout, indent=1)
            print()
        elif args.output is not None:
            print(f"  wrote {args.output}", file=report)
    return 0
