"""Digits: federated tuning of a small MLP (the paper's MNIST experiment, Appendix E.4, offline).

Data: the UCI optical-recognition handwritten digits as bundled with scikit-learn (CC BY 4.0),
shipped as ``objectives/data/digits.npz``: an offline stand-in for MNIST.  Client m owns one of
``MAX_CLIENTS`` label-skewed shards (``SHARD``, ``TRAIN``, ``TEST`` images); its local objective at
x = (batch size, learning rate, weight decay) is the test accuracy of a 64-64-10 MLP trained by SGD
for ``EPOCHS`` epochs; f* = 1.

The shards, the batch-size bins, the training and its determinism: docs/guides/paper-figures.md, section "The objectives in detail", "Digits".
"""
from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

from objectives.objective import averages, mean_of_clients
from objectives.ordered import matvec, pairwise_sum
from objectives.stored import stored

MAX_CLIENTS = 10
NUM_CLASSES = 10
SHARD, TRAIN, TEST = 164, 100, 64
HOME_SHARE = 82
HIDDEN = 64
EPOCHS = 5
LO = (1.0, 1e-6, 1e-6)
HI = (100.0, 1.0, 0.5)
F_STAR = 1.0

DATA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "digits.npz")


@functools.lru_cache(maxsize=1)
def load_raw() -> dict:
    """The shipped arrays: X (1797, 64) uint8 in 0..16, y (1797,) int8."""
    with np.load(DATA_FILE, allow_pickle=False) as f:
        return {k: f[k] for k in ("X", "y")}


def _rng(key, *path) -> np.random.Generator:
    """A NumPy generator keyed by the JAX key and a path of integers (host-side set-up only)."""
    for p in path:
        key = jax.random.fold_in(key, p)
    return np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())


