"""Every X-armed algorithm of this package against PyXAB 0.3.0 itself, statistically: on Garland with
uniform(-0.1, 0.1) noise, the final regret of 200 runs here and of PyXAB's own runs, recorded by
``python scripts/pyxab_figures.py`` in tests/data/pyxab_regret.json (100 per algorithm; PyXAB takes an hour, VROOM most),
agree in mean and spread (tests/support/helpers.py: the tests and their false-alarm rates).  Each algorithm runs PyXAB's rules (``pyxab=True``, HCT's
``expand='pyxab'``) and PyXAB's default parameters, as the script runs PyXAB."""
import json
import os

import numpy as np
import pytest

import fedpne_jax as fp
from tests.support.helpers import assert_same_distribution

FIGURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "pyxab_regret.json")
SEEDS = 200
# PyXAB's rule where the algorithm has one; VHCT's own defaults are PyXAB's.
RULES = {"hct": dict(expand="pyxab"), "soo": dict(pyxab=True), "stosoo": dict(pyxab=True), "vhct": dict(pyxab=True),
         "poo": dict(pyxab=True), "gpo": dict(pyxab=True), "pct": dict(pyxab=True), "vpct": dict(pyxab=True)}

with open(FIGURES) as _f:
    RECORDED = json.load(_f)


def test_figures_cover_the_family():
    tree_algorithms = {"hct", "hoo", "doo", "soo", "stosoo", "vhct", "poo", "gpo", "pct", "vpct", "sequool",
                       "stroquool", "zooming", "vroom"}
    assert set(RECORDED["algorithms"]) == tree_algorithms <= set(fp.ALGORITHMS)
    assert RECORDED["noise"] == "uniform:0.1" and RECORDED["function"] == "garland"
    assert all(len(r["final_regret"]) >= 100 for r in RECORDED["algorithms"].values())


@pytest.mark.parametrize("name", sorted(RECORDED["algorithms"]))
def test_final_regret_agrees_with_pyxab(name, garland):
    recorded = RECORDED["algorithms"][name]
    config = fp.make_config(name, horizon=recorded["T"], noise=RECORDED["noise"], checkpoints=10, **RULES.get(name, {}))
    res = fp.run(config, garland, seeds=SEEDS)
    theirs = np.asarray(recorded["final_regret"])
    assert res.final_regret.std() > 0 and theirs.std() > 0
    assert_same_distribution(res.final_regret, theirs, "final regret")
