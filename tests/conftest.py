"""Every registered algorithm with a small configuration, for the tests that every algorithm must
pass (tests/test_contract.py).  A new algorithm registered in fedpne_jax.core.registry fails the
suite until it has an entry here.  (The built-in ones: tests/test_plugins.py registers an example
algorithm in its own process, which must not change what other test files see.)

The parallel workers share no compilation cache (a shared persistent cache saved about 11 s of the
suite's 1,100 s of compilation), and each test file's compiled programs are dropped when the file
ends: a worker that kept all of them grew past 4.8 GB, and twice a worker that old crashed inside
XLA's compiler (a segmentation fault), which leaves pytest-xdist waiting for it."""
import jax
import pytest

import objectives
from fedpne_jax.algorithms import BUILTIN
from fedpne_jax.core import executor


@pytest.fixture(autouse=True, scope="module")
def _programs_of_one_file():
    yield
    executor._compiled.clear()
    jax.clear_caches()


def pytest_generate_tests(metafunc):
    if "algorithm" in metafunc.fixturenames:
        metafunc.parametrize("algorithm", [a.name for a in BUILTIN])


# The one-client, homogeneous problems of the centralized tree tests (test_hct, test_hoo, test_doo).
@pytest.fixture(scope="module")
def garland():
    return objectives.make_objective("garland", num_clients=1, heterogeneity="none")


@pytest.fixture(scope="module")
def himmelblau():
    return objectives.make_objective("himmelblau", num_clients=1, heterogeneity="none")
