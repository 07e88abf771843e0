"""Every registered algorithm with a small configuration, for the tests that every algorithm must
pass (tests/test_contract.py).  A new algorithm registered in fedpne_jax.core.registry fails the
suite until it has an entry here.  (The built-in ones: tests/test_plugins.py registers an example
algorithm in its own process, which must not change what other test files see.)

The parallel workers of one run share a persistent compilation cache in a temporary folder, so a
program two test files compile in different workers is compiled once; the folder is new for each run
(nothing carries over between runs) and removed at its end."""
import os
import shutil
import tempfile
import uuid

import jax
import pytest

import objectives
from fedpne_jax.algorithms import BUILTIN


def _cache_folder(run: str) -> str:
    return os.path.join(tempfile.gettempdir(), f"fedpne-jax-test-compilations-{run}")


_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")          # set in xdist's workers
_CACHE = _cache_folder(_RUN) if _RUN else None
if _CACHE:
    jax.config.update("jax_compilation_cache_dir", _CACHE)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def pytest_generate_tests(metafunc):
    if "algorithm" in metafunc.fixturenames:
        metafunc.parametrize("algorithm", [a.name for a in BUILTIN])


def pytest_configure(config):
    # The controller names the run, so that it knows which folder to remove when the workers are done.
    if not hasattr(config, "workerinput") and getattr(config.option, "testrunuid", "absent") is None:
        config.option.testrunuid = uuid.uuid4().hex


def pytest_sessionfinish(session):
    run = getattr(session.config.option, "testrunuid", None)
    if run and not hasattr(session.config, "workerinput"):
        shutil.rmtree(_cache_folder(run), ignore_errors=True)


# The one-client, homogeneous problems of the centralized tree tests (test_hct, test_hoo, test_doo).
@pytest.fixture(scope="module")
def garland():
    return objectives.make_objective("garland", num_clients=1, heterogeneity="none")


@pytest.fixture(scope="module")
def himmelblau():
    return objectives.make_objective("himmelblau", num_clients=1, heterogeneity="none")
