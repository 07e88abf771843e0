"""What every benchmark script shares: the project on the import path, the host's cores as devices
(as the command line has them), best-of-N timing, the device line, a plain table and the JSON file,
and the command line of a section (``--quick``, ``--out``).

A section script defines ``rows(quick) -> list[dict]`` and, optionally, ``table(rows) -> str``; run
alone it calls :func:`main`; ``scripts/bench.py`` imports it and runs many sections in one process.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from typing import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:        # the project (and its test-support package, tests.support) from a checkout
    sys.path.insert(0, ROOT)

from fedpne_jax.core import host_devices, processor  # noqa: E402
from fedpne_jax.core.files import write_json  # noqa: E402
from fedpne_jax.core.result import device_name, versions  # noqa: E402

# What the command line runs on: a CPU's cores as devices (FEDPNE_HOST_DEVICES=off: one device).
host_devices.enable()


def best_seconds(fn: Callable[[], object], repeats: int) -> float:
    """The fastest of ``repeats`` calls of ``fn`` (wall seconds): on a shared machine the minimum is
    the least disturbed measurement."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def best_run_seconds(run: Callable[[], object], repeats: int) -> float:
    """The fastest ``run_seconds`` (compile excluded) of ``repeats`` calls returning a RunResult."""
    return min(run().run_seconds for _ in range(repeats))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def generic_table(rows: list[dict]) -> str:
    """Every key of the rows as a column (floats to four significant digits)."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    fmt = lambda v: f"{v:,.4g}" if isinstance(v, float) else str(v)
    cells = [[fmt(r.get(k, "")) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    line = lambda items: "  ".join(x.rjust(w) for x, w in zip(items, widths))
    return "\n".join([line(keys), "-" * len(line(keys))] + [line(c) for c in cells])


def report(results: dict, path: str) -> None:
    """Write the benchmark's JSON: the device and processor, the versions, the sections' rows and the
    peak memory."""
    write_json(path, {"device": device_name(), "processor": processor.describe(), "versions": versions(),
                      "sections": results, "process_peak_rss_mb": peak_rss_mb()})
    print(f"wrote {path}")


def main(doc: str, rows: Callable[[bool], list[dict]], table: Callable[[list[dict]], str] | None,
         default_out: str, argv=None) -> int:
    """The command line of one section run alone: ``--quick`` and ``--out``."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--out", default=default_out)
    args = ap.parse_args(argv)
    print(f"device: {device_name()}, {processor.describe()}")
    result = rows(args.quick)
    print((table or generic_table)(result))
    report({os.path.splitext(os.path.basename(default_out))[0]: result}, args.out)
    return 0
