"""Ask/tell: what driving an algorithm step by step costs, inside JAX and from Python.

    python scripts/bench_asktell.py [--quick] [--out bench_asktell.json]   (or scripts/bench.py --sections asktell)

Rows, all from one run on one machine:

* **inside JAX** -- a ``lax.scan`` of the batched stepper (ask, the objective's values with the
  configuration's noise, tell), compiled once and sharded over the host's devices as ``fp.run`` is,
  against ``fp.run`` of the same configuration and seed count (run seconds, compile excluded):
  HCT at T = 10^4 and Fed-PNE (M = 10, T = 10^4), 1,000 seeds each;
* **from Python, one seed** -- HCT through ``fp.Optimizer`` at T = 10^4 (Garland, the caller's
  Gaussian noise), steps per second, against PyXAB's own HCT ``pull``/``receive_reward`` loop on the
  same objective, and the ask/tell overhead of Nevergrad's and Optuna's documented loops on a trivial
  objective (the ``bench`` extra installs them);
* **from Python, 1,000 seeds** -- one ``ask`` and one ``tell`` a round for all seeds: pulls per second.
"""
from __future__ import annotations

import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the project on the import path, host devices)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import fedpne_jax as fp  # noqa: E402
import objectives  # noqa: E402
from fedpne_jax.core import stepper as stepper_lib  # noqa: E402

SIGMA = 0.1


def _garland(x: float) -> float:
    return x * (1 - x) * (4 - math.sqrt(abs(math.sin(60 * x))))


def scanned_seconds(config, objective, seeds: int, repeats: int) -> tuple[float, float]:
    """(best run seconds, compile seconds) of a scan of the batched stepper over ``seeds`` runs,
    told the objective's values with the configuration's noise."""
    s = fp.stepper(config, objective)
    init, ask, tell, _, done, outputs, _ = stepper_lib.batch(s)
    evaluate = jax.vmap(s.evaluate, in_axes=(stepper_lib.QUERY_AXES, 0))
    steps = int(config.horizon)

    def whole(keys):
        def body(carry, _):
            state, k = carry
            q, state = ask(state)
            noise_keys = jax.vmap(lambda a: jax.random.fold_in(a, state.step))(k)
            return (tell(state, q, evaluate(q, noise_keys)), k), None
        state = init(keys)
        if s.algorithm.name == "fedpne":       # a phase a step: stop once every run is done
            state = jax.lax.while_loop(lambda c: ~jnp.all(done(c[0])), lambda c: body(c, None)[0], (state, keys))[0]
        else:
            state = jax.lax.scan(body, (state, keys), None, length=steps)[0][0]
        return outputs(state).final_regret

    devices = jax.devices()
    mesh = Mesh(np.asarray(devices), ("seeds",))
    sharding = NamedSharding(mesh, P("seeds"))
    keys = jax.vmap(lambda i: s.key(i, 0))(jnp.arange(seeds))
    keys = jax.device_put(keys, sharding)
    with s.x64():
        start = time.perf_counter()
        program = jax.jit(whole).lower(keys).compile()
        compile_s = time.perf_counter() - start
        best = harness.best_seconds(lambda: jax.block_until_ready(program(keys)), repeats)
    return best, compile_s


def inside_rows(quick: bool) -> list[dict]:
    seeds = 100 if quick else 1000
    rows = []
    for name, M in (("hct", 1), ("fedpne", 10)):
        T = 2000 if quick else 10**4
        config = fp.make_config(name, horizon=T, noise=f"gaussian:{SIGMA}", **({"num_clients": M} if M > 1 else {}))
        objective = objectives.make_objective("garland", M)
        fp.run(config, objective, seeds=seeds)                       # compile
        run_s = harness.best_run_seconds(lambda c=config, o=objective: fp.run(c, o, seeds=seeds), 3)
        scan_s, compile_s = scanned_seconds(config, objective, seeds, 3)
        rows.append(dict(kind="inside JAX", algorithm=name, T=T, seeds=seeds, fp_run_s=run_s, stepper_scan_s=scan_s,
                         scan_over_run=scan_s / run_s, scan_compile_s=compile_s))
        print(f"  {name}: fp.run {run_s:.3f} s, scanned stepper {scan_s:.3f} s", file=sys.stderr)
    return rows


