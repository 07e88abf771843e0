"""Every registered algorithm with a small configuration, for the tests that every algorithm must
pass (tests/test_contract.py).  A new algorithm registered in fedpne_jax.core.registry fails the
suite until it has an entry here."""
import fedpne_jax as fp

def pytest_generate_tests(metafunc):
    if "algorithm" in metafunc.fixturenames:
        metafunc.parametrize("algorithm", fp.ALGORITHMS)
