"""Record (or check) the per-seed outputs of a fixed set of runs: every algorithm, Fed-PNE with each
sampler, DP, a grid and a sweep (tests/support/behaviour.py).

    python scripts/record_behaviour.py --write    # tests/data/behaviour.npz, from the current code
    python scripts/record_behaviour.py            # compare the current code against it, bit for bit

tests/test_behaviour.py runs the comparison in the suite: a refactoring that changes any number of
these runs (a different draw, a different summation order) fails it.
"""
from __future__ import annotations

import argparse
import os
import sys

import harness  # noqa: F401,I001  (puts the project on the import path)
import numpy as np

from tests.support.behaviour import FIXTURE, collect, compare, recorded


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="record the fixture from the current code")
    args = ap.parse_args(argv)
    current = collect()
    if args.write:
        os.makedirs(os.path.dirname(FIXTURE), exist_ok=True)
        np.savez_compressed(FIXTURE, **{k.replace("/", "__"): v for k, v in current.items()})
        print(f"wrote {len(current)} arrays to {FIXTURE}")
        return 0
    expected = recorded()
    problems = compare(expected, current)
    print("\n".join(problems) if problems else f"all {len(expected)} arrays are identical")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
