"""Copy a full ``fedpne reproduce`` run's figures into the committed gallery (``docs/figures``).

    fedpne reproduce all --out results
    python scripts/gallery.py results docs/figures

Copies every figure's PNG and CSV and writes the run's SUMMARY.md next to them (linking the PNGs
in that folder) and the studies' wall times (timing.json).  The JSON files stay in the results
folder: the CSV files hold the same numbers.
"""
from __future__ import annotations

import argparse
import os
import shutil

from fedpne_jax.paper import summary
from fedpne_jax.paper.reproduce import TIMING


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", help="the --out folder of a fedpne reproduce run")
    parser.add_argument("dest", help="gallery folder, e.g. docs/figures")
    args = parser.parse_args(argv)
    figures, skipped = summary.load_figures(args.results)
    if not figures:
        parser.error(f"{args.results!r} holds no figure data (run fedpne reproduce first)")
    os.makedirs(args.dest, exist_ok=True)
    for name in figures:
        for ext in (".png", ".csv"):
            source = os.path.join(args.results, "figures", name + ext)
            if os.path.exists(source):
                shutil.copyfile(source, os.path.join(args.dest, name + ext))
    if os.path.exists(os.path.join(args.results, TIMING)):
        shutil.copyfile(os.path.join(args.results, TIMING), os.path.join(args.dest, TIMING))
    with open(os.path.join(args.dest, "SUMMARY.md"), "w") as fh:
        fh.write(summary.render(figures, skipped, figure_dir=""))
    print(f"copied {len(figures)} figures and SUMMARY.md to {args.dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
