"""Every registered algorithm with a small configuration, for the tests that every algorithm must
pass (tests/test_contract.py).  A new algorithm registered in fedpne_jax.core.registry fails the
suite until it has an entry here.  (The built-in ones: tests/test_plugins.py registers an example
algorithm in its own process, which must not change what other test files see.)"""
from fedpne_jax.algorithms import BUILTIN


def pytest_generate_tests(metafunc):
    if "algorithm" in metafunc.fixturenames:
        metafunc.parametrize("algorithm", [a.name for a in BUILTIN])
