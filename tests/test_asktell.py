"""Ask/tell (fedpne_jax.core.stepper, fedpne_jax.core.optimizer) against fp.run.

* The contract, for every registered algorithm: its small configuration (tests/support/contract.py),
  noise-free, driven through a lax.scan of ask, the objective's own values and tell over a batch of
  seeds, equals fp.run's run of the same seeds bit for bit: curves, final, best-so-far and simple
  regret, and every reported metric (recommendation, depth, nodes, phases, uploads, ...).
* fp.Optimizer: the same numbers from a Python loop, one seed or several; saved at a step and
  loaded in a new process, it ends with the numbers of the run never saved; damaged and foreign
  files are refused by name; every bad call is refused before the state changes (a property test
  draws sequences of calls).
"""
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fedpne_jax as fp
import objectives
from fedpne_jax.core import registry
from fedpne_jax.core import stepper as stepper_lib
from fedpne_jax.core.algorithm import describe
from tests.support.behaviour import recorded_objective
from tests.support.contract import CONTRACT

SEEDS = 2
BASE = 4
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(name, **changes):
    options, _ = CONTRACT[name]
    return fp.make_config(name, **{**options, "noise": "none", **changes})


def _scanned(s: fp.Stepper, seeds: int, base_seed: int):
    """The outputs of ``seeds`` runs driven by a lax.scan of ask, evaluate and tell until done."""
    init, ask, tell, _, done, outputs, _ = stepper_lib.batch(s)
    evaluate = jax.vmap(s.evaluate, in_axes=(stepper_lib.QUERY_AXES,))

    def whole(keys, steps):
        def body(state, _):
            q, state = ask(state)
            return tell(state, q, evaluate(q)), None
        state = jax.lax.scan(body, init(keys), None, length=steps)[0]
        return outputs(state), done(state), state.error

    keys = jax.vmap(lambda i: s.key(i, base_seed))(jnp.arange(seeds))
    with s.x64():
        return jax.jit(whole, static_argnums=1)(keys, _steps(s))


def _steps(s: fp.Stepper) -> int:
    """Enough steps for any run: a tree's T rounds; a phase algorithm stops earlier (done), its
    later queries empty."""
    return int(s.config.horizon)


def test_every_builtin_algorithm_has_steps():
    missing = [a for a in registry.names() if registry.get(a).steps is None]
    assert missing == []


def test_noise_free_stepper_equals_run(algorithm):
    config = _config(algorithm)
    objective = recorded_objective()
    expected = fp.run(config, objective, seeds=SEEDS, base_seed=BASE)
    s = fp.stepper(config, objective)
    out, done, error = _scanned(s, SEEDS, BASE)
    # A phase algorithm is done before T steps; the empty asks after that are flagged TOLD_DONE, and
    # nothing else may be.
    assert np.all(np.asarray(done)) and np.all((np.asarray(error) & ~stepper_lib.TOLD_DONE) == 0)
    _, _, metrics = describe(s.algorithm, config, s.tables, jax.tree.map(np.asarray, out))
    pairs = {"curves": out.curve, "final_regret": out.final_regret, "simple_curve": out.simple_curve,
             "best_curve": out.best_curve, **metrics}
    for name, got in pairs.items():
        want = np.asarray(getattr(expected, name))
        np.testing.assert_array_equal(np.asarray(got).astype(want.dtype), want, err_msg=name)


# ------------------------------------------------------------------ fp.Optimizer

_EVALUATORS: dict = {}


def _values(objective, ask):
    """What the simulator's clients answer, noise-free: NaN in empty slots."""
    if id(objective) not in _EVALUATORS:
        _EVALUATORS[id(objective)] = (objective, jax.jit(jax.vmap(objective.global_value)))
    pts = ask.points.reshape(-1, ask.points.shape[-1])
    f = np.asarray(_EVALUATORS[id(objective)][1](jnp.asarray(pts, jnp.float32)), np.float64)
    return np.where(ask.counts > 0, f.reshape(ask.counts.shape), np.nan)


@pytest.fixture(scope="module")
def garland1():
    return objectives.make_objective("garland", num_clients=1, heterogeneity="none")


def _hct(horizon=60):
    return fp.make_config("hct", horizon=horizon, checkpoints=4, noise="none")


