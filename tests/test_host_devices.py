"""One XLA device per core on a CPU host (fedpne_jax.core.host_devices): the count asked for, the
caller's own setting kept, a bad FEDPNE_HOST_DEVICES refused by name, and a command-line run on the
host's devices equal, seed for seed, to the same run on one device."""
import os
import subprocess
import sys

import jax
import pytest

from fedpne_jax.cli import main
from fedpne_jax.core import host_devices

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_default_is_one_device_per_core_this_process_may_use():
    assert host_devices.requested({}) == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("environ", [{"XLA_FLAGS": "--xla_force_host_platform_device_count=3"},
                                     {"XLA_FLAGS": "--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count=1"},
                                     {"JAX_NUM_CPU_DEVICES": "5"},
                                     {"FEDPNE_HOST_DEVICES": "off"}, {"FEDPNE_HOST_DEVICES": "1"},
                                     {"FEDPNE_HOST_DEVICES": " OFF "}, {"FEDPNE_HOST_DEVICES": "1.0"},
                                     {"FEDPNE_HOST_DEVICES": "0.0"}])
def test_a_count_the_caller_chose_or_the_default_of_one_is_kept(environ):
    assert host_devices.requested(environ) is None
    assert host_devices.enable(environ) is None


def test_a_count_asked_for_is_used():
    for spelling in ("3", " 3 ", "3.0", "3e0", "0_3"):
        assert host_devices.requested({"FEDPNE_HOST_DEVICES": spelling}) == 3, spelling


@pytest.mark.parametrize("value", ["-2", "two", "1.5", "0x2", "nan", "inf", "-1.0", "4097", "99999999"])
def test_a_bad_count_is_refused_naming_the_variable(value, monkeypatch, capsys):
    with pytest.raises(ValueError, match=f"FEDPNE_HOST_DEVICES must be a number of devices in 2 .. 4096, or off, "
                                         f"got '{value}'"):
        host_devices.requested({"FEDPNE_HOST_DEVICES": value})
    monkeypatch.setenv("FEDPNE_HOST_DEVICES", value)
    assert main(["run", "--seeds", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fedpne: error: FEDPNE_HOST_DEVICES") and "Traceback" not in err


class _Device:
    def __init__(self, platform):
        self.platform = platform


def test_a_call_of_few_runs_stays_on_one_host_device(monkeypatch):
    cpus, gpus = tuple(_Device("cpu") for _ in range(4)), tuple(_Device("gpu") for _ in range(4))
    assert host_devices.share(cpus, 5) == cpus            # devices the caller made: as given
    monkeypatch.setattr(host_devices, "_SET", [4])
    m = host_devices.MIN_RUNS
    for runs, used in [(1, 1), (m - 1, 1), (2 * m - 1, 1), (2 * m, 2), (3 * m, 3), (100 * m, 4)]:
        assert host_devices.share(cpus, runs) == cpus[:used]
    assert host_devices.share(gpus, 1) == gpus and host_devices.share(cpus[:1], 1) == cpus[:1]


def test_after_the_backend_exists_nothing_changes():
    jax.devices()
    assert host_devices.enable({"FEDPNE_HOST_DEVICES": "3"}) is None
    assert jax.config.values["jax_num_cpu_devices"] == -1


# One process, so that its three programs compile once: the command line shards 96 seeds over three
# host devices; the same run on one device equals it; 5 seeds stay on one device, where the program
# sized for them is the one that runs and an explicit one-device call reuses it.
SHARDED_AND_ALONE = """
import json, sys
import jax
import numpy as np
import fedpne_jax as fp
from fedpne_jax.cli import main
from fedpne_jax.core import executor, host_devices
seeds = 3 * host_devices.MIN_RUNS
args = ["run", "--objective", "doublesine", "--clients", "3", "--horizon", "2000", "--seeds", str(seeds),
        "--noise", "gaussian:0.2", "--checkpoints", "10", "--seed", "4", "--output", sys.argv[1]]
counts = [executor.trace_count()]
assert main(args) == 0 and jax.device_count() == 3
counts.append(executor.trace_count())
data = json.load(open(sys.argv[1]))
config = fp.FedPNEConfig(num_clients=3, horizon=2000, noise="gaussian:0.2", checkpoints=10)
alone = fp.run(config, "doublesine", seeds=seeds, base_seed=4, devices=1)
counts.append(executor.trace_count())
assert np.array_equal(np.array(data["per_seed"]["curves"]), alone.curves)
assert np.array_equal(data["per_seed"]["final_regret"], alone.final_regret)
few = [fp.run(config, "doublesine", seeds=5, devices=d) for d in ("all", 1)]
counts.append(executor.trace_count())
assert np.array_equal(few[0].curves, few[1].curves) and np.array_equal(few[0].metrics["hits"], few[1].metrics["hits"])
print(data["device"])
print(np.diff(counts).tolist())
"""


def test_the_command_line_shards_over_the_host_devices_and_a_small_call_stays_on_one(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env.update(FEDPNE_HOST_DEVICES="3", JAX_PLATFORMS="cpu", PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-c", SHARDED_AND_ALONE, str(tmp_path / "r.json")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    device, counts = proc.stdout.split("\n")[-3:-1]
    assert device.endswith(" x3")
    assert counts == "[1, 1, 1]"       # the sharded program, the one-device program, the small call's
