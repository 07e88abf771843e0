"""A full node table is detected every time: grown and rerun to the same result, or an error."""
import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.fedpne.plan import plan
from tests.support.helpers import make

CONFIG = fp.FedPNEConfig(num_clients=4, horizon=5_000, noise="gaussian:0.1", split="random")


@pytest.fixture(scope="module")
def objective():
    return make("himmelblau", 4, dim=2)


@pytest.fixture(scope="module")
def roomy(objective):
    # Room for the runs' 32 nodes, and none of the tables a capacity of 4 grows to (4, 16, 64): a table
    # of 256 rows took half as long again to compile.
    return fp.run(CONFIG.replace(capacity=48), objective, seeds=6)


def test_small_capacity_grows_to_the_same_result(objective, roomy):
    assert roomy.max_active.max() > 8
    small = fp.run(CONFIG.replace(capacity=4), objective, seeds=6)
    assert small.capacity > 4 and small.capacity != roomy.capacity
    for a, b in [(small.final_regret, roomy.final_regret), (small.curves, roomy.curves),
                 (small.phases, roomy.phases), (small.uploads, roomy.uploads), (small.depth, roomy.depth),
                 (small.recommendation, roomy.recommendation)]:
        np.testing.assert_array_equal(a, b)


def test_overflow_raises_without_growth(objective):
    with pytest.raises(fp.CapacityError, match="capacity 4 overflowed"):
        fp.run(CONFIG.replace(capacity=4), objective, seeds=6, grow=False)


def test_default_capacity_holds_the_first_phase_children():
    cfg = fp.FedPNEConfig(num_clients=100, horizon=10**6)
    # tau_h = ceil(0.01 * log(1e8) * 4^h) = 1, 1, 3, 12, 48: |K| grows to 16 before 16 * 48 > 100.
    assert plan(cfg).initial_capacity == 32
    assert plan(cfg.replace(capacity=5)).initial_capacity == 5