def _drive(opt, objective, stop=None):
    while not opt.done and (stop is None or opt.step < stop):
        q = opt.ask()
        opt.tell(q, _values(objective, q))
    return opt


@pytest.mark.parametrize("seeds", [None, 3])
def test_optimizer_equals_run(garland1, seeds):
    config = _hct()
    expected = fp.run(config, garland1, seeds=seeds or 1, base_seed=7)
    opt = _drive(fp.Optimizer(config, garland1, seeds=seeds, base_seed=7), garland1)
    result = opt.result()
    np.testing.assert_array_equal(result.curves, expected.curves)
    np.testing.assert_array_equal(result.final_regret, expected.final_regret)
    np.testing.assert_array_equal(result.recommendation, expected.recommendation)
    rec = opt.recommendation
    assert rec.shape == ((1,) if seeds is None else (seeds, 1))
    np.testing.assert_array_equal(np.atleast_2d(rec), expected.recommendation)


def test_box_without_f_star_reports_no_regret(garland1):
    # _hct()'s horizon: fp.run's program is test_optimizer_equals_run's, and so are some of the
    # Optimizer's with f* given (a box and Garland's objective have one box and f*).
    opt = fp.Optimizer(_hct(), ([0.0], [1.0]))
    _drive(opt, garland1)
    result = opt.result()
    assert np.all(np.isnan(result.curves)) and np.isnan(result.final_regret).all()
    assert np.all((result.recommendation >= 0) & (result.recommendation <= 1))
    # The same run told the same values, with f* given: the regret of the told values.
    opt = _drive(fp.Optimizer(_hct(), ([0.0], [1.0]), f_star=garland1.f_star), garland1)
    expected = fp.run(_hct(), garland1, seeds=1)
    np.testing.assert_allclose(opt.result().final_regret, expected.final_regret, rtol=1e-5)


# The new process keeps its compiled programs in the suite's folder (FEDPNE_COMPILE_CACHE, which the
# suite sets), as the command line does: it loads the ask and tell programs this process compiled.
RESUME = """
import sys, numpy as np, jax, jax.numpy as jnp
import fedpne_jax as fp, objectives
from fedpne_jax.core import compile_cache
compile_cache.enable()
garland = objectives.make_objective("garland", num_clients=1, heterogeneity="none")
evaluate = jax.jit(jax.vmap(garland.global_value))
opt = fp.Optimizer.load(sys.argv[1])
while not opt.done:
    q = opt.ask()
    pts = q.points.reshape(-1, q.points.shape[-1])
    f = np.asarray(evaluate(jnp.asarray(pts, jnp.float32)), np.float64)
    opt.tell(q, np.where(q.counts > 0, f.reshape(q.counts.shape), np.nan))
np.save(sys.argv[2], opt.result().curves)
"""


def test_saved_run_continues_in_a_new_process(garland1, tmp_path):
    # test_optimizer_equals_run's seeds: the run never saved, told the same values, is its fp.run.
    config = _hct()
    opt = fp.Optimizer(config, "garland", seeds=3, base_seed=7)
    _drive(opt, garland1, stop=23)
    path = tmp_path / "run.fpne"
    opt.save(path)
    curves = tmp_path / "curves.npy"
    subprocess.run([sys.executable, "-c", RESUME, str(path), str(curves)], check=True, cwd=ROOT,
                   env={**os.environ, "PYTHONPATH": ROOT})
    expected = fp.run(config, garland1, seeds=3, base_seed=7)
    np.testing.assert_array_equal(np.load(curves), expected.curves)


