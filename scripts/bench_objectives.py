"""Benchmark of the real-world objectives (landmine, covid, digits).

    python scripts/bench_objectives.py [--quick] [--dense] [--out bench_objectives.json]

* Throughput: evaluations per second when nodes x clients x seeds local objectives are evaluated in
  one compiled call (the shape of one Fed-PNE phase: ``objective.local_values`` on a (seeds, nodes, D)
  batch of points drawn uniformly in the box), after a warm-up call that compiles.
* SVM agreement (only when scikit-learn is importable, ``pip install -e ".[svm]"``): the landmine
  AUC of the JAX solver against ``sklearn.svm.SVC(C, gamma, tol=1e-12)`` on every field over a grid
  of (C, gamma) points.  scikit-learn's default tol = 1e-3 is an absolute KKT tolerance that leaves
  the small-C solutions unconverged (their AUCs then depend on C although the exact ones do not), so
  the reference is run to 1e-12.
* ``--dense``: dense-search estimates of the best global value of each objective (default M).
* ``--evaluations``: Fed-PNE on the iterative objectives evaluates only the rows a phase pulls
  (fedpne_jax/algorithms/fedpne/evaluation.py).  Landmine (M = 4, T = 500, 4 seeds): run seconds and
  evaluations with every row of the node table evaluated (``eval_block=0``, the earlier path) and
  with the pulled rows only, whether the two give the same numbers, and the same runs through
  landmine-sklearn (SVC on the host, which fits only distinct points; needs the svm extra).  Digits
  (default M, T, seeds): evaluations with the pulled rows only, against every row (from the runs'
  counters: evaluation calls x capacity x sites x M).  Only this section runs with the flag.

``objective_rows(quick)`` returns the throughput and agreement rows; ``scripts/bench.py`` may import it.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402,F401  (the project on the import path)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import fedpne_jax as fp  # noqa: E402
import objectives  # noqa: E402
from fedpne_jax.algorithms.fedpne import engine  # noqa: E402
from objectives import covid, landmine  # noqa: E402
from objectives import python as pyobj  # noqa: E402
from objectives.errors import MissingExtra  # noqa: E402

REAL = ("landmine", "covid", "digits")


def _device() -> str:
    d = jax.devices()[0]
    return f"{d.platform}:{d.device_kind} x{len(jax.devices())}"


def throughput_row(name: str, nodes: int, seeds: int, clients: int | None = None, seed: int = 0) -> dict:
    """Evaluations/s of ``nodes x clients x seeds`` local objectives in one compiled call."""
    M = clients or objectives.default_size(name)[0]
    obj = objectives.make_objective(name, M, seed=seed)
    lo, hi = np.asarray(obj.lo), np.asarray(obj.hi)
    rng = np.random.default_rng(seed)
    X = (lo + rng.uniform(size=(seeds, nodes, obj.dim)) * (hi - lo)).astype(np.float32)
    fn = jax.jit(lambda o, x: o.local_values(x))
    start = time.perf_counter()
    jax.block_until_ready(fn(obj, X[:, :1]))                   # compile (another shape) is not timed
    compile_s = time.perf_counter() - start
    jax.block_until_ready(fn(obj, X))                          # compile this shape
    start = time.perf_counter()
    values = np.asarray(jax.block_until_ready(fn(obj, X)))
    seconds = time.perf_counter() - start
    evaluations = seeds * nodes * M
    return dict(kind="throughput", objective=name, clients=M, nodes=nodes, seeds=seeds, evaluations=evaluations,
                seconds=seconds, evaluations_per_second=evaluations / seconds, compile_seconds=compile_s,
                mean_value=float(values.mean()), finite=bool(np.isfinite(values).all()), device=_device())


def svm_agreement_row(Cs, gammas, fields=range(landmine.NUM_FIELDS)) -> dict | None:
    """AUC of the JAX SVM against scikit-learn's SVC on every (field, C, gamma); None without sklearn."""
    try:
        from sklearn.metrics import roc_auc_score
        from sklearn.svm import SVC
    except ImportError:
        return None
    fields = list(fields)
    data = landmine.make_data(landmine.NUM_FIELDS, jax.random.key(0))     # all fields, in order
    grid = np.array([(f, C, g) for f in fields for C in Cs for g in gammas])
    fn = jax.jit(jax.vmap(lambda m, C, g: (landmine.client_auc(data, m, C, g),
                                           landmine.svm_dual(data["d2_train"], m, data["y"][m], data["mask"][m],
                                                             C, g)[1])))
    m_idx = jnp.asarray(grid[:, 0], jnp.int32)
    C_arr, g_arr = jnp.asarray(grid[:, 1], jnp.float32), jnp.asarray(grid[:, 2], jnp.float32)
    start = time.perf_counter()
    jax_auc, iters = (np.asarray(v) for v in jax.block_until_ready(fn(m_idx, C_arr, g_arr)))
    jax_s = time.perf_counter() - start
    raw = landmine.load_raw()
    ref = np.zeros(len(grid))
    start = time.perf_counter()
    for k, (f, C, g) in enumerate(grid):
        sel = raw["field"] == int(f)
        tr, te = sel & raw["train"], sel & ~raw["train"]
        # The float32 (C, gamma) the JAX solver saw.
        clf = SVC(C=float(np.float32(C)), gamma=float(np.float32(g)), tol=1e-12).fit(raw["X"][tr], raw["y"][tr])
        ref[k] = roc_auc_score(raw["y"][te], clf.decision_function(raw["X"][te]))
    sk_s = time.perf_counter() - start
    diff = np.abs(jax_auc - ref)
    shape = (len(fields), len(Cs), len(gammas))
    glob = np.abs(jax_auc.reshape(shape).mean(0) - ref.reshape(shape).mean(0))
    return dict(kind="svm_agreement", grid_C=[float(c) for c in Cs], grid_gamma=[float(g) for g in gammas],
                fields=len(fields), points=len(grid), mean_abs_auc_diff=float(diff.mean()),
                max_abs_auc_diff=float(diff.max()), share_identical=float(np.mean(diff < 2.0**-16)),
                max_abs_global_diff=float(glob.max()), max_smo_iterations=int(iters.max()),
                mean_smo_iterations=float(iters.mean()), jax_seconds_incl_compile=jax_s, sklearn_seconds=sk_s,
                worst=dict(zip(("field", "C", "gamma"), map(float, grid[int(np.argmax(diff))]))))


