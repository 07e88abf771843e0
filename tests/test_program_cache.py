"""Compiled programs are dropped before their code exhausts the process's memory mappings: a full
`fedpne reproduce all` (about 200 programs in one process) died with "LLVM compilation error: Cannot
allocate memory" once Linux's vm.max_map_count (65,530) was reached."""
import sys

import numpy as np
import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax.core import executor

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts /proc/self/maps")


def _configs(n, offset=0):
    return [fp.FedPNEConfig(num_clients=3, horizon=300 + 10 * (i + offset), checkpoints=3) for i in range(n)]


@linux
def test_dropping_programs_unmaps_their_code():
    objective = objectives.make_objective("garland", 3)
    before = executor._mappings()[0]
    for config in _configs(2, offset=10):
        fp.run(config, objective, seeds=2)
    grown = executor._mappings()[0]
    assert grown > before + 300                     # each program maps its code (hundreds of mappings)
    executor.drop_programs()
    assert executor._compiled == {}
    assert executor._mappings()[0] < grown - 300


def test_a_dropped_program_is_compiled_again_with_the_same_numbers(monkeypatch):
    objective = objectives.make_objective("garland", 3)
    configs = _configs(3)
    first = fp.run(configs[0], objective, seeds=2)
    monkeypatch.setattr(executor, "_room_for_programs", lambda: len(executor._compiled) < 2)
    for config in configs[1:]:
        fp.run(config, objective, seeds=2)
        assert len(executor._compiled) <= 2
    traces = executor.trace_count()
    again = fp.run(configs[0], objective, seeds=2)
    assert executor.trace_count() > traces          # it was dropped, so compiled again
    np.testing.assert_array_equal(again.final_regret, first.final_regret)
    np.testing.assert_array_equal(again.curves, first.curves)
    traces = executor.trace_count()
    fp.run(configs[0], objective, seeds=2)          # the program just compiled is always kept
    assert executor.trace_count() == traces


@linux
def test_room_is_half_the_mapping_limit(monkeypatch):
    monkeypatch.setattr(executor, "_mappings", lambda: (32_764, 65_530))
    assert executor._room_for_programs()
    monkeypatch.setattr(executor, "_mappings", lambda: (32_765, 65_530))
    assert not executor._room_for_programs()
    monkeypatch.setattr(executor, "_mappings", lambda: None)          # off Linux: a count of programs
    monkeypatch.setattr(executor, "_compiled", {i: None for i in range(executor.MAX_PROGRAMS)})
    assert not executor._room_for_programs()
