"""``fedpne export``: run results and sweep folders as one tidy CSV or as IOHprofiler data.
"""
from __future__ import annotations

from fedpne_jax.cli.common import Defaults, check_output_file, check_output_folder, results_argument
from fedpne_jax.experiments.export import FORMATS, export

NAME = "export"
INTERRUPTED = "interrupted; nothing was written"


def add_parser(sub):
    p = sub.add_parser("export", help="run results and sweep folders as one tidy CSV (a row per configuration, "
                                      "seed and checkpoint) or as IOHprofiler data for IOHanalyzer",
                       formatter_class=Defaults)
    results_argument(p)
    p.add_argument("--format", default="csv", choices=FORMATS,
                   help="csv: one file; ioh: a folder of IOHprofiler data (the ioh extra)")
    p.add_argument("--out", default=None, help="csv: the file to write ('-': standard output; default runs.csv); "
                                               "ioh: a new or empty folder (default ioh-data)")
    return p


def command(args) -> int:
    out = args.out if args.out is not None else ("ioh-data" if args.format == "ioh" else "runs.csv")
    if args.format == "ioh":
        check_output_folder("--out", out)
        runs = export(args.results, out, fmt="ioh")
        print(f"wrote {runs:,} runs of IOHprofiler data to {out}")
        return 0
    check_output_file("--out", out, inputs=args.results)
    rows = export(args.results, out, fmt=args.format)
    if out != "-":
        print(f"wrote {rows:,} rows to {out}")
    return 0
