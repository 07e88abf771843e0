"""The package on an accelerator: its decisions against the CPU's, then its speed, in one prepared call.

    pip install --no-deps --no-build-isolation -e . && python scripts/bench_gpu.py --out "$OUT"
    python scripts/bench_gpu.py --quick --out /tmp/gpu      # a rehearsal on the CPU, tiny sizes

Installs nothing.  Sections run in this order, most important first, each in its own process under
its own time budget (scaled down when less is left of ``--budget``), and every row is appended to
``<out>/bench_gpu.json`` as soon as it is measured, so a call cut short still returns what it did:

* ``correctness``: every run of the behaviour fixture (tests/support/behaviour.py: Fed-PNE's samplers,
  DP, random splits and every baseline) on the default device, with its recorded noise and noise-free
  (scale 0 in the same program; 'none' for Bernoulli).  Compared with the fixture (recorded on an AMD
  EPYC, an older JAX) and with the same runs on this machine's CPU backend (a child process with
  JAX_PLATFORMS=cpu, the same JAX): decisions (phases, uploads, depth, recommendation, ...) must be
  equal; where regrets differ, the largest relative difference is recorded.
* ``fedpne``: the aggregate sampler, Garland, gaussian:0.1, M = 100, T = 10^6 at 10^3, 10^4, 10^5
  seeds: runs/s, compile s, XLA's buffers and the device's peak memory, against this project's 2-core
  CPU figures (README, Benchmark) and against the NumPy reference timed on this machine's processor
  in the same section (scripts/bench.py's ``reference_rate``).
* ``perpull``: the ``explicit`` sampler, uniform:0.1, centre and uniform points, M = 100, T = 10^6,
  100 seeds, against the device's floor: the same uniforms drawn and summed in one jitted call,
  threefry and Philox (scripts/bench_perpull.py).
* ``hct``: HCT and T-HOO aggregate pulls/s, T = 10^4, at 1, 10^3 and 10^4 seeds, and the while loops
  of the 10^4-seed program with the kernels one trip of each launches (from the compiled HLO).
* ``objectives``: Fed-PNE on landmine (M = 4, T = 500) evaluating only the pulled rows, at 4 and 64
  seeds, against landmine-sklearn on the same 4 runs when scikit-learn is there; then landmine's and
  digits' evaluations/s in one call of 16 x 16 x M points; then Fed-PNE on digits at its default size
  (M = 5, T = 300) at 8 and 64 seeds, with the (point, client) pairs it trained.
* ``trees``: every X-armed tree algorithm, HCT and T-HOO included, then those with a ``pyxab`` rule
  under it, at 1,000 seeds, T = 10^4, Garland, gaussian:0.1 (PyXAB's defaults), against PyXAB timed
  on this machine's processor in the same section (PYXAB_SECONDS of each algorithm, several at once
  but never more than half the logical CPUs, so that no two share a core; scripts/bench_trees.py's
  ``pyxab_budget_rate``), or without PyXAB against its pulls/s on this project's CPU (README).
* ``gp``: KernelTS, GP-UCB, BO and BBO at T = 1,000, 100 and 1,000 seeds.
* ``cmdbuf``: HCT's rows of ``hct`` and SequOOL's and PCT's of ``trees`` again, with XLA recording
  while loops and conditionals into command buffers (``SECTION_ENV``): the same programs, without the
  host's wait on each trip's condition.

The last lines printed are the tables; ``bench_gpu.log`` holds every section's output and
``correctness_arrays.npz`` every array the device computed for the fixture's runs.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# One process at a time holds the accelerator, but this driver asks for the device's name before its
# sections start: it must not take three quarters of the card's memory for that.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import harness  # noqa: E402,F401  (the project on the import path)
import numpy as np  # noqa: E402

from fedpne_jax.core import processor  # noqa: E402

# The order is the order of importance; the seconds are each section's share of a full run.
SECTIONS = {"correctness": 110, "fedpne": 70, "perpull": 45, "hct": 40, "objectives": 90, "trees": 200, "gp": 30,
            "cmdbuf": 40}
# A section's own environment, set before its process starts JAX (XLA reads its flags once).  cmdbuf
# records the round loops into CUDA graphs, conditional nodes included, so a loop's trip no longer
# waits for its condition on the host: "+" adds these kinds to XLA's default list of commands.
SECTION_ENV = {"cmdbuf": {"XLA_FLAGS": "--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL"}}
# Seconds of PyXAB per algorithm in the trees section: a run of its slow ones (T-HOO, DOO, VROOM) takes
# longer, so they are timed over their first rounds, which overstates their rate.
PYXAB_SECONDS = 10.0
# This project's 2-core Intel Xeon, from the README's Benchmark tables (one run each).
CPU_FEDPNE_RUNS_PER_S = {1000: 25_899, 10_000: 33_351}
CPU_HCT_PULLS_PER_S = {1000: 561_000}
HCT_REFERENCE = {("hct", seeds): rate for seeds, rate in CPU_HCT_PULLS_PER_S.items()}   # _tree_rows' keys
PYXAB_PULLS_PER_S = {"hct": 3_714, "hoo": 323, "doo": 204, "soo": 2_697, "stosoo": 461, "vhct": 1_407, "poo": 478,
                     "gpo": 1_101, "pct": 14_640, "vpct": 7_125, "sequool": 36_360, "stroquool": 27_670,
                     "zooming": 57_820, "vroom": 7.0}
DECISIONS = ("phases", "uploads", "depth", "recommendation", "max_active", "distinct", "choices", "nodes",
             "arms_left", "arms_pulled")


# ----------------------------------------------------------------------------------------- helpers

def device_peak_mb() -> float | None:
    """The default device's peak allocation so far (None where the backend keeps no statistics)."""
    import jax
    stats = jax.devices()[0].memory_stats() or {}
    peak = stats.get("peak_bytes_in_use")
    return None if peak is None else peak / 2**20


