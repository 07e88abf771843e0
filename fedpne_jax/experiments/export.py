"""``fedpne export RESULTS... --format csv --out FILE`` (``fp.export``): run files and sweep folders as
one tidy CSV, one row per (configuration, seed, checkpoint), for pandas, R or any analysis tool.

Columns: problem, configuration (the report's label), algorithm, source, seed, base_seed, round,
evaluations (M x round for a federated algorithm), cumulative_regret (per client for federated
algorithms), best_so_far_regret, target_scale.  The fixed-target hit rounds are per run, not per
checkpoint: ``fedpne report`` tabulates them.
"""
from __future__ import annotations

import csv
import io

from fedpne_jax.core.files import write_atomic
from fedpne_jax.experiments import analysis

FORMATS = ("csv",)
COLUMNS = ("problem", "configuration", "algorithm", "source", "seed", "base_seed", "round", "evaluations",
           "cumulative_regret", "best_so_far_regret", "target_scale")


def tidy_rows(entries):
    for e in entries:
        for i in range(e.runs):
            seed = int(e.seeds[i]) if e.seeds.size else i
            for c, round_ in enumerate(e.checkpoints):
                yield (e.problem, e.label, e.algorithm, e.source, seed, e.base_seed, int(round_),
                       int(round_) * e.per_round, repr(float(e.curves[i, c])), repr(float(e.best[i, c])),
                       repr(float(e.scale[i])))


def export(paths, out: str, fmt: str = "csv") -> int:
    """Write the runs of ``paths`` (run JSON files, sweep folders) to ``out`` in format ``fmt``; returns
    the rows written.  Values are written with every digit (repr), so they read back bit for bit.
    Rows are streamed to the file a configuration at a time (atomically: the file appears whole)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {list(FORMATS)}, got {fmt!r}")
    entries = analysis.load(list(paths))
    count = [0]

    def write(fh):
        for i, e in enumerate(entries):
            buffer = io.StringIO()
            writer = csv.writer(buffer, lineterminator="\n")
            if i == 0:
                writer.writerow(COLUMNS)
            for row in tidy_rows([e]):
                writer.writerow(row)
                count[0] += 1
            fh.write(buffer.getvalue().encode())

    write_atomic(out, write)
    return count[0]
