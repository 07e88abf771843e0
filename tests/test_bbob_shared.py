"""BBOB objectives built to share one compiled program (make_objective's ``shared_with``; a sweep's
``share_programs``): the values of the objectives built alone to two float32 ulps, the gallery's runs
bit for bit, one compilation per algorithm and dimension, and bad input refused by name."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax.cli import build_parser
from fedpne_jax.experiments import sweep as sweep_lib
from objectives import bbob

ALL = tuple(f"bbob-f{k}" for k in range(1, bbob.NUM_FUNCTIONS + 1))


@jax.jit
def _values(objective, X):
    # Compiled, as the engine evaluates: eagerly, the switch would be compiled and the function alone not.
    return objective.value(X), objective.local_values(X)


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
    on = sweep_lib.load(sweep_lib.from_options(**lists, share_programs=True))
    off = sweep_lib.load(sweep_lib.from_options(**lists))
    assert on.definition["share_programs"] is True and "share_programs" not in off.definition
    assert sweep_lib.load(sweep_lib.from_options(**lists, share_programs=False)).hash == off.hash != on.hash
    assert sweep_lib.shared_with(on, on.entries[1]) == ("bbob-f1", "bbob-f8")
    assert sweep_lib.shared_with(off, off.entries[1]) is None
    parser = build_parser()
    assert parser.parse_args(["sweep", "--out", "x", "--share-programs"]).share_programs is True


def test_share_programs_must_be_a_boolean(tmp_path):
    with pytest.raises(fp.SweepError, match="share_programs must be true or false, got 'yes'"):
        fp.run_sweep({"objectives": ["bbob-f1"], "share_programs": "yes"}, tmp_path, progress=False)


@pytest.mark.parametrize("name,shared_with,match", [
    ("bbob-f1", ("bbob-f2",), "must name the objective itself"),
    ("bbob-f1", ("bbob-f1", "garland"), "applies to the BBOB objectives.*'garland'"),
    ("garland", ("garland",), "applies to the BBOB objectives"),
    ("bbob-f1", "bbob-f1", "must be a list of BBOB objective names"),
    ("bbob-f1", (1, 2), "must be a list of BBOB objective names"),
    ("bbob-f1", 3, "must be a list of BBOB objective names"),
    ("bbob-f1", ("bbob-f1", "bbob-f25"), "function number"),
])
def test_bad_shared_with_is_refused_by_name(name, shared_with, match):
    with pytest.raises(ValueError, match=match):
        objectives.make_objective(name, 2, shared_with=shared_with)
