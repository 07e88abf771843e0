"""A grid of hyper-parameters runs in one compiled program and equals separate runs number for number."""
import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.fedpne import ALGORITHM as FEDPNE
from fedpne_jax.algorithms.fedpne.plan import Tables, make_params, plan
from fedpne_jax.core import executor, grid
from fedpne_jax.core.run import run_pairs, stack_params, static_key
from tests.support.helpers import make

# c values chosen with one depth limit, so the three separate runs also share one program.
CONFIG = fp.FedPNEConfig(num_clients=3, horizon=600, noise="gaussian:0.3", checkpoints=4, capacity=32)
C_VALUES = [0.07, 0.1, 0.12]
SEEDS = 8


def objective():
    return make("himmelblau", 3, dim=2)


def fields(res):
    return [res.final_regret, res.curves] + [res.metrics[k] for k in sorted(res.metrics)]


def assert_same(a, b):
    for x, y in zip(fields(a), fields(b)):
        np.testing.assert_array_equal(x, y)


@pytest.fixture(scope="module")
def grid_results():
    traces = executor.trace_count()
    results = fp.run_grid(grid.product(CONFIG, c=C_VALUES), objective(), seeds=SEEDS, base_seed=3)
    return results, executor.trace_count() - traces


def test_grid_is_one_compilation_and_equals_separate_runs(grid_results):
    results, traces = grid_results
    # One program for the three values (none if another test module compiled this shape already) ...
    assert traces <= 1
    # ... and other values of c are data for that same program.
    traces = executor.trace_count()
    fp.run_grid(grid.product(CONFIG, c=[0.08, 0.09, 0.11]), objective(), seeds=SEEDS, base_seed=3)
    assert executor.trace_count() == traces
    for c, res in zip(C_VALUES, results):
        alone = fp.run(CONFIG.replace(c=c), objective(), seeds=SEEDS, base_seed=3)
        assert res.config["c"] == c and res.num_seeds == SEEDS
        assert_same(res, alone)
    # The grid points really differ.
    assert len({r.final_regret.mean() for r in results}) == 3


def test_pairs_in_any_order_equal_the_grid(grid_results):
    """A sweep's calls mix configurations and seed ranges: any (grid point, seed) pairs give the same runs."""
    results, _ = grid_results
    configs = grid.product(CONFIG, c=C_VALUES)
    g = np.array([2, 0, 2, 1, 0, 1, 2, 0] * 3)
    seeds = np.array([7, 0, 1, 3, 5, 6, 4, 2, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7])
    # Pairs may repeat and come in any order: each run's numbers depend on its (grid point, seed) only.
    out = run_pairs(configs, objective(), g, seeds, base_seed=3)
    for k, res in enumerate(out):
        order = seeds[g == k]
        np.testing.assert_array_equal(res.seeds, order)
        np.testing.assert_array_equal(res.final_regret, results[k].final_regret[order])
        np.testing.assert_array_equal(res.curves, results[k].curves[order])


def test_product_order_and_labels():
    configs = grid.product(CONFIG, c=[0.1, 0.2], rho=[0.5, 0.6, 0.7])
    assert [(x.c, x.rho) for x in configs] == [(0.1, 0.5), (0.1, 0.6), (0.1, 0.7), (0.2, 0.5), (0.2, 0.6), (0.2, 0.7)]
    assert grid.points(k=[2, 3]) == [{"k": 2}, {"k": 3}]
    with pytest.raises(ValueError, match="repeat"):
        grid.points(c=[0.1, 0.1])
    with pytest.raises(ValueError, match="must be a list"):
        grid.points(c=0.1)


def test_product_refuses_an_unknown_parameter_by_name():
    with pytest.raises(ValueError, match=r"HCTConfig has no parameter 'cc'; its parameters are horizon, noise, "
                                         r"checkpoints, .*, c, delta"):
        fp.grid_product(fp.make_config("hct"), c=[0.1], cc=[1, 2])


def test_horizons_share_one_program_and_equal_separate_runs(grid_results):
    """The horizon and the checkpoints' rounds are data: a study over horizons (with one checkpoint
    count) is one program, and each of its runs equals the run of its horizon alone, whose tables
    (depth limit) differ."""
    # 600 and 1200 have CONFIG's depth limit, 300 a smaller one: the study's tables, runs and
    # checkpoint count are those of the grid of c values, so it runs that grid's program, traced once.
    configs = [CONFIG.replace(horizon=T) for T in (300, 600, 1200)]
    depths = [plan(config).depth_limit for config in configs]
    assert depths[0] < depths[1] == depths[2] == plan(CONFIG).depth_limit
    traces = executor.trace_count()
    results = fp.run_grid(configs, objective(), seeds=SEEDS, base_seed=3)
    assert executor.trace_count() == traces
    for config, res in zip(configs, results):
        np.testing.assert_array_equal(res.checkpoints, config.checkpoint_rounds)
        assert_same(res, fp.run(config, objective(), seeds=SEEDS, base_seed=3))
    assert len({r.final_regret.mean() for r in results}) == 3


def test_shapes_group_into_fewest_programs():
    """Scalar parameters and the horizon share a program; M, k, the checkpoint count, noise kind or
    DP on/off split the grid."""
    obj = objective()
    configs = [CONFIG, CONFIG.replace(c=0.3, rho=0.7, nu=0.5, c1=2.0, delta=0.1, noise="gaussian:0.1", capacity=64,
                                      horizon=5000),
               CONFIG.replace(k=3), CONFIG.replace(noise="none"), CONFIG.replace(dp_epsilon=1.0, dp_delta=0.01),
               CONFIG.replace(dp_epsilon=2.0, dp_delta=0.1), CONFIG.replace(k=3, c=0.2), CONFIG.replace(checkpoints=5)]
    keys = [static_key(c, obj) for c in configs]
    assert grid.group_indices(keys) == [[0, 1], [2, 6], [3], [4, 5], [7]]
    with pytest.raises(ValueError, match="differ in shapes"):
        run_pairs([CONFIG, CONFIG.replace(k=3)], obj, [0, 1], [0, 0])


def test_stacked_params_have_a_grid_axis():
    configs = grid.product(CONFIG, c=C_VALUES)
    tables = Tables(capacity=32, depth=12)
    stacked = stack_params(FEDPNE, configs, tables)
    assert stacked.tau.shape == (3, 13) and stacked.noise_scale.shape == (3,) and stacked.checkpoint_rounds.shape == (3, 4)
    np.testing.assert_array_equal(stacked.conf[1], make_params(configs[1], tables).conf)
