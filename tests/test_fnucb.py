"""FN-UCB: the pieces that can be computed exactly (neural tangent features, the history-as-counts
gradient and SGD, the whitened confidence widths) against plain NumPy in float64; whole runs against a
plain NumPy FN-UCB written from the public code's rules (explicit histories, a V inverse per client
and round) for the first rounds; a seed alone equals the same seed in a batch; bad input is refused."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.arms import arm_grid as arms
from fedpne_jax.algorithms.arms import fnucb, network
from fedpne_jax.algorithms.arms.fnucb import FNUCBConfig
from fedpne_jax.core import checkpoints, executor
from tests.support import reference_fed1ucb as ref_arms
from tests.support.helpers import make, reference_problem, target_hits

M = 3
CONFIG = FNUCBConfig(num_clients=M, horizon=300, noise="gaussian:0.1", arms=10, alpha_ramp=20, checkpoints=300)
COMPARED_ROUNDS = 50
SEEDS = 4


# ---------------------------------------------------------------- NumPy FN-UCB (float64, explicit)

def np_forward(theta, X, width):
    d = X.shape[1]
    w1, b1 = theta[:width * d].reshape(width, d), theta[width * d:width * (d + 1)]
    w2, b2 = theta[width * (d + 1):width * (d + 2)], theta[-1]
    h = X @ w1.T + b1
    return h, np.maximum(h, 0) @ w2 + b2, w2


def np_features(theta, X, width):
    """d f / d theta in PyTorch's parameter order (W1 row-major, b1, w2, b2)."""
    h, _, w2 = np_forward(theta, X, width)
    on = (h > 0) * w2
    dw1 = (on[:, :, None] * X[:, None, :]).reshape(len(X), -1)
    return np.concatenate([dw1, on, np.maximum(h, 0), np.ones((len(X), 1))], axis=1)


def np_mse_grad(theta, Xh, yh, width):
    """Gradient of mean((f(x_i) - y_i)^2) over an explicit history."""
    _, out, _ = np_forward(theta, Xh, width)
    return (2.0 / len(yh)) * np_features(theta, Xh, width).T @ (out - yh)


def np_train(theta, Xh, yh, width, steps, lr, lam):
    """The public code's training: SGD(lr, weight_decay = lam / n) on the MSE, ``steps`` full-batch steps."""
    wd = lam / len(yh)
    for _ in range(steps):
        theta = theta - lr * (np_mse_grad(theta, Xh, yh, width) + wd * theta)
    return theta


def np_fnucb(theta0, X, gaps, rewards, T, cfg: FNUCBConfig):
    """Per client and round as run_fn_ucb.py does it (communication every round), in float64.
    ``rewards(t, k) -> (M,)`` the clients' rewards at arm k in round t.  Returns the arms of every
    client and round, (T, M)."""
    lam, width = cfg.lam, cfg.width
    G = np_features(theta0, X, width)
    p = G.shape[1]
    W_sync, B_sync = np.zeros((p, p)), np.zeros(p)
    V_local = [lam * np.eye(p) for _ in range(cfg.num_clients)]
    nets = [theta0.copy() for _ in range(cfg.num_clients)]
    hist = [([], []) for _ in range(cfg.num_clients)]
    agg = theta0.copy()
    V_nn_inv = np.eye(p) / lam
    chosen = np.zeros((T, cfg.num_clients), int)
    for t in range(T):
        alpha = min(max((t - cfg.alpha_delay) / cfg.alpha_ramp, 0.0), 1.0)
        # W_new,i was reset at the last sync, so V_bar = lam I + W_sync for every client this round.
        V_bar_inv = np.linalg.inv(lam * np.eye(p) + W_sync)
        width_b = cfg.nu * math.sqrt(lam) * np.sqrt(np.einsum("kp,pq,kq->k", G, V_bar_inv, G))
        width_a = cfg.nu2 * math.sqrt(lam) * np.sqrt(np.einsum("kp,pq,kq->k", G, V_nn_inv, G))
        for i in range(cfg.num_clients):
            ucb = G @ (V_bar_inv @ B_sync) + width_b
            if alpha > 0:
                ucb = alpha * (np_forward(agg, X, width)[1] + width_a) + (1 - alpha) * ucb
            chosen[t, i] = np.argmax(ucb)
        trained = False
        for i in range(cfg.num_clients):
            k = chosen[t, i]
            r = rewards(t, k)[i]
            g = G[k]
            W_sync = W_sync + np.outer(g, g)          # the server sums every client's W_new, B_new
            B_sync = B_sync + r * g
            V_local[i] = V_local[i] + np.outer(g, g)
            if cfg.alpha_delay <= t < cfg.train_until:
                hist[i][0].append(X[k])
                hist[i][1].append(r)
                if len(hist[i][1]) % cfg.train_every == 0:
                    nets[i] = np_train(nets[i], np.array(hist[i][0]), np.array(hist[i][1]), width,
                                       cfg.train_steps, cfg.lr, lam)
                    trained = True
        if t >= cfg.alpha_delay:
            V_nn_inv = sum(np.linalg.inv(V) for V in V_local) / cfg.num_clients
        if trained:
            agg = sum(nets) / cfg.num_clients
    return chosen


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def garland():
    return make("garland", M)