def optimizer_rate(T: int, seeds) -> tuple[float, float]:
    """(steps/s, pulls/s) of HCT through fp.Optimizer with the caller's NumPy evaluation."""
    config = fp.make_config("hct", horizon=T, noise=f"gaussian:{SIGMA}")
    space = objectives.make_objective("garland", 1)
    rng = np.random.default_rng(0)
    warm = fp.Optimizer(config, space, seeds=seeds)          # compiles the programs the timed run shares
    q = warm.ask()
    warm.tell(q, np.zeros(q.counts.shape))
    opt = fp.Optimizer(config, space, seeds=seeds)
    start = time.perf_counter()
    while not opt.done:
        q = opt.ask()
        x = q.points[..., 0]
        f = x * (1 - x) * (4 - np.sqrt(np.abs(np.sin(60 * x))))
        opt.tell(q, f + SIGMA * rng.standard_normal(f.shape))
    elapsed = time.perf_counter() - start
    runs = 1 if seeds is None else seeds
    return T / elapsed, T * runs / elapsed


def pyxab_rate(T: int) -> tuple[float, str] | None:
    try:
        from importlib.metadata import version

        from PyXAB.algos.HCT import HCT
    except ImportError:
        return None
    np.random.seed(0)
    rng = np.random.default_rng(0)
    algo = HCT(nu=1, rho=0.5, c=0.1, delta=0.01, domain=[[0.0, 1.0]])
    start = time.perf_counter()
    for t in range(1, T + 1):
        point = algo.pull(t)
        algo.receive_reward(t, _garland(float(point[0])) + SIGMA * rng.standard_normal())
    return T / (time.perf_counter() - start), f"PyXAB {version('pyxab')} HCT"


def nevergrad_rate(steps: int) -> tuple[float, str] | None:
    try:
        import nevergrad as ng
    except ImportError:
        return None
    # OnePlusOne: NGOpt's default choice here fails inside Nevergrad 1.0.12 with NumPy 2 (a
    # metamodel's float() of a 1-element array); the ask/tell loop is the same.
    opt = ng.optimizers.OnePlusOne(parametrization=ng.p.Array(shape=(1,)).set_bounds(0.0, 1.0), budget=steps)
    start = time.perf_counter()
    for _ in range(steps):
        x = opt.ask()
        opt.tell(x, float(x.value[0]))
    return steps / (time.perf_counter() - start), f"Nevergrad {ng.__version__} OnePlusOne ask/tell"


def optuna_rate(steps: int) -> tuple[float, str] | None:
    try:
        import optuna
    except ImportError:
        return None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    start = time.perf_counter()
    for _ in range(steps):
        trial = study.ask()
        study.tell(trial, trial.suggest_float("x", 0.0, 1.0))
    return steps / (time.perf_counter() - start), f"Optuna {optuna.__version__} RandomSampler ask/tell"


def python_rows(quick: bool) -> list[dict]:
    T = 2000 if quick else 10**4
    rows = []
    steps, _ = optimizer_rate(T, None)
    rows.append(dict(kind="from Python, 1 seed", implementation="fp.Optimizer HCT", T=T, steps_per_s=steps))
    mine = steps
    found = pyxab_rate(T)
    if found:
        rate, label = found
        rows.append(dict(kind="from Python, 1 seed", implementation=label, T=T, steps_per_s=rate))
        rows[0]["x_pyxab"] = mine / rate
    for fn in (nevergrad_rate, optuna_rate):
        found = fn(500 if quick else 2000)
        if found:
            rate, label = found
            rows.append(dict(kind="from Python, trivial objective", implementation=label, steps_per_s=rate))
    seeds = 100 if quick else 1000
    steps, pulls = optimizer_rate(T, seeds)
    rows.append(dict(kind=f"from Python, {seeds} seeds", implementation="fp.Optimizer HCT", T=T, seeds=seeds,
                     steps_per_s=steps, pulls_per_s=pulls))
    return rows


def rows(quick: bool) -> list[dict]:
    return inside_rows(quick) + python_rows(quick)


if __name__ == "__main__":
    sys.exit(harness.main(__doc__, rows, None, "bench_asktell.json"))
