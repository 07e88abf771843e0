"""Objectives from plain Python and PyXAB (objectives.python): values, host calls per run, the engine's
samplers, HCT, grids, sharding, errors, and landmine-sklearn against the JAX landmine."""
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax.algorithms.trees.hct import HCTConfig
from objectives import python as pyobj
from objectives import synthetic
from objectives.errors import MissingExtra
from objectives.heterogeneity import GlobalOnly, Shifted
from objectives.objective import Objective

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
M = 3
SHIFT = np.array([-0.25, 0.0625, 0.1875])        # zero-sum and exact in float32
SEEDS = 6
# A batch of runs evaluates the box centre, the same point for every run, once: the scale of their
# targets (checkpoints.target_scale), one more global call of one point.
SCALE_CALLS = 1
FEDPNE = fp.FedPNEConfig(num_clients=M, horizon=600, checkpoints=6)
HCT = HCTConfig(horizon=150, checkpoints=5)
# Every sampler: aggregate (the default here), client (Bernoulli rewards), explicit with centre and
# with uniform pulls.  The Python and the JAX objectives compute the same values in float64 and
# float32 respectively, so runs agree up to float32 rounding.
SAMPLERS = {
    "aggregate": FEDPNE,
    "client": FEDPNE.replace(noise="gaussian:0.1", sampling="client"),
    "explicit-centre": FEDPNE.replace(horizon=300, sampling="explicit"),
    "explicit-uniform": FEDPNE.replace(horizon=300, sampling="explicit", pull="uniform"),
}


def garland_np(X):
    x = X[:, 0]
    return x * (1.0 - x) * (4.0 - np.sqrt(np.abs(np.sin(60.0 * x))))


class Counted:
    """A Python function that records how often, and on how many points, it is called."""

    def __init__(self, f):
        self.f, self.rows = f, []

    def __call__(self, X):
        self.rows.append(X.shape[0])
        return self.f(X)

    @property
    def calls(self):
        return len(self.rows)


def shifted_local(X):
    return garland_np(X)[:, None] + SHIFT[None, :]


def python_objective(fn=garland_np, local_fn=shifted_local, name="garland-python"):
    return pyobj.from_python(fn, 0.0, 1.0, synthetic.GARLAND_F_STAR, name=name, num_clients=M, local_fn=local_fn)


def jax_objective():
    """The same problem written in JAX (Garland with client shifts SHIFT)."""
    return Objective(name="garland-jax", lo=(0.0,), hi=(1.0,), f_star=synthetic.GARLAND_F_STAR, num_clients=M,
                     global_fn=GlobalOnly(synthetic.garland), local_fn=Shifted(synthetic.garland),
                     data={"shift": jnp.asarray(SHIFT, jnp.float32)})


@pytest.fixture(scope="module")
def counted():
    """(objective, fn, local_fn) shared by the tests that count calls (one compiled program per run kind)."""
    fn, local = Counted(garland_np), Counted(shifted_local)
    return python_objective(fn, local), fn, local


