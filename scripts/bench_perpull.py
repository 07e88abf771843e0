"""Per-pull section of scripts/bench.py: the ``explicit`` sampler against the device's floor and NumPy.

    python scripts/bench.py --sections perpull [--quick]

For uniform:0.1 noise on Garland (shift heterogeneity), with centre pulls and with uniform points,
at (M = 10, T = 10^5, 100 seeds) and (M = 100, T = 10^6, 10 seeds), all in one process run:

* engine: ``fp.run`` with sampling 'explicit' (after a first call that compiles and sizes the
  table); pulls/s counts every pull of every run, T x M x seeds, over the best of three calls;
* floor: the uniforms those pulls need (one per pull for centre pulls, D + 1 for uniform points)
  drawn and summed by one jitted call, with jax.random.uniform (threefry, JAX's default) and with
  the package's Philox4x32-10;
* numpy: the reference's vectorised per-pull simulation (tests/reference.py, per_pull=True), the
  same algorithm drawing every reward of every round with NumPy's PCG64, timed on a few runs;
* memory: XLA's buffers of the engine's program (arguments + outputs + temporaries) and the
  engine process's peak RSS, imports included (each engine case runs in a fresh process).

Both the engine and the NumPy simulation draw rewards only in phases that complete (a phase cut at
T uploads nothing); the floor columns draw for every pull, so they are the stricter yardstick.
Also measured: the float32 sum of 10^9 uniforms of one node against float64 (accuracy row).
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402,F401  (the project on the import path)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import fedpne_jax as fp  # noqa: E402
import objectives  # noqa: E402
from fedpne_jax.core import counters, pulls  # noqa: E402
from fedpne_jax.core.run import compiled_memory  # noqa: E402

CASES = [(10, 10**5, 100), (100, 10**6, 10)]
NOISE = "uniform:0.1"


def _config(M, T, pull):
    return fp.FedPNEConfig(num_clients=M, horizon=T, noise=NOISE, pull=pull, sampling="explicit")


def engine_case(M: int, T: int, seeds: int, pull: str, repeats: int) -> dict:
    """One engine case, in this process (main runs each in a fresh subprocess)."""
    config = _config(M, T, pull)
    objective = objectives.make_objective("garland", M)
    first = fp.run(config, objective, seeds=seeds)
    config = config.replace(capacity=first.capacity)
    best = harness.best_run_seconds(lambda: fp.run(config, objective, seeds=seeds), repeats)
    mem = compiled_memory(config, objective, seeds)
    return dict(seconds=best, compile_seconds=first.compile_seconds, capacity=first.capacity,
                xla_buffers_mb=(mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes) / 2**20,
                peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                final_regret_mean=float(first.final_regret.mean()))


def _engine_subprocess(M, T, seeds, pull, repeats) -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--case", str(M), str(T), str(seeds), pull,
                          str(repeats)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def floor_seconds(uniforms: int, generator: str, repeats: int = 3) -> float:
    """Best time of one jitted call drawing ``uniforms`` float32 uniforms and summing them (in slabs
    of 2^24 inside the call, so memory stays bounded)."""
    slab = 2**24
    slabs = -(-uniforms // slab)
    if generator == "threefry":
        def draw(i):
            return jax.random.uniform(jax.random.fold_in(jax.random.key(0), i), (slab,)).sum()
    else:
        def draw(i):
            q = i.astype(jnp.uint32) * jnp.uint32(slab // 4) + jnp.arange(slab // 4, dtype=jnp.uint32)
            words = counters.philox4x32((q, 0, 0, 0), (jnp.uint32(1), jnp.uint32(2)))
            return sum(counters.unit_floats(w) for w in words).sum()
    fn = jax.jit(lambda: jax.lax.fori_loop(0, slabs, lambda i, acc: acc + draw(i), jnp.float32(0)))
    jax.block_until_ready(fn())
    return harness.best_seconds(lambda: jax.block_until_ready(fn()), repeats) * uniforms / (slabs * slab)


def numpy_seconds_per_run(M, T, pull, runs: int) -> float:
    from tests.support import reference
    objective = objectives.make_objective("garland", M)
    prob = reference.problem(objective.name, M, objective.dim, shifts=np.asarray(objective.data["shift"], np.float64))
    config = _config(M, T, pull)
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for _ in range(runs):
        reference.fedpne(prob, T, split="longest", c=config.c_value, noise="uniform", sigma=config.noise_scale,
                         pull=pull, checkpoints=config.checkpoints, rng=rng, per_pull=True)
    return (time.perf_counter() - start) / runs


def accuracy_row() -> dict:
    """The float32 block sums of 10^9 uniforms of one row against float64 sums of the same numbers."""
    n, key = 10**9, np.uint32([1, 2])

    def total(dtype):
        def block(j, b):
            u = [x[0].astype(dtype) for x in pulls.block_uniforms(key, j, b, 1, 1, jnp.float32)]
            return pulls.block_sum(u, (pulls.block_offsets(b) < n)[:, None, :]), (), jnp.int32(0)
        run = jax.jit(lambda: pulls.row_sums(jnp.int32(1), pulls.block_count(jnp.int32(n)), block,
                                             jnp.zeros((1,), dtype), (), 1)[0])
        return float(np.asarray(run(), np.float64)[0, 0])

    single = total(jnp.float32)
    with jax.enable_x64(True):
        double = total(jnp.float64)
    return dict(case="float32 sum of 1e9 pulls", float32=single, float64=double, relative_error=single / double - 1)


def rows(quick: bool) -> list[dict]:
    cases = [(10, 10**4, 20), (100, 10**5, 4)] if quick else CASES
    out = []
    for M, T, seeds in cases:
        for pull in ("centre", "uniform"):
            words = 1 + (0 if pull == "centre" else 1)          # Garland: D = 1
            n_pulls = T * M * seeds
            eng = _engine_subprocess(M, T, seeds, pull, repeats=1 if quick else 3)
            threefry = floor_seconds(n_pulls * words, "threefry")
            ph = floor_seconds(n_pulls * words, "philox")
            runs = 1 if (quick or T >= 10**6) else 3
            numpy_run = numpy_seconds_per_run(M, T, pull, runs)
            row = dict(M=M, T=T, seeds=seeds, pull=pull, uniforms_per_pull=words,
                       engine_pulls_per_s=n_pulls / eng["seconds"],
                       floor_threefry_pulls_per_s=n_pulls / threefry, floor_philox_pulls_per_s=n_pulls / ph,
                       numpy_pulls_per_s=T * M / numpy_run, numpy_seconds_per_run=numpy_run,
                       engine_seconds_per_run=eng["seconds"] / seeds, **{k: v for k, v in eng.items() if k != "seconds"})
            row["vs_floor"] = row["engine_pulls_per_s"] / row["floor_threefry_pulls_per_s"]
            row["vs_philox_floor"] = row["engine_pulls_per_s"] / row["floor_philox_pulls_per_s"]
            row["vs_numpy"] = row["engine_pulls_per_s"] / row["numpy_pulls_per_s"]
            out.append(row)
            print(f"  M={M} T={T} {pull}: {row['engine_pulls_per_s']:.3g} pulls/s, {row['vs_floor']:.2f} x floor, "
                  f"{row['vs_numpy']:.2f} x numpy", file=sys.stderr)
    if not quick:
        out.append(accuracy_row())
    return out


def table(rows: list[dict]) -> str:
    header = (f"{'M':>4} {'T':>6} {'seeds':>5} {'pull':<8} {'engine pulls/s':>14} {'floor tf':>10} {'floor ph':>10} "
              f"{'numpy':>10} {'x floor':>7} {'x ph':>6} {'x numpy':>7} {'compile s':>9} {'XLA MB':>7} {'RSS MB':>7}")
    lines = [header, "-" * len(header)]
    for r in rows:
        if "pull" not in r:
            lines.append(f"{r['case']}: float32 {r['float32']:.9g}, float64 {r['float64']:.9g}, "
                         f"relative error {r['relative_error']:.2e}")
            continue
        lines.append(f"{r['M']:>4} {r['T']:>6.0e} {r['seeds']:>5} {r['pull']:<8} {r['engine_pulls_per_s']:>14.3g} "
                     f"{r['floor_threefry_pulls_per_s']:>10.3g} {r['floor_philox_pulls_per_s']:>10.3g} "
                     f"{r['numpy_pulls_per_s']:>10.3g} {r['vs_floor']:>7.2f} {r['vs_philox_floor']:>6.2f} "
                     f"{r['vs_numpy']:>7.2f} {r['compile_seconds']:>9.2f} {r['xla_buffers_mb']:>7.1f} "
                     f"{r['peak_rss_mb']:>7.0f}")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--case":
        M, T, seeds, pull, repeats = sys.argv[2:7]
        print(json.dumps(engine_case(int(M), int(T), int(seeds), pull, int(repeats))))
    else:
        sys.exit(harness.main(__doc__, rows, table, "bench_perpull.json"))
