"""Objectives built to share one compiled program (make_objective's ``shared_with``; a sweep's
``share_programs``), BBOB functions and synthetic functions of one box: the values of the objectives
built alone to two float32 ulps, the BBOB gallery's runs bit for bit, one compilation per algorithm
and dimension (per box for the synthetic functions), and bad input refused by name."""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax.cli import build_parser
from fedpne_jax.cli.sweep import from_options
from fedpne_jax.experiments import sweep as sweep_lib
from objectives import bbob
from objectives.objective import PROBE_POINTS, _probe_values

ALL = tuple(f"bbob-f{k}" for k in range(1, bbob.NUM_FUNCTIONS + 1))


def _values(objective, X):
    """f and the local values at the rows of X, compiled, as the engine evaluates (eagerly, the switch
    would be compiled and the function alone not).  The program is the one make_objective compiled
    for its check of the mean, PROBE_POINTS rows a call: reused, it compiles nothing more (compiling
    one of our own for every objective built was half of the values tests' time)."""
    X = np.asarray(X, jnp.result_type(float))
    rows = np.concatenate([X, np.repeat(X[-1:], -len(X) % PROBE_POINTS, axis=0)])
    calls = [_probe_values(objective, jnp.asarray(block)) for block in rows.reshape(-1, PROBE_POINTS, X.shape[1])]
    return tuple(np.concatenate([np.asarray(c[i]) for c in calls])[:len(X)] for i in range(2))


@pytest.mark.parametrize("dim", [2, 5])
def test_values_equal_the_objective_built_alone(dim):
    X = np.random.default_rng(dim).uniform(-5.5, 5.5, (64, dim))
    for name in ALL:
        alone = objectives.make_objective(name, 3, dim=dim)
        shared = objectives.make_objective(name, 3, dim=dim, shared_with=ALL)
        assert shared.name == name
        for a, s in zip(_values(alone, X), _values(shared, X)):
            # Inside the switch a function is compiled apart from what surrounds it, so XLA may contract
            # a product and a sum into an FMA in one program and not the other: two float32 ulps, and
            # eight for Gallagher's peaks, whose gap - w expm1(.) cancels about three bits of a product
            # rounded once or twice.
            ulps = 8 if name in ("bbob-f21", "bbob-f22") else 2
            np.testing.assert_allclose(np.asarray(s), np.asarray(a), rtol=ulps * 2 ** -24, atol=0, err_msg=name)


def test_objectives_that_differ_in_function_and_name_have_one_structure():
    names = ("bbob-f1", "bbob-f21")
    a, b = (objectives.make_objective(n, 2, dim=3, shared_with=names) for n in names)
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    assert jax.tree.map(lambda leaf: leaf, b).name == "bbob-f21"
    alone = objectives.make_objective("bbob-f1", 2, dim=3)
    assert jax.tree_util.tree_structure(alone) != jax.tree_util.tree_structure(a)
    # any iterable of names, read once
    c = objectives.make_objective("bbob-f1", 2, dim=3, shared_with=iter(names))
    assert jax.tree_util.tree_structure(c) == jax.tree_util.tree_structure(a)


def test_a_sweep_that_shares_programs_compiles_once_per_algorithm_and_dimension(tmp_path):
    names = ("bbob-f1", "bbob-f15")
    definition = {"objectives": [{"name": n, "dim": 2} for n in names] + ["garland"], "algorithms": ["doo"],
                  "horizon": [60], "seeds": 3, "params": {"checkpoints": 6}, "share_programs": True}
    report = fp.run_sweep(definition, tmp_path, progress=False)
    assert report.compilations == 2 and report.configs == 3        # the BBOB functions' one, Garland's
    res = fp.load_sweep(tmp_path)
    config = fp.make_config("doo", horizon=60, checkpoints=6)
    for i, name in enumerate(names):
        # The gallery's functions run bit for bit as when built alone.
        alone = fp.run(config, objectives.make_objective(name, 1, dim=2), seeds=3)
        np.testing.assert_array_equal(res.curves[i], np.asarray(alone.curves), err_msg=name)
        np.testing.assert_array_equal(res.final_regret[i], np.asarray(alone.final_regret), err_msg=name)


def test_the_command_line_flag_sets_the_key_and_a_false_key_keeps_the_hash():
    lists = dict(objectives="bbob-f1,bbob-f8", algorithms="doo", horizon="60", seeds=2)
    on = sweep_lib.load(from_options(**lists, share_programs=True))
    off = sweep_lib.load(from_options(**lists))
    assert on.definition["share_programs"] is True and "share_programs" not in off.definition
    assert sweep_lib.load(from_options(**lists, share_programs=False)).hash == off.hash != on.hash
    assert sweep_lib.shared_with(on, on.entries[1]) == ("bbob-f1", "bbob-f8")
    assert sweep_lib.shared_with(off, off.entries[1]) is None
    parser = build_parser()
    assert parser.parse_args(["sweep", "--out", "x", "--share-programs"]).share_programs is True


@pytest.mark.parametrize("value", ["yes", [], ["bbob", "real"], [1]])
def test_share_programs_must_be_a_boolean_or_kinds(tmp_path, value):
    with pytest.raises(fp.SweepError, match=r"share_programs must be true \(the BBOB functions\), false or a list of "
                                            r"objective kinds from \['bbob', 'synthetic'\], got " + re.escape(repr(value))):
        fp.run_sweep({"objectives": ["bbob-f1"], "share_programs": value}, tmp_path, progress=False)


