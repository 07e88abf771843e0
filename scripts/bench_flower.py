"""The cost of the wire: Fed-PNE over Flower's deployment engine on localhost, against fp.run.

    python scripts/bench_flower.py [--clients 4,16,64] [--horizon 1000] [--isolation warm] [--out bench_flower.json]

For each number N of SuperNodes: a SuperLink and N SuperNodes on this machine (fedpne_jax.flower.local),
one noise-free Fed-PNE run of Garland (shift heterogeneity, M = N, sampling='client', seed 0), and:

* ms per step (median over the steps) and seconds per run (the server's loop, after its start-up;
  and the whole run with the processes' start-up), and where a step goes: the exchange (sending,
  Flower's routing, the clients' work, the replies), the slowest client's handler (its evaluation),
  the server's ask/tell/save (the rest);
* bytes sent and received per step (the records' payloads as Flower serialises them), against the
  paper's communication count: the means uploaded (floats) x 8 bytes;
* fp.run of the same run: its compile and run seconds (one seed).

The rows also say whether the Flower run's regret curve equals fp.run's bit for bit.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fedpne_jax as fp  # noqa: E402
import objectives  # noqa: E402
from fedpne_jax.core import processor  # noqa: E402
from fedpne_jax.flower import local  # noqa: E402


def flower_run(n: int, horizon: int, isolation: str, folder: str, cache: str) -> dict:
    config = {"algorithm": "fedpne", "objective": "garland", "heterogeneity": "shift", "clients": n,
              "horizon": horizon, "noise": "none", "sampling": "client", "seed": 0, "resume": False,
              "state": os.path.join(folder, "state.fpne"), "output": os.path.join(folder, "out.json"),
              "status": os.path.join(folder, "status.json"), "client-timeout": 1800.0, "node-timeout": 1800.0}
    log = io.StringIO()
    started = time.time()
    with local.Deployment(n, workdir=os.path.join(folder, "work"), out=log, isolation=isolation,
                          extra_env={"FEDPNE_COMPILE_CACHE": cache}) as d:
        d.start()
        d.submit(config)
    wall = time.time() - started
    with open(config["status"]) as fh:
        status = json.load(fh)
    if not status["ok"]:
        raise RuntimeError(f"N = {n}: {status['message']}\n{log.getvalue()[-3000:]}")
    with open(config["output"]) as fh:
        data = json.load(fh)
    data["wall_seconds"] = wall
    return data


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", default="4,16,64")
    p.add_argument("--horizon", type=int, default=1000)
    p.add_argument("--isolation", default="warm", choices=local.ISOLATIONS)
    p.add_argument("--out", default=None, help="also write the rows as JSON here")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-flower-") as tmp:
        cache = os.path.join(tmp, "xla")
        for n in [int(v) for v in args.clients.split(",")]:
            folder = os.path.join(tmp, f"n{n}")
            os.makedirs(folder)
            data = flower_run(n, args.horizon, args.isolation, folder, cache)
            cfg = fp.make_config("fedpne", num_clients=n, horizon=args.horizon, noise="none", sampling="client",
                                 checkpoints=min(100, args.horizon))
            objective = objectives.make_objective("garland", num_clients=n, heterogeneity="shift", seed=0)
            reference = fp.run(cfg, objective, seeds=1, base_seed=0)
            flower = data["flower"]
            steps = flower["per_step"]
            uploads = flower["paper_uploads"]
            row = {
                "supernodes": n, "steps": len(steps),
                "ms_per_step": 1e3 * statistics.median(s["seconds"] for s in steps),
                "exchange_ms_per_step": 1e3 * statistics.median(s["exchange_seconds"] for s in steps),
                "client_handler_ms_per_step": 1e3 * statistics.median(s["client_handler_seconds"] for s in steps),
                "server_loop_s": flower["run_seconds"], "wall_s_with_startup": data["wall_seconds"],
                "sent_bytes_per_step": flower["sent_bytes"] / len(steps),
                "received_bytes_per_step": flower["received_bytes"] / len(steps),
                "paper_uploads_floats": uploads, "paper_upload_bytes_per_step": 8 * uploads / len(steps),
                "fp_run_compile_s": reference.compile_seconds, "fp_run_run_ms": 1e3 * reference.run_seconds,
                "same_curve": data["per_seed"]["curves"] == reference.to_dict()["per_seed"]["curves"],
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"\nFed-PNE over Flower 1.42 on localhost ({args.isolation} clients), Garland shift, T = {args.horizon}, "
          f"noise-free; {processor.describe()}, {os.cpu_count()} cores\n")
    print("| SuperNodes | steps | ms/step | exchange ms/step | slowest client ms/step | server loop s | "
          "wall s (with start-up) | B sent/step | B received/step | paper: uploads x 8 B / step | "
          "fp.run ms/run (compile s) | same curve |")
    print("|" + "---|" * 12)
    for r in rows:
        print(f"| {r['supernodes']} | {r['steps']} | {r['ms_per_step']:.0f} | {r['exchange_ms_per_step']:.0f} | "
              f"{r['client_handler_ms_per_step']:.0f} | {r['server_loop_s']:.1f} | {r['wall_s_with_startup']:.1f} | "
              f"{r['sent_bytes_per_step']:.0f} | {r['received_bytes_per_step']:.0f} | "
              f"{r['paper_upload_bytes_per_step']:.0f} | {r['fp_run_run_ms']:.1f} ({r['fp_run_compile_s']:.1f}) | "
              f"{r['same_curve']} |")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"processor": processor.describe(), "cores": os.cpu_count(), "isolation": args.isolation,
                       "horizon": args.horizon, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
