"""An HCT run saved halfway, loaded in a new process, and finished with the numbers of a run never saved.

    python examples/ask_tell_resume.py [--horizon 2000] [--file hct.fpne]

The objective is evaluated here, outside the optimizer: Garland with Gaussian noise of scale 0.1,
drawn by NumPy from a seed of this script's (the noise is the caller's, as it would be for a
simulator in another process).  The first half runs here and is saved; a second Python process
loads the file and runs the second half; the same run without the interruption is then made here,
and the two final regrets and recommendations are compared.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

import fedpne_jax as fp
import objectives

NOISE = 0.1


def values(objective, q, rng):
    """The mean of each asked slot's pulls at its point, noisy; NaN in empty slots."""
    x = q.points.reshape(-1, q.points.shape[-1])
    f = np.asarray(objective.value(x.astype(np.float32)), np.float64).reshape(q.counts.shape)
    noise = rng.normal(0.0, NOISE, q.counts.shape) / np.sqrt(np.maximum(q.counts, 1))
    return np.where(q.counts > 0, f + noise, np.nan)


def drive(opt, objective, rng, stop=None):
    while not opt.done and (stop is None or opt.step < stop):
        q = opt.ask()
        opt.tell(q, values(objective, q, rng))
    return opt


def second_half(path: str, horizon: int):
    """Run in the new process: load, finish, print the result."""
    objective = objectives.make_objective("garland", num_clients=1)
    opt = fp.Optimizer.load(path)
    rng = np.random.default_rng([7, opt.step])        # the noise stream of the second half
    drive(opt, objective, rng)
    result = opt.result()
    print(f"{float(result.final_regret[0])!r} {float(opt.recommendation[0])!r}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=2000)
    parser.add_argument("--file", default=None, help="where to save the half-way run (default: a temporary file)")
    parser.add_argument("--second-half", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.second_half:
        second_half(args.second_half, args.horizon)
        return 0

    objective = objectives.make_objective("garland", num_clients=1)
    config = fp.make_config("hct", horizon=args.horizon, noise=f"gaussian:{NOISE}")
    half = args.horizon // 2
    with tempfile.TemporaryDirectory() as folder:
        path = args.file or os.path.join(folder, "hct.fpne")
        opt = drive(fp.Optimizer(config, objective), objective, np.random.default_rng([7, 0]), stop=half)
        opt.save(path)
        print(f"saved at step {opt.step} of {args.horizon}: {path}")
        out = subprocess.run([sys.executable, __file__, "--second-half", path, "--horizon", str(args.horizon)],
                             check=True, capture_output=True, text=True).stdout.split()
        resumed_regret, resumed_x = float(out[0]), float(out[1])

    whole = fp.Optimizer(config, objective)
    drive(whole, objective, np.random.default_rng([7, 0]), stop=half)
    drive(whole, objective, np.random.default_rng([7, half]))
    regret, x = float(whole.result().final_regret[0]), float(whole.recommendation[0])
    print(f"resumed in a new process: final regret {resumed_regret!r}, recommendation {resumed_x!r}")
    print(f"never interrupted:        final regret {regret!r}, recommendation {x!r}")
    same = resumed_regret == regret and resumed_x == x
    print("same numbers" if same else "DIFFERENT numbers")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