def objective_rows(quick: bool) -> list[dict]:
    """Throughput of every real objective and (with scikit-learn) the SVM agreement."""
    nodes, seeds = (16, 2) if quick else (64, 4)
    rows = [throughput_row(name, nodes, seeds) for name in REAL]
    if quick:
        agreement = svm_agreement_row(np.logspace(-4, 1, 3), np.logspace(-2, 1, 3), fields=range(0, 29, 4))
    else:
        agreement = svm_agreement_row(np.logspace(-4, 1, 6), np.logspace(-2, 1, 6))
    if agreement is not None:
        rows.append(agreement)
    return rows


def dense_search_rows(quick: bool) -> list[dict]:
    """Best global value found by a dense search of each objective (default M, seed 0)."""
    rows = []
    # landmine: all 29 fields; log-spaced grids (the best AUCs sit at small gamma).
    M = landmine.NUM_FIELDS
    obj = objectives.make_objective("landmine", M)
    nC, ng = (4, 5) if quick else (8, 12)
    X = np.array([(C, g) for C in np.logspace(-4, 1, nC) for g in np.logspace(-2, 1, ng)], np.float32)
    rows.append(_dense_row("landmine", obj, X))
    # covid: the objective's own f* (dense grid of [1/2, 1], refined twice, float64).
    obj = objectives.make_objective("covid", covid.NUM_REGIONS)
    xs = np.linspace(0.0, 1.0, 2001, dtype=np.float32)[:, None]
    row = _dense_row("covid", obj, xs)
    row["f_star_used"] = obj.f_star
    rows.append(row)
    # digits: batch sizes, log-spaced learning rates and weight decays.
    M = objectives.default_size("digits")[0]
    obj = objectives.make_objective("digits", M)
    bs = [1, 2, 4, 8, 16] if quick else [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 100]
    lrs = np.logspace(-3, 0, 4 if quick else 10)
    wds = [1e-6, 1e-3] if quick else [1e-6, 1e-4, 1e-3, 1e-2]
    X = np.array([(b, lr, wd) for b in bs for lr in lrs for wd in wds], np.float32)
    rows.append(_dense_row("digits", obj, X))
    return rows