def memory_gb() -> float:
    """One call's buffer budget: most of an accelerator, the package's default on a CPU."""
    import jax
    stats = jax.devices()[0].memory_stats() or {}
    limit = stats.get("bytes_limit")
    return 2.0 if not limit else 0.5 * limit / 2**30


def machine() -> dict:
    import jax

    from fedpne_jax.core.result import versions
    info = dict(versions(), devices=[str(d) for d in jax.devices()], backend=jax.default_backend(),
                processor=processor.describe())
    try:
        info["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,clocks.sm,"
                                             "clocks.max.sm", "--format=csv,noheader"], capture_output=True,
                                            text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        info["nvidia_smi"] = None
    return info


# Instructions that launch no kernel of their own.
NO_KERNEL = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast", "while", "conditional", "call",
             "after-all", "partition-id", "replica-id", "opt-barrier"}


def _computations(hlo: str) -> dict:
    """A compiled module's text as {computation: [(opcode, line)]}."""
    comps: dict = {}
    name = None
    for line in hlo.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\w.\-]+) \(.*\{$", line)
        if head:
            name = head.group(1)
            comps[name] = []
        elif line.startswith("}"):
            name = None
        elif name is not None and (m := re.match(r"^\s+(?:ROOT )?%?[\w.\-]+ = .*?\s([a-z][\w\-]*)\(", line)):
            comps[name].append((m.group(1), line))
    return comps


def loop_report(hlo: str) -> list[dict]:
    """Every while loop of a compiled program, nested ones after their parent: its depth of nesting,
    the kernels one trip of its body launches (a conditional counts its largest branch), and XLA's
    trip count where it knows one.  On a GPU each trip also waits for its condition on the host."""
    comps = _computations(hlo)

    def kernels(comp: str) -> int:
        n = 0
        for op, line in comps.get(comp, []):
            if op == "conditional" and (bs := re.search(r"branch_computations=\{([^}]*)\}", line)):
                n += 1 + max((kernels(c) for c in re.findall(r"%?([\w.\-]+)", bs.group(1))), default=0)
            elif op == "call" and (c := re.search(r"to_apply=%?([\w.\-]+)", line)):
                n += kernels(c.group(1))
            elif op not in NO_KERNEL:
                n += 1
        return n

    out: list = []

    def walk(comp: str, depth: int) -> None:
        for op, line in comps.get(comp, []):
            if op == "while":
                body = re.search(r"body=%?([\w.\-]+)", line).group(1)
                trips = re.search(r'"known_trip_count":\{"n":"(\d+)"', line)
                where = re.search(r'op_name="([^"]+)"', line)
                out.append(dict(depth=depth, kernels_per_trip=kernels(body),
                                known_trips=int(trips.group(1)) if trips else None,
                                where=where.group(1)[-80:] if where else body))
                walk(body, depth + 1)
            elif op == "conditional" and (bs := re.search(r"branch_computations=\{([^}]*)\}", line)):
                for c in re.findall(r"%?([\w.\-]+)", bs.group(1)):
                    walk(c, depth)
            elif op == "call" and (c := re.search(r"to_apply=%?([\w.\-]+)", line)):
                walk(c.group(1), depth)

    entry = [n for n in comps if n.startswith("main")] or list(comps)[-1:]
    if entry:
        walk(entry[0], 0)
    return out


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------- correctness

def _runs(quick: bool) -> list[str]:
    from tests.support import behaviour
    names = behaviour.runs()
    return [n for n in names if n in ("fedpne/aggregate", "fedpne/explicit-points", "baseline/hct")] if quick else names


def _noise_free(config):
    kind = config.noise.partition(":")[0]
    return config.replace(noise="none" if kind == "bernoulli" else f"{kind}:0")


def fixture_outputs(name: str) -> dict:
    """The fixture's arrays of run ``name``, with its recorded noise and noise-free (suffix '~quiet')."""
    import fedpne_jax as fp
    from tests.support import behaviour
    config = behaviour.config(name)
    objective = behaviour.objective(name)
    quiet = _noise_free(config)
    kw = dict(seeds=behaviour.SEEDS, base_seed=behaviour.BASE_SEED)
    if quiet.noise == "none":       # another noise kind: another program
        loud, still = fp.run(config, objective, **kw), fp.run(quiet, objective, **kw)
    else:                           # the scale is data: both in one program
        loud, still = fp.run_grid([config, quiet], objective, **kw)
    out = behaviour.stored(name, loud)
    out.update({k.replace(name, name + "~quiet", 1): v for k, v in behaviour.stored(name, still).items()})
    return out


def cpu_child(path: str, quick: bool, deadline: float) -> None:
    """On the CPU backend: every fixture run's outputs, saved to ``path`` after each run."""
    arrays: dict = {}
    for name in _runs(quick):
        if time.time() > deadline:
            break
        arrays.update(fixture_outputs(name))
        np.savez(path + ".tmp.npz", **{k.replace("/", "__"): v for k, v in arrays.items()})
        os.replace(path + ".tmp.npz", path)


def _diff(a, b) -> dict:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return dict(equal=False, shape=[list(a.shape), list(b.shape)])
    if np.array_equal(a, b):
        return dict(equal=True)
    scale = np.maximum(np.abs(a), np.abs(b))
    rel = np.where(scale > 0, np.abs(a - b) / np.where(scale > 0, scale, 1), 0)
    return dict(equal=False, max_abs=float(np.max(np.abs(a - b))), max_rel=float(np.max(rel)),
                differing=int(np.sum(a != b)), of=int(a.size))


def compare(mine: dict, other: dict, prefix: str) -> dict:
    """Per run: whether every decision array is equal and how far the regrets are."""
    keys = [k for k in mine if k.startswith(prefix + "/") and k in other]
    decisions = {k.rpartition("/")[2]: _diff(mine[k], other[k]) for k in keys if k.rpartition("/")[2] in DECISIONS}
    values = {k.rpartition("/")[2]: _diff(mine[k], other[k]) for k in keys
              if k.rpartition("/")[2] not in DECISIONS}
    return dict(arrays=len(keys), identical=sum(_diff(mine[k], other[k])["equal"] for k in keys),
                decisions_equal=all(d["equal"] for d in decisions.values()),
                differing_decisions=sorted(k for k, d in decisions.items() if not d["equal"]),
                max_rel_value_diff=max((d.get("max_rel", 0.0) for d in values.values()), default=0.0),
                values={k: d for k, d in values.items() if not d["equal"]})


def correctness(quick: bool, deadline: float, emit, arrays_path: str | None = None) -> None:
    from tests.support import behaviour
    fixture = behaviour.recorded()
    cpu_path = os.path.join(tempfile.mkdtemp(), "cpu.npz")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--cpu-child", cpu_path, "--deadline",
                              str(deadline - 5)] + (["--quick"] if quick else []), env=env)
    mine: dict = {}
    for name in _runs(quick):
        if time.time() > deadline - 10:
            emit(dict(run=name, skipped="out of time"))
            continue
        start = time.perf_counter()
        mine.update(fixture_outputs(name))
        if arrays_path:         # every array, for a closer look on this machine afterwards
            np.savez_compressed(arrays_path, **{k.replace("/", "__"): v for k, v in mine.items()})
        emit(dict(run=name, seconds=time.perf_counter() - start, against="fixture (AMD EPYC, JAX 0.10.2)",
                  **compare(mine, fixture, name)))
    try:
        child.wait(timeout=max(1.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        child.kill()
    cpu = {}
    if os.path.exists(cpu_path):
        with np.load(cpu_path) as data:
            cpu = {k.replace("__", "/"): data[k] for k in data.files}
    for name in _runs(quick):
        for run in (name, name + "~quiet"):
            if any(k.startswith(run + "/") for k in cpu) and any(k.startswith(run + "/") for k in mine):
                emit(dict(run=run, against="this machine's CPU backend, same JAX", **compare(mine, cpu, run)))


def correctness_table(rows: list[dict]) -> str:
    lines = [f"{'run':<34} {'against':<12} {'identical':>9} {'decisions':>9} {'max rel diff':>12}  differing"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"{r['run']:<34} skipped ({r['skipped']})")
            continue
        against = "fixture" if r["against"].startswith("fixture") else "cpu"
        lines.append(f"{r['run']:<34} {against:<12} {r['identical']:>4}/{r['arrays']:<4} "
                     f"{'equal' if r['decisions_equal'] else 'DIFFER':>9} {r['max_rel_value_diff']:>12.2e}  "
                     f"{','.join(r['differing_decisions'] + sorted(r['values']))}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------- speed

def _timed_run(config, objective, seeds: int, repeats: int, **kw) -> dict:
    """First call (compiles, sizes the table), then the best of ``repeats`` at the found capacity."""
    import fedpne_jax as fp
    budget = memory_gb()
    first = fp.run(config, objective, seeds=seeds, memory_gb=budget, **kw)
    if isinstance(config, fp.FedPNEConfig):
        config = config.replace(capacity=first.capacity)
    best = harness.best_run_seconds(lambda: fp.run(config, objective, seeds=seeds, memory_gb=budget, **kw), repeats)
    return dict(seconds=best, compile_seconds=first.compile_seconds, final_regret_mean=float(first.final_regret.mean()),
                capacity=getattr(first, "capacity", None), device_peak_mb=device_peak_mb())


def fedpne(quick: bool, deadline: float, emit) -> None:
    import bench

    import fedpne_jax as fp
    import objectives
    from fedpne_jax.core.run import compiled_memory
    M, T = (10, 10**4) if quick else (100, 10**6)
    objective = objectives.make_objective("garland", M)
    config = fp.FedPNEConfig(num_clients=M, horizon=T, noise="gaussian:0.1")
    reference = bench.reference_rate(config.replace(split="longest"), objective, 5 if quick else 50, False)
    emit(dict(M=M, T=T, implementation="numpy reference (exact means)", processor=processor.describe(),
              reference_runs_per_s=reference))
    for seeds in ((10, 100) if quick else (1_000, 10_000, 100_000)):
        if time.time() > deadline - 5:
            emit(dict(M=M, T=T, seeds=seeds, skipped="out of time"))
            continue
        r = _timed_run(config, objective, seeds, repeats=2)
        mem = compiled_memory(config.replace(capacity=r["capacity"]), objective, min(seeds, 10_000))
        cpu = CPU_FEDPNE_RUNS_PER_S.get(min(seeds, 10_000)) if not quick else None
        emit(dict(M=M, T=T, seeds=seeds, runs_per_s=seeds / r["seconds"], **r,
                  xla_buffers_mb_per_10k=(mem.argument_size_in_bytes + mem.output_size_in_bytes
                                          + mem.temp_size_in_bytes) / 2**20,
                  cpu_runs_per_s=cpu, vs_cpu=None if cpu is None else seeds / r["seconds"] / cpu,
                  vs_reference=seeds / r["seconds"] / reference))


def perpull(quick: bool, deadline: float, emit) -> None:
    import bench_perpull
    M, T, seeds = (10, 10**4, 20) if quick else (100, 10**6, 100)
    for pull in ("centre", "uniform"):
        if time.time() > deadline - 5:
            emit(dict(pull=pull, skipped="out of time"))
            continue
        eng = bench_perpull.engine_case(M, T, seeds, pull, repeats=2)
        n = T * M * seeds
        words = 1 if pull == "centre" else 2              # Garland: D = 1
        threefry = bench_perpull.floor_seconds(n * words, "threefry")
        philox = bench_perpull.floor_seconds(n * words, "philox")
        rate = n / eng["seconds"]
        emit(dict(M=M, T=T, seeds=seeds, pull=pull, pulls_per_s=rate, floor_threefry=n / threefry,
                  floor_philox=n / philox, vs_floor=rate * threefry / n, vs_philox_floor=rate * philox / n,
                  compile_seconds=eng["compile_seconds"], xla_buffers_mb=eng["xla_buffers_mb"],
                  device_peak_mb=device_peak_mb()))


# A row's label and the options it sets beyond the horizon and the noise: "soo-pyxab" is SOO with
# pyxab=True, "hct-pyxab" HCT with PyXAB's expansion rule.
VARIANTS = {"hct-pyxab": {"expand": "pyxab"}}


def _options(label: str) -> tuple[str, dict]:
    name, _, variant = label.partition("-")
    return name, VARIANTS.get(label, {"pyxab": True} if variant == "pyxab" else {})


def _tree_rows(labels, seed_counts, T, deadline, emit, reference: dict, source: str | None = None) -> None:
    import fedpne_jax as fp
    import objectives
    objective = objectives.make_objective("garland", num_clients=1, heterogeneity="none")
    for label in labels:
        name, options = _options(label)
        for seeds in seed_counts:
            if time.time() > deadline - 5:
                emit(dict(algorithm=label, seeds=seeds, skipped="out of time"))
                continue
            r = _timed_run(fp.make_config(name, horizon=T, noise="gaussian:0.1", **options), objective, seeds,
                           repeats=1)
            rate = seeds * T / r["seconds"]
            ref = reference.get((name, seeds)) or reference.get(name)
            emit(dict(algorithm=label, T=T, seeds=seeds, pulls_per_s=rate, **r, reference_pulls_per_s=ref,
                      ratio=None if not ref else rate / ref, **({"reference": source} if source else {})))


def hct(quick: bool, deadline: float, emit, algorithms=None) -> None:
    from fedpne_jax.core import executor
    T = 2_000 if quick else 10_000
    for name in algorithms or ("hct", "hoo"):
        executor._compiled.clear()
        _tree_rows((name,), (1, 10, 100) if quick else (1, 1_000, 10_000), T, deadline, emit, HCT_REFERENCE)
        # What bounds a round: the loops of the largest batch's program and the kernels of their trips.
        programs = [exe.as_text() for exe, _ in executor._compiled.values()]
        if programs:
            for loop in loop_report(programs[-1]):
                emit(dict(algorithm=name, kind="loop", **loop))


def _pyxab_rate(args):
    os.environ["JAX_PLATFORMS"] = "cpu"        # PyXAB's worker needs no accelerator of its own
    import bench_trees
    return bench_trees.pyxab_budget_rate(*args)


def pyxab_workers(algorithms: int) -> int:
    """PyXAB processes at once: half the logical CPUs (SMT siblings would share a core and halve
    PyXAB's rate), at most one per algorithm."""
    return max(1, min(algorithms, (os.cpu_count() or 2) // 2))


def pyxab_rates(names, T: int, seconds: float) -> dict | None:
    """{name: (pulls/s, label)} of PyXAB's own algorithms on this machine's processor, each timed in
    its own process for ``seconds``, :func:`pyxab_workers` at once; None without PyXAB."""
    import concurrent.futures
    import multiprocessing
    try:
        import PyXAB  # noqa: F401
    except ImportError:
        return None
    workers = pyxab_workers(len(names))
    # Spawned, not forked: a fork of a process that has started JAX's threads can deadlock.
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        rates = list(pool.map(_pyxab_rate, [(name, T, seconds) for name in names]))
    return {name: (rate[0], rate[2]) for name, rate in zip(names, rates)}


def trees(quick: bool, deadline: float, emit, algorithms=None) -> None:
    cheap_first = ("hct", "hoo", "doo", "sequool", "stroquool", "zooming", "soo", "stosoo", "vhct", "gpo", "pct",
                   "poo", "vpct", "vroom", "hct-pyxab", "soo-pyxab", "stosoo-pyxab", "vhct-pyxab", "gpo-pyxab",
                   "pct-pyxab", "poo-pyxab", "vpct-pyxab")
    labels = algorithms or cheap_first
    T = 2_000 if quick else 10_000
    names = sorted({_options(label)[0] for label in labels})
    measured = pyxab_rates(names, T, 2.0 if quick else PYXAB_SECONDS)
    if measured is None:
        _tree_rows(labels, (10,) if quick else (1_000,), T, deadline, emit, PYXAB_PULLS_PER_S,
                   "PyXAB on this project's 2-core CPU (README)")
        return
    for name, (rate, label) in measured.items():
        emit(dict(kind="pyxab", algorithm=name, T=T, pulls_per_s=rate, reference=label,
                  processor=processor.describe(), workers=pyxab_workers(len(names))))
    _tree_rows(labels, (10,) if quick else (1_000,), T, deadline, emit, {n: r for n, (r, _) in measured.items()},
               "PyXAB on this machine's processor, same section")


def _evaluation_row(kind: str, config, objective, seeds: int, deadline: float, emit) -> dict | None:
    """Fed-PNE's runs on an expensive objective, evaluating only the pulled rows: one row of run and
    compile seconds and (point, client) evaluations; the timed run, or None when out of time."""
    from fedpne_jax.algorithms.fedpne import engine
    if time.time() > deadline:
        emit(dict(kind=kind, seeds=seeds, skipped="out of time"))
        return None
    first = engine.evaluation_run(config, objective, seeds)          # compiles
    run = engine.evaluation_run(config, objective, seeds)
    emit(dict(kind=kind, M=config.num_clients, T=config.horizon, seeds=seeds, run_seconds=run["run_seconds"],
              compile_seconds=first["compile_seconds"], evaluations=int(run["total"].sum()),
              evaluations_every_row=int(run["every_row_total"].sum()), runs_per_s=seeds / run["run_seconds"],
              final_regret_mean=float(run["outputs"].final_regret.mean()), device_peak_mb=device_peak_mb()))
    return run


def objective_section(quick: bool, deadline: float, emit) -> None:
    import bench_objectives

    import fedpne_jax as fp
    import objectives
    M, T = 4, (100 if quick else 500)
    config = fp.FedPNEConfig(num_clients=M, horizon=T)
    landmine = objectives.make_objective("landmine", M)
    for seeds in (4, 64):
        run = _evaluation_row("fedpne-landmine", config, landmine, seeds, deadline - 10, emit)
        if run is not None and seeds == 4 and time.time() < deadline - 20:
            try:
                sk = objectives.make_objective("landmine-sklearn", M)
            except Exception as exc:                                # the svm extra is missing
                emit(dict(kind="landmine-sklearn", skipped=str(exc)))
                continue
            table = config.replace(capacity=run["capacity"])
            fp.run(table, sk, seeds=seeds)                          # compiles; the host memoises its fits
            sk = objectives.make_objective("landmine-sklearn", M)
            start = time.perf_counter()
            res = fp.run(table, sk, seeds=seeds)
            emit(dict(kind="landmine-sklearn", M=M, T=T, seeds=seeds, run_seconds=res.run_seconds,
                      wall_seconds=time.perf_counter() - start,
                      max_abs_final_regret_diff=float(np.max(np.abs(res.final_regret
                                                                    - run["outputs"].final_regret)))))
    for name in ("landmine", "digits"):
        if time.time() < deadline - 15:
            emit(bench_objectives.throughput_row(name, 16, 4 if quick else 16))
    M, T = objectives.default_size("digits")
    config, digits = fp.FedPNEConfig(num_clients=M, horizon=T), objectives.make_objective("digits", M)
    for seeds in (2, 4) if quick else (8, 64):
        _evaluation_row("fedpne-digits", config, digits, seeds, deadline - 20, emit)


def gp(quick: bool, deadline: float, emit) -> None:
    import bench_gp
    T = 100 if quick else 1_000
    for name in ("kernelts", "gpucb", "bo", "bbo"):
        for seeds in ((10,) if quick else (100, 1_000)):
            if time.time() > deadline - 5:
                emit(dict(algorithm=name, seeds=seeds, skipped="out of time"))
                continue
            r = bench_gp.jax_rate(name, T, seeds, repeats=2)
            emit(dict(algorithm=name, T=T, seeds=seeds, **r, device_peak_mb=device_peak_mb()))


def cmdbuf(quick: bool, deadline: float, emit) -> None:
    T = 2_000 if quick else 10_000
    _tree_rows(("hct",), (1, 100) if quick else (1, 1_000, 10_000), T, deadline, emit, HCT_REFERENCE)
    _tree_rows(("sequool", "pct"), (10,) if quick else (1_000,), T, deadline, emit, PYXAB_PULLS_PER_S)


RUNNERS = {"correctness": correctness, "fedpne": fedpne, "perpull": perpull, "hct": hct,
           "objectives": objective_section, "trees": trees, "gp": gp,
           "cmdbuf": cmdbuf}


# -------------------------------------------------------------------------------------- the driver

def section_env(name: str, environ) -> dict:
    """The environment of section ``name``'s process: the caller's, with the section's own settings;
    its XLA flags join the caller's rather than replace them."""
    env = dict(environ)
    for key, value in SECTION_ENV.get(name, {}).items():
        env[key] = f"{env.get(key, '')} {value}".strip() if key == "XLA_FLAGS" else value
    return env


def run_section(name: str, quick: bool, deadline: float, rows_path: str, algorithms: list[str] | None,
                out_dir: str) -> None:
    def emit(row: dict) -> None:
        with open(rows_path, "a") as f:
            f.write(json.dumps(row, default=float) + "\n")
        log(f"  {name}: {json.dumps(row, default=float)[:300]}")
    if algorithms and name in ("hct", "trees"):
        RUNNERS[name](quick, deadline, emit, algorithms)
    elif name == "correctness":
        correctness(quick, deadline, emit, os.path.join(out_dir, "correctness_arrays.npz"))
    else:
        RUNNERS[name](quick, deadline, emit)


def _rows(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def table(name: str, rows: list[dict]) -> str:
    return correctness_table(rows) if name == "correctness" else harness.generic_table(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a rehearsal on the CPU")
    ap.add_argument("--out", default="bench_gpu", help="folder for bench_gpu.json and bench_gpu.log")
    ap.add_argument("--budget", type=float, default=sum(SECTIONS.values()), help="seconds for all sections")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"a subset of {','.join(SECTIONS)}")
    ap.add_argument("--algorithms", help="the algorithms of the hct and trees sections (comma-separated; default all)")
    ap.add_argument("--section", help=argparse.SUPPRESS)
    ap.add_argument("--rows", help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--cpu-child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.cpu_child:
        cpu_child(args.cpu_child, args.quick, args.deadline)
        return 0
    if args.section:
        run_section(args.section, args.quick, args.deadline, args.rows,
                    args.algorithms.split(",") if args.algorithms else None, args.out)
        return 0
    names = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        ap.error(f"--sections: unknown {unknown}; choose from {','.join(SECTIONS)}")
    from fedpne_jax.core.files import write_json
    os.makedirs(args.out, exist_ok=True)
    out_json, out_log = os.path.join(args.out, "bench_gpu.json"), os.path.join(args.out, "bench_gpu.log")
    start = time.time()
    end = start + args.budget
    report: dict = {"machine": machine(), "budget_seconds": args.budget, "quick": args.quick, "sections": {}}
    print(json.dumps(report["machine"]), flush=True)
    scratch = tempfile.mkdtemp()
    for i, name in enumerate(names):
        left = end - time.time()
        # Each section gets its share of what is left, but never less than its share of the budget
        # when earlier sections finished early.
        budget = min(left, max(SECTIONS[name], left * SECTIONS[name] / sum(SECTIONS[n] for n in names[i:])))
        entry: dict = {"budget_seconds": round(budget, 1)}
        if budget < 10:
            entry["status"] = "skipped: out of time"
        else:
            rows_path = os.path.join(scratch, f"{name}.jsonl")
            t0 = time.time()
            with open(out_log, "a") as logf:
                logf.write(f"\n## {name} (budget {budget:.0f} s)\n")
                logf.flush()
                cmd = [sys.executable, os.path.abspath(__file__), "--section", name, "--rows", rows_path, "--out", args.out,
                       "--deadline", str(t0 + budget)] + (["--quick"] if args.quick else []) \
                    + (["--algorithms", args.algorithms] if args.algorithms else [])
                proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True,
                                        env=section_env(name, os.environ))
                try:
                    rc = proc.wait(timeout=budget + 20)
                    entry["status"] = "ok" if rc == 0 else f"failed (exit {rc}; see bench_gpu.log)"
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
                    proc.wait()
                    entry["status"] = "cut at its time budget"
            entry["seconds"] = round(time.time() - t0, 1)
            entry["rows"] = _rows(rows_path)
        report["sections"][name] = entry
        write_json(out_json, report)
        print(f"[{time.time() - start:6.0f} s] {name}: {entry['status']}, {len(entry.get('rows', []))} rows",
              flush=True)
    for name, entry in report["sections"].items():
        print(f"\n## {name} ({entry['status']})\n{table(name, entry.get('rows', []))}")
    print(f"\nwrote {out_json} in {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
