"""Runs sharded over several devices (and processes) equal single-device runs bit for bit."""
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.core import grid, sharding
from tests.test_grid import C_VALUES, CONFIG, SEEDS, objective

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Seed counts that 4 does not divide (the run axis is padded, the padded runs dropped), all within the
# 8 seeds of test_grid's grid, whose single-device results are the reference (one shared program).
RUN_SEEDS = [7, 3, 0, 5, 1, 6]       # 6 runs -> 8 on 4 devices
GRID_SEEDS = 6                       # 3 x 6 = 18 runs -> 20

# Writes the sharded results of one run and one grid to an npz.
CHILD = textwrap.dedent("""
    import sys
    import jax
    import numpy as np
    sys.path[:0] = [{root!r}]
    {setup}
    import fedpne_jax as fp
    from fedpne_jax.core import grid
    from tests.test_grid import C_VALUES, CONFIG, objective
    run = fp.run(CONFIG.replace(c=C_VALUES[1]), objective(), seeds={run_seeds}, base_seed=3, devices="all")
    grid_runs = fp.run_grid(grid.product(CONFIG, c=C_VALUES), objective(), seeds={grid_seeds}, base_seed=3) \
        if {with_grid} else []
    if jax.process_index() == 0:
        out = dict(devices=len(jax.devices()), processes=jax.process_count(), final=run.final_regret, curves=run.curves,
                   phases=run.phases, recommendation=run.recommendation)
        for i, r in enumerate(grid_runs):
            out[f"grid{{i}}_final"], out[f"grid{{i}}_curves"] = r.final_regret, r.curves
        np.savez({out!r}, **out)
""")


def child_script(out, setup="", with_grid=True):
    return CHILD.format(root=ROOT, setup=setup, run_seeds=RUN_SEEDS,
                        grid_seeds=GRID_SEEDS, with_grid=with_grid, out=str(out))


def child_env(devices: int):
    return dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")


def compare(data, reference):
    """``reference``: the single-device grid of test_grid (seeds 0..7); its c = C_VALUES[1] point equals
    fp.run of that config (test_grid checks it)."""
    single = reference[1]
    np.testing.assert_array_equal(data["final"], single.final_regret[RUN_SEEDS])
    np.testing.assert_array_equal(data["curves"], single.curves[RUN_SEEDS])
    np.testing.assert_array_equal(data["phases"], single.phases[RUN_SEEDS])
    np.testing.assert_array_equal(data["recommendation"], single.recommendation[RUN_SEEDS])
    for i, r in enumerate(reference):
        if f"grid{i}_final" not in data:
            continue
        np.testing.assert_array_equal(data[f"grid{i}_final"], r.final_regret[:GRID_SEEDS])
        np.testing.assert_array_equal(data[f"grid{i}_curves"], r.curves[:GRID_SEEDS])


def single_device():
    return fp.run_grid(grid.product(CONFIG, c=C_VALUES), objective(), seeds=SEEDS, base_seed=3, devices=1)


