"""fp.run now against fp.run at an earlier commit: the same rows timed in both checkouts, interleaved
in one run, so that a change's cost is a ratio measured under the same load.

    python scripts/bench_base.py [--base REV] [--repeats 3] [--quick] [--out bench-base.json]

Each (row, checkout, repeat) runs in a fresh process with that checkout first on the import path: it
compiles the row's program (compile time reported apart), runs it once untimed, then times five
runs and keeps the fastest.
The rows are the engine rows of the other bench scripts: Fed-PNE with the paper's defaults (the
client-mean sampler and the per-pull one), HCT and T-HOO, on Garland with shift heterogeneity and
gaussian:0.1 noise.  The table gives each checkout's median seconds, their ratio (now / base; above 1 is slower now)
and the ratio of the fastest repeats.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import harness  # noqa: E402,F401  (the project on the import path)

from fedpne_jax.core import processor  # noqa: E402

# name: (algorithm, parameters, clients, seeds, quick seeds)
ROWS = {
    "fedpne M=10 T=1e4": ("fedpne", {"horizon": 10_000}, 10, 1000, 100),
    "fedpne explicit M=10 T=1e4": ("fedpne", {"horizon": 10_000, "sampling": "explicit"}, 10, 100, 10),
    "hct T=1e4": ("hct", {"horizon": 10_000}, 1, 200, 20),
    "hoo T=2e3": ("hoo", {"horizon": 2_000}, 1, 100, 10),
}

# Run in the checkout under test: only the public API that both checkouts share.
PROGRAM = """
import json, sys, time
import jax
import fedpne_jax as fp, objectives
algorithm, params, clients, seeds = json.loads(sys.argv[1])
kw = {"num_clients": clients} if algorithm == "fedpne" else {}
config = fp.make_config(algorithm, noise="gaussian:0.1", **kw, **params)
objective = objectives.make_objective("garland", num_clients=clients, heterogeneity="shift")
start = time.perf_counter()
jax.block_until_ready(fp.run(config, objective, seeds=seeds, base_seed=1).final_regret)
first = time.perf_counter() - start
times = []
for base_seed in range(2, 7):
    start = time.perf_counter()
    out = fp.run(config, objective, seeds=seeds, base_seed=base_seed)
    jax.block_until_ready(out.final_regret)
    times.append(time.perf_counter() - start)
print(json.dumps({"first": first, "seconds": min(times), "regret": float(out.final_regret.mean())}))
"""


def checkout(rev: str, folder: str) -> str:
    path = os.path.join(folder, rev.replace("/", "_"))
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-f", path, rev], check=True,
                   capture_output=True)
    return path


def measure(tree: str, row) -> dict:
    algorithm, params, clients, seeds = row
    env = {**os.environ, "PYTHONPATH": tree, "FEDPNE_COMPILE_CACHE": "off"}
    done = subprocess.run([sys.executable, "-c", PROGRAM, json.dumps([algorithm, params, clients, seeds])],
                          cwd=tree, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="500c5fa", help="the earlier commit (default: before ask/tell)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small seed counts (a smoke run)")
    ap.add_argument("--rows", default="", help="only the rows whose names contain this text")
    ap.add_argument("--out", default="bench-base.json")
    args = ap.parse_args(argv)
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        trees = {"base": checkout(args.base, folder), "now": checkout("HEAD", folder)}
        try:
            for name, (algorithm, params, clients, seeds, quick) in ROWS.items():
                if args.rows not in name:
                    continue
                row = (algorithm, params, clients, quick if args.quick else seeds)
                times = {"base": [], "now": []}
                firsts = {"base": [], "now": []}
                for _ in range(args.repeats):
                    for which, tree in trees.items():       # interleaved: both see the same load
                        m = measure(tree, row)
                        times[which].append(m["seconds"])
                        firsts[which].append(m["first"])
                base, now = statistics.median(times["base"]), statistics.median(times["now"])
                # The fastest of the repeats is the one least disturbed by whatever else ran.
                fastest = min(times["now"]) / min(times["base"])
                rows.append({"row": name, "seeds": row[3], "base_s": base, "now_s": now, "ratio": now / base,
                             "ratio_of_fastest": fastest,
                             "base_first_s": statistics.median(firsts["base"]),
                             "now_first_s": statistics.median(firsts["now"]), "base_all": times["base"],
                             "now_all": times["now"]})
                r = rows[-1]
                print(f"{name:30s} seeds {r['seeds']:5d}  base {base:8.3f} s  now {now:8.3f} s  ratio {r['ratio']:.3f}"
                      f"  (first call {r['base_first_s']:.1f} / {r['now_first_s']:.1f} s)", flush=True)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tree], capture_output=True)
    machine = {"processor": processor.describe(),
               "cores": os.cpu_count(), "load_average": os.getloadavg()}
    with open(args.out, "w") as fh:
        json.dump({"base": args.base, "now": head, "repeats": args.repeats, "machine": machine, "rows": rows}, fh,
                  indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
