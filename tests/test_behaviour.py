"""A fixed set of runs (every algorithm; Fed-PNE with each sampler, DP, random splits; a grid; a
sweep) gives the numbers recorded in tests/data/behaviour.npz, bit for bit.  The fixture was written
by ``python scripts/record_behaviour.py --write`` before the package was reorganised: a change of
layout or API that changes any draw or any summation order fails here.

The fixture was recorded on an AMD EPYC and passes unchanged on an Intel Xeon: nothing here may depend
on the processor, so every program these runs compiled is also held to
fedpne_jax.core.portability (the check that would have caught BBO's approximate rsqrt on one machine)."""
import numpy as np

from fedpne_jax.core import executor
from fedpne_jax.core.portability import processor_dependent_ops
from tests.support.behaviour import FIXTURE, collect, compare


def test_recorded_runs_are_unchanged():
    with np.load(FIXTURE) as data:
        recorded = {k.replace("__", "/"): data[k] for k in data.files}
    assert len(recorded) > 100
    # Only these runs' programs are scanned: a file run earlier in this process may have compiled a
    # Python objective's program, whose host callback is a custom-call by design.
    executor._compiled.clear()
    assert compare(recorded, collect()) == []
    assert len(executor._compiled) >= 10
    found = {f"{key[0].__module__} program {i}": ops for i, (key, (exe, _)) in enumerate(executor._compiled.items())
             if (ops := processor_dependent_ops(exe.as_text()))}
    assert found == {}
