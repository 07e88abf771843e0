"""``fedpne report``: the benchmark report of run results and sweep folders (fixed-budget and
fixed-target tables, runtime ECDFs, ranks, win rates, REPORT.md).
"""
from __future__ import annotations

import argparse

from fedpne_jax.cli.common import Defaults, check_output_folder, results_argument, whole_number
from fedpne_jax.experiments.report import REPORT_FILE, report

NAME = "report"
INTERRUPTED = "interrupted; files already written are complete"


def add_parser(sub):
    p = sub.add_parser("report", help="benchmark report of run results and sweep folders: fixed-budget and "
                                      "fixed-target tables (ERT), runtime ECDFs, ranks, win rates, REPORT.md",
                       formatter_class=Defaults)
    results_argument(p)
    p.add_argument("--out", default="report", help="folder to write (created if missing)")
    p.add_argument("--budgets", type=_int_list, default=None,
                   help="rounds of the fixed-budget table, e.g. 100,1000 (default: the checkpoints about 10 %%, "
                        "50 %% and 100 %% of the way through the shortest run)")
    p.add_argument("--no-plots", action="store_true", help="tables and REPORT.md only (no matplotlib needed)")
    return p


def _int_list(text: str) -> list[int]:
    try:
        values = [whole_number(v) for v in text.split(",")]
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"expected rounds separated by commas, e.g. 100,1000, got {text!r}") from None
    return values


def command(args) -> int:
    check_output_folder("--out", args.out)
    written = report(args.results, args.out, budgets=args.budgets, plots=not args.no_plots)
    print(f"wrote {len(written)} files to {args.out}; start with {written[REPORT_FILE]}")
    return 0
