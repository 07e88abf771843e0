"""Ctrl-C during ``fedpne run``: the first says at once that the run stops after the call in flight,
the second exits at once, and the runs that finished are kept in --output, marked partial."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax import cli
from fedpne_jax.experiments import sweep as sweep_lib
from fedpne_jax.paper import figures
from fedpne_jax.paper.studies import STUDIES


def _interrupt_after(*delays):
    def send():
        for d in delays:
            time.sleep(d)
            signal.raise_signal(signal.SIGINT)
    threading.Thread(target=send, daemon=True).start()


def test_first_ctrl_c_stops_after_the_call_in_flight(capsys):
    def compute(stop, progress):
        progress(10, 100, 0.5)
        while not stop():                       # a call in flight, until the stop request arrives
            time.sleep(0.01)
        return "finished runs"

    _interrupt_after(0.3)
    assert cli.run.run_interruptibly(compute) == (True, "finished runs")
    err = capsys.readouterr().err
    assert "stopping after the call in flight (10 of 100 runs are done; a call takes about 0.5 s" in err
    assert "press Ctrl-C again to exit now" in err


def test_second_ctrl_c_exits_at_once(capsys, monkeypatch):
    release, codes = threading.Event(), []

    def exit_now(code):                         # stands in for os._exit, which would end the test run
        codes.append(code)
        release.set()

    monkeypatch.setattr(cli.run.os, "_exit", exit_now)
    _interrupt_after(0.3, 1.5 * cli.run.REPEAT_SECONDS)
    start = time.monotonic()
    cli.run.run_interruptibly(lambda stop, progress: release.wait(30))
    assert codes == [130] and time.monotonic() - start < 10
    assert "interrupted; no result was written; exiting now" in capsys.readouterr().err


def test_a_doubled_signal_is_one_request(capsys, monkeypatch):
    """`timeout -s INT` and some terminals deliver one Ctrl-C as two SIGINTs: the second, this soon
    after the first, must not discard the runs that finished."""
    codes = []
    monkeypatch.setattr(cli.run.os, "_exit", codes.append)

    def compute(stop, progress):
        while not stop():
            time.sleep(0.01)
        time.sleep(0.5)                         # the call in flight ends after both signals
        return "finished runs"

    _interrupt_after(0.3, 0.05)
    assert cli.run.run_interruptibly(compute) == (True, "finished runs")
    assert codes == [] and "exiting now" not in capsys.readouterr().err


def test_ctrl_c_while_the_result_is_written_keeps_it(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run.json"
    write = fp.RunResult.write_json

    def interrupted_write(self, path):
        signal.raise_signal(signal.SIGINT)      # arrives while the JSON is being written
        signal.raise_signal(signal.SIGINT)
        return write(self, path)

    monkeypatch.setattr(fp.RunResult, "write_json", interrupted_write)
    code = cli.main(["run", "--algorithm", "hct", "--horizon", "40", "--checkpoints", "4", "--seeds", "3",
                     "--output", str(out)])
    assert code == 130
    data = json.loads(out.read_text())
    assert data["seeds"] == [0, 1, 2] and data["partial"] is False
    assert "the result is being written first" in capsys.readouterr().err


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
def test_ctrl_c_keeps_the_finished_seeds(tmp_path):
    out = tmp_path / "run.json"
    # Many small calls (a 1 MiB budget), far more work than the wait below: SIGINT lands mid-run.
    child = subprocess.Popen([sys.executable, "-m", "fedpne_jax", "run", "--algorithm", "hct", "--horizon", "200",
                              "--seeds", "200000", "--memory-gb", "0.001", "--checkpoints", "5", "--output", str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(8)
    child.send_signal(signal.SIGINT)
    stdout, stderr = child.communicate(timeout=240)
    assert child.returncode == 130, stderr
    assert "stopping after the call in flight" in stderr and "marked partial" in stderr
    data = json.loads(out.read_text())
    n = len(data["seeds"])
    assert data["partial"] is True and 0 < n < 200000 and data["seeds"] == list(range(n))
    # The finished seeds are exactly what a run of those seeds gives.
    first = fp.run(fp.make_config("hct", horizon=200, checkpoints=5, noise="gaussian:0.1"), "garland",
                   seeds=min(n, 4))
    np.testing.assert_array_equal(data["per_seed"]["final_regret"][:first.num_seeds], first.final_regret)
    assert os.path.getsize(out) > 0


@pytest.mark.skipif(sys.platform == "win32", reason="signals to a process group")
@pytest.mark.parametrize("group, signum", [(True, signal.SIGINT), (False, signal.SIGTERM)], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_stops_the_workers_of_reproduce_and_a_rerun_resumes(group, signum, tmp_path):
    """Ctrl-C reaches the terminal's whole process group, SIGTERM (a scheduler's time limit) the
    command alone: with two studies computed at once in worker processes, the command exits 130, no
    worker is left running, and a rerun computes only what is missing (the chunks written before the
    interrupt are kept as they were)."""
    argv = [sys.executable, "-m", "fedpne_jax", "reproduce", "fig6", "arms", "--quick", "--jobs", "2", "--no-plot",
            "--no-progress", "--out", str(tmp_path)]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    sweeps = tmp_path / "quick" / "sweeps"
    deadline = time.monotonic() + 180
    while child.poll() is None and not any(sweeps.glob("*/chunks/*.npz")) and time.monotonic() < deadline:
        time.sleep(0.05)
    (os.killpg if group else os.kill)(child.pid, signum)
    stdout, stderr = child.communicate(timeout=120)
    assert child.returncode == 130, stderr
    assert "fedpne: interrupted; finished chunks are kept, rerun the same command to resume" in stderr
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:          # multiprocessing's resource tracker leaves once the parent has
        try:
            os.killpg(child.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("a process of the interrupted command is still running")
    kept = {p: p.stat().st_mtime_ns for p in sweeps.glob("*/chunks/*.npz")}
    # One chunk per configuration here: the workers stopped mid-study, not after their studies.
    studies = figures.studies_of(["fig6", "arms"])
    assert 0 < len(kept) < sum(len(sweep_lib.load(STUDIES[s].definition(quick=True)).entries) for s in studies)
    rerun = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert all(p.stat().st_mtime_ns == t for p, t in kept.items())
    assert (tmp_path / "quick" / "figures" / "fig6.json").is_file() and (tmp_path / "quick" / "SUMMARY.md").is_file()
