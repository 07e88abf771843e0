"""A fixed set of runs (every algorithm; Fed-PNE with each sampler, DP, random splits; a grid; a
sweep) gives the numbers recorded in tests/data/behaviour.npz, bit for bit.  The fixture was written
by ``python scripts/record_behaviour.py --write`` before the package was reorganised: a change of
layout or API that changes any draw or any summation order fails here."""
import numpy as np

from tests.support.behaviour import FIXTURE, collect, compare


def test_recorded_runs_are_unchanged():
    with np.load(FIXTURE) as data:
        recorded = {k.replace("__", "/"): data[k] for k in data.files}
    assert len(recorded) > 100
    assert compare(recorded, collect()) == []