def test_kinds_are_normalised_so_that_true_keeps_its_hash():
    lists = dict(objectives="bbob-f1,bbob-f8,garland,doublesine", algorithms="doo", horizon="60", seeds=2)
    true = sweep_lib.load(from_options(**lists, share_programs=True))
    bbob_only = sweep_lib.load(from_options(**lists, share_programs=["bbob", "bbob"]))
    assert bbob_only.definition["share_programs"] is True and bbob_only.hash == true.hash
    both = sweep_lib.load(from_options(**lists, share_programs=["synthetic", "bbob"]))
    assert both.definition["share_programs"] == ["bbob", "synthetic"] and both.hash != true.hash
    garland = next(e for e in both.entries if e.objective["name"] == "garland")
    assert sweep_lib.shared_with(both, garland) == ("doublesine", "garland")
    assert sweep_lib.shared_with(true, garland) is None
    synthetic = sweep_lib.load(from_options(**lists, share_programs=["synthetic"]))
    assert sweep_lib.shared_with(synthetic, synthetic.entries[0]) is None            # bbob-f1: kind not named


SYNTHETIC_BOXES = {("garland", "doublesine"): (1,), ("ackley", "rastrigin"): (2, 3)}


@pytest.mark.parametrize("heterogeneity", ["shift", "fourier", "none"])
def test_synthetic_values_equal_the_function_built_alone(heterogeneity):
    for names, dims in SYNTHETIC_BOXES.items():
        for dim in dims:
            for name in names:
                alone = objectives.make_objective(name, 3, dim=dim, heterogeneity=heterogeneity)
                shared = objectives.make_objective(name, 3, dim=dim, heterogeneity=heterogeneity, shared_with=names)
                X = np.random.default_rng(dim).uniform(alone.lo[0] - 0.05, alone.hi[0] + 0.05, (512, dim))
                (fa, la), (fs, ls) = (tuple(np.asarray(v) for v in _values(o, X)) for o in (alone, shared))
                ulp = lambda v: np.spacing(np.abs(v).astype(np.float32)).astype(np.float64)
                # Two float32 ulps of f (an FMA or not inside the switch); a local value f + p_m, whose
                # perturbation p_m is compiled beside the switch, two ulps of each term and one of the sum.
                assert np.all(np.abs(fs.astype(np.float64) - fa) <= 2 * ulp(fa)), name
                perturbation = la.astype(np.float64) - fa[:, None]
                bound = 2 * ulp(fa)[:, None] + 2 * ulp(perturbation) + ulp(la)
                assert np.all(np.abs(ls.astype(np.float64) - la) <= bound), name


def test_synthetic_functions_of_one_box_share_a_program_and_run_as_the_shared_objective(tmp_path):
    """Garland and DoubleSine (one box) share Fed-PNE's program, Himmelblau keeps its own; each run is
    the run of its objective built with the sweep's shared_with, bit for bit."""
    names = ["garland", "doublesine", "himmelblau"]
    definition = {"objectives": names, "algorithms": ["fedpne"], "clients": [3], "horizon": [200], "seeds": 3,
                  "params": {"checkpoints": 5, "capacity": 64}, "share_programs": ["synthetic"]}
    report = fp.run_sweep(definition, tmp_path, progress=False)
    assert report.compilations == 2 and report.configs == 3        # no table grows: a program per box
    res = fp.load_sweep(tmp_path)
    config = fp.FedPNEConfig(num_clients=3, horizon=200, checkpoints=5, capacity=64)
    for name in names:
        i = _one_index(res, name)
        shared = ("doublesine", "garland") if name != "himmelblau" else None
        run = fp.run(config, objectives.make_objective(name, 3, shared_with=shared), seeds=3)
        np.testing.assert_array_equal(res.curves[i], np.asarray(run.curves), err_msg=name)
        np.testing.assert_array_equal(res.final_regret[i], np.asarray(run.final_regret), err_msg=name)


def _one_index(res, name):
    found = res.find(objective=name)
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("name,shared_with,match", [
    ("bbob-f1", ("bbob-f2",), "must name the objective itself"),
    ("bbob-f1", ("bbob-f1", "garland"), r"the BBOB objective 'bbob-f1' shares programs with BBOB objectives only.*"
                                        r"got 'garland'"),
    ("garland", ("garland", "bbob-f1"), r"the synthetic objective 'garland' shares programs with synthetic "
                                        r"objectives on its box \[0, 1\]\^1 only, got 'bbob-f1'"),
    ("garland", ("garland", "himmelblau"), r"on its box \[0, 1\]\^1 only, got 'himmelblau'"),
    ("landmine", ("landmine",), "applies to the BBOB and synthetic objectives, not to objective 'landmine'"),
    ("garland", ("garland", "nope"), "shared_with: objective must be one of"),
    ("bbob-f1", "bbob-f1", "must be a list of objective names"),
    ("bbob-f1", (1, 2), "must be a list of objective names"),
    ("bbob-f1", 3, "must be a list of objective names"),
    ("bbob-f1", ("bbob-f1", "bbob-f25"), "function number"),
])
def test_bad_shared_with_is_refused_by_name(name, shared_with, match):
    with pytest.raises(ValueError, match=match):
        objectives.make_objective(name, 2, shared_with=shared_with)
