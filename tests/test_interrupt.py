"""Ctrl-C during ``fedpne run``: the first says at once that the run stops after the call in flight,
the second exits at once, and the runs that finished are kept in --output, marked partial."""
import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax import cli
from fedpne_jax.core.processes import alive
from fedpne_jax.experiments import store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOLD = os.path.join(ROOT, "tests", "support", "hold")


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


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_ctrl_c_while_an_output_fifo_has_no_reader_keeps_the_result(tmp_path, monkeypatch, capsys):
    """--output names a FIFO nobody reads: the wait for a reader ends at Ctrl-C (the command line
    defers Ctrl-C while a result is written, so a blocked open would wait for ever), the result goes
    to the fallback file, and the exit says it was interrupted."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    monkeypatch.chdir(tmp_path)
    write = fp.RunResult.write_json

    def write_later_interrupted(self, path):
        if path == str(fifo):                   # not the fallback file's write
            _interrupt_after(0.5)               # while the FIFO waits for a reader
        return write(self, path)

    monkeypatch.setattr(fp.RunResult, "write_json", write_later_interrupted)
    code = cli.main(["run", "--algorithm", "hct", "--horizon", "40", "--checkpoints", "4", "--seeds", "3",
                     "--output", str(fifo)])
    err = capsys.readouterr().err
    assert code == 130, err
    assert f"could not write {str(fifo)!r}: interrupted while waiting for a reader" in err
    kept = [n for n in os.listdir(tmp_path) if n.startswith("fedpne-result-")]
    assert len(kept) == 1 and f"the result is kept in {tmp_path / kept[0]}" in err
    assert json.loads((tmp_path / kept[0]).read_text())["seeds"] == [0, 1, 2]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


# `python -m fedpne_jax` with a line on stderr after each call of a run: the test interrupts once a call
# has finished, so SIGINT lands mid-run however slowly the command starts (after a fixed wait it could
# land during the imports of a loaded machine, before the command sets its handler), and no later.
AFTER_A_CALL = "test: a call finished"
MARKED_COMMAND = f"""
import sys
from fedpne_jax import cli

interruptibly = cli.run.run_interruptibly


def marked(compute):
    def compute_marked(stop, progress):
        def progress_marked(*args):
            progress(*args)
            print({AFTER_A_CALL!r}, file=sys.stderr, flush=True)
        return compute(stop, progress_marked)
    return interruptibly(compute_marked)


