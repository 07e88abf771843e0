"""Fed-PNE tunes an SVM's two hyper-parameters for four data owners, each evaluation a real fit.

    python examples/ask_tell_sklearn.py [--horizon 2000] [--workers 4]

Each of four clients owns one landmine field (the package ships the data: objectives/data/landmine.npz)
and fits scikit-learn's SVC on its field's training half, scoring it by accuracy on the field's
held-out half.  Fed-PNE searches (log10 C, log10 gamma) in [-2, 2] x [-2, 1] through ask and tell:
each phase asks every client for its active nodes' points, the fits of a phase run in a
ProcessPoolExecutor, and the clients' scores go back as the means of the asked pulls (a fit is
deterministic, so every pull of a point scores the same and one fit answers them all).  The same run
is then repeated with the fits made one after another, which gives the same recommendation, and the
two wall times are printed.
"""
from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

import fedpne_jax as fp
from objectives import landmine

FIELDS = (0, 1, 2, 3)            # the four data owners' landmine fields
BOX = ([-2.0, -2.0], [2.0, 1.0])  # log10 C, log10 gamma


def field_data(field: int):
    raw = landmine.load_raw()
    mine = raw["field"] == field
    train, test = mine & raw["train"], mine & ~raw["train"]
    return raw["X"][train], raw["y"][train], raw["X"][test], raw["y"][test]


def fit_score(job):
    """Client ``field``'s held-out accuracy of SVC(C, gamma) at x = (log10 C, log10 gamma)."""
    from sklearn.svm import SVC
    field, x = job
    X, y, X_test, y_test = field_data(field)
    model = SVC(C=10.0 ** x[0], gamma=10.0 ** x[1]).fit(X, y)
    return float(model.score(X_test, y_test))


def tune(horizon: int, pool=None):
    """Fed-PNE over the four clients; ``pool``: an executor for each phase's fits (None: serial)."""
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

    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        opt, fits = tune(args.horizon, pool)
    parallel = time.perf_counter() - start
    x = opt.recommendation
    scores = [fit_score((f, x)) for f in FIELDS]
    print(f"phases: {opt.step}, fits: {fits}")
    print(f"recommendation: log10 C = {x[0]:.3f}, log10 gamma = {x[1]:.3f}  (C = {10 ** x[0]:.4g}, "
          f"gamma = {10 ** x[1]:.4g})")
    print("validation accuracy per client: " + ", ".join(f"field {f}: {s:.4f}" for f, s in zip(FIELDS, scores))
          + f"; mean {np.mean(scores):.4f}")

    start = time.perf_counter()
    serial_opt, _ = tune(args.horizon)
    serial = time.perf_counter() - start
    same = np.array_equal(serial_opt.recommendation, x)
    print(f"wall time: {parallel:.2f} s with {args.workers} worker processes, {serial:.2f} s serially "
          f"({serial / parallel:.2f}x); same recommendation: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
