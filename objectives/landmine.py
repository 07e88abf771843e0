"""Landmine: federated tuning of an RBF-kernel SVM (the paper's Section 5 / Appendix E.2).

Data: the Landmine detection data of Liu, Liao and Carin (NeurIPS 2007), 29 fields, shipped as
``objectives/data/landmine.npz`` with the stratified 50/50 split of Dai et al. (NeurIPS 2020).
Client m owns one field; its local objective at x = (C, gamma) is the test AUC-ROC of an SVM
(scikit-learn's ``SVC(C, gamma)``) trained on its train half, here by a batched float32 SMO
(``SVM_EPS``, ``SVM_CHUNK``, ``SVM_MAX_ITER``); the global objective is the mean; f* = 1.

The solver, the exact AUC, the agreement with scikit-learn and the determinism: docs/guides/paper-figures.md, section "The objectives in detail", "Landmine".
"""
from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np

from objectives.objective import averages, mean_of_clients
from objectives.ordered import first_argmax, pairwise_sum

NUM_FIELDS = 29
LO = (1e-4, 0.01)          # (C, gamma)
HI = (10.0, 10.0)
F_STAR = 1.0               # the paper's choice for regret (the best AUC found is about 0.71, see README)

SVM_EPS = 1e-4             # stopping gap, relative to min(C, 1)
SVM_CHUNK = 256            # SMO iterations between exact refreshes and convergence checks
SVM_MAX_ITER = 16384       # hard cap (the grid of the benchmark needs at most ~7,000)
_TAU = 1e-12               # smallest curvature (duplicate points)
_BLOCK = 32                # training points per block of a fixed-order sum
AUC_SCALE = 2**16          # AUCs are multiples of 1 / AUC_SCALE (see auc)

DATA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "landmine.npz")


@functools.lru_cache(maxsize=1)
def load_raw() -> dict:
    """The shipped arrays: X (14820, 9), y (14820,) in {0, 1}, field (14820,), train (14820,) bool."""
    with np.load(DATA_FILE, allow_pickle=False) as f:
        return {k: f[k] for k in ("X", "y", "field", "train")}


def choose_fields(num_clients: int, key) -> np.ndarray:
    """All 29 fields in order for M = 29, else M distinct fields drawn from the objective's key."""
    if num_clients == NUM_FIELDS:
        return np.arange(NUM_FIELDS)
    return np.asarray(jax.random.permutation(key, NUM_FIELDS))[:num_clients]