def assert_close_runs(a, b):
    np.testing.assert_allclose(a.final_regret, b.final_regret, rtol=1e-4)
    np.testing.assert_allclose(a.curves, b.curves, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------- values


def test_values_match_jax_and_take_one_call_per_batch(counted):
    obj, fn, local = counted
    assert (fn.calls, local.calls) == (1, 1)                   # the probe at construction
    ref = jax_objective()
    X = np.random.default_rng(0).uniform(size=(4, 5, 1)).astype(np.float32)   # (seeds, nodes, D)
    X[1] = X[0]                                                 # repeated points are evaluated once
    np.testing.assert_allclose(obj.value(X), ref.value(X), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(obj.local_values(X), ref.local_values(X), rtol=1e-6, atol=1e-7)
    assert (fn.calls, local.calls) == (2, 2) and fn.rows[-1] == local.rows[-1] == 15    # not 20, not 3 x 15
    # jit and vmap over "grid points" and seeds: still one call of each, with every point.
    both = jax.jit(jax.vmap(jax.vmap(lambda x: (obj.value(x), obj.local_values(x)))))
    g, l = both(np.stack([X, X + 0.01]))
    assert g.shape == (2, 4, 5) and l.shape == (2, 4, 5, M)
    assert (fn.calls, local.calls) == (3, 3) and fn.rows[-1] == 30
    np.testing.assert_allclose(l[1], ref.local_values(X + 0.01), rtol=1e-6, atol=1e-7)
    # One point, one client (the per-pull sampler's form).
    assert float(obj.local(jnp.array([0.3]), 2)) == pytest.approx(float(shifted_local(np.array([[0.3]]))[0, 2]))


def test_default_locals_and_dtype():
    fn = Counted(garland_np)
    obj = pyobj.from_python(fn, [0.0], [1.0], synthetic.GARLAND_F_STAR, num_clients=4, dtype=None)
    X = np.linspace(0.0, 1.0, 7)[:, None]
    local = obj.local_values(X.astype(np.float32))
    assert local.dtype == jnp.float32 and fn.calls == 2 and fn.rows[-1] == 7      # one row per point for 4 clients
    np.testing.assert_allclose(local, np.repeat(garland_np(X)[:, None], 4, 1), rtol=1e-6)
    with jax.enable_x64(True):
        assert obj.value(X).dtype == jnp.float64                 # dtype=None: the points' dtype
        np.testing.assert_array_equal(obj.value(X), garland_np(X))


# --------------------------------------------------------------------------------- engine runs


# The child's runs: the Python objective built anew there, on 4 host devices.
CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path[:0] = [{root!r}]
    import fedpne_jax as fp
    from objectives import python as pyobj
    from tests.test_python_objectives import HCT, SAMPLERS, SEEDS, python_objective
    obj = python_objective()
    out = {{}}
    for name in ("aggregate", "explicit-uniform"):
        run = fp.run(SAMPLERS[name], obj, seeds=SEEDS, devices="all")
        out[name + "_final"], out[name + "_curves"] = run.final_regret, run.curves
    out["hct_final"] = fp.run(HCT, obj, seeds=SEEDS, devices="all").final_regret
    out["calls"] = pyobj.stats(obj)["global_calls"]
    np.savez({out!r}, **out)
""")


@pytest.fixture(scope="module")
def sharded_child(tmp_path_factory):
    """The 4-device runs of test_four_devices_equal_one, computed in a child process (4 host devices)
    that starts before the single-device references and runs beside them."""
    out = tmp_path_factory.mktemp("sharded") / "sharded.npz"
    script = CHILD.format(root=ROOT, out=str(out))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    child = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    yield child, out
    if child.poll() is None:
        child.kill()
        child.communicate()


@pytest.fixture(scope="module")
def single_device_runs(counted, sharded_child):
    """Every sampler and HCT on the Python objective, on one device (the sharding test's reference)."""
    obj = counted[0]
    runs = {name: fp.run(config, obj, seeds=SEEDS, devices=1) for name, config in SAMPLERS.items()}
    runs["hct"] = fp.run(HCT, obj, seeds=SEEDS, devices=1)
    return runs


def test_fedpne_makes_one_call_per_site_and_phase(counted, single_device_runs):
    obj, fn, local = counted
    pyobj.stats(obj, reset=True)
    calls = fn.calls
    run = fp.run(FEDPNE, obj, seeds=SEEDS, devices=1)
    s = pyobj.stats(obj)
    # The phase loop runs until the last seed is done; a phase cut at T is a call but not a phase.
    phase_calls = s["global_calls"] - SCALE_CALLS
    assert run.phases.max() <= phase_calls <= run.phases.max() + 1 and s["local_calls"] == 0
    assert fn.calls - calls == s["global_calls"]
    # every node of every seed per phase call, and the box centre once (the same point in every run)
    assert s["points"] == phase_calls * SEEDS * run.capacity + SCALE_CALLS
    np.testing.assert_array_equal(run.final_regret, single_device_runs["aggregate"].final_regret)


def test_uniform_pulls_match_the_jax_objective(single_device_runs):
    """Every client evaluates its own points, so the client index must follow each point through the
    host call: the run equals the JAX objective's up to float32 rounding."""
    assert_close_runs(single_device_runs["explicit-uniform"],
                      fp.run(SAMPLERS["explicit-uniform"], jax_objective(), seeds=SEEDS, devices=1))


@pytest.mark.parametrize("sampler", ["client", "explicit-centre"])
def test_local_sites_make_one_call_per_phase_for_all_clients(sampler, counted, single_device_runs):
    """The global and local sites see the same nodes, one call each per phase, and local_fn gets each
    distinct node once for all M clients.  (Their values are those of test_values_match_jax_...)."""
    obj, fn, local = counted
    pyobj.stats(obj, reset=True)
    g0, l0 = fn.calls, local.calls
    run = fp.run(SAMPLERS[sampler], obj, seeds=SEEDS, devices=1)
    s = pyobj.stats(obj)
    np.testing.assert_array_equal(run.final_regret, single_device_runs[sampler].final_regret)
    assert run.phases.max() <= s["global_calls"] - SCALE_CALLS == s["local_calls"] <= run.phases.max() + 1
    assert fn.rows[g0 + SCALE_CALLS:] == local.rows[l0:]


def test_hct_makes_one_call_per_round(counted, single_device_runs):
    obj, fn, _ = counted
    pyobj.stats(obj, reset=True)
    run = fp.run(HCT, obj, seeds=SEEDS, devices=1)
    s = pyobj.stats(obj)
    assert s["global_calls"] == HCT.horizon + 1 + SCALE_CALLS
    assert s["points"] == (HCT.horizon + 1) * SEEDS + SCALE_CALLS      # the centre: one point for all runs
    np.testing.assert_array_equal(run.final_regret, single_device_runs["hct"].final_regret)
    ref = fp.run(HCT, jax_objective(), seeds=SEEDS, devices=1)
    np.testing.assert_allclose(run.final_regret, ref.final_regret, rtol=1e-4)


def test_grid_shares_the_calls(counted, single_device_runs):
    obj = counted[0]
    configs = fp.grid_product(FEDPNE, c=[FEDPNE.c_value, 4 * FEDPNE.c_value])
    pyobj.stats(obj, reset=True)
    runs = fp.run_grid(configs, obj, seeds=SEEDS, devices=1)
    s = pyobj.stats(obj)
    assert s["global_calls"] <= max(r.phases.max() for r in runs) + 1 + SCALE_CALLS
    np.testing.assert_array_equal(runs[0].final_regret, single_device_runs["aggregate"].final_regret)
    assert not np.array_equal(runs[1].final_regret, runs[0].final_regret)


def test_four_devices_equal_one(sharded_child, single_device_runs):
    """Sharded over 4 host devices (6 runs padded to 8), every device calls the host for its own
    block; the numbers are those of one device."""
    child, out = sharded_child
    _, stderr = child.communicate(timeout=300)
    assert child.returncode == 0, stderr
    data = np.load(out)
    for name in ("aggregate", "explicit-uniform"):
        np.testing.assert_array_equal(data[name + "_final"], single_device_runs[name].final_regret)
        np.testing.assert_array_equal(data[name + "_curves"], single_device_runs[name].curves)
    np.testing.assert_array_equal(data["hct_final"], single_device_runs["hct"].final_regret)
    assert data["calls"] > 4 * (HCT.horizon + 1)            # 4 devices x (T + 1) rounds for HCT alone


# -------------------------------------------------------------------------------------- errors


class Fragile:
    """Raises above 0.7 (mode 'raise') or returns NaN below 0.4 (mode 'nan'): one objective, so
    one compiled program, for both tests."""

    def __init__(self):
        self.mode = "raise"

    def __call__(self, X):
        if self.mode == "raise" and np.any(X[:, 0] > 0.7):
            raise ZeroDivisionError("no values above 0.7 today")
        return np.where((X[:, 0] < 0.4) & (self.mode == "nan"), np.nan, garland_np(X))


def raising(X):
    if np.any(X[:, 0] > 0.7):
        raise ZeroDivisionError("no values above 0.7 today")
    return garland_np(X)


FRAGILE_RUN = fp.FedPNEConfig(num_clients=2, horizon=200, checkpoints=2)


@pytest.fixture(scope="module")
def fragile():
    fn = Fragile()
    return pyobj.from_python(fn, 0.0, 1.0, synthetic.GARLAND_F_STAR, name="fragile", num_clients=2), fn


def test_an_exception_reaches_the_user_with_its_message(fragile, monkeypatch):
    raising_objective, fn = fragile
    fn.mode, config = "raise", FRAGILE_RUN
    # The executor keeps the callback's exception on the host and raises it after the run, with its
    # own message and as the cause (before the NaN it returned could be reported).
    with pytest.warns(RuntimeWarning, match="fragile.*ZeroDivisionError: no values above 0.7"):
        with pytest.raises(pyobj.PythonObjectiveError, match="objective 'fragile': fn Fragile raised "
                           "ZeroDivisionError: no values above 0.7 today") as info:
            fp.run(config, raising_objective, seeds=2, devices=1)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert isinstance(info.value, fp.ObjectiveError)
    pyobj.raise_pending(raising_objective)                    # reported once


@pytest.mark.parametrize("bad,match", [
    (lambda X: np.zeros((X.shape[0], 2)), r"returned shape \(3, 2\); expected a numeric array of shape \(3,\)"),
    (lambda X: np.array(["a"] * X.shape[0]), r"dtype <U1 \(not numbers\); expected a numeric array of shape \(3,\)"),
    (lambda X: np.array([{}] * X.shape[0], dtype=object), r"do not convert to float .*shape \(3,\)"),
    (lambda X: [[1.0], [2.0, 3.0], []], r"not an array .*shape \(3,\)"),
    (lambda X: 0.5, r"returned shape \(\); expected a numeric array of shape \(3,\)"),
])
def test_wrong_shapes_and_types_are_refused_at_construction(bad, match):
    with pytest.raises(pyobj.PythonObjectiveError, match="objective 'bad': fn .*" + match):
        pyobj.from_python(bad, 0.0, 1.0, 1.0, name="bad")


def test_bad_local_functions_are_refused_at_construction():
    with pytest.raises(pyobj.PythonObjectiveError, match=r"'bad': local_fn .*shape \(3,\); .*shape \(3, 3\)"):
        pyobj.from_python(garland_np, 0.0, 1.0, 1.0, name="bad", num_clients=M, local_fn=garland_np)
    with pytest.raises(ValueError, match="'bad': fn must be the mean of local_fn's 3 columns"):
        pyobj.from_python(garland_np, 0.0, 1.0, 1.0, name="bad", num_clients=M,
                          local_fn=lambda X: shifted_local(X) + 0.01)
    with pytest.raises(pyobj.PythonObjectiveError, match="'bad': fn raising raised ZeroDivisionError.*probe") as info:
        pyobj.from_python(raising, 0.5, 1.0, 1.0, name="bad")
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_a_shape_error_after_construction_is_reported():
    state = {"calls": 0}

    def flaky(X):
        state["calls"] += 1
        return garland_np(X) if state["calls"] == 1 else garland_np(X)[:, None]

    obj = pyobj.from_python(flaky, 0.0, 1.0, 1.0, name="flaky")
    with pytest.warns(RuntimeWarning, match="flaky"):
        assert np.isnan(obj.value(np.full((4, 1), 0.25))).all()
    with pytest.raises(pyobj.PythonObjectiveError, match=r"'flaky': fn .* returned shape \(1, 1\); expected a "
                                                         r"numeric array of shape \(1,\)"):
        pyobj.raise_pending(obj)


def test_nan_is_reported_by_the_run_flags(fragile):
    obj, fn = fragile
    fn.mode = "nan"
    with pytest.raises(fp.ObjectiveError, match="'fragile' returned NaN"):
        fp.run(FRAGILE_RUN, obj, seeds=2, devices=1)
    pyobj.raise_pending(obj)                                  # NaN is a value, not a failure


# -------------------------------------------------------------------------------------- PyXAB


class GarlandLikePyXAB:
    """PyXAB's interface: f on ONE point given as a list, and fmax (PyXAB's Garland states 1)."""

    def __init__(self):
        self.fmax, self.points = 1, 0

    def f(self, x):
        self.points += 1
        if len(x) != 1:
            raise ValueError("The dimension of the point should be 1 in Garland")
        x = x[0]
        return x * (1 - x) * (4 - np.sqrt(np.abs(np.sin(60 * x))))


def test_from_pyxab_loops_over_distinct_points():
    g = GarlandLikePyXAB()
    obj = objectives.from_pyxab(g, 0.0, 1.0, num_clients=2)
    assert obj.f_star == 1 and obj.name == "pyxab-garlandlikepyxab" and g.points == 3      # 3 probe points
    X = np.array([[0.1], [0.52], [0.1], [0.9]], np.float32)
    np.testing.assert_allclose(obj.local_values(X), objectives.make_objective("garland", 2, heterogeneity="none")
                               .local_values(X), rtol=1e-6)
    assert g.points == 3 + 3
    fixed = objectives.from_pyxab(g, 0.0, 1.0, f_star=synthetic.GARLAND_F_STAR, name="garland-pyxab")
    assert fixed.f_star == synthetic.GARLAND_F_STAR and fixed.name == "garland-pyxab"

    class TwoValues:
        fmax = 1.0

        def f(self, x):
            return [1.0, 2.0]

    with pytest.raises(pyobj.PythonObjectiveError, match="'pyxab-twovalues': TwoValues.f returned .*one number"):
        objectives.from_pyxab(TwoValues(), 0.0, 1.0)


def test_real_pyxab_garland_equals_ours():
    garland_module = pytest.importorskip("PyXAB.synthetic_obj.Garland",
                                         reason="PyXAB is not installed (pip install pyxab)")
    target = garland_module.Garland()
    obj = objectives.from_pyxab(target, 0.0, 1.0, dtype=None)
    assert obj.f_star == 1                                     # PyXAB's fmax; the true maximum is 0.99777
    ours = objectives.make_objective("garland", 1, heterogeneity="none")
    X = np.concatenate([np.linspace(0.0, 1.0, 257), [np.pi / 6]])[:, None]
    with jax.enable_x64(True):                                # both in float64: float32 differs at the cusp
        np.testing.assert_allclose(obj.value(X), ours.value(X), rtol=1e-12, atol=1e-15)
        assert float(obj.value(X[-1])) == pytest.approx(synthetic.GARLAND_F_STAR, abs=1e-7)


# ---------------------------------------------------------------------------- landmine-sklearn

# (C, gamma): small C, moderate, large C and gamma, and the best region (large C, small gamma).
LANDMINE_POINTS = np.array([[1e-4, 0.01], [0.5, 0.3], [10.0, 10.0], [3.0, 0.05]], np.float32)


def test_landmine_sklearn_agrees_with_the_jax_svm():
    """Both solve the same SVM dual (scikit-learn to tol 1e-12); they differ in float32 against
    float64 solutions, which reorders near-tied test scores (at most 3.5e-3 of a field's AUC over
    10 fields x 25 (C, gamma) points, see landmine_sklearn), and in the JAX AUC's rounding down to a
    multiple of 2^-16.  Hence 5e-3, for the clients and for their mean (M = 2 averages little)."""
    pytest.importorskip("sklearn", reason="scikit-learn is not installed (the svm extra)")
    ours = objectives.make_objective("landmine-sklearn", 2, seed=3)
    jax_obj = objectives.make_objective("landmine", 2, seed=3)
    assert (ours.lo, ours.hi, ours.f_star, ours.num_clients) == (jax_obj.lo, jax_obj.hi, jax_obj.f_star, 2)
    local = np.asarray(ours.local_values(LANDMINE_POINTS))
    ref = np.asarray(jax_obj.local_values(LANDMINE_POINTS))
    np.testing.assert_allclose(local, ref, atol=5e-3)
    np.testing.assert_allclose(ours.value(LANDMINE_POINTS), ref.mean(axis=1), atol=5e-3)
    none = objectives.make_objective("landmine-sklearn", 2, seed=3, heterogeneity="none")
    np.testing.assert_allclose(none.local_values(LANDMINE_POINTS[:1]), np.repeat(local[:1].mean(1), 2)[None], atol=1e-6)


def test_landmine_sklearn_names_the_missing_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)          # import sklearn now raises ImportError
    monkeypatch.setitem(sys.modules, "sklearn.svm", None)
    monkeypatch.setitem(sys.modules, "sklearn.metrics", None)
    with pytest.raises(MissingExtra, match=r"'landmine-sklearn' needs scikit-learn: pip install "
                                                     r"\"fedpne-jax\[svm\]\""):
        objectives.make_objective("landmine-sklearn", 2)
    assert objectives.spec("landmine-sklearn").max_clients == 29
    with pytest.raises(ValueError, match="heterogeneity"):
        objectives.make_objective("landmine-sklearn", 2, heterogeneity="shift")


# ------------------------------------------------------------------------ local_fn(X, clients)


class CountedPairs:
    """local_fn(X, clients) that records the (point, client) pairs of every call."""

    def __init__(self):
        self.calls = []

    def __call__(self, X, clients):
        self.calls.append((X.copy(), np.asarray(clients).copy()))
        return garland_np(X) + SHIFT[clients]


def test_local_fn_of_points_and_clients_gets_only_the_pairs_it_must_compute(single_device_runs):
    """The two-argument local_fn: its values equal the one-argument form's; under uniform pulls (each
    client draws its own points) a call gets only the (point, client) pairs the run uses, each once,
    where the one-argument form computes all M columns of every point; the run is the same, bit for
    bit."""
    pairs = CountedPairs()
    obj = python_objective(local_fn=pairs, name="garland-pairs")
    assert len(pairs.calls) == 1 and pairs.calls[0][0].shape[0] == len(pairs.calls[0][1])      # the probe
    X = np.random.default_rng(3).uniform(size=(7, 1)).astype(np.float32)
    np.testing.assert_array_equal(obj.local_values(X), python_objective().local_values(X))
    clients = jnp.asarray([2, 0, 2, 1, 0, 0, 1], jnp.int32)
    one = jax.jit(jax.vmap(obj.local))(jnp.asarray(X), clients)
    np.testing.assert_array_equal(one, np.asarray(shifted_local(X.astype(np.float64))[np.arange(7), clients],
                                                 np.float32))
    assert sorted(pairs.calls[-1][1].tolist()) == sorted(clients.tolist())      # 7 pairs, not 7 x M values
    before = len(pairs.calls)
    run = fp.run(SAMPLERS["explicit-uniform"], obj, seeds=SEEDS, devices=1)
    np.testing.assert_array_equal(run.final_regret, single_device_runs["explicit-uniform"].final_regret)
    np.testing.assert_array_equal(run.curves, single_device_runs["explicit-uniform"].curves)
    calls = pairs.calls[before:]
    assert calls and all(len({(float(x[0]), int(m)) for x, m in zip(X_, c)}) == len(c) for X_, c in calls)
    computed = sum(len(c) for _, c in calls)
    points = sum(len({float(x[0]) for x in X_}) for X_, _ in calls)
    assert computed < 0.5 * M * points, (computed, points)


def test_takes_clients_tells_the_two_forms_apart():
    assert pyobj.takes_clients(lambda X, clients: X[:, 0]) and pyobj.takes_clients(CountedPairs())
    assert not pyobj.takes_clients(shifted_local) and not pyobj.takes_clients(lambda X, *, scale=1.0: X)