def shard_indices(key) -> np.ndarray:
    """(MAX_CLIENTS, SHARD) row indices of the label-skewed shards, drawn from ``key``."""
    y = load_raw()["y"].astype(np.int64)
    rng = _rng(key, 0)
    classes = rng.permutation(NUM_CLASSES)
    homes = [(classes[k], classes[(k + 1) % NUM_CLASSES]) for k in range(MAX_CLIENTS)]
    pools = {c: list(rng.permutation(np.flatnonzero(y == c))) for c in range(NUM_CLASSES)}
    shards = []
    for k in range(MAX_CLIENTS):
        want = np.zeros(NUM_CLASSES, np.int64)
        want[list(homes[k])] = [HOME_SHARE - HOME_SHARE // 2, HOME_SHARE // 2]
        others = [c for c in range(NUM_CLASSES) if c not in homes[k]]
        rest = SHARD - HOME_SHARE
        for r, c in enumerate(others):       # 82 over 8 classes: 11 for the first 2, 10 for the rest
            want[c] = rest // len(others) + (1 if r < rest % len(others) else 0)
        rows = np.concatenate([[pools[c].pop() for _ in range(want[c])] for c in range(NUM_CLASSES)])
        shards.append(rng.permutation(rows))
    return np.stack(shards)


def init_params(rng: np.random.Generator) -> dict:
    """Glorot-uniform weights, zero biases (float32)."""
    lim1 = np.sqrt(6.0 / (64 + HIDDEN))
    lim2 = np.sqrt(6.0 / (HIDDEN + NUM_CLASSES))
    return dict(w1=rng.uniform(-lim1, lim1, (64, HIDDEN)).astype(np.float32), b1=np.zeros(HIDDEN, np.float32),
                w2=rng.uniform(-lim2, lim2, (HIDDEN, NUM_CLASSES)).astype(np.float32),
                b2=np.zeros(NUM_CLASSES, np.float32))


def make_data(num_clients: int, key) -> dict:
    raw = load_raw()
    idx = shard_indices(key)[:num_clients]
    X = raw["X"].astype(np.float32) / 16.0
    y = raw["y"].astype(np.int32)
    # Initial weights and epoch orders of client m depend on (key, m) only.
    params = [init_params(_rng(key, 1, m)) for m in range(num_clients)]
    order = np.asarray([[_rng(key, 2, m, e).permutation(TRAIN) for e in range(EPOCHS)]
                        for m in range(num_clients)], np.int32)
    return dict(x_train=jnp.asarray(X[idx[:, :TRAIN]]), y_train=jnp.asarray(y[idx[:, :TRAIN]]),
                x_test=jnp.asarray(X[idx[:, TRAIN:]]), y_test=jnp.asarray(y[idx[:, TRAIN:]]),
                init={k: jnp.asarray(np.stack([p[k] for p in params])) for k in params[0]},
                order=jnp.asarray(order))


def batch_size(x0):
    """Real batch-size coordinate -> integer in 1..100 (100 equal bins of [1, 100])."""
    b = 1 + jnp.floor((x0 - 1.0) * (100.0 / 99.0))
    return jnp.clip(b, 1, 100).astype(jnp.int32)


def _forward(p, x):
    """Logits, hidden pre-activations and activations of one example."""
    pre = matvec(x, p["w1"]) + p["b1"]
    h = jnp.maximum(pre, 0.0)
    return matvec(h, p["w2"]) + p["b2"], pre, h


def _signals(p, x, label):
    """Hidden activations, and the cross-entropy gradient of one example at the logits and at the
    hidden layer (by hand: one matrix-vector product per layer)."""
    logits, pre, h = _forward(p, x)
    e = jnp.exp(logits - jnp.max(logits))
    prob = e / pairwise_sum(e)
    d_logits = prob - jax.nn.one_hot(label, NUM_CLASSES, dtype=prob.dtype)
    d_h = matvec(d_logits, p["w2"].T) * (pre > 0)
    return h, d_logits, d_h


def _gradient(p, x, label, live):
    """Cross-entropy gradient of one example: outer products of the stored signals (``live``: see
    :func:`objectives.stored.stored`; recomputed inside the 64 x 64 product, they took 60 % of a
    step)."""
    h, d_logits, d_h = stored(live, _signals, p, x, label)
    return dict(w1=x[:, None] * d_h[None, :], b1=d_h, w2=h[:, None] * d_logits[None, :], b2=d_logits)


def train_and_test(params, x_train, y_train, x_test, y_test, order, bsize, lr, wd):
    """Test accuracy after EPOCHS epochs of mini-batch SGD from ``params``."""
    dt = jnp.result_type(lr)
    params = jax.tree.map(lambda a: a.astype(dt), params)
    x_train, x_test = x_train.astype(dt), x_test.astype(dt)
    opt = optax.chain(optax.add_decayed_weights(wd), optax.sgd(lr))
    opt_state = opt.init(params)
    zeros = jax.tree.map(jnp.zeros_like, params)
    n = x_train.shape[0]

    def step(carry, k):
        params, opt_state, acc, count, fresh = carry
        pos = k % n
        i = order[k // n, pos]
        g = _gradient(params, x_train[i], y_train[i], k >= 0)
        # A batch's sum starts afresh at its first example rather than being cleared at the end of the
        # one before: the update and the next step then read the same stored sum, and XLA need not
        # copy it every step.  0 + g is g, so the values are the same.
        acc = jax.tree.map(lambda a, b: jnp.where(fresh, 0.0, a) + b, acc, g)
        count = jnp.where(fresh, 0, count) + 1
        end = ((pos + 1) % bsize == 0) | (pos == n - 1)
        mean = jax.tree.map(lambda a: a / count.astype(dt), acc)
        updates, new_state = opt.update(mean, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        pick = lambda a, b: jnp.where(end, a, b)
        params = jax.tree.map(pick, new_params, params)
        opt_state = jax.tree.map(pick, new_state, opt_state)
        return (params, opt_state, acc, count, end), None

    init = (params, opt_state, zeros, jnp.int32(0), jnp.bool_(True))
    (params, _, _, _, _), _ = jax.lax.scan(step, init, jnp.arange(EPOCHS * n, dtype=jnp.int32))
    logits = jax.vmap(lambda xi: _forward(params, xi)[0])(x_test)
    correct = (jnp.argmax(logits, axis=1) == y_test) & jnp.all(jnp.isfinite(logits), axis=1)
    # count / 64 is exact: no rounding that XLA could do differently in a batch than alone.
    return jnp.sum(correct.astype(jnp.int32)).astype(dt) * (1.0 / x_test.shape[0])


def local(data, x, m):
    """Client m's test accuracy at x = (batch size, learning rate, weight decay)."""
    client = lambda a: a[m]
    return train_and_test(jax.tree.map(client, data["init"]), data["x_train"][m], data["y_train"][m],
                          data["x_test"][m], data["y_test"][m], data["order"][m], batch_size(x[0]), x[1], x[2])


@averages(local, combine=mean_of_clients)
def global_(data, x):
    M = data["y_train"].shape[0]
    return mean_of_clients(data, jax.vmap(lambda m: local(data, x, m))(jnp.arange(M, dtype=jnp.int32)))
