"""A fixed set of runs (every algorithm; Fed-PNE with each sampler, DP, random splits; a grid; a
sweep) gives the numbers recorded in tests/data/behaviour.npz, bit for bit.  (The recorded run of each
algorithm's own configuration is checked by tests/test_contract.py, whose batch it is.)  The fixture was written
by ``python scripts/record_behaviour.py --write`` before the package was reorganised: a change of
layout or API that changes any draw or any summation order fails here.

The fixture was recorded on an AMD EPYC and passes unchanged on an Intel Xeon: nothing here may depend
on the processor, so every program these runs compiled is also held to
fedpne_jax.core.portability (the check that would have caught BBO's approximate rsqrt on one machine)."""
import pytest

from fedpne_jax.core import executor
from fedpne_jax.core.portability import processor_dependent_ops
from tests.support.behaviour import OWN, collect_part, compare, part_of, parts, recorded

PARTS = [part for part in parts() if part not in OWN.values()]


def test_every_recorded_array_is_checked():
    """Each array of the fixture belongs to a part checked here or in tests/test_contract.py."""
    assert {part_of(key) for key in recorded()} == set(parts())


@pytest.mark.parametrize("part", PARTS)
def test_recorded_part_is_unchanged(part):
    expected = {k: v for k, v in recorded().items() if part_of(k) == part}
    assert expected
    # Only this part's programs are scanned: a file run earlier in this process may have compiled a
    # Python objective's program, whose host callback is a custom-call by design.
    executor._compiled.clear()
    assert compare(expected, collect_part(part)) == []
    assert executor._compiled
    found = {f"{key[0].__module__} program {i}": ops for i, (key, (exe, _)) in enumerate(executor._compiled.items())
             if (ops := processor_dependent_ops(exe.as_text()))}
    assert found == {}
