"""The cost of the wire: Fed-PNE over Flower's deployment engine on localhost, against fp.run.

    python scripts/bench_flower.py [--clients 4,16,64] [--horizon 1000] [--isolation warm]
                                   [--nodes-per-executor K] [--out FILE.json]

For each number N of SuperNodes: a SuperLink and N SuperNodes on this machine (fedpne_jax.flower.local),
one noise-free Fed-PNE run of Garland (shift heterogeneity, M = N, sampling='client', seed 0), and:

* ms per step (median over the steps) and seconds per run (the server's loop, after its start-up;
  and the whole run with the processes' start-up), and where a step goes: the exchange (sending,
  Flower's routing, the clients' work, the replies), the slowest client's handler (its evaluation),
  the server's ask/tell/save (the rest);
* bytes sent and received per step (the records' payloads as Flower serialises them), against the
  paper's communication count: the means uploaded (floats) x 8 bytes;
* fp.run of the same run: its compile and run seconds (one seed);
* the deployment's memory: the peaks of its processes' resident (RSS) and proportional (PSS) memory
  summed (sampled every 0.5 s; GiB), with ``--nodes-per-executor K`` warm ClientApp executors serving
  K SuperNodes each.

The rows also say whether the Flower run's regret curve equals fp.run's bit for bit, and what
bounds a step: the round trip (the exchange less the slowest client's handler), the objective (that
handler), the server's ask/tell/save, and the serialisation of the step's messages (building and
deflating them as Flower does, timed here in one process).  The JSON (default
docs/bench/flower-<machine>.json) names the processor (/proc/cpuinfo) and the load average.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fedpne_jax as fp  # noqa: E402
import objectives  # noqa: E402
from fedpne_jax.core import processor  # noqa: E402
from fedpne_jax.core.processes import descendants  # noqa: E402
from fedpne_jax.flower import local, wire  # noqa: E402


def memory_bytes(pids) -> tuple:
    """(resident, proportional) bytes of ``pids`` summed: RSS counts the pages processes share (the
    Python runtime, Flower's and JAX's libraries) once in each; PSS splits them among the sharers."""
    rss = pss = 0
    for pid in pids:
        for name, key in (("status", "VmRSS:"), ("smaps_rollup", "Pss:")):
            try:
                with open(f"/proc/{pid}/{name}") as fh:
                    value = next(int(line.split()[1]) * 1024 for line in fh if line.startswith(key))
            except (OSError, StopIteration):
                continue
            if key == "VmRSS:":
                rss += value
            else:
                pss += value
    return rss, pss


def flower_run(n: int, horizon: int, isolation: str, folder: str, cache: str, nodes_per_executor: int) -> dict:
    config = {"algorithm": "fedpne", "objective": "garland", "heterogeneity": "shift", "clients": n,
              "horizon": horizon, "noise": "none", "sampling": "client", "seed": 0, "resume": False,
              "state": os.path.join(folder, "state.fpne"), "output": os.path.join(folder, "out.json"),
              "status": os.path.join(folder, "status.json"), "client-timeout": 1800.0, "node-timeout": 1800.0}
    log = io.StringIO()
    started = time.time()
    peak = [0, 0]
    done = threading.Event()
    with local.Deployment(n, workdir=os.path.join(folder, "work"), out=log, isolation=isolation,
                          extra_env={"FEDPNE_COMPILE_CACHE": cache}, nodes_per_executor=nodes_per_executor) as d:
        def sample():
            while not done.wait(0.5):
                pids = descendants([p.pid for p in list(d.processes.values())])
                rss, pss = memory_bytes(pids)
                peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            d.start()
            d.submit(config)
        finally:
            done.set()
            sampler.join()
    wall = time.time() - started
    with open(config["status"]) as fh:
        status = json.load(fh)
    if not status["ok"]:
        raise RuntimeError(f"N = {n}: {status['message']}\n{log.getvalue()[-3000:]}")
    with open(config["output"]) as fh:
        data = json.load(fh)
    data["wall_seconds"] = wall
    data["peak_resident_bytes"], data["peak_proportional_bytes"] = peak
    return data


def machine_name() -> str:
    """A file-name tag of this processor: vendor, family and model (AMD EPYC family 25 model 1: amd-f25m1)."""
    found = processor.fields(("vendor_id", "cpu family", "model"))
    vendor = {"AuthenticAMD": "amd", "GenuineIntel": "intel"}.get(found.get("vendor_id", ""), "cpu")
    return f"{vendor}-f{found.get('cpu family', 'x')}m{found.get('model', 'x')}"


def serialise_ms(steps: list, dim: int, repeats: int = 20) -> float:
    """Milliseconds to build and deflate one step's messages (the median step's slots, one message
    a client), as the server and the clients do before sending."""
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
    slots = int(statistics.median(s["slots"] for s in steps))
    clients = max(1, int(statistics.median(s["clients"] for s in steps)))
    per = max(1, slots // clients)
    points, counts = np.random.rand(per, dim).astype(np.float32), np.ones(per, np.int64)
    started = time.perf_counter()
    for _ in range(repeats):
        for m in range(clients):
            for content in (wire.query_content("r", 1, wire.EVALUATE, m, points, counts),
                            wire.reply_content("r", 1, m, np.zeros(per))):
                for obj in get_all_nested_objects(content).values():
                    obj.deflate()
    return 1e3 * (time.perf_counter() - started) / repeats


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", default="4,16,64")
    p.add_argument("--horizon", type=int, default=1000)
    p.add_argument("--isolation", default="warm", choices=local.ISOLATIONS)
    p.add_argument("--nodes-per-executor", type=int, default=1, metavar="K",
                   help="warm: SuperNodes served by each ClientApp executor")
    p.add_argument("--out", default=None, help="the JSON (default: docs/bench/flower-<machine>.json)")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-flower-") as tmp:
        cache = os.path.join(tmp, "xla")
        for n in [int(v) for v in args.clients.split(",")]:
            folder = os.path.join(tmp, f"n{n}")
            os.makedirs(folder)
            data = flower_run(n, args.horizon, args.isolation, folder, cache, args.nodes_per_executor)
            cfg = fp.make_config("fedpne", num_clients=n, horizon=args.horizon, noise="none", sampling="client",
                                 checkpoints=min(100, args.horizon))
            objective = objectives.make_objective("garland", num_clients=n, heterogeneity="shift", seed=0)
            reference = fp.run(cfg, objective, seeds=1, base_seed=0)
            flower = data["flower"]
            steps = flower["per_step"]
            uploads = flower["paper_uploads"]
            median = {key: 1e3 * statistics.median(s[key] for s in steps)
                      for key in ("seconds", "exchange_seconds", "client_handler_seconds")}
            row = {
                "supernodes": n, "steps": len(steps),
                "ms_per_step": median["seconds"],
                "exchange_ms_per_step": median["exchange_seconds"],
                "client_handler_ms_per_step": median["client_handler_seconds"],
                "round_trip_ms_per_step": median["exchange_seconds"] - median["client_handler_seconds"],
                "server_ms_per_step": median["seconds"] - median["exchange_seconds"],
                "serialise_ms_per_step": serialise_ms(steps, len(objective.lo)),
                "ms_per_run": 1e3 * flower["run_seconds"],
                "server_loop_s": flower["run_seconds"], "wall_s_with_startup": data["wall_seconds"],
                "sent_bytes_per_step": flower["sent_bytes"] / len(steps),
                "received_bytes_per_step": flower["received_bytes"] / len(steps),
                "paper_uploads_floats": uploads, "paper_upload_bytes_per_step": 8 * uploads / len(steps),
                "fp_run_compile_s": reference.compile_seconds, "fp_run_run_ms": 1e3 * reference.run_seconds,
                "same_curve": data["per_seed"]["curves"] == reference.to_dict()["per_seed"]["curves"],
                "nodes_per_executor": args.nodes_per_executor,
                "peak_rss_gib": data["peak_resident_bytes"] / 2**30,
                "peak_pss_gib": data["peak_proportional_bytes"] / 2**30,
            }
            row["load_average"] = open("/proc/loadavg").read().split()[:3]
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"\nFed-PNE over Flower 1.42 on localhost ({args.isolation} clients), Garland shift, T = {args.horizon}, "
          f"noise-free; {processor.describe()}, {os.cpu_count()} cores\n")
    print("| SuperNodes | steps | ms/step | round trip ms | slowest client ms | server ms | serialise ms | "
          "s/run (loop) | s/run (with start-up) | B sent/step | B received/step | paper: uploads x 8 B / step | "
          "fp.run ms/run (compile s) | same curve | SuperNodes per executor | peak RSS GiB | peak PSS GiB | load |")
    print("|" + "---|" * 18)
    for r in rows:
        print(f"| {r['supernodes']} | {r['steps']} | {r['ms_per_step']:.0f} | {r['round_trip_ms_per_step']:.0f} | "
              f"{r['client_handler_ms_per_step']:.0f} | {r['server_ms_per_step']:.0f} | "
              f"{r['serialise_ms_per_step']:.1f} | {r['server_loop_s']:.1f} | {r['wall_s_with_startup']:.1f} | "
              f"{r['sent_bytes_per_step']:.0f} | {r['received_bytes_per_step']:.0f} | "
              f"{r['paper_upload_bytes_per_step']:.0f} | {r['fp_run_run_ms']:.1f} ({r['fp_run_compile_s']:.1f}) | "
              f"{r['same_curve']} | {r['nodes_per_executor']} | {r['peak_rss_gib']:.1f} | {r['peak_pss_gib']:.1f} | "
              f"{' '.join(r['load_average'])} |")
    out = args.out or os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "bench",
                                   f"flower-{machine_name()}.json")
    with open(out, "w") as fh:
        json.dump({"processor": processor.describe(), "cores": os.cpu_count(), "isolation": args.isolation,
                   "nodes_per_executor": args.nodes_per_executor,
                   "horizon": args.horizon, "flower": "1.42", "rows": rows}, fh, indent=1)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