def test_damaged_and_foreign_files_are_refused(garland1, tmp_path):
    opt = _drive(fp.Optimizer(_hct(), garland1), garland1, stop=5)
    path = tmp_path / "run.fpne"
    opt.save(path)
    data = bytearray(path.read_bytes())
    import zipfile
    with zipfile.ZipFile(path) as z:
        header = z.read("header.json")
    damaged = tmp_path / "damaged.fpne"
    with zipfile.ZipFile(damaged, "w") as z:
        z.writestr("header.json", header.replace(b'"step": 5', b'"step": 6'))
        with zipfile.ZipFile(path) as src:
            z.writestr("state.npz", src.read("state.npz"))
            z.writestr("sha256", src.read("sha256"))
    with pytest.raises(ValueError, match="checksum mismatch"):
        fp.Optimizer.load(damaged)
    truncated = tmp_path / "truncated.fpne"
    truncated.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(ValueError, match="not a saved ask/tell run, or damaged"):
        fp.Optimizer.load(truncated)
    foreign = tmp_path / "foreign.json"
    foreign.write_text("{}")
    with pytest.raises(ValueError, match="foreign.json: not a saved ask/tell run"):
        fp.Optimizer.load(foreign)
    with pytest.raises(ValueError, match="no such file"):
        fp.Optimizer.load(tmp_path / "missing.fpne")
    with pytest.raises(ValueError, match="not a regular file"):
        fp.Optimizer.load(tmp_path)
    os.mkfifo(tmp_path / "fifo")         # opened, it would wait for a writer
    with pytest.raises(ValueError, match="fifo: not a regular file"):
        fp.Optimizer.load(tmp_path / "fifo")


def test_bad_calls_are_refused_and_change_nothing(garland1):
    opt = fp.Optimizer(_hct(8), garland1)
    q = opt.ask()
    assert q.points.shape == (1, 1, 1) and q.counts.tolist() == [[1]]
    good = _values(garland1, q)
    for values, match in [(np.zeros((2, 1)), r"values must have the query's shape \(1, 1\)"),
                          (np.array([[np.nan]]), "hold NaN or inf"), (np.array([[np.inf]]), "hold NaN or inf"),
                          # finite in float64, inf in the run's float32
                          (np.array([[1e39]]), r"hold NaN or inf \(in float32, the run's precision\)"),
                          ("abc", "values must be an array of real numbers"),
                          (np.array([["0.5"]]), "array of real numbers of shape \\(1, 1\\), got ndarray of <U3"),
                          (np.array([[True]]), "got ndarray of bool"), (np.array([[0.5 + 1j]]), "got ndarray of complex"),
                          ([[0.5], [0.5, 0.5]], "got list")]:
        with pytest.raises((ValueError, TypeError), match=match):
            opt.tell(q, values)
    assert opt.step == 0
    other = fp.Optimizer(_hct(8), garland1)
    with pytest.raises(ValueError, match="another optimizer"):
        other.tell(q, good)
    with pytest.raises(TypeError, match="query must be the Ask"):
        opt.tell((q.points, q.counts), good)
    opt.tell(q, good)
    with pytest.raises(ValueError, match="already told"):
        opt.tell(q, good)
    _drive(opt, garland1)
    with pytest.raises(ValueError, match="ask: the run is done"):
        opt.ask()
    with pytest.raises(ValueError, match="seeds must be None"):
        fp.Optimizer(_hct(8), garland1, seeds=0)
    with pytest.raises(ValueError, match="space: need finite lo < hi"):
        fp.Optimizer(_hct(8), ([1.0], [0.0]))
    with pytest.raises(ValueError, match=r"f_star must be a finite number \(in float32"):
        fp.Optimizer(_hct(8), ([0.0], [1.0]), f_star=1e39)
    with pytest.raises(TypeError, match="space must be an objectives.Objective or a box"):
        fp.Optimizer(_hct(8), 3)


def test_the_pure_tell_refuses_a_shape_at_trace_time_and_flags_non_finite_values(garland1):
    """fp.stepper's tell cannot raise on values inside a program, so NaN or inf told where a pull was
    asked (inf after the cast to float32 too) sets the TOLD_NONFINITE bit; a shape is static, so
    another one is refused when the function is traced (no broadcast)."""
    s = fp.stepper(_hct(8), garland1)
    tell = jax.jit(s.tell)
    state = s.init(jax.random.key(0))
    query, state = s.ask(state)
    for values in (jnp.zeros(()), jnp.zeros(3), jnp.zeros((2, 2)), jnp.zeros((1,))):
        with pytest.raises(ValueError, match=r"tell: values must have the query's shape \(1, 1\)"):
            tell(state, query, values)
    with pytest.raises(TypeError, match="real numbers, got dtype bool"):
        tell(state, query, jnp.ones((1, 1), bool))
    for bad in (np.nan, np.inf, 1e39):
        with np.errstate(over="ignore"):                # 1e39 is inf in float32
            after = tell(state, query, np.full((1, 1), bad))
        assert int(after.error) == stepper_lib.TOLD_NONFINITE and int(after.step) == 1
    told = tell(state, query, np.asarray(_values(garland1, query)))
    assert int(told.error) == 0 and int(told.step) == 1