@pytest.fixture(scope="module")
def batch(garland):
    return fp.run(CONFIG, garland, seeds=SEEDS)


# ---------------------------------------------------------------- pieces

# Inputs of the three piece tests, all computed by one jitted function (one compilation).
FEAT = dict(dim=2, width=5, K=7)
TRAIN = dict(dim=1, width=20, K=40, n=50, steps=30, lr=0.01, lam=0.1)
WHITE = dict(width=20, K=30, lam=0.1, scale=5.0, updates=500)


def _train_data():
    rng = np.random.default_rng(0)
    X = np.sort(rng.random((TRAIN["K"], TRAIN["dim"])), axis=0)
    picks = rng.integers(0, TRAIN["K"], TRAIN["n"])       # 50 history points on up to 40 arms (several chunks)
    y = rng.normal(size=(M, TRAIN["n"]))
    return X, picks, y


def _white_data():
    rng = np.random.default_rng(1)
    u = WHITE["updates"]
    return np.where(rng.random(u) < 0.9, rng.integers(10, 13, u), rng.integers(0, WHITE["K"], u)), rng.normal(size=u)


@pytest.fixture(scope="module")
def pieces():
    X_tr, picks_tr, y_tr = _train_data()
    counts = np.bincount(picks_tr, minlength=TRAIN["K"]).astype(np.float32)
    sums = np.stack([np.bincount(picks_tr, weights=y_tr[m], minlength=TRAIN["K"]) for m in range(M)])
    picks_w, r_w = _white_data()

    @jax.jit
    def compute(X_feat, X_tr, counts, sums, picks_w, r_w):
        out = {}
        net = network.init_net(jax.random.key(1), FEAT["dim"], FEAT["width"])
        out["feat"] = (network.flatten(net), network.features(net, X_feat), network.forward(net, X_feat))
        net = network.init_net(jax.random.key(3), TRAIN["dim"], TRAIN["width"])
        nets = jax.tree.map(lambda x: jnp.broadcast_to(x, (M,) + x.shape), net)
        n = jnp.float32(TRAIN["n"])
        out["train"] = (network.flatten(net), network.flatten(network.loss_grad(net, X_tr, counts, sums[0], n)),
                        jax.vmap(network.flatten)(network.train(nets, X_tr, counts, sums, n, TRAIN["steps"], TRAIN["lr"],
                                                            TRAIN["lam"] / n)))
        net = network.init_net(jax.random.key(4), 1, WHITE["width"])
        G = network.features(net, jnp.linspace(0.0, 1.0, WHITE["K"])[:, None])

        def body(carry, x):
            w, b = carry
            w, v, c = fnucb.whitened_update(w, x[0], jnp.array([WHITE["scale"], 1.0]))
            return (w, fnucb.whitened_reward(b, v[0], c[0], x[1])), None

        w0 = G / jnp.sqrt(WHITE["lam"])
        (w, b), _ = jax.lax.scan(body, (jnp.stack([w0, w0]), jnp.zeros(G.shape[1])), (picks_w, r_w))
        out["white"] = (G, fnucb.ucb_terms(w, b))
        return out

    X_feat = jax.random.uniform(jax.random.key(2), (FEAT["K"], FEAT["dim"]))
    out = compute(X_feat, jnp.asarray(X_tr, jnp.float32), jnp.asarray(counts), jnp.asarray(sums, jnp.float32),
                  jnp.asarray(picks_w), jnp.asarray(r_w, jnp.float32))
    out = jax.tree.map(lambda x: np.asarray(x, np.float64), out)
    out["X_feat"] = np.asarray(X_feat, np.float64)
    return out


