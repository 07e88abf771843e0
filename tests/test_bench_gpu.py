"""The pieces of scripts/bench_gpu.py whose output the README quotes: the loop structure read from a
compiled program (what bounds the tree algorithms on a GPU), the comparison of a device's fixture
arrays with another's (which decisions differ), and the environment of the command-buffer section."""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
import bench_gpu  # noqa: E402


def test_loop_report_finds_nested_loops_and_their_trip_counts():
    def f(n, x):
        def outer(i, acc):
            # data-dependent: no trip count XLA could know
            inner = jax.lax.while_loop(lambda c: c[0] < acc[0] + i, lambda c: (c[0] + 1.0, c[1] * 1.5), (acc[0], acc))
            return jnp.sin(inner[1]) + acc
        return jax.lax.fori_loop(0, n, outer, x)

    hlo = jax.jit(f).lower(jnp.int32(3), jnp.zeros(4)).compile().as_text()
    loops = bench_gpu.loop_report(hlo)
    assert [loop["depth"] for loop in loops] == [0, 1]
    assert all(loop["known_trips"] is None and loop["kernels_per_trip"] >= 1 for loop in loops)
    assert bench_gpu.loop_report("HloModule empty\n") == []


def test_compare_separates_decisions_from_values():
    mine = {"run/phases": np.array([3, 4]), "run/recommendation": np.array([[0.5], [0.25]]),
            "run/final_regret": np.array([1.0, 2.0]), "run/curves": np.array([[0.5, 1.0], [1.0, 2.0]])}
    same = {k: v.copy() for k, v in mine.items()}
    out = bench_gpu.compare(mine, same, "run")
    assert out["identical"] == out["arrays"] == 4 and out["decisions_equal"] and out["max_rel_value_diff"] == 0
    other = dict(same, **{"run/phases": np.array([3, 5]), "run/final_regret": np.array([1.0, 2.0 * (1 + 2**-20)])})
    out = bench_gpu.compare(mine, other, "run")
    assert out["identical"] == 2 and not out["decisions_equal"] and out["differing_decisions"] == ["phases"]
    assert list(out["values"]) == ["final_regret"]
    assert out["max_rel_value_diff"] == out["values"]["final_regret"]["max_rel"]
    np.testing.assert_allclose(out["max_rel_value_diff"], 2**-20 / (1 + 2**-20), rtol=1e-12)


def test_section_env_adds_the_command_buffer_flags_to_the_callers():
    caller = {"XLA_FLAGS": "--xla_dump_to=/tmp/d", "HOME": "/root"}
    env = bench_gpu.section_env("cmdbuf", caller)
    assert env["XLA_FLAGS"] == "--xla_dump_to=/tmp/d --xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL"
    assert env["HOME"] == "/root" and caller["XLA_FLAGS"] == "--xla_dump_to=/tmp/d"
    assert bench_gpu.section_env("cmdbuf", {})["XLA_FLAGS"] == "--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL"
    assert bench_gpu.section_env("hct", caller) == caller