def _dense_row(name, obj, X) -> dict:
    fn = jax.jit(lambda o, x: o.value(x))
    start = time.perf_counter()
    values = np.asarray(fn(obj, X))
    k = int(np.argmax(values))
    return dict(kind="dense_search", objective=name, clients=obj.num_clients, points=len(X),
                best_value=float(values[k]), best_x=[float(v) for v in X[k]], f_star=obj.f_star,
                seconds_incl_compile=time.perf_counter() - start)


def _evaluation_fields(run: dict, seeds: int) -> dict:
    return dict(eval_block=run["eval_block"], capacity=run["capacity"], run_seconds=run["run_seconds"],
                compile_seconds=run["compile_seconds"], evaluations=int(run["total"].sum()),
                evaluations_every_row=int(run["every_row_total"].sum()), seeds=seeds)


def evaluation_rows(quick: bool = False) -> list[dict]:
    """Landmine with every row evaluated against the pulled rows only (and against landmine-sklearn) on
    the same runs, and digits' evaluations per run on both paths (see the module's docstring).  Run
    seconds exclude compilation; the faster path's run is timed twice and its best kept."""
    rows = []
    M, T, seeds = 4, 500, 4
    config = fp.FedPNEConfig(num_clients=M, horizon=T)
    obj = objectives.make_objective("landmine", M)
    every = engine.evaluation_run(config, obj, seeds, eval_block=0)
    pulled = [engine.evaluation_run(config, obj, seeds) for _ in range(2)]
    best = min(pulled, key=lambda r: r["run_seconds"])
    # Every output but the evaluation counters, which differ by design.
    same = all(np.array_equal(a, b) for name, a, b in zip(every["outputs"]._fields, every["outputs"], best["outputs"])
               if name != "evaluations")
    row = dict(kind="evaluations", objective="landmine", clients=M, horizon=T, device=_device(),
               every_row=_evaluation_fields(every, seeds), pulled_rows=_evaluation_fields(best, seeds),
               identical_outputs=bool(same), final_regret=[float(v) for v in best["outputs"].final_regret])
    try:
        sk = objectives.make_objective("landmine-sklearn", M)
    except MissingExtra:
        sk = None
    if sk is not None:
        same_table = config.replace(capacity=best["capacity"])    # no overflow and rerun: one call, as above
        fp.run(same_table, sk, seeds=seeds)                        # compiles; the host's fits are memoised
        sk = objectives.make_objective("landmine-sklearn", M)      # a fresh memo for the timed run
        start = time.perf_counter()
        res = fp.run(same_table, sk, seeds=seeds)
        wall = time.perf_counter() - start
        stats = pyobj.stats(sk)
        row["sklearn"] = dict(run_seconds=res.run_seconds, wall_seconds=wall, host_seconds=stats["seconds"],
                              host_distinct_points=stats["distinct_points"],
                              max_abs_final_regret_diff=float(np.max(np.abs(res.final_regret
                                                                           - best["outputs"].final_regret))))
    rows.append(row)
    name = "digits"
    M, T = objectives.default_size(name)
    seeds = 2 if quick else objectives.spec(name).default_seeds
    run = engine.evaluation_run(fp.FedPNEConfig(num_clients=M, horizon=T), objectives.make_objective(name, M), seeds)
    rows.append(dict(kind="evaluations", objective=name, clients=M, horizon=T, device=_device(),
                     pulled_rows=_evaluation_fields(run, seeds), per_run=[int(v) for v in run["total"]],
                     per_run_every_row=[int(v) for v in run["every_row_total"]]))
    return rows