def test_features_are_the_gradient(pieces):
    """g(x) against the hand-derived gradient in float64 (PyTorch's parameter order)."""
    theta, G, out = pieces["feat"]
    X, width = pieces["X_feat"], FEAT["width"]
    assert G.shape == (FEAT["K"], width * (FEAT["dim"] + 2) + 1)
    np.testing.assert_allclose(G, np_features(theta, X, width), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out, np_forward(theta, X, width)[1], rtol=1e-5, atol=1e-5)
    # Finite differences of the float64 network confirm the hand-derived gradient itself.
    eps = 1e-6
    fd = np.stack([(np_forward(theta + eps * e, X, width)[1] - np_forward(theta - eps * e, X, width)[1]) / (2 * eps)
                   for e in np.eye(theta.size)], axis=1)
    np.testing.assert_allclose(np_features(theta, X, width), fd, rtol=1e-5, atol=1e-5)


def test_history_counts_give_the_explicit_mse_gradient_and_sgd(pieces):
    """A history held as per-arm counts and reward sums trains exactly as the explicit list of points
    (PyTorch's SGD with weight decay lam/n), with arms gathered 16 at a time."""
    X, picks, y = _train_data()
    assert len(set(picks.tolist())) > 16
    theta, grad, trained = pieces["train"]
    width = TRAIN["width"]
    np.testing.assert_allclose(grad, np_mse_grad(theta, X[picks], y[0], width), rtol=1e-4, atol=1e-4)
    for m in range(M):
        want = np_train(theta, X[picks], y[m], width, TRAIN["steps"], TRAIN["lr"], TRAIN["lam"])
        np.testing.assert_allclose(trained[m], want, rtol=1e-4, atol=1e-4)


def test_whitened_widths_match_the_inverse(pieces):
    """||g_k||^2_{V^-1} and <g_k, V^-1 B> from the whitened features after 500 rank-one updates
    V += s g g^T (s = M for V_bar, which gains every client's pull; s = 1 for V_local) against float64
    inverses, on the neural tangent features of 30 grid arms (condition numbers above 10^5)."""
    G, (q, mean, q_local) = pieces["white"]
    picks, r = _white_data()
    lam, s = WHITE["lam"], WHITE["scale"]
    for scale, got in ((s, q), (1.0, q_local)):
        V = lam * np.eye(G.shape[1]) + scale * G[picks].T @ G[picks]
        assert np.linalg.cond(V) > 1e5
        np.testing.assert_allclose(got, np.einsum("kp,pq,kq->k", G, np.linalg.inv(V), G), rtol=1e-3)
    V = lam * np.eye(G.shape[1]) + s * G[picks].T @ G[picks]
    np.testing.assert_allclose(mean, G @ np.linalg.inv(V) @ (G[picks].T @ r), rtol=1e-3, atol=1e-4)


# ---------------------------------------------------------------- whole runs

