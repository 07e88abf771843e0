"""Compiled programs are dropped before their code exhausts the process's memory mappings: a full
`fedpne reproduce all` (about 200 programs in one process) died with "LLVM compilation error: Cannot
allocate memory" once Linux's vm.max_map_count (65,530) was reached.  The checks run in a child
process, so that dropping programs does not drop those the suite's other files share in this one."""
import subprocess
import sys
import textwrap

import pytest

from fedpne_jax.core import executor

CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import fedpne_jax as fp
    import objectives
    from fedpne_jax.core import executor

    objective = objectives.make_objective("garland", 3)
    configs = [fp.FedPNEConfig(num_clients=3, horizon=300 + 10 * i, checkpoints=3) for i in range(4)]
    first = fp.run(configs[0], objective, seeds=2)
    linux = executor._mappings() is not None
    before = executor._mappings()[0] if linux else 0
    fp.run(configs[1], objective, seeds=2)
    fp.run(configs[2], objective, seeds=2)
    fp.run(configs[0], objective, seeds=2)                 # a hit: configs[0] is now the most recent
    if linux:
        assert executor._mappings()[0] > before + 300      # a program maps its code: hundreds of mappings
    # No room once four programs are held: the least recently used half goes (configs[1] and [2]).
    executor._room_for_programs = lambda: len(executor._compiled) < 4
    held = executor._mappings()[0] if linux else 0
    fp.run(configs[3], objective, seeds=2)
    kept = sorted(key[1].horizon for key in executor._compiled)
    assert kept == [300, 330], kept                        # the newest half: configs[0] (used last) and [3]
    if linux:
        assert executor._mappings()[0] < held              # more code unmapped than configs[3] mapped
    traces = executor.trace_count()
    again = fp.run(configs[0], objective, seeds=2)
    assert executor.trace_count() == traces                # kept: not compiled again
    np.testing.assert_array_equal(again.final_regret, first.final_regret)
    fp.run(configs[1], objective, seeds=2)
    assert executor.trace_count() > traces                 # dropped: compiled again
    executor.drop_programs()
    assert executor._compiled == {}
    print("ok")
""")


def test_least_recently_used_programs_are_dropped_and_unmapped():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts /proc/self/maps")
def test_room_is_three_quarters_of_the_mapping_limit(monkeypatch):
    held, limit = executor._mappings()
    assert 0 < held < limit
    monkeypatch.setattr(executor, "_mappings", lambda: (49_146, 65_530))
    assert executor._room_for_programs()
    monkeypatch.setattr(executor, "_mappings", lambda: (49_147, 65_530))
    assert not executor._room_for_programs()
    monkeypatch.setattr(executor, "_mappings", lambda: None)          # off Linux: a count of programs
    monkeypatch.setattr(executor, "_compiled", {i: None for i in range(executor.MAX_PROGRAMS)})
    assert not executor._room_for_programs()
