"""Record PyXAB 0.3.0's own final regrets on Garland, the figures tests/test_pyxab_statistics.py
compares every X-armed algorithm of this package with (PyXAB is too slow to run in the suite).

    python scripts/pyxab_figures.py [--seeds 100] [--horizon 1000] [--out tests/data/pyxab_regret.json]
                                    [--only NAME ...]

Every algorithm with PyXAB's default parameters on [0, 1], T rounds, uniform(-0.1, 0.1) noise on
each reward (NumPy's PCG64 seeded by the seed; PyXAB's own draws from NumPy's global generator,
seeded likewise), regret f* - f(x_t) summed over the rounds with f* = 0.9977723911610445.  The
JSON holds, per algorithm: the PyXAB class, T, the seeds and their final regrets, and the versions.
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import time
from importlib.metadata import version

import harness  # noqa: F401  (puts the project on the import path)
import numpy as np

from fedpne_jax.core.files import write_json
from tests.support.reference import FUNCTIONS

NOISE = 0.1
# name -> (PyXAB module.class, constructor keywords beyond the domain; "T" stands for the horizon)
ALGORITHMS = {
    "hct": ("HCT.HCT", {}),
    "hoo": ("HOO.T_HOO", {"rounds": "T"}),
    "doo": ("DOO.DOO", {"n": "T"}),
    "soo": ("SOO.SOO", {"n": "T"}),
    "stosoo": ("StoSOO.StoSOO", {"n": "T"}),
    "vhct": ("VHCT.VHCT", {}),
    "poo": ("POO.POO", {"rounds": "T", "algo": "HOO.T_HOO"}),
    "gpo": ("GPO.GPO", {"rounds": "T", "algo": "HOO.T_HOO"}),
    "pct": ("PCT.PCT", {"rounds": "T"}),
    "vpct": ("VPCT.VPCT", {"rounds": "T"}),
    "sequool": ("SequOOL.SequOOL", {"n": "T"}),
    "stroquool": ("StroquOOL.StroquOOL", {"n": "T"}),
    "zooming": ("Zooming.Zooming", {}),
    # PyXAB requires b and f_max; the package's defaults (Garland's values lie in [0, 1]).
    "vroom": ("VROOM.VROOM", {"n": "T", "b": 1.0, "f_max": 1.0}),
}


def _class(path: str):
    module, name = path.split(".")
    return getattr(importlib.import_module(f"PyXAB.algos.{module}"), name)


def _garland(x: float) -> float:
    return x * (1 - x) * (4 - math.sqrt(abs(math.sin(60 * x))))


def final_regret(name: str, T: int, seed: int) -> float:
    path, kwargs = ALGORITHMS[name]
    args = {k: (T if v == "T" else _class(v) if isinstance(v, str) else v) for k, v in kwargs.items()}
    np.random.seed(seed)
    algo = _class(path)(domain=[[0.0, 1.0]], **args)
    rng = np.random.default_rng(seed)
    f_star = FUNCTIONS["garland"][3]
    regret = 0.0
    for t in range(1, T + 1):
        x = float(algo.pull(t)[0])
        value = _garland(x)
        regret += f_star - value
        algo.receive_reward(t, value + rng.uniform(-NOISE, NOISE))
    return regret


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--horizon", type=int, default=1000)
    ap.add_argument("--out", default="tests/data/pyxab_regret.json")
    ap.add_argument("--only", nargs="+", choices=sorted(ALGORITHMS),
                    help="record these algorithms and keep the others' figures already in --out")
    args = ap.parse_args(argv)
    out = {"pyxab": version("pyxab"), "numpy": np.__version__, "function": "garland", "noise": f"uniform:{NOISE}",
           "algorithms": {}}
    if args.only:
        with open(args.out) as fh:
            kept = json.load(fh)
        if (kept["pyxab"], kept["function"], kept["noise"]) != (out["pyxab"], out["function"], out["noise"]):
            ap.error(f"--only: {args.out} was recorded with PyXAB {kept['pyxab']} on {kept['function']} with "
                     f"{kept['noise']} noise; record every algorithm again")
        out["algorithms"] = kept["algorithms"]
    for name, (path, _) in ALGORITHMS.items():
        if args.only and name not in args.only:
            continue
        start = time.perf_counter()
        regrets = [final_regret(name, args.horizon, seed) for seed in range(args.seeds)]
        out["algorithms"][name] = {"pyxab_class": path, "T": args.horizon, "seeds": list(range(args.seeds)),
                                   "final_regret": regrets}
        print(f"{name:10} mean {np.mean(regrets):9.2f}  sd {np.std(regrets, ddof=1):8.2f}  "
              f"({time.perf_counter() - start:.1f} s)", flush=True)
    write_json(args.out, out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
