"""FN-UCB's neural network: one hidden ReLU layer, f(x; theta) = w2 . relu(W1 x + b1) + b2.

The public code's network (github.com/daizhongxiang/Federated-Neural-Bandits): every weight and bias
drawn N(0, 1) (:func:`init_net`), its parameters in PyTorch's order (:func:`flatten`), its
neural-tangent features g(x) = grad_theta f(x; theta) (:func:`features`), and the clients' training
(:func:`train`: full-batch SGD with weight decay on the MSE over a history held as per-arm counts
and reward sums, :func:`loss_grad` written out by hand with fixed-order sums so that a seed's
numbers do not depend on its batch) and the server's average (:func:`average`).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from objectives.ordered import pairwise_mean, pairwise_sum
from objectives.stored import stored

TRAIN_CHUNK = 16                # history arms per gradient chunk


class Net(NamedTuple):
    w1: jax.Array     # (m, D)
    b1: jax.Array     # (m,)
    w2: jax.Array     # (m,)
    b2: jax.Array     # ()


def init_net(key, dim: int, width: int) -> Net:
    """theta_0: every weight and bias N(0, 1) (the public code's initialisation)."""
    z = jax.random.normal(key, (width * (dim + 2) + 1,), jnp.float32)
    return unflatten(z, dim, width)


def flatten(net: Net):
    """The parameter vector in the public code's (PyTorch) order: W1 row-major, b1, w2, b2."""
    return jnp.concatenate([net.w1.reshape(-1), net.b1, net.w2, net.b2[None]])


def unflatten(theta, dim: int, width: int) -> Net:
    m, d = width, dim
    return Net(w1=theta[:m * d].reshape(m, d), b1=theta[m * d:m * d + m], w2=theta[m * d + m:m * d + 2 * m],
               b2=theta[m * d + 2 * m])


def _sum_first(x):
    """Sum over the first axis in a fixed order."""
    return pairwise_sum(jnp.moveaxis(x, 0, -1))


def hidden(net: Net, X):
    """Pre-activations (m, K) at arms X (K, D); the sum over D in a fixed order."""
    h = net.b1[:, None]
    for d in range(X.shape[1]):      # D is static and small
        h = h + net.w1[:, d, None] * X[None, :, d]
    return h


def forward(net: Net, X):
    """f(x_k; theta) for the K arms X (K, D)."""
    a = jnp.maximum(hidden(net, X), 0.0)
    return _sum_first(net.w2[:, None] * a) + net.b2


def features(net: Net, X):
    """g(x_k) = grad_theta f(x_k; theta), (K, p), in :func:`flatten`'s order (relu'(0) = 0, as PyTorch)."""
    h = hidden(net, X)
    on = (h > 0).astype(h.dtype)
    db1 = (net.w2[:, None] * on).T                                   # (K, m)
    dw1 = (db1[:, :, None] * X[:, None, :]).reshape(X.shape[0], -1)  # (K, m D), W1 row-major
    dw2 = jnp.maximum(h, 0.0).T
    return jnp.concatenate([dw1, db1, dw2, jnp.ones((X.shape[0], 1), h.dtype)], axis=1)


def _residuals(net: Net, X, counts, sums, n):
    """Hidden pre-activations (m, K), activations (m, K) and the loss's derivative at each arm's output (K,)."""
    h = hidden(net, X)
    a = jnp.maximum(h, 0.0)
    out = _sum_first(net.w2[:, None] * a) + net.b2
    return h, a, (2.0 / n) * (counts * out - sums)


def loss_grad(net: Net, X, counts, sums, n, live=True):
    """Gradient of the MSE over a history of n points, held as per-arm counts (K,) and reward sums
    (K,): (1/n) sum_k [c_k f_k^2 - 2 f_k R_k] + const, so d/df_k = (2/n)(c_k f_k - R_k).  Every
    component's sum over the arms is one fixed-order sum (rows in :func:`flatten`'s order).

    The residuals are stored (``live``: see :func:`objectives.stored.stored`): recomputed in each of
    the 61 rows of ``terms``, they were a sixth of a training run."""
    m, d = net.w1.shape
    h, a, e = stored(live, _residuals, net, X, counts, sums, n)
    delta = e[None, :] * net.w2[:, None] * (h > 0)                   # (m, K)
    terms = jnp.concatenate([(delta[:, None, :] * X.T[None, :, :]).reshape(m * d, -1), delta, e[None, :] * a,
                             e[None, :]])
    return unflatten(pairwise_sum(terms), d, m)


def train(nets: Net, X, counts, sums, n, steps, lr, weight_decay, chunk: int = TRAIN_CHUNK) -> Net:
    """``steps`` SGD steps (PyTorch's SGD with weight decay: p <- p - lr (grad + wd p)) of every
    client's network (leading axis M) on its own history: ``counts`` (K,) points per arm, ``sums``
    (M, K) reward sums per client and arm, n points in all.

    Only arms in the history contribute to the gradient, and a run's history visits few of the K arms,
    so they are gathered first and the gradient sums them ``chunk`` at a time (chunks in order)."""
    K = counts.shape[0]
    width = -(-K // chunk) * chunk
    rows = jnp.nonzero(counts > 0, size=width, fill_value=K)[0]
    n_chunks = -(-jnp.sum(counts > 0, dtype=jnp.int32) // chunk)
    Xh = jnp.take(X, rows, axis=0, mode="fill", fill_value=0.0)
    ch = jnp.take(counts, rows, mode="fill", fill_value=0.0)
    sh = jnp.take(sums, rows, axis=1, mode="fill", fill_value=0.0)

    def grad(net, s, live):
        def add_chunk(c, acc):
            part = lambda a, axis=0: jax.lax.dynamic_slice_in_dim(a, c * chunk, chunk, axis)
            g = loss_grad(net, part(Xh), part(ch), part(s), n, live)
            return jax.tree.map(jnp.add, acc, g)
        return jax.lax.fori_loop(0, n_chunks, add_chunk, jax.tree.map(jnp.zeros_like, net))

    opt = optax.chain(optax.add_decayed_weights(weight_decay), optax.sgd(lr))
    state = opt.init(nets)                                           # stateless (no momentum)

    def step(i, nets):
        updates, _ = opt.update(jax.vmap(grad, in_axes=(0, 0, None))(nets, sh, i >= 0), state, nets)
        return optax.apply_updates(nets, updates)

    return jax.lax.fori_loop(0, steps, step, nets)


def average(nets: Net) -> Net:
    """The server's parameter average over the clients (leading axis), in a fixed order."""
    return jax.tree.map(lambda x: pairwise_mean(jnp.moveaxis(x, 0, -1)), nets)
