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
    import jax
    import jax.numpy as jnp
    import numpy as np
    import objectives
    from fedpne_jax.core import executor

    # Programs as small as a program gets (about 50 mappings each, half a second to compile): the cache
    # keys on (run_single, static, shapes), whatever the run computes.  An algorithm's program maps
    # hundreds (about 360 for a small Fed-PNE one).
    objective = objectives.make_objective("garland", 1)

    def run_single(static, params, objective, key):
        x = jax.random.uniform(key, (static,))
        step = lambda i, x: jnp.sort(objective.value(x[:, None]) + params) * 0.5 + jnp.cumsum(x)[::-1] * 1e-3
        return jax.lax.fori_loop(0, 4, step, x)

    run = lambda size: executor.execute(run_single, size, np.float32(0.5), objective, 0, np.arange(2))[0]
    first = run(5)
    linux = executor._mappings() is not None
    before = executor._mappings()[0] if linux else 0
    run(6)
    run(7)
    run(5)                                                 # a hit: size 5 is now the most recent
    if linux:
        assert executor._mappings()[0] > before + 2 * 20   # each program maps its code
    # No room once four programs are held: the least recently used half goes (sizes 6 and 7).
    executor._room_for_programs = lambda: len(executor._compiled) < 4
    held = executor._mappings()[0] if linux else 0
    run(8)
    kept = sorted(key[1] for key in executor._compiled)
    assert kept == [5, 8], kept                            # the newest half: size 5 (used last) and 8
    if linux:
        assert executor._mappings()[0] < held              # more code unmapped than size 8 mapped
    traces = executor.trace_count()
    again = run(5)
    assert executor.trace_count() == traces                # kept: not compiled again
    np.testing.assert_array_equal(again, first)
    run(6)
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
