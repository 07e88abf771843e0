"""Command line: ``fedpne run ...`` (also ``python -m fedpne_jax run ...``)."""
from __future__ import annotations

import argparse
import sys

from fedpne_jax.config import NOISE_KINDS, PULLS, SAMPLINGS, SPLITS, FedPNEConfig
from fedpne_jax.errors import CapacityError, ObjectiveError

ALGORITHMS = ("fedpne",)


def _run_parser(sub):
    p = sub.add_parser("run", help="run Fed-PNE / DP-Fed-PNE for a batch of seeds",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--algorithm", default="fedpne", choices=ALGORITHMS)
    p.add_argument("--objective", default="garland", help="garland, doublesine, himmelblau, ackley, rastrigin")
    p.add_argument("--dim", type=int, default=None, help="dimension (ackley, rastrigin)")
    p.add_argument("--clients", type=int, default=10, help="M")
    p.add_argument("--horizon", type=int, default=10_000, help="T, rounds per client")
    p.add_argument("--seeds", type=int, default=100, help="number of runs (seed indices 0..S-1)")
    p.add_argument("--seed", type=int, default=0, help="base seed: seed i uses fold_in(key(seed), i)")
    p.add_argument("--nu", type=float, default=1.0)
    p.add_argument("--rho", type=float, default=0.5)
    p.add_argument("--c", type=float, default=None, help="default 0.1 (x sqrt(1 + 4 sigma_dp^2) under DP)")
    p.add_argument("--c1", type=float, default=1.0)
    p.add_argument("--delta", type=float, default=None, help="default 1/M")
    p.add_argument("--k", type=int, default=2)
    p.add_argument("--split", default="random", choices=SPLITS)
    p.add_argument("--noise", default="gaussian:0.1", help=f"one of {NOISE_KINDS}, e.g. gaussian:0.1, uniform:0.1")
    p.add_argument("--pull", default="centre", choices=PULLS)
    p.add_argument("--sampling", default="auto", choices=SAMPLINGS)
    p.add_argument("--heterogeneity", default=None,
                   help="none or shift (default: shift, or none with bernoulli noise, whose values must stay in [0, 1])")
    p.add_argument("--objective-seed", type=int, default=0, help="key of the client heterogeneity")
    p.add_argument("--dp-epsilon", type=float, default=None)
    p.add_argument("--dp-delta", type=float, default=None)
    p.add_argument("--checkpoints", type=int, default=100)
    p.add_argument("--capacity", type=int, default=None, help="initial node-table capacity (default: from config)")
    p.add_argument("--no-grow", action="store_true", help="fail instead of growing a full node table")
    p.add_argument("--output", default=None, help="write the result as JSON to this file")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fedpne", description="Federated X-armed bandits in JAX")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    return parser


def cmd_run(args) -> int:
    import os

    import objectives
    from fedpne_jax.fedpne import run

    if args.output and not os.path.isdir(os.path.dirname(os.path.abspath(args.output))):
        raise ValueError(f"--output: the folder of {args.output!r} does not exist")
    heterogeneity = args.heterogeneity or ("none" if args.noise.strip().lower() == "bernoulli" else "shift")

    config = FedPNEConfig(
        num_clients=args.clients, horizon=args.horizon, k=args.k, split=args.split, nu=args.nu, rho=args.rho,
        c=args.c, c1=args.c1, delta=args.delta, noise=args.noise, pull=args.pull, sampling=args.sampling,
        dp_epsilon=args.dp_epsilon, dp_delta=args.dp_delta, checkpoints=args.checkpoints, capacity=args.capacity)
    objective = objectives.make_objective(args.objective, num_clients=args.clients,
                                          heterogeneity=heterogeneity, seed=args.objective_seed, dim=args.dim)
    result = run(config, objective, seeds=args.seeds, base_seed=args.seed, grow=not args.no_grow)
    print(result.summary())
    if args.output:
        result.write_json(args.output)
        print(f"  wrote {args.output}")
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return cmd_run(args)
    except (ValueError, CapacityError, ObjectiveError) as err:
        print(f"fedpne: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
