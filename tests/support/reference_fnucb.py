"""FN-UCB (Federated Neural-UCB) in NumPy float64, many independent runs at once.

Written from the public code's rules (run_fn_ucb.py: communication every round, the server summing
every client's W_new and B_new, a one-hidden-layer ReLU network trained by full-batch SGD with weight
decay lam / n on each client's own history, the neural UCB mixed in by alpha_t).  It is the
whole-run oracle of tests/test_fnucb_noisy.py; tests/test_fnucb.py's explicit per-client form checks it.

Runs share nothing but their length: every array has a leading axis of S runs.  Every client of a run
pulls the same arm each round (their UCBs are equal: they share W_sync, B_sync and the aggregate), so
the clients' V matrices are equal too and are kept once.
"""
from __future__ import annotations

import math

import numpy as np


def _split(theta, d: int, width: int):
    w1 = theta[..., :width * d].reshape(theta.shape[:-1] + (width, d))
    b1 = theta[..., width * d:width * (d + 1)]
    w2 = theta[..., width * (d + 1):width * (d + 2)]
    return w1, b1, w2, theta[..., -1]


def forward(theta, X, width: int):
    """(h, f(X)) of networks ``theta`` (..., P) at points ``X`` (..., n, d)."""
    w1, b1, w2, b2 = _split(theta, X.shape[-1], width)
    h = np.einsum("...nd,...wd->...nw", X, w1) + b1[..., None, :]
    return h, np.einsum("...nw,...w->...n", np.maximum(h, 0.0), w2) + b2[..., None]


def features(theta, X, width: int):
    """d f / d theta at ``X``, in PyTorch's parameter order (W1 row-major, b1, w2, b2): (..., n, P)."""
    h, _ = forward(theta, X, width)
    _, _, w2, _ = _split(theta, X.shape[-1], width)
    on = (h > 0) * w2[..., None, :]
    dw1 = (on[..., :, :, None] * X[..., :, None, :]).reshape(h.shape[:-1] + (-1,))
    return np.concatenate([dw1, on, np.maximum(h, 0.0), np.ones(h.shape[:-1] + (1,))], axis=-1)


def train(theta, Xh, yh, width: int, steps: int, lr: float, lam: float):
    """``steps`` full-batch SGD steps on mean((f(x_i) - y_i)^2) with weight decay lam / n."""
    n = yh.shape[-1]
    for _ in range(steps):
        _, out = forward(theta, Xh, width)
        grad = (2.0 / n) * np.matmul((out - yh)[..., None, :], features(theta, Xh, width))[..., 0, :]
        theta = theta - lr * (grad + (lam / n) * theta)
    return theta


def _quadratic(G, A):
    """g_k' A g_k for every arm: (S, K)."""
    return (np.matmul(G, A) * G).sum(axis=-1)


def _rank_one(A_inv, g, weight):
    """(A + weight g g')^-1 from A^-1 (Sherman-Morrison), for every run: A_inv (S, P, P), g (S, P)."""
    u = np.matmul(A_inv, g[..., None])[..., 0]
    return A_inv - weight * np.einsum("sp,sq->spq", u, u) / (1.0 + weight * (g * u).sum(axis=-1))[:, None, None]


def regret(cfg, theta0, X, gaps, rewards):
    """Final regret of S runs: theta0 (S, P), arms X (S, K, d) in [0, 1]^d, gaps (S, K) = f* - f,
    rewards (S, T, K, M) the clients' reward at each arm in each round.  Returns (regret (S,), arms
    pulled (S, T))."""
    S, T = rewards.shape[0], rewards.shape[1]
    lam, width, M = cfg.lam, cfg.width, cfg.num_clients
    G = features(theta0, X, width)                       # (S, K, P): the gradient at theta_0
    P = G.shape[-1]
    eye = np.eye(P)
    # (lam I + W_sync)^-1 and the clients' V^-1, both lam I plus pulled g g', kept by rank-one updates.
    V_bar_inv = np.broadcast_to(eye / lam, (S, P, P)).copy()
    V_local_inv = V_bar_inv.copy()
    B_sync = np.zeros((S, P))
    nets = np.repeat(theta0[:, None], M, axis=1)         # (S, M, P)
    agg = theta0.copy()
    V_nn_inv = np.broadcast_to(eye / lam, (S, P, P)).copy()
    hist_x, hist_y = [], []
    chosen = np.zeros((S, T), int)
    runs = np.arange(S)
    for t in range(T):
        alpha = min(max((t - cfg.alpha_delay) / cfg.alpha_ramp, 0.0), 1.0)
        width_b = cfg.nu * math.sqrt(lam) * np.sqrt(_quadratic(G, V_bar_inv))
        width_a = cfg.nu2 * math.sqrt(lam) * np.sqrt(_quadratic(G, V_nn_inv))
        ucb = np.matmul(G, np.matmul(V_bar_inv, B_sync[..., None]))[..., 0] + width_b
        if alpha > 0:
            ucb = alpha * (forward(agg, X, width)[1] + width_a) + (1 - alpha) * ucb
        k = np.argmax(ucb, axis=1)
        chosen[:, t] = k
        r = rewards[runs, t, k]                          # (S, M)
        g = G[runs, k]                                   # (S, P)
        B_sync = B_sync + r.sum(axis=1)[:, None] * g
        V_bar_inv = _rank_one(V_bar_inv, g, float(M))        # the server adds every client's g g'
        V_local_inv = _rank_one(V_local_inv, g, 1.0)
        if cfg.alpha_delay <= t < cfg.train_until:
            hist_x.append(X[runs, k])
            hist_y.append(r)
            if len(hist_y) % cfg.train_every == 0:
                Xh = np.repeat(np.stack(hist_x, axis=1)[:, None], M, axis=1)     # (S, M, n, d)
                yh = np.stack(hist_y, axis=2)                                    # (S, M, n)
                nets = train(nets, Xh, yh, width, cfg.train_steps, cfg.lr, lam)
                agg = nets.mean(axis=1)
        if t >= cfg.alpha_delay:
            V_nn_inv = V_local_inv
    return gaps[runs[:, None], chosen].sum(axis=1), chosen
