"""landmine-sklearn: the landmine objective with scikit-learn's SVC, evaluated on the host.

The same problem as :mod:`objectives.landmine` (the same fields, split and box), with
``sklearn.svm.SVC(kernel="rbf", C=C, gamma=gamma, tol=1e-12)`` trained in float64 and called through
:func:`objectives.python.from_python`, so it needs the ``svm`` extra (``pip install
"fedpne-jax[svm]"``).  Values are memoised per point, so the global and local sites of a phase
share their fits.

Why tol = 1e-12, and how the two landmine objectives agree: docs/guides/paper-figures.md, section "The objectives in detail", "landmine-sklearn".
"""
from __future__ import annotations

import numpy as np

from objectives import landmine
from objectives.errors import MissingExtra
from objectives.objective import Objective
from objectives.python import from_python

NAME = "landmine-sklearn"
EXTRA = "svm"
CACHE_POINTS = 1 << 16
TOL = 1e-12


def sklearn_parts():
    """(SVC, roc_auc_score), or MissingExtra naming the extra."""
    try:
        from sklearn.metrics import roc_auc_score
        from sklearn.svm import SVC
    except ImportError as err:
        raise MissingExtra(f"objective {NAME!r} needs scikit-learn: pip install \"fedpne-jax[{EXTRA}]\" "
                           f"(or pip install scikit-learn); the JAX objective 'landmine' needs nothing ({err})") \
            from None
    return SVC, roc_auc_score


class FieldSVMs:
    """Per-field train / test halves and the AUCs of SVC at (C, gamma), memoised per point."""

    def __init__(self, fields) -> None:
        self.SVC, self.roc_auc_score = sklearn_parts()
        raw = landmine.load_raw()
        X, y, field, train = raw["X"].astype(np.float64), raw["y"].astype(np.int64), raw["field"], raw["train"]
        self.fields = [int(f) for f in fields]
        self.parts = []
        for f in self.fields:
            tr, te = (field == f) & train, (field == f) & ~train
            self.parts.append((X[tr], y[tr], X[te], y[te]))
        self.cache: dict = {}

    def auc(self, m: int, C: float, gamma: float) -> float:
        xtr, ytr, xte, yte = self.parts[m]
        clf = self.SVC(kernel="rbf", C=C, gamma=gamma, tol=TOL).fit(xtr, ytr)
        return float(self.roc_auc_score(yte, clf.decision_function(xte)))

    def local(self, X) -> np.ndarray:
        """(n, M) AUCs at the rows (C, gamma) of X."""
        out = np.empty((X.shape[0], len(self.parts)))
        for i, (C, gamma) in enumerate(np.asarray(X, np.float64)):
            key = (float(C), float(gamma))
            if key not in self.cache:
                if len(self.cache) >= CACHE_POINTS:
                    self.cache.clear()
                self.cache[key] = np.array([self.auc(m, *key) for m in range(len(self.parts))])
            out[i] = self.cache[key]
        return out

    def global_(self, X) -> np.ndarray:
        return self.local(X).mean(axis=1)


def make_objective(num_clients: int, key, heterogeneity: str = "intrinsic", name: str = NAME) -> Objective:
    """The objective for M clients (fields chosen from ``key`` as :func:`landmine.choose_fields` does);
    heterogeneity 'none' gives every client the mean over the fields."""
    svms = FieldSVMs(landmine.choose_fields(num_clients, key))
    local_fn = svms.local if heterogeneity == "intrinsic" else None
    return from_python(svms.global_, landmine.LO, landmine.HI, landmine.F_STAR, name=name, num_clients=num_clients,
                       local_fn=local_fn)