def field_arrays(fields) -> dict:
    """Padded per-client arrays (NumPy) for the given fields.

    Every client is padded to the largest train / test half among the chosen fields (at most 345;
    the train side rounded up to a multiple of 32 for the blocked sums), so all clients share static
    shapes; masks mark real points.  d2_train[m] holds squared distances between train points,
    d2_test_t[m] between train (rows) and test (columns) points.
    """
    raw = load_raw()
    X, y, field, train = raw["X"].astype(np.float64), raw["y"].astype(np.int64), raw["field"], raw["train"]
    parts = []
    for f in fields:
        tr = (field == f) & train
        te = (field == f) & ~train
        parts.append((X[tr], y[tr], X[te], y[te]))
    n_tr = -(-max(p[0].shape[0] for p in parts) // _BLOCK) * _BLOCK
    n_te = max(p[2].shape[0] for p in parts)
    n_pos = max(int(p[3].sum()) for p in parts)
    M = len(parts)
    out = dict(d2_train=np.zeros((M, n_tr, n_tr)), d2_test_t=np.zeros((M, n_tr, n_te)),
               y=np.zeros((M, n_tr)), mask=np.zeros((M, n_tr), bool),
               pos_index=np.zeros((M, n_pos), np.int32), pos_mask=np.zeros((M, n_pos), bool),
               neg_mask=np.zeros((M, n_te), bool), pairs2=np.zeros((M,), np.int32))
    for m, (xtr, ytr, xte, yte) in enumerate(parts):
        a, b = len(xtr), len(xte)
        out["d2_train"][m, :a, :a] = ((xtr[:, None, :] - xtr[None, :, :]) ** 2).sum(-1)
        out["d2_test_t"][m, :a, :b] = ((xtr[:, None, :] - xte[None, :, :]) ** 2).sum(-1)
        out["y"][m, :a] = 2.0 * ytr - 1.0
        out["mask"][m, :a] = True
        pos = np.flatnonzero(yte == 1)
        out["pos_index"][m, :len(pos)] = pos
        out["pos_mask"][m, :len(pos)] = True
        out["neg_mask"][m, :b] = yte == 0
        out["pairs2"][m] = 2 * len(pos) * int((yte == 0).sum())
    assert int(out["pairs2"].max()) * AUC_SCALE < 2**31
    return out


def make_data(num_clients: int, key) -> dict:
    """The objective's data pytree (float32 leaves) for M clients."""
    fields = choose_fields(num_clients, key)
    arrays = field_arrays(fields)
    as_jnp = {k: jnp.asarray(v, jnp.float32 if v.dtype == np.float64 else v.dtype) for k, v in arrays.items()}
    as_jnp["field"] = jnp.asarray(fields, jnp.int32)
    return as_jnp


def _kernel_row(d2_row, gamma, maskf):
    """Row of K - 1 (zero on padding)."""
    return jnp.expm1(-gamma * d2_row) * maskf


def _accumulate(d2_t, m, weights, gamma, transform, dt):
    """sum_s weights_s * transform(-gamma d2_t[m, s, :]) over the training points s.

    The training points are taken in blocks of ``_BLOCK`` rows of the client's slab (never copying the
    whole slab per evaluation): a fixed-order pairwise sum inside a block, blocks added one after
    another, so the summation order never depends on the batch.
    """
    n_tr, cols = d2_t.shape[1], d2_t.shape[2]
    w_blocks = weights.reshape(n_tr // _BLOCK, _BLOCK)

    def body(k, acc):
        start = (jnp.asarray(m, jnp.int32), jnp.asarray(k * _BLOCK, jnp.int32), jnp.int32(0))
        slab = jax.lax.dynamic_slice(d2_t, start, (1, _BLOCK, cols))[0].astype(dt)
        block = w_blocks[k][:, None] * transform(-gamma * slab)
        return acc + pairwise_sum(block.T)
    return jax.lax.fori_loop(0, n_tr // _BLOCK, body, jnp.zeros((cols,), dt))


def _gap(w, F, y, mask, C):
    """max_{I_up} v - min_{I_low} v with v = y - C F, formed per label pair (no +-1 cancellation)."""
    up, low = (w < 1) & mask, (w > 0) & mask
    pos, neg = y > 0, y < 0
    inf = jnp.asarray(jnp.inf, F.dtype)
    up_p = jnp.min(jnp.where(up & pos, F, inf))
    up_n = jnp.min(jnp.where(up & neg, F, inf))
    low_p = jnp.max(jnp.where(low & pos, F, -inf))
    low_n = jnp.max(jnp.where(low & neg, F, -inf))
    cands = jnp.stack([C * (low_p - up_p), C * (low_n - up_n), 2.0 + C * (low_n - up_p), -2.0 + C * (low_p - up_n)])
    return jnp.max(jnp.where(jnp.isnan(cands), -inf, cands))


def _smo_step(carry, d2, m, y, mask, maskf, C, gamma, shift):
    w, F = carry
    dt = F.dtype
    idx = jnp.arange(y.shape[0])
    ninf = jnp.asarray(-jnp.inf, dt)
    up, low = (w < 1) & mask, (w > 0) & mask
    # i = argmax_{I_up} (y - C F) = argmax (y / C - F).  The key y * shift - F with
    # shift = min(1/C, bound on |F| spread) orders I_up the same way but never adds a huge 1/C to F,
    # which in float32 would quantise F (and hence the choice) when C is small.
    key = jnp.where(up, y * shift - F, ninf)
    i = first_argmax(key)
    yi, Fi = y[i], F[i]
    Ki = _kernel_row(d2[m, i].astype(dt), gamma, maskf)
    # Second-order selection of j among I_low (libsvm's WSS 2); b is exact for same-label pairs.
    b = (yi - y) - C * (Fi - F)
    a = jnp.maximum(-2.0 * C * Ki, _TAU * C)
    score = jnp.where(low & (b > 0), b * b / a, ninf)
    j = first_argmax(score)
    Kj = _kernel_row(d2[m, j].astype(dt), gamma, maskf)
    aij = jnp.maximum(-2.0 * Ki[j], _TAU)
    step = ((yi - y[j]) / C - (Fi - F[j])) / aij
    wi, wj = w[i], w[j]
    step = jnp.clip(step, jnp.maximum(-wi, wj - 1.0), jnp.minimum(1.0 - wi, wj))
    step = jnp.where((key[i] > ninf) & (score[j] > ninf), step, 0.0)
    onehot = (idx == i).astype(dt) - (idx == j).astype(dt)
    return jnp.clip(w + step * onehot, 0.0, 1.0), F + step * (Ki - Kj)


def svm_dual(d2, m, y, mask, C, gamma):
    """u = y * alpha / C of the SVM dual of client m (d2: all clients' train distances, indexed lazily
    so that no evaluation copies a client's matrix); returns (u, iterations)."""
    dt = jnp.result_type(C)
    y = y.astype(dt)
    maskf = mask.astype(dt)
    tol = SVM_EPS * jnp.minimum(C, 1.0)
    # w = beta for positives and 1 - beta for negatives, so I_up = {w < 1} and I_low = {w > 0}.
    w0 = jnp.where(y > 0, 0.0, 1.0).astype(dt) * maskf
    u_of = lambda w: jnp.where(y > 0, w, w - 1.0) * maskf

    def shift_of(F):
        # Within a chunk F moves by far less than its current spread plus 2; the exact gap check
        # below does not depend on this choice in any case.
        return jnp.minimum(1.0 / C, 2.0 * jnp.max(jnp.abs(F)) + 2.0)

    def chunk(c):
        it, w, F, _ = c
        shift = shift_of(F)
        w, F = jax.lax.fori_loop(0, SVM_CHUNK,
                                 lambda s, wf: _smo_step(wf, d2, m, y, mask, maskf, C, gamma, shift), (w, F))
        F = _accumulate(d2, m, u_of(w), gamma, jnp.expm1, dt) * maskf
        return it + SVM_CHUNK, w, F, _gap(w, F, y, mask, C)

    init = (jnp.int32(0), w0, jnp.zeros_like(w0), jnp.asarray(jnp.inf, dt))
    it, w, F, _ = jax.lax.while_loop(lambda c: (c[0] < SVM_MAX_ITER) & (c[3] > tol), chunk, init)
    return u_of(w), it


def auc(scores, pos_index, pos_mask, neg_mask, pairs2):
    """Mann-Whitney AUC: P(score_pos > score_neg) + P(equal) / 2, from exact integer counts.

    ``pairs2`` = 2 n_pos n_neg.  The AUC is returned rounded down to a multiple of 2^-16 by integer
    division (at most 1.5e-5 below the exact ratio, whose own step is at least 1 / pairs2 > 6e-5, so
    distinct AUCs stay distinct and ordered): a dyadic value with few bits, so the mean over clients
    is an exact sum in any order, however XLA fuses it (a float division or a product followed by an
    addition may round differently in a one-point batch than in a larger one)."""
    sp = scores[pos_index]
    twice = 2 * (sp[:, None] > scores[None, :]).astype(jnp.int32) + (sp[:, None] == scores[None, :]).astype(jnp.int32)
    count2 = jnp.sum(jnp.where(pos_mask[:, None] & neg_mask[None, :], twice, 0))
    q = (count2 * AUC_SCALE) // pairs2
    return q.astype(scores.dtype) * (1.0 / AUC_SCALE)


def client_auc(data, m, C, gamma):
    """Test AUC of the SVM (C, gamma) trained on client m's train half."""
    y, mask = data["y"][m], data["mask"][m]
    u, _ = svm_dual(data["d2_train"], m, y, mask, C, gamma)
    scores = _accumulate(data["d2_test_t"], m, u, gamma, jnp.exp, u.dtype)
    return auc(scores, data["pos_index"][m], data["pos_mask"][m], data["neg_mask"][m], data["pairs2"][m])


def local(data, x, m):
    """Client m's AUC at x = (C, gamma)."""
    return client_auc(data, m, x[0], x[1])


@averages(local, combine=mean_of_clients)
def global_(data, x):
    """Mean AUC over the clients."""
    M = data["y"].shape[0]
    return mean_of_clients(data, jax.vmap(lambda m: local(data, x, m))(jnp.arange(M, dtype=jnp.int32)))