def test_first_rounds_match_numpy_fnucb(garland, batch):
    """Same arms for the first 50 rounds as the explicit NumPy FN-UCB (every client picks the same arm
    there too), given the run's theta_0, grid start and reward draws."""
    prob = reference_problem(garland)
    k = arms.per_dim(CONFIG.arms, 1)
    seed = 1

    @jax.jit
    def run_inputs(key):
        """The run's grid offsets, theta_0 and every round's rewards at every arm (the engine draws
        round t's rewards at arm a as observe(fold_in(noise key, t), local values at a))."""
        _, _, local = arms.run_arms(key, garland, k)
        noise_key = jax.random.fold_in(key, fnucb.NOISE_STREAM)
        draw = lambda t, a: arms.observe_flat(jax.random.fold_in(noise_key, t), "gaussian", jnp.float32(0.1), local[a])
        rewards = jax.vmap(lambda t: jax.vmap(lambda a: draw(t, a))(jnp.arange(k)))(jnp.arange(COMPARED_ROUNDS))
        theta0 = network.flatten(network.init_net(jax.random.fold_in(key, fnucb.INIT_STREAM), 1, CONFIG.width))
        return arms.start_offsets(key, 1), theta0, rewards

    offsets, theta0, rewards = (np.asarray(x, np.float64) for x in run_inputs(executor.seed_key(0, seed)))
    points = ref_arms.grid(offsets, prob.lo, prob.hi, k)
    X = (points - prob.lo) / (prob.hi - prob.lo)
    gaps = prob.f_star - prob.f(points)
    chosen = np_fnucb(theta0, X, gaps, lambda t, a: rewards[t, a], COMPARED_ROUNDS, CONFIG)
    assert (chosen == chosen[:, :1]).all()
    per_round = np.diff(batch.curves[seed], prepend=0.0)[:COMPARED_ROUNDS]
    np.testing.assert_allclose(per_round, gaps[chosen[:, 0]], rtol=0, atol=2e-4)
    assert len(set(chosen[:, 0].tolist())) > 1
    # The best-so-far regret of those rounds, and the rounds at which it reached its targets.
    best = np.minimum.accumulate(gaps[chosen[:, 0]])
    early = batch.checkpoints <= COMPARED_ROUNDS
    np.testing.assert_allclose(batch.best_curve[seed][early], best[batch.checkpoints[early] - 1], rtol=1e-5, atol=1e-6)
    hits, near = target_hits(best, batch.target_scale[seed] * 10.0 ** checkpoints.TARGET_EXPONENTS)
    got = np.where((batch.hits[seed] == 0) | (batch.hits[seed] > COMPARED_ROUNDS), 0, batch.hits[seed])
    np.testing.assert_array_equal(got[~near], hits[~near])
    assert hits[0] == 1 and np.any(hits == 0)


def test_regret_sublinear_on_garland(batch):
    """(A seed alone equals the same seed in a batch: tests/test_contract.py.)"""
    assert len(set(batch.final_regret.tolist())) == SEEDS
    per_round = batch.regret_mean / batch.checkpoints
    assert per_round[-1] < 0.7 * per_round[29]           # R(T)/T well below R(T/10)/(T/10)
    assert (batch.phases == CONFIG.horizon).all() and batch.recommendation.shape == (SEEDS, 1)


@pytest.mark.parametrize("field, value", [
    ("num_clients", 0), ("arms", 0), ("width", 0), ("width", 2.0), ("lam", 0.0), ("lam", -1.0), ("nu", -0.1),
    ("nu2", float("nan")), ("lr", 0.0), ("train_steps", -1), ("train_every", 0), ("train_until", -1),
    ("alpha_delay", -1), ("alpha_ramp", 0), ("horizon", 0), ("noise", "gaussian:-1"), ("noise", "uniform:1e30")])
def test_bad_parameters_are_refused(field, value):
    with pytest.raises(ValueError, match=field.split("_")[0]):
        FNUCBConfig(**{field: value})


def test_bad_combinations_are_refused(garland):
    with pytest.raises(ValueError, match="num_clients"):
        fp.run(CONFIG.replace(num_clients=2), garland)
    with pytest.raises(ValueError, match="arms"):
        fp.run(CONFIG.replace(arms=20), make("ackley", M, dim=4))
