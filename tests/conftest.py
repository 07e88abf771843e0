"""Every registered algorithm with a small configuration, for the tests that every algorithm must
pass (tests/test_contract.py).  A new algorithm registered in fedpne_jax.core.registry fails the
suite until it has an entry here.  (The built-in ones: tests/test_plugins.py registers an example
algorithm in its own process, which must not change what other test files see.)

Each test file's run programs are dropped when the file ends, and
every other cached program once the worker holds KEEP_CACHES_BELOW: a worker that kept all of them
grew past 4.8 GB, and twice a worker that old crashed inside XLA's compiler (a segmentation fault),
which leaves pytest-xdist waiting for it."""
import os
import shutil
import tempfile

import jax
import pytest

import objectives
from fedpne_jax.algorithms import BUILTIN
from fedpne_jax.core import compile_cache, executor, host_devices
from tests.support import tiers

# The command line keeps compiled programs on disk (compile_cache), in the user's folder.  The suite
# keeps them in one folder of its own instead, which its workers and every process they start (the
# command line, its workers, Flower's apps) share: a rerun that resumes, and a later test of the same
# shapes, load what an earlier one compiled, as a user's would, with the same bits.  SUITE_CACHE
# names a folder to share across sessions (.ci/run's two tiers); else the controller makes one and
# removes it at the end.
# Which process made the folder is this module's own state, not the environment's: a pytest that a
# test starts (the mutation check's) inherits the variable and must not remove the folder.
SUITE_CACHE = "FEDPNE_SUITE_COMPILE_CACHE"
_made_cache = None
if not os.environ.get("PYTEST_XDIST_WORKER") and not os.environ.get(SUITE_CACHE):
    os.environ[SUITE_CACHE] = _made_cache = tempfile.mkdtemp(prefix="fedpne-suite-xla-")
os.environ[compile_cache.ENV] = os.environ[SUITE_CACHE]
compile_cache.enable()
# The command line makes every core a device (host_devices) when it is the first to touch JAX, which
# a test calling it in a worker could be: the suite keeps one device unless a test asks for more.
os.environ[host_devices.ENV] = "off"

# A worker keeps the small programs every file uses (random keys, conversions: about a tenth of the
# suite's compilation) until its memory passes this; each file's run programs are dropped at its end.
KEEP_CACHES_BELOW = 2.5 * 2**30


def _resident_bytes() -> float:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return float("inf")      # unknown: clear everything, as a worker without the check would


@pytest.fixture(autouse=True, scope="module")
def _programs_of_one_file():
    yield
    executor._compiled.clear()
    executor._jitted.clear_cache()
    executor._jitted_sharded.clear_cache()
    executor._one_run.clear_cache()          # the runs' traces, which the dropped programs were built from
    if _resident_bytes() > KEEP_CACHES_BELOW:
        jax.clear_caches()


def pytest_addoption(parser):
    parser.addoption("--thorough", action="store_true", default=bool(os.environ.get("FEDPNE_THOROUGH")),
                     help="run the whole suite, not only the gate (tests/support/tiers.py)")


def pytest_unconfigure(config):
    if _made_cache:
        shutil.rmtree(_made_cache, ignore_errors=True)


def pytest_configure(config):
    config.addinivalue_line("markers", "thorough: a test of the thorough tier only (tests/support/tiers.py)")


def pytest_collection_modifyitems(config, items):
    functions: dict = {}
    for item in items:
        function = item.nodeid.partition("[")[0]
        functions.setdefault(function, []).append(tiers.thorough(item.nodeid))
        if functions[function][-1]:
            item.add_marker(pytest.mark.thorough)
    empty = [f for f, marks in functions.items() if all(marks) and not tiers.whole(f)]
    if empty:
        raise pytest.UsageError(f"tests/support/tiers.py's CASES leave no gate case of {empty}; name them in FUNCTIONS")
    if not (config.option.keyword or config.option.markexpr) and all(os.path.isdir(a) for a in config.args):
        stale = tiers.stale(item.nodeid for item in items)
        if stale:
            raise pytest.UsageError(f"tests/support/tiers.py names tests that do not exist: {stale}")
    if config.getoption("--thorough"):
        return
    skip = pytest.mark.skip(reason="thorough tier: pytest --thorough (tests/support/tiers.py)")
    for item in items:
        if "thorough" in item.keywords:
            item.add_marker(skip)


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
