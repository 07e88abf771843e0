"""Every registered algorithm with a small configuration, for the tests that every algorithm must
pass (tests/test_contract.py).  A new algorithm registered in fedpne_jax.core.registry fails the
suite until it has an entry here.  (The built-in ones: tests/test_plugins.py registers an example
algorithm in its own process, which must not change what other test files see.)

The parallel workers share no compilation cache: a shared persistent cache saved about 11 s of the
suite's 1,100 s of compilation, and in one run jaxlib crashed (a segmentation fault) while writing
an executable to it, which left pytest-xdist waiting for the dead worker."""
import pytest

import objectives
from fedpne_jax.algorithms import BUILTIN


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
