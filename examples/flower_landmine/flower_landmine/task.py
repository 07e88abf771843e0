"""What each SuperNode evaluates: the test AUC of an RBF SVM on its own landmine field.

SuperNode ``partition-id`` m owns field FIELDS[m] of the Landmine data (Liu, Liao and Carin, 2007;
shipped with fedpne-jax as objectives/data/landmine.npz, the stratified 50/50 train/test split of the
paper's experiments).  A point is (log10 C, log10 gamma); a pull fits
``sklearn.svm.SVC(kernel="rbf", C=C, gamma=gamma)`` on the field's train half and returns its AUC on
the test half.  The fit is deterministic, so a pull's value is the value: ``auc.deterministic`` tells
the ClientApp to fit once per point rather than once per pull.  No field's data leaves its SuperNode;
only the AUCs' means do.
"""
from __future__ import annotations

import functools

import numpy as np

FIELDS = (0, 9, 15, 23)      # one field per SuperNode (partition-id 0..3): two of each terrain type


@functools.lru_cache(maxsize=None)
def _field(partition_id: int):
    from objectives import landmine
    raw = landmine.load_raw()
    field = FIELDS[partition_id]
    train, test = (raw["field"] == field) & raw["train"], (raw["field"] == field) & ~raw["train"]
    X = raw["X"].astype(np.float64)
    return X[train], raw["y"][train], X[test], raw["y"][test]


def auc(partition_id: int, points) -> np.ndarray:
    """AUCs at the rows (log10 C, log10 gamma) of ``points`` on this SuperNode's field."""
    from sklearn.metrics import roc_auc_score
    from sklearn.svm import SVC
    xtr, ytr, xte, yte = _field(int(partition_id))
    out = []
    for log_c, log_gamma in np.asarray(points, np.float64):
        svm = SVC(kernel="rbf", C=10.0 ** log_c, gamma=10.0 ** log_gamma, tol=1e-6).fit(xtr, ytr)
        out.append(roc_auc_score(yte, svm.decision_function(xte)))
    return np.asarray(out)


auc.deterministic = True
