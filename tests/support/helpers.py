"""Shared test helpers: run the engine and the NumPy reference on the same problem."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import io

import numpy as np

import fedpne_jax as fp
import objectives
from fedpne_jax import cli
from fedpne_jax.algorithms.fedpne import partition
from fedpne_jax.algorithms.fedpne.engine import run_keys
from fedpne_jax.core import executor
from fedpne_jax.core.executor import seed_key
from tests.support import reference


def reference_problem(objective) -> reference.RefProblem:
    shifts = np.asarray(objective.data["shift"], np.float64) if "shift" in objective.data \
        else np.zeros(objective.num_clients)
    return reference.problem(objective.name, objective.num_clients, objective.dim, shifts=shifts)


def random_split_fn(base_seed: int, seed: int, dim: int):
    """The engine's random partition of one run, as the reference's split_dim_fn(path)."""
    pkey, _ = run_keys(seed_key(base_seed, seed))
    return functools.lru_cache(maxsize=None)(lambda path: partition.path_split_dim(pkey, path, dim))


def reference_run(config: fp.FedPNEConfig, objective, rng=None, split_dim_fn=None):
    """The NumPy reference's run of ``config``, and its simple regret at the checkpoints (``simple``)."""
    prob = reference_problem(objective)
    ref = reference.fedpne(
        prob, config.horizon, k=config.k, split=config.split, nu=config.nu,
        rho=config.rho, c=config.c_value, c1=config.c1, delta=config.delta_value, noise=config.noise_kind,
        sigma=config.noise_scale, dp_sigma2=config.dp_sigma2, pull=config.pull,
        checkpoints=config.checkpoints, rng=rng, split_dim_fn=split_dim_fn)
    ref.simple = reference.simple_curve(prob, ref, config.horizon, config.checkpoints)
    return ref


def make(name, M, dim=None, heterogeneity="shift"):
    return objectives.make_objective(name, num_clients=M, heterogeneity=heterogeneity, dim=dim)


def two_sample_z(a, b) -> float:
    """z statistic of the difference of two sample means (independent samples)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    se = np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    return float((a.mean() - b.mean()) / se)


def assert_same_tree_run(out, i, ref):
    """Run i of an HCT/T-HOO batch equals a tree reference run: every pulled point bit for bit."""
    np.testing.assert_array_equal(out.points[i], ref.points)
    np.testing.assert_array_equal(out.recommendation[i], ref.recommendation)
    assert (out.nodes[i], out.depth[i]) == (ref.nodes, ref.depth)
    np.testing.assert_allclose(out.curve[i], ref.curve, rtol=2e-5)  # float32 sums of float32 values
    assert out.flags[i] == 0


def assert_regret_per_round_falls(curves, checkpoint_rounds):
    """The mean regret per round of the second half of a run is below 0.9 times the first half's
    (regret grows sublinearly); returns the mean curve."""
    rounds = np.asarray(checkpoint_rounds)
    mean = np.asarray(curves).mean(axis=0)
    half = len(rounds) // 2 - 1
    first = mean[half] / rounds[half]
    second = (mean[-1] - mean[half]) / (rounds[-1] - rounds[half])
    assert second < 0.9 * first
    return mean


def traced_tree_run(module, config, objective, seeds, base_seed=0):
    """(outputs with the pulled points, static) of a tree algorithm's module (hct, hoo, doo, soo):
    its static with trace=True, one compiled program per config and shape."""
    static = dataclasses.replace(module.make_static(config, objective), trace=True)
    out, _, _ = executor.execute(module.run_single, static, module.make_params(config), objective, base_seed,
                                 np.asarray(seeds))
    return out, static


def assert_runs_equal_reference(module, config, objective, seeds, reference):
    """Each seed's run of a tree algorithm (its pulled points traced) equals ``reference(split_dims)``,
    the reference run given that seed's split dimensions (tree.run_split_dims: entry 0 the root's,
    entry t the round-t draw); returns the outputs."""
    from fedpne_jax.algorithms.trees import tree
    out, static = traced_tree_run(module, config, objective, seeds)
    for i, seed in enumerate(seeds):
        dims = tree.run_split_dims(seed_key(0, seed), config.horizon, static.chunk, objective.dim, config.precision)
        assert_same_tree_run(out, i, reference(dims))
    return out


def pyxab_run(algo, objective, T: int):
    """(pulled points, get_last_point()) of a PyXAB algorithm object over T noise-free rounds of
    ``objective``'s global value, evaluated in float64 (PyXAB's arithmetic)."""
    import jax
    points = []
    with jax.enable_x64(True):
        for t in range(1, T + 1):
            x = algo.pull(t)
            points.append(x)
            algo.receive_reward(t, float(objective.value(np.asarray(x, np.float64))))
    return np.asarray(points), algo.get_last_point()


def target_hits(best, goals, rtol=1e-5):
    """(first round, 1-based, at which the per-round best-so-far regret ``best`` reaches each goal,
    0 if never; the goals within ``rtol`` of some value of ``best``, where float32 and float64 may
    land either way)."""
    best, goals = np.asarray(best, np.float64), np.asarray(goals, np.float64)
    reached = best[None, :] <= goals[:, None]
    hits = np.where(reached.any(axis=1), reached.argmax(axis=1) + 1, 0)
    near = np.isclose(goals[:, None], best[None, :], rtol=rtol, atol=1e-9).any(axis=1)
    return hits, near


def cli_call(argv) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``fedpne ARGV`` in this process; any exception but
    argparse's SystemExit propagates, failing the test as the traceback a user would see."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exit_:
            code = exit_.code
    return code, out.getvalue(), err.getvalue()
