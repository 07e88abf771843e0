"""Fed-PNE tunes an SVM's two hyper-parameters for four data owners, each evaluation a real fit.

    python examples/ask_tell_sklearn.py [--horizon 2000] [--workers 4]

Each of four clients owns one landmine field (the package ships the data: objectives/data/landmine.npz)
and fits scikit-learn's SVC on its field's training half, scoring it on the field's held-out half by
AUC-ROC, as the paper's landmine objective does (about 94 % of the points are negatives, so accuracy
alone would reward predicting "no mine" everywhere; it is printed beside).  Fed-PNE searches (log10 C, log10 gamma) in [-2, 2] x [-2, 1] through ask and tell:
each phase asks every client for its active nodes' points, the fits of a phase run in a
ProcessPoolExecutor, and the clients' scores go back as the means of the asked pulls (a fit is
deterministic, so every pull of a point scores the same and one fit answers them all).  The same run
is made three times: once to compile the optimizer's programs, then timed with the pool and timed
serially; both give the same recommendation.
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

FIELDS = (0, 1, 2, 3)            # the four data owners' landmine fields
BOX = ([-2.0, -2.0], [2.0, 1.0])  # log10 C, log10 gamma


@functools.lru_cache(maxsize=None)
def raw_data() -> dict:
    """The shipped landmine arrays, read without importing the package: the worker processes need
    NumPy and scikit-learn only, not JAX."""
    folder = importlib.util.find_spec("objectives").submodule_search_locations[0]
    with np.load(os.path.join(folder, "data", "landmine.npz")) as data:
        return {k: data[k] for k in ("X", "y", "field", "train")}


def field_data(field: int):
    raw = raw_data()
    mine = raw["field"] == field
    train, test = mine & raw["train"], mine & ~raw["train"]
    return raw["X"][train], raw["y"][train], raw["X"][test], raw["y"][test]


def fit(field: int, x):
    from sklearn.svm import SVC
    X, y, X_test, y_test = field_data(field)
    return SVC(C=10.0 ** x[0], gamma=10.0 ** x[1]).fit(X, y), X_test, y_test


def fit_score(job):
    """Client ``field``'s held-out AUC-ROC of SVC(C, gamma) at x = (log10 C, log10 gamma)."""
    from sklearn.metrics import roc_auc_score
    field, x = job
    model, X_test, y_test = fit(field, x)
    return float(roc_auc_score(y_test, model.decision_function(X_test)))


def accuracy(field: int, x) -> float:
    model, X_test, y_test = fit(field, x)
    return float(model.score(X_test, y_test))


def tune(horizon: int, pool=None):
    """Fed-PNE over the four clients; ``pool``: an executor for each phase's fits (None: serial)."""
    import fedpne_jax as fp
    config = fp.make_config("fedpne", num_clients=len(FIELDS), horizon=horizon, noise="none")
    opt = fp.Optimizer(config, BOX)
    fits = 0
    while not opt.done:
        q = opt.ask()                                     # points (M, B, 2), counts (M, B)
        slots = np.argwhere(q.counts > 0)
        jobs = [(FIELDS[m], q.points[m, b]) for m, b in slots]
        scores = list(pool.map(fit_score, jobs, chunksize=4)) if pool else [fit_score(j) for j in jobs]
        values = np.full(q.counts.shape, np.nan)
        values[tuple(slots.T)] = scores
        opt.tell(q, values)
        fits += len(jobs)
    return opt, fits


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=2000, help="pulls per client (default 2000)")
    parser.add_argument("--workers", type=int, default=4, help="processes for the fits (default 4)")
    args = parser.parse_args(argv)

    tune(args.horizon)             # compiles the optimizer's programs, which the timed runs share
    # Worker processes are spawned, not forked: a fork of a process running JAX's threads can hang.
    with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        # The workers start, import scikit-learn and read the data before the clock starts.
        list(pool.map(fit_score, [(f, (0.0, 0.0)) for f in FIELDS for _ in range(args.workers)]))
        start = time.perf_counter()
        opt, fits = tune(args.horizon, pool)
        parallel = time.perf_counter() - start
    x = opt.recommendation
    print(f"phases: {opt.step}, fits: {fits}")
    print(f"recommendation: log10 C = {x[0]:.3f}, log10 gamma = {x[1]:.3f}  (C = {10 ** x[0]:.4g}, "
          f"gamma = {10 ** x[1]:.4g})")
    for f in FIELDS:
        print(f"  field {f}: validation AUC {fit_score((f, x)):.4f}, accuracy {accuracy(f, x):.4f}")

    start = time.perf_counter()
    serial_opt, _ = tune(args.horizon)
    serial = time.perf_counter() - start
    same = np.array_equal(serial_opt.recommendation, x)
    print(f"wall time: {parallel:.2f} s with {args.workers} worker processes, {serial:.2f} s serially "
          f"({serial / parallel:.2f}x); same recommendation: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
