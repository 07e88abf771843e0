"""``fedpne plot``: the regret curves of run results and sweep folders on one axes.
"""
from __future__ import annotations

from fedpne_jax.cli.common import Defaults, check_output_file, results_argument
from fedpne_jax.experiments.plot import plot_results

NAME = "plot"
INTERRUPTED = "interrupted"


def add_parser(sub):
    p = sub.add_parser("plot", help="regret curves of run results (--output JSON) and sweep folders, one axes",
                       formatter_class=Defaults)
    results_argument(p)
    p.add_argument("--out", default="regret.png",
                   help="file to write: PNG, or the format its extension names (.pdf, .svg)")
    p.add_argument("--title", default=None, help="the figure's title (none by default)")
    p.add_argument("--band", default="std", choices=("std", "stderr"), help="shaded band: ±1 std or ±1 s.e.")
    p.add_argument("--logx", action="store_true", help="log x-axis")
    p.add_argument("--logy", action="store_true", help="log y-axis")
    return p


def command(args) -> int:
    check_output_file("--out", args.out, inputs=args.results, stream=False)
    path = plot_results(args.results, args.out, title=args.title, band=args.band,
                        xscale="log" if args.logx else "linear", yscale="log" if args.logy else "linear")
    print(f"wrote {path}")
    return 0
