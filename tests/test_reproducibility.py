"""The same key gives the same numbers alone, in a batch, with or without jit; compiled programs are
reused for equal shapes."""
import jax
import numpy as np
import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax.core import executor
from tests.support.helpers import make

CONFIG = fp.FedPNEConfig(num_clients=3, horizon=600, noise="gaussian:0.3", split="random", checkpoints=8,
                         capacity=32)


def _fields(res, i):
    return (res.final_regret[i], res.curves[i], res.phases[i], res.uploads[i], res.depth[i], res.recommendation[i])


def _assert_same(a, i, b, j):
    for x, y in zip(_fields(a, i), _fields(b, j)):
        np.testing.assert_array_equal(x, y)


@pytest.fixture(scope="module")
def objective():
    return make("himmelblau", 3, dim=2)


@pytest.fixture(scope="module")
def batch(objective):
    return fp.run(CONFIG, objective, seeds=64, base_seed=7)


def test_seed_alone_equals_seed_in_batch(objective, batch):
    for seed in (0, 13, 63):
        alone = fp.run(CONFIG, objective, seeds=[seed], base_seed=7)
        _assert_same(alone, 0, batch, seed)
    # Runs differ between seeds (so equality above is not trivial).
    assert len(set(batch.final_regret.tolist())) > 10


@pytest.fixture(scope="module")
def company(objective):
    """Three of the batch's seeds in another order and company, and how many programs their run
    traced (a batch size of its own: one, which test_same_shapes_do_not_recompile checks)."""
    traces = executor.trace_count()
    run = fp.run(CONFIG, objective, seeds=[40, 2, 63], base_seed=7)
    return run, executor.trace_count() - traces


def test_order_and_company_do_not_matter(batch, company):
    other, _ = company
    for j, seed in enumerate([40, 2, 63]):
        _assert_same(other, j, batch, seed)


def test_without_jit_equals_jit(objective, batch):
    # Eager execution compiles each primitive it meets once, so its cost hardly depends on the run's
    # length (two phases at T = 100 cost as much): the eager run is one of the batch's, compiled already.
    with jax.disable_jit():
        eager = fp.run(CONFIG, objective, seeds=[2], base_seed=7)
    assert eager.compile_seconds == 0.0
    assert eager.phases[0] > 1
    _assert_same(eager, 0, batch, 2)


def test_client_sampler_alone_equals_batch():
    """Per-client sampling: the server's average over clients is summed in a fixed order (per-pull
    sampling: tests/test_statistics.py)."""
    config = fp.FedPNEConfig(num_clients=3, horizon=800, checkpoints=8, capacity=16, noise="bernoulli")
    objective = make("garland", 3, heterogeneity="none")
    batch = fp.run(config, objective, seeds=12)
    for seed in (2, 9):
        _assert_same(fp.run(config, objective, seeds=[seed]), 0, batch, seed)
    assert len(set(batch.final_regret.tolist())) > 3


def test_many_coordinates_alone_equal_batch():
    """Ackley in 5 dimensions sums over coordinates in a fixed order, so its values do not depend on
    the batch they are computed in."""
    config = fp.FedPNEConfig(num_clients=2, horizon=3000, checkpoints=8, capacity=64, split="random")
    objective = make("ackley", 2, dim=5)
    batch = fp.run(config, objective, seeds=12)
    for seed in (3, 10):
        _assert_same(fp.run(config, objective, seeds=[seed]), 0, batch, seed)


def test_base_seed_changes_runs(objective, batch):
    other = fp.run(CONFIG, objective, seeds=64, base_seed=8)
    assert not np.array_equal(other.final_regret, batch.final_regret)


def test_same_shapes_do_not_recompile(objective, batch, company):
    traces = executor.trace_count()
    again = fp.run(CONFIG, objective, seeds=list(range(100, 164)), base_seed=99)      # the batch's shape
    assert executor.trace_count() == traces
    assert again.compile_seconds == 0.0
    # Another instance of the objective (other client shifts: data, not structure) reuses the program.
    fp.run(CONFIG, objectives.make_objective("himmelblau", 3, seed=5, dim=2), seeds=64)
    assert executor.trace_count() == traces
    assert company[1] == 1                      # a new batch size is a new shape


def test_run_key_words_are_the_seed_keys_and_share_a_program_up_to_a_power_of_two():
    """A run's key words are those of executor.seed_key for its index, whatever the other indices
    beside it (the key program's lanes are padded to a power of two); counts 5 to 8 share one program."""
    for ids in ([3], [0, 7, 2], list(range(5)), list(range(9, 17)), [2**31 - 1, 0, 12, 5, 6]):
        expected = np.stack([np.asarray(jax.random.key_data(executor.seed_key(11, i))) for i in ids])
        np.testing.assert_array_equal(executor.run_key_words(11, ids), expected)
    executor.run_key_words(0, range(5))
    compiled = executor._seed_words._cache_size()
    for count in (6, 7, 8):
        executor.run_key_words(0, range(count))
    assert executor._seed_words._cache_size() == compiled


EXPLICIT = fp.FedPNEConfig(num_clients=2, horizon=400, noise="uniform:0.3", pull="uniform", checkpoints=8,
                           capacity=16)


def test_explicit_sampler_without_jit_equals_jit():
    """One phase of the per-pull block sampler (uniform points, uniform noise, a checkpoint inside a
    node), run eagerly, gives the compiled program's numbers.  (A whole eager run dispatches every
    operation of every loop trip from Python: minutes for a few phases.)"""
    import jax.numpy as jnp

    from fedpne_jax.algorithms.fedpne import partition, sampling
    from fedpne_jax.algorithms.fedpne.plan import Tables, make_params, make_static, plan

    objective = make("himmelblau", 2, dim=2)
    tables = Tables(capacity=16, depth=plan(EXPLICIT).depth_limit)
    static = make_static(EXPLICIT, objective, tables)
    params = jax.tree.map(jnp.asarray, make_params(EXPLICIT, tables))

    @jax.jit
    def phase_table():
        # One compiled program: built op by op, the table took longer than the jitted estimate.
        table = partition.root(static, jax.random.key(0))
        table, _ = partition.expand(static, table, jnp.arange(16) < 1, jnp.int32(0))
        return table, partition.centres(static, table, objective.lo, objective.hi)

    table, centre = phase_table()
    n = jnp.int32(200)                                       # one block of pulls per node
    pulls = jnp.where(jnp.arange(16) < 2, n, 0)
    jc = jnp.full((EXPLICIT.checkpoints,), 1, jnp.int32)
    part = jnp.where(jnp.arange(EXPLICIT.checkpoints) == 0, 170, 0).astype(jnp.int32)
    # The schedule is data, as in a run (a compile-time constant would let XLA fold the divisions).
    estimate = lambda *a: sampling.estimate(static, params, objective, table, centre, *a, True)
    args = (pulls, n, jax.random.key(5), jc, part)
    jitted = jax.jit(estimate)(*args)
    with jax.disable_jit():
        eager = estimate(*args)
    for a, b in zip(jitted, eager):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert float(jitted.partial[0]) > 0 and float(jitted.regret[1]) > 0
