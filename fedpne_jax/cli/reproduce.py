"""``fedpne reproduce``: the sweeps a figure of the paper (or a new study) needs, then the figure.
"""
from __future__ import annotations

import argparse

from fedpne_jax.cli.common import check_output_folder, devices, memory_gb, plugin_option, whole_number
from fedpne_jax.experiments import workers
from fedpne_jax.paper import figures
from fedpne_jax.paper.reproduce import reproduce

NAME = "reproduce"
INTERRUPTED = "interrupted; finished chunks are kept, rerun the same command to resume"


def add_parser(sub):
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
    p.add_argument("--seeds", type=whole_number, default=None, help="seeds of every study (default: the study's, "
                   "100 where runs are cheap)")
    p.add_argument("--out", default="results", help="results folder (sweeps/, figures/, SUMMARY.md)")
    p.add_argument("--memory-gb", type=memory_gb, default=None, help="memory budget per device for one call")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plot", action="store_true", help="write the data and summary only")
    p.add_argument("--overwrite", action="store_true",
                   help="rerun a study whose sweep folder holds another definition instead of refusing")
    p.add_argument("--devices", default="all", help="shard the runs over all visible devices or the first N")
    p.add_argument("--jobs", default=workers.AUTO, metavar="N",
                   help=f"studies computed at once, each in a process of its own, longest first (default {workers.AUTO}: "
                        f"one per core up to {workers.MAX_AUTO} on a CPU, 1 on accelerators; the numbers are the same "
                        f"for any N)")
    plugin_option(p)
    return p


def command(args) -> int:
    check_output_folder("--out", args.out)
    reproduce(args.figures, out=args.out, quick=args.quick, seeds=args.seeds, progress=not args.no_progress,
              memory_gb=args.memory_gb, devices=devices(args.devices), plot=not args.no_plot, overwrite=args.overwrite,
              jobs=args.jobs)
    return 0