def test_a_value_in_an_empty_slot_is_refused():
    config = fp.make_config("fedpne", horizon=200, num_clients=2, noise="none")
    objective = objectives.make_objective("garland", num_clients=2)
    opt = fp.Optimizer(config, objective)
    q = opt.ask()
    empty = np.argwhere(q.counts == 0)
    assert len(empty) > 0
    values = np.where(q.counts > 0, 0.5, np.nan)
    values[tuple(empty[0])] = 0.5
    with pytest.raises(ValueError, match="has count 0"):
        opt.tell(q, values)
    assert opt.step == 0


@pytest.fixture(scope="module")
def undisturbed(garland1):
    """The curves of the run of _hct(12) told the objective's values, without a bad call."""
    return _drive(fp.Optimizer(_hct(12), garland1), garland1).result().curves


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["ask", "tell", "tell_stale", "tell_bad", "save_load"]), min_size=1, max_size=30))
def test_any_sequence_of_calls_keeps_the_run(garland1, undisturbed, tmp_path, calls):
    """Whatever calls are made, good ones in between bad ones, the run told the same values ends
    with the same numbers as one told them without the bad calls."""
    opt = fp.Optimizer(_hct(12), garland1)
    stale = None
    for call in calls:
        if opt.done:
            break
        if call == "ask":
            q = opt.ask()
            assert opt.ask() is q      # asking again before telling gives the same query
        elif call == "tell":
            q = opt.ask()
            opt.tell(q, _values(garland1, q))
            stale = q
        elif call == "tell_stale" and stale is not None:
            with pytest.raises(ValueError, match="already told|not the pending"):
                opt.tell(stale, _values(garland1, stale))
        elif call == "tell_bad":
            q = opt.ask()
            with pytest.raises(ValueError):
                opt.tell(q, np.full(q.counts.shape, np.nan))
        elif call == "save_load":
            opt.save(tmp_path / "p.fpne")
            opt = fp.Optimizer.load(tmp_path / "p.fpne", space=garland1)
    _drive(opt, garland1)
    np.testing.assert_array_equal(opt.result().curves, undisturbed)


def test_a_table_outgrown_by_an_ask_is_grown_and_the_step_asked_again(tmp_path):
    """Fed-PNE expands its tree before a phase, in ask: a table that overflows there is grown, the
    told steps replayed on it, and the phase asked again (never an empty query told as a step)."""
    config = fp.make_config("fedpne", num_clients=4, horizon=200, noise="none", checkpoints=10)
    opt = fp.Optimizer(config, ((-4.0, -2.0), (1.0, 1.0)), f_star=1.0)
    shapes, saved = [], {}
    while not opt.done:
        q = opt.ask()
        assert q.counts.sum() > 0
        shapes.append(q.counts.shape[1])
        if shapes[0] < shapes[-1] and not saved:     # just grown, its ask pending: saved as such
            saved["pending"] = (tmp_path / "pending.fpne", opt.step)
            opt.save(saved["pending"][0])
        opt.tell(q, np.where(q.counts > 0, 0.5, np.nan))
        if shapes[0] < shapes[-1] and len(saved) == 1:
            saved["told"] = (tmp_path / "told.fpne", opt.step)
            opt.save(saved["told"][0])
    assert shapes[0] < shapes[-1]                      # the node table grew
    result = opt.result()
    # Every pull told 0.5 with f* = 1: the regret at round t is t / 2.
    np.testing.assert_array_equal(result.curves[0], 0.5 * np.asarray(config.checkpoint_rounds))
    opt.save(tmp_path / "done.fpne")
    # Saved after the growth, the run loads onto the grown tables (its told values are that wide)
    # and finishes with the same numbers.
    for path, step in [*saved.values(), (tmp_path / "done.fpne", opt.step)]:
        again = fp.Optimizer.load(path)
        assert again.step == step and again.stepper.slots == opt.stepper.slots
        while not again.done:
            q = again.ask()
            again.tell(q, np.where(q.counts > 0, 0.5, np.nan))
        np.testing.assert_array_equal(again.result().curves, result.curves)