def rows(quick: bool) -> list[dict]:
    """The section ``scripts/bench.py --sections objectives`` runs: throughput and SVM agreement, then
    Fed-PNE's evaluations on landmine (against landmine-sklearn) and digits."""
    return objective_rows(quick) + evaluation_rows(quick)


def table(rows_: list[dict]) -> str:
    """The rows as the text the scripts print."""
    out = []
    for r in rows_:
        if r["kind"] == "throughput":
            out.append(f"{r['objective']:9s} M={r['clients']:2d} nodes={r['nodes']:3d} seeds={r['seeds']:2d}: "
                       f"{r['evaluations']:6d} evaluations in {r['seconds']:7.2f} s = {r['evaluations_per_second']:9.1f}/s"
                       f"  (first compile {r['compile_seconds']:.1f} s)")
        elif r["kind"] == "svm_agreement":
            out.append(f"SVM vs sklearn SVC(tol=1e-12): {r['points']} (field, C, gamma) points, |dAUC| mean "
                       f"{r['mean_abs_auc_diff']:.2e} max {r['max_abs_auc_diff']:.2e}, identical "
                       f"{100 * r['share_identical']:.0f}%, global (mean over fields) max {r['max_abs_global_diff']:.2e}; "
                       f"SMO iterations max {r['max_smo_iterations']} mean {r['mean_smo_iterations']:.0f}; "
                       f"worst {r['worst']}")
        elif r["kind"] == "dense_search":
            out.append(f"dense search {r['objective']:9s} M={r['clients']:2d}: best {r['best_value']:.6f} at "
                       f"{r['best_x']} over {r['points']} points (f* used: {r['f_star']:.6f})")
        elif r["kind"] == "evaluations":
            p = r["pulled_rows"]
            head = (f"Fed-PNE {r['objective']} M={r['clients']} T={r['horizon']} {p['seeds']} seeds "
                    f"(capacity {p['capacity']}):")
            if "every_row" in r:
                e = r["every_row"]
                out.append(f"{head} every row {e['evaluations']} evaluations in {e['run_seconds']:.2f} s; pulled rows "
                           f"(blocks of {p['eval_block']}) {p['evaluations']} in {p['run_seconds']:.2f} s; identical "
                           f"outputs: {r['identical_outputs']}")
            else:
                out.append(f"{head} {p['evaluations']} evaluations (every row: {p['evaluations_every_row']}) in "
                           f"{p['run_seconds']:.2f} s; per run {r['per_run']} (every row: {r['per_run_every_row']})")
            if "sklearn" in r:
                k = r["sklearn"]
                out.append(f"  landmine-sklearn, same runs: {k['run_seconds']:.2f} s ({k['host_distinct_points']} distinct "
                           f"points on the host), final regret within {k['max_abs_final_regret_diff']:.2e} of the JAX runs")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small batches and grids (a smoke run)")
    ap.add_argument("--dense", action="store_true", help="also run the dense searches (minutes)")
    ap.add_argument("--evaluations", action="store_true",
                    help="only the rows-evaluated comparison of Fed-PNE on landmine and digits (minutes)")
    ap.add_argument("--out", default="bench_objectives.json")
    args = ap.parse_args(argv)
    if args.evaluations:
        rows = evaluation_rows(args.quick)
        print(table(rows))
        harness.report({"objectives": rows}, args.out)
        return 0
    rows = objective_rows(args.quick)
    if args.dense:
        rows += dense_search_rows(args.quick)
    print(table(rows))
    harness.report({"objectives": rows}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