def test_four_devices_equal_one(tmp_path):
    out = tmp_path / "sharded.npz"
    # The child compiles while this process computes the single-device reference.
    child = subprocess.Popen([sys.executable, "-c", child_script(out)], env=child_env(4),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reference = single_device()
    stdout, stderr = child.communicate(timeout=300)
    assert child.returncode == 0, stderr
    data = np.load(out)
    assert int(data["devices"]) == 4 and "grid2_final" in data
    compare(data, reference)


EXPLICIT_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path[:0] = [{root!r}]
    import fedpne_jax as fp
    from tests.support.helpers import make
    from tests.test_reproducibility import EXPLICIT
    run = fp.run(EXPLICIT.replace(horizon=600, capacity=64), make("himmelblau", 2, dim=2), seeds=[4, 0, 3, 1, 2],
                 base_seed=5, devices="all")
    np.savez({out!r}, final=run.final_regret, curves=run.curves, phases=run.phases,
             recommendation=run.recommendation)
""")


def test_explicit_sampler_on_four_devices_equals_one(tmp_path):
    """Per-pull draws are keyed by (phase, pull, row, client): 5 runs padded to 8 over 4 devices give
    the numbers of one device."""
    from tests.support.helpers import make
    from tests.test_reproducibility import EXPLICIT
    out = tmp_path / "explicit.npz"
    script = EXPLICIT_CHILD.format(root=ROOT, out=str(out))
    child = subprocess.Popen([sys.executable, "-c", script], env=child_env(4), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    # The node table these runs need: from EXPLICIT's 16 every run overflows and is rerun, which compiles
    # each side's program twice and is capacity's test (tests/test_capacity.py), not this one.
    single = fp.run(EXPLICIT.replace(horizon=600, capacity=64), make("himmelblau", 2, dim=2), seeds=5, base_seed=5,
                    devices=1)
    assert single.config["capacity"] == 64
    stdout, stderr = child.communicate(timeout=300)
    assert child.returncode == 0, stderr
    data = np.load(out)
    order = [4, 0, 3, 1, 2]
    for field, name in [("final_regret", "final"), ("curves", "curves"), ("phases", "phases"),
                        ("recommendation", "recommendation")]:
        np.testing.assert_array_equal(data[name], getattr(single, field)[order])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(os.environ.get("FEDPNE_MULTIPROCESS_TESTS") != "1",
                    reason="two JAX processes (about 15 s of CPU); set FEDPNE_MULTIPROCESS_TESTS=1")
def test_two_processes_equal_one_device(tmp_path):
    """jax.distributed on one machine: 2 processes x 2 CPU devices, the seeds split over all 4."""
    out = tmp_path / "multiprocess.npz"
    port = _free_port()
    setup = ("jax.distributed.initialize(coordinator_address='localhost:{port}', num_processes=2, "
             "process_id=int(sys.argv[1]))").format(port=port)
    script = child_script(out, setup, with_grid=False)     # the grid's sharding is the 4-device test's
    children = [subprocess.Popen([sys.executable, "-c", script, str(p)], env=child_env(2), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for p in range(2)]
    reference = single_device()
    for child in children:
        _, stderr = child.communicate(timeout=300)
        assert child.returncode == 0, stderr
    data = np.load(out)
    assert int(data["devices"]) == 4 and int(data["processes"]) == 2
    compare(data, reference)


class FakeDevice:
    def __init__(self, process_index, device_id):
        self.process_index, self.id = process_index, device_id


def test_padding_and_process_shares():
    assert sharding.padded_size(10, 4) == 12
    assert sharding.padded_size(10, 1) == 10
    assert sharding.padded_size(10, 4, pad_to=16) == 16
    np.testing.assert_array_equal(sharding.pad(np.array([5, 7, 9]), 5), [5, 7, 9, 9, 9])
    # Two hosts with two devices each, listed out of order: each host gets one contiguous block.
    devices = sharding._ordered([FakeDevice(1, 3), FakeDevice(0, 0), FakeDevice(1, 2), FakeDevice(0, 1)])
    assert [(d.process_index, d.id) for d in devices] == [(0, 0), (0, 1), (1, 2), (1, 3)]
    assert sharding.process_share(12, devices, 0) == range(0, 6)
    assert sharding.process_share(12, devices, 1) == range(6, 12)
    assert sharding.process_share(12, devices, 2) == range(0)


def test_device_specs():
    import jax
    assert sharding.select_devices("all") == tuple(jax.devices())
    assert sharding.select_devices(1) == (jax.devices()[0],)
    for bad in (0, len(jax.devices()) + 1, "some", 1.5):
        with pytest.raises(ValueError, match="devices"):
            sharding.select_devices(bad)
    with sharding.use_devices(1):
        assert sharding.select_devices() == (jax.devices()[0],)