cli.run.run_interruptibly = marked
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
def test_ctrl_c_keeps_the_finished_seeds(tmp_path):
    out = tmp_path / "run.json"
    # Many small calls (a 1 MiB budget), far more work than a call: SIGINT lands mid-run.
    child = subprocess.Popen([sys.executable, "-c", MARKED_COMMAND, "run", "--algorithm", "hct", "--horizon", "200",
                              "--seeds", "200000", "--memory-gb", "0.001", "--checkpoints", "5", "--output", str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines, called = [], threading.Event()

    def read():
        for line in child.stderr:
            lines.append(line)
            if AFTER_A_CALL in line:
                called.set()
        called.set()                            # the command ended without a call: the asserts say why

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert called.wait(300), "no call of the run finished within 300 s"
        child.send_signal(signal.SIGINT)
        child.wait(timeout=240)
    finally:
        if child.poll() is None:
            child.kill()
    reader.join(10)
    stderr = "".join(lines)
    assert AFTER_A_CALL in stderr and child.returncode == 130, stderr
    assert "stopping after the call in flight" in stderr and "marked partial" in stderr
    data = json.loads(out.read_text())
    n = len(data["seeds"])
    assert data["partial"] is True and 0 < n < 200000 and data["seeds"] == list(range(n))
    # The finished seeds are exactly what a run of those seeds gives.
    first = fp.run(fp.make_config("hct", horizon=200, checkpoints=5, noise="gaussian:0.1"), "garland",
                   seeds=min(n, 4))
    np.testing.assert_array_equal(data["per_seed"]["final_regret"][:first.num_seeds], first.final_regret)
    assert os.path.getsize(out) > 0


# `fedpne reproduce` as `python -m fedpne_jax` runs it, with the quick studies of two figures made tiny
# (the quick studies themselves compile a dozen programs): arms' Fed1-UCB with K = 10 and 30 arms, two
# programs compiled one after the other, and a sensitivity study of one configuration.  Every
# configuration is a call of its own that writes one chunk.  The test signals once a chunk is indexed,
# and tests/support/hold keeps the command from writing another before the signal: loaded from the
# suite's cache, the whole command once finished before a poll from a busy machine saw its first index.
# SIGINT as a terminal's foreground command has it: a test run started in the background of a
# non-interactive shell (`pytest ... &`) has SIGINT ignored, every process it starts inherits that,
# and fedpne reproduce, like any Python program, then leaves it ignored.
TINY_STUDIES = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from fedpne_jax import cli
from fedpne_jax.paper import studies
from tests.support.tiny_studies import tiny_studies

studies.STUDIES.update(tiny_studies(arms=(10, 30), c=(0.1,)))
sys.exit(cli.main(sys.argv[1:]))
"""


def _indexed(sweeps) -> list:
    """The chunk files the studies' indexes list.  The interrupt waits for one, and the rerun must keep
    these as they are; not every chunk file: a worker writes a call's chunk files and then the index,
    and one stopped in between leaves files that no index lists, which the rerun computes again."""
    return [index.parent / entry["file"] for index in sweeps.glob(f"*/{store.INDEX_FILE}")
            for entry in json.loads(index.read_text())["chunks"].values()]


@pytest.mark.skipif(sys.platform == "win32", reason="signals to a process group")
@pytest.mark.parametrize("group, signum", [(True, signal.SIGINT), (False, signal.SIGTERM)], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_stops_the_workers_of_reproduce_and_a_rerun_resumes(group, signum, tmp_path):
    """Ctrl-C reaches the terminal's whole process group, SIGTERM (a scheduler's time limit) the
    command alone: with two studies computed at once in worker processes, the command exits 130, no
    worker is left running, and a rerun computes only what is missing (the chunks written before the
    interrupt are kept as they were)."""
    argv = [sys.executable, "-c", TINY_STUDIES, "reproduce", "arms", "sensitivity", "--quick", "--jobs", "2",
            "--no-plot", "--no-progress", "--out", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": ROOT}
    # The command and its workers hold before any chunk after the first indexed one (tests/support/hold).
    held = {**env, "PYTHONPATH": os.pathsep.join([HOLD, ROOT]), "FEDPNE_TEST_HOLD": str(tmp_path / "held")}
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                             env=held)
    try:
        sweeps = tmp_path / "quick" / "sweeps"
        deadline = time.monotonic() + 180
        while child.poll() is None and not _indexed(sweeps) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _indexed(sweeps) and child.poll() is None, (child.returncode, child.stderr.read() if
                                                           child.poll() is not None else "no chunk indexed in 180 s")
        (os.killpg if group else os.kill)(child.pid, signum)
        try:
            stdout, stderr = child.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGUSR1)        # every process prints its stacks (the hold)
            time.sleep(2)
            os.killpg(child.pid, signal.SIGKILL)
            stdout, stderr = child.communicate(timeout=30)
            pytest.fail(f"the command did not stop within 120 s of the signal; its processes' stacks:\n{stderr}")
    except BaseException:
        # A held process never finishes by itself: whatever failed above, none may outlive the test.
        # (Not after a clean exit: that no process outlives the command is what the test checks.)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        raise
    assert child.returncode == 130, stderr
    assert "2 studies at a time" in stdout
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
    kept = {p: p.stat().st_mtime_ns for p in _indexed(sweeps)}
    # One chunk per configuration here (four of arms, one of sensitivity): the workers stopped mid-study,
    # not after their studies.
    assert 0 < len(kept) < 5
    rerun = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert rerun.returncode == 0, rerun.stderr
    assert all(p.stat().st_mtime_ns == t for p, t in kept.items())
    assert all((tmp_path / "quick" / "figures" / f"{name}.json").is_file() for name in ("arms", "sensitivity"))
    assert (tmp_path / "quick" / "SUMMARY.md").is_file() and len(list(sweeps.glob("*/chunks/*.npz"))) == 5


def test_workers_raise_an_interrupt_whose_exception_was_lost():
    """A SIGINT whose KeyboardInterrupt was raised where Python ignores exceptions (JAX's
    garbage-collection callback) still stops the wait for the workers, which ignore SIGINT: once a
    signal has set Workers.interrupted, completed() raises within half a second."""
    from concurrent.futures import Future

    from fedpne_jax.experiments import workers
    pool = workers.Workers(1)
    try:
        never = Future()
        pool.interrupted.set()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            list(pool.completed([never]))
        assert time.monotonic() - started < 1.0
        done = Future()
        done.set_result(3)
        pool.interrupted.clear()
        assert [f.result() for f in pool.completed([done])] == [3]
    finally:
        pool.stop()


def test_a_signal_during_the_wait_for_workers_is_raised_outside_concurrent_futures():
    """A KeyboardInterrupt raised inside concurrent.futures' wait can leave a future's lock held (its
    locks are taken one by one) and the pool unable to stop: a SIGINT while completed() waits only sets
    Workers.interrupted, and completed() itself raises, within its poll; a second signal while the
    workers are being stopped raises nothing."""
    from concurrent.futures import Future

    from fedpne_jax.experiments import workers
    never = Future()
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    # Workers answers SIGINT only where it is Python's default (not an ignored or a caller's one), as
    # in a terminal's foreground command; a test run in a shell's background inherits it ignored.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    # Should the signal not reach completed(), the wait still ends, and the test fails instead of hanging.
    ends = threading.Timer(10.0, never.set_result, (None,))
    try:
        with pytest.raises(KeyboardInterrupt) as caught:
            with workers.Workers(1) as pool:
                assert signal.getsignal(signal.SIGINT) == pool._on_signal
                timer.start()
                ends.start()
                started = time.monotonic()
                list(pool.completed([never]))
    finally:
        ends.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 0.3 + 2 * workers.POLL_SECONDS
    frames = [entry.name for entry in caught.traceback]
    assert frames[-1] == "completed", frames
    assert pool.interrupted.is_set()
    pool._deferring = True                      # as while stopping: a second signal changes nothing
    pool._on_signal(signal.SIGINT, None)


ORPHANED = """
import sys, time
from fedpne_jax.experiments import workers
pool = workers.Workers(1)
pool._pool.submit(time.sleep, 300)          # a worker busy for minutes, as one computing a study
while not pool._pool._processes:
    time.sleep(0.05)
print(*pool._pool._processes, flush=True)
time.sleep(300)
"""


def test_a_worker_whose_parent_was_killed_exits():
    """fedpne reproduce killed with SIGKILL (or by the kernel for memory) stops no worker: each ends
    itself within a few seconds of its parent, instead of finishing its study for no one and then
    waiting on the pool's queue for good."""
    parent = subprocess.Popen([sys.executable, "-c", ORPHANED], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": ROOT}, start_new_session=True)
    try:
        worker = int(parent.stdout.readline())
        assert os.path.exists(f"/proc/{worker}")
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30
        while alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(worker), "the worker outlived its killed parent by 30 s"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)
