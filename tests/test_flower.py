"""Fed-PNE with real Flower clients (fedpne_jax.flower) through Flower's deployment engine: a SuperLink
and SuperNodes as real processes on localhost, every one of them stopped by the test that started it.

* a noise-free run (3 SuperNodes, Garland with shift heterogeneity) is ``fp.run``'s run of the same
  seed bit for bit: phases, uploads, depth, recommendation, regret curve; ``fedpne flower local``
  makes the same run over TLS with certificates made for the run and SuperNode authentication on,
  and leaves no process behind;
* a NaN or a wrongly shaped reply is refused naming the client, and the run stops;
* a SuperNode killed mid-run: the server stops naming the client with its state kept, and the same
  run submitted again with the client back finishes with the numbers of an uninterrupted run; with
  on-client-loss 'continue' it goes on with the others and the result records the lost client;
* a ServerApp that crashes after a step resumes from its saved state with the same numbers;
* runs stopped mid-run and by a timeout leave every warm executor running for the next run;
* the reply checks by themselves (another run or step, a missing key, an error).

The sampler: Fed-PNE's stepper is exact against fp.run with sampling='client' (its steps' docstring).
The fp.run references and the command line's own deployment run beside the other tests at a low CPU
priority, and fill the time the shared deployment's runs wait (beside, cli_beside).
"""
from __future__ import annotations

import io
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import ConfigRecord, Error, Metadata, RecordDict  # noqa: E402
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects  # noqa: E402

import fedpne_jax as fp  # noqa: E402
import objectives  # noqa: E402
from fedpne_jax.experiments.workers import stop_pool  # noqa: E402
from fedpne_jax.flower import local, wire  # noqa: E402

M, T = 3, 200
PROBLEM = {"algorithm": "fedpne", "objective": "garland", "heterogeneity": "shift", "clients": M, "horizon": T,
           "noise": "none", "sampling": "client", "seed": 0}
# A killed SuperNode is found lost when its step's replies are not all in after client-timeout seconds.
# The live clients answer a step in under a second on an idle machine and in a few on a loaded one,
# so the fault tests give LOSS_MARGIN times the slowest exchange of the module's noise-free run on the
# same deployment (after its first step, where the clients compile), and at least LOSS_FLOOR seconds.
LOSS_MARGIN, LOSS_FLOOR = 8.0, 3.0
# The niceness of the work done beside the runs under test: theirs comes first, but beside a busy
# process (CI's other worker) a process at 10 still gets about a tenth of a core, where one at 19
# gets about 1.5 % and a run's clients could wait minutes for each step.
BESIDE_NICE = 10
COMPARED = ("final_regret", "phases", "uploads", "depth", "recommendation", "curves", "simple_regret")


def fp_run(objective: str, seeds: int = 1, base_seed: int = 0, noise: str = "none", **objective_options) -> dict:
    """``fp.run``'s result (as a dict) of PROBLEM's configuration on ``objective``."""
    config = fp.make_config("fedpne", num_clients=M, horizon=T, noise=noise, sampling="client", checkpoints=100)
    built = objectives.make_objective(objective, num_clients=M, heterogeneity="shift", seed=0, **objective_options)
    return fp.run(config, built, seeds=seeds, base_seed=base_seed).to_dict()


NOISY = "gaussian:0.5"
BBOB = {"objective": "bbob-f7", "dim": 2}
# The references fp.run computes for the tests (beside), by the test that needs each.
REFERENCES = {
    "test_noise_free_run_over_flower_is_fp_runs_run": ("garland", {}),
    "test_noise_free_bbob_run_over_flower_is_fp_runs_run": ("bbob", BBOB),
    "test_noisy_runs_over_flower_match_fp_run_in_distribution":
        ("noisy", {"objective": "garland", "seeds": 500, "base_seed": 1000, "noise": NOISY}),
}


def selected(request, name: str) -> bool:
    """Whether this session runs the test function ``name``: collected, not deselected, and not skipped
    by its tier (tests/conftest.py marks those).  Under pytest-xdist it assumes the suite's
    ``--dist loadfile`` (README), where this file's tests all run in one worker."""
    return any(item.originalname == name and not item.get_closest_marker("skip") for item in request.session.items)


def _low_priority() -> None:
    """The reference process's start: a low CPU priority (the threads XLA starts later inherit it) and
    the suite's compilation cache (its folder is in the environment)."""
    os.nice(BESIDE_NICE)
    from fedpne_jax.core import compile_cache
    compile_cache.enable()


@pytest.fixture(scope="module")
def beside(request):
    """{name: future} of the tests' own fp.run references, computed one after another in a process of
    a low CPU priority (BESIDE_NICE) from the module's start: they compile in the CPU time the deployments
    leave idle (runs waiting on the wire, the fault tests waiting for a lost client) instead of
    beside a deployment's start or before a test's run."""
    context = multiprocessing.get_context("spawn")       # not fork: this process runs JAX's threads
    pool = ProcessPoolExecutor(1, mp_context=context, initializer=_low_priority)
    try:
        soon = {}
        for test, (name, options) in REFERENCES.items():
            if name == "garland" or selected(request, test):
                options = dict(options)
                soon[name] = pool.submit(fp_run, options.pop("objective", "garland"), **options)
        yield soon
    finally:
        stop_pool(pool)     # a module stopped early does not wait for the references still to come


@pytest.fixture(scope="module")
def reference(beside):
    return beside["garland"].result()


def assert_same_run(data: dict, reference: dict) -> None:
    for key in COMPARED:
        if key in reference["per_seed"]:
            assert data["per_seed"][key] == reference["per_seed"][key], key
    assert data["regret_mean"] == reference["regret_mean"]
    assert data["checkpoints"] == reference["checkpoints"]
    assert data["config"] == reference["config"]


@pytest.fixture(scope="module")
def xla_cache(tmp_path_factory):
    # The server and client processes share compiled programs within this file, not with the user's cache.
    return {"FEDPNE_COMPILE_CACHE": str(tmp_path_factory.mktemp("xla"))}


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, xla_cache, beside):
    """One SuperLink and M SuperNodes for every test that submits runs to a running deployment; a test
    that kills a SuperNode starts it again.  SuperNodes 0 and 1 share one warm ClientApp executor,
    SuperNode 2 has its own (nodes_per_executor=2), so the fault tests kill both kinds.  Every
    process is stopped at the end."""
    workdir = str(tmp_path_factory.mktemp("deployment"))
    with local.Deployment(M, workdir=workdir, out=io.StringIO(), extra_env=xla_cache, nodes_per_executor=2) as d:
        d.start()
        yield d
    assert processes_in(workdir) == []


def processes_in(folder: str) -> list:
    """Processes whose working folder is ``folder`` (every process a deployment starts runs there)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.readlink(f"/proc/{name}/cwd") == folder:
                    found.append(int(name))
            except OSError:
                pass
    return found


def submit(d: local.Deployment, tmp_path, name: str, timeout: float = 600, on_line=None, **options) -> tuple:
    """(status, result or None) of one run on deployment ``d``."""
    status = str(tmp_path / f"{name}.status.json")
    config = dict(PROBLEM, state=str(tmp_path / f"{name}.fpne"), output=str(tmp_path / f"{name}.json"),
                  status=status, **options)
    if os.path.exists(status):
        os.remove(status)
    d.submit(config, timeout=timeout, on_line=on_line)
    with open(status) as fh:
        outcome = json.load(fh)
    result = None
    if outcome["ok"]:
        with open(config["output"]) as fh:
            result = json.load(fh)
    return outcome, result


def start_cli(tmp_path, *extra, env=None, low_priority: bool = False) -> tuple:
    """(process, result path, working folder) of ``fedpne flower local`` on PROBLEM, started; its
    output goes to files in ``tmp_path`` (a pipe nobody reads could fill and stop it)."""
    workdir = tmp_path / "work"
    out = tmp_path / "run.json"
    command = [sys.executable, "-m", "fedpne_jax", "flower", "local", "--clients", str(M), "--heterogeneity",
               "shift", "--horizon", str(T), "--noise", "none", "--sampling", "client", "--output", str(out),
               "--state", str(tmp_path / "state.fpne"), "--workdir", str(workdir), *extra]
    if low_priority:                                   # and so every process it starts
        command = [sys.executable, "-c", f"import os, sys; os.nice({BESIDE_NICE}); os.execv(sys.argv[1], sys.argv[1:])",
                   *command]
    with open(tmp_path / "stdout.txt", "w") as stdout, open(tmp_path / "stderr.txt", "w") as stderr:
        proc = subprocess.Popen(command, stdout=stdout, stderr=stderr, text=True, env={**os.environ, **(env or {})})
    return proc, out, str(workdir)


def finish_cli(proc: subprocess.Popen, tmp_path, timeout: float = 900) -> subprocess.CompletedProcess:
    """Wait for ``start_cli``'s command; a test stopped meanwhile (timeout, Ctrl-C) interrupts it."""
    try:
        proc.wait(timeout=timeout)
    except BaseException:
        interrupt(proc)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, (tmp_path / "stdout.txt").read_text(),
                                       (tmp_path / "stderr.txt").read_text())


def interrupt(proc: subprocess.Popen) -> None:
    """Ctrl-C a command still running, as a user would, and wait for it to stop its processes (a KILL
    would leave them)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)


@pytest.fixture(scope="module")
def cli_beside(request, tmp_path_factory, xla_cache):
    """``fedpne flower local --tls --auth`` (its own SuperLink, SuperNodes and certificates), started
    after the shared deployment's first run (plain) at a low CPU priority, as the module's
    references are (beside); its test is the module's last and waits for it.  None when that test
    does not run."""
    if not selected(request, "test_fedpne_flower_local_over_tls_with_auth_is_the_same_run_and_leaves_no_process"):
        yield None
        return
    tmp_path = tmp_path_factory.mktemp("cli")
    proc, out, workdir = start_cli(tmp_path, "--tls", "--auth", "--nodes-per-executor", str(M), env=xla_cache,
                                   low_priority=True)
    yield proc, out, workdir, tmp_path
    interrupt(proc)                     # where its test did not wait for it (stopped, or failed before)


def assert_wire(data: dict, reference: dict) -> None:
    flower = data["flower"]
    assert flower["steps"] >= reference["per_seed"]["phases"][0]
    assert flower["paper_uploads"] == reference["per_seed"]["uploads"][0]
    assert flower["received_bytes"] > 8 * flower["paper_uploads"] and flower["lost_clients"] == []


@pytest.fixture(scope="module")
def plain(request, deployment, tmp_path_factory):
    """(status, result) of the noise-free run on the module's deployment.  The command line's run
    (cli_beside) starts once it is over: its exchanges set the fault tests' timeout (loss_timeout)."""
    done = submit(deployment, tmp_path_factory.mktemp("plain"), "plain")
    request.getfixturevalue("cli_beside")
    return done


@pytest.fixture(scope="module")
def loss_timeout(plain):
    """client-timeout for a fault test (LOSS_MARGIN)."""
    outcome, result = plain
    assert outcome["ok"], outcome
    return max(LOSS_FLOOR, LOSS_MARGIN * max(s["exchange_seconds"] for s in result["flower"]["per_step"][1:]))


def test_noise_free_run_over_flower_is_fp_runs_run(plain, reference):
    outcome, result = plain
    assert outcome["ok"], outcome
    assert_same_run(result, reference)
    assert_wire(result, reference)


def joined(d: local.Deployment, i: int, timeout: float = 300) -> None:
    """Wait until SuperNode ``i`` says it has its node id (it has joined, or it exits)."""
    deadline = time.time() + timeout
    while "SuperNode ID:" not in d.tail(f"supernode-{i}", 1000) and time.time() < deadline:
        assert d.processes[f"supernode-{i}"].poll() is None, d.tail(f"supernode-{i}")
        time.sleep(0.1)


def test_supernode_auth_admits_only_registered_keys(tmp_path):
    """With --enable-supernode-auth, a SuperNode whose key is not registered cannot join (it exits
    with Flower's exit code 305 and is not listed); once its key is registered, it joins."""
    workdir = str(tmp_path / "auth")
    # No run is submitted: Flower's own executors (subprocess isolation) start none of the warm
    # executors' processes, which import JAX for a run.
    with local.Deployment(2, workdir=workdir, out=io.StringIO(), auth=True, isolation="subprocess") as d:
        d.start_superlink()
        d.register(0)
        d.start_supernode(0)
        d.start_supernode(1)
        assert d.processes["supernode-1"].wait(timeout=300) != 0
        assert "Exit Code: 305" in d.tail("supernode-1") and "Failed to activate SuperNode" in d.tail("supernode-1")
        joined(d, 0)
        assert [n["status"] for n in d.control.nodes()] == ["online"]
        d.stop("supernode-1")
        d.register(1)
        d.start_supernode(1)
        joined(d, 1)
        assert sorted(n["status"] for n in d.control.nodes()) == ["online", "online"]
        assert d.processes["supernode-1"].poll() is None
    assert processes_in(workdir) == []


def test_simulation_engine_run_is_fp_runs_run_and_leaves_no_process(tmp_path, reference, xla_cache):
    """The same app under Flower's simulation engine (submitted as flwr run --federation-config
    num-supernodes=M submits it, to a SuperLink started with --simulation; the ClientApps run as Ray
    actors): fp.run's run."""
    pytest.importorskip("ray")
    workdir = str(tmp_path / "simulation")
    with local.Deployment(M, workdir=workdir, out=io.StringIO(), extra_env=xla_cache, simulation=True) as d:
        d.start()
        assert [name for name in d.processes] == ["superlink"]
        outcome, result = submit(d, tmp_path, "simulation")
    assert outcome["ok"], outcome
    assert_same_run(result, reference)
    assert processes_in(workdir) == []


def test_ctrl_c_stops_every_process_it_started(tmp_path, xla_cache):
    workdir = tmp_path / "work"
    command = [sys.executable, "-m", "fedpne_jax", "flower", "local", "--clients", str(M), "--horizon", str(T),
               "--noise", "none", "--state", str(tmp_path / "state.fpne"), "--workdir", str(workdir)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **xla_cache})
    deadline = time.time() + 300
    # Interrupted once the run is submitted (its app written), or once the server has saved a state.
    while not ((workdir / "app-1").exists() or (tmp_path / "state.fpne").exists()) and time.time() < deadline \
            and proc.poll() is None:
        time.sleep(0.1)
    time.sleep(0.5)
    assert processes_in(str(workdir)), "the deployment's processes run in its working folder"
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-3000:]
    assert "every process it started is stopped" in out
    assert processes_in(str(workdir)) == []


@pytest.mark.parametrize("function, client, says", [
    ("tests.test_flower_functions:nan_at_client_1", 1, "NaN or infinite"),
    ("tests.test_flower_functions:one_too_many_at_client_2", 2, "have shape"),
])
def test_a_malformed_reply_is_refused_naming_the_client(deployment, tmp_path, function, client, says):
    outcome, _ = submit(deployment, tmp_path, "bad", function=function, lo="0", hi="1", horizon=50)
    assert not outcome["ok"]
    assert f"client {client} (node" in outcome["message"] and says in outcome["message"]
    assert "never averaged" in outcome["message"]


def test_noise_free_bbob_run_over_flower_is_fp_runs_run(deployment, tmp_path, beside):
    outcome, result = submit(deployment, tmp_path, "bbob", **BBOB)
    assert outcome["ok"], outcome
    assert_same_run(result, beside["bbob"].result())


def kill_after_step(d: local.Deployment, book: str, step: int, node: int) -> threading.Thread:
    """Kill SuperNode ``node`` (and its children) once the server has saved step ``step`` (or the
    run has ended)."""
    status = book.replace(".fpne.json", ".status.json")

    def watch():
        deadline = time.time() + 600
        while time.time() < deadline and not os.path.exists(status):
            try:
                with open(book) as fh:
                    if len(json.load(fh)["steps"]) > step:
                        break
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        d.stop(f"supernode-{node}", signal.SIGKILL)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_killed_supernode_stops_the_run_with_its_state_kept_and_the_rerun_finishes_it(deployment, tmp_path,
                                                                                         reference, loss_timeout):
    watcher = kill_after_step(deployment, str(tmp_path / "loss.fpne.json"), 0, 2)
    outcome, _ = submit(deployment, tmp_path, "loss", **{"client-timeout": loss_timeout})
    watcher.join()
    assert not outcome["ok"]
    assert "client 2 (node" in outcome["message"] and "did not answer step" in outcome["message"]
    assert "state kept" in outcome["message"]
    saved = fp.Optimizer.load(tmp_path / "loss.fpne")
    assert saved.step >= 1 and not saved.done
    deployment.start_supernode(2)
    outcome, result = submit(deployment, tmp_path, "loss", **{"client-timeout": 120.0})
    assert outcome["ok"], outcome
    assert_same_run(result, reference)
    assert result["flower"]["resumed_at_steps"] == [saved.step]


def test_on_client_loss_continue_goes_on_and_records_the_lost_client(deployment, tmp_path, loss_timeout):
    watcher = kill_after_step(deployment, str(tmp_path / "cont.fpne.json"), 0, 1)
    outcome, result = submit(deployment, tmp_path, "cont",
                             **{"client-timeout": loss_timeout, "on-client-loss": "continue"})
    watcher.join()
    deployment.start_supernode(1)
    assert outcome["ok"], outcome
    lost = result["flower"]["lost_clients"]
    assert len(lost) == 1 and lost[0]["client"] == 1 and lost[0]["step"] >= 1
    answered = [s["clients"] for s in result["flower"]["per_step"]]
    assert answered[:lost[0]["step"]] == [M] * lost[0]["step"]
    assert all(n == M - 1 for n in answered[lost[0]["step"]:] if n)


def test_stopped_runs_leave_the_executors_serving_the_next_run(deployment, tmp_path, plain):
    """A run stopped once its first step is saved (the request of flwr stop), and one stopped by
    Deployment.submit's timeout (exit status 1, no result): the stopped run's ServerApp says so, no
    warm executor ends (Flower's retry policy would interrupt their processes on the revoked task
    tokens), and the next run on the same deployment is fp.run's."""
    executors = {name: p.pid for name, p in deployment.processes.items() if name.startswith("executor")}
    book, status = tmp_path / "mid.fpne.json", tmp_path / "mid.status.json"

    def stop_after_the_first_step():
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                if json.loads(book.read_text())["steps"]:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.02)
        assert deployment.control.stop_run(deployment.active_run)
    stopper = threading.Thread(target=stop_after_the_first_step, daemon=True)
    stopper.start()
    config = dict(PROBLEM, state=str(tmp_path / "mid.fpne"), output=str(tmp_path / "mid.json"), status=str(status))
    assert deployment.submit(config) == 0           # its log ended: the run is over
    stopper.join()
    deadline = time.time() + 60                     # the ServerApp writes its status as it ends
    while not status.exists() and time.time() < deadline:
        time.sleep(0.05)
    outcome = json.loads(status.read_text())
    assert not outcome["ok"] and "stopped at the SuperLink" in outcome["message"], outcome
    assert len(json.loads(book.read_text())["steps"]) < plain[1]["flower"]["steps"]

    lines: list = []
    config = dict(PROBLEM, state=str(tmp_path / "slow.fpne"), output=str(tmp_path / "slow.json"),
                  status=str(tmp_path / "slow.status.json"))
    assert deployment.submit(config, timeout=0.1, on_line=lines.append) == 1
    assert any("and was stopped" in line for line in lines), lines
    assert not os.path.exists(config["output"])

    outcome, result = submit(deployment, tmp_path, "next")
    assert outcome["ok"], outcome
    assert_same_run(result, plain[1])
    assert {name: p.pid for name, p in deployment.processes.items() if name.startswith("executor")} == executors
    assert all(deployment.processes[name].poll() is None for name in executors)


def test_a_crashed_server_resumes_from_its_last_step_with_the_same_numbers(deployment, tmp_path, reference):
    outcome = None
    try:
        outcome, _ = submit(deployment, tmp_path, "crash", **{"crash-after-step": 1})
    except FileNotFoundError:
        pass                   # the crash left no status file
    assert outcome is None or not outcome["ok"]
    assert fp.Optimizer.load(tmp_path / "crash.fpne").step == 2
    outcome, result = submit(deployment, tmp_path, "crash")
    assert outcome["ok"], outcome
    assert_same_run(result, reference)
    assert result["flower"]["resumed_at_steps"] == [2]


# ------------------------------------------------------------------ the reply checks alone

def test_run_config_defaults_are_fedpne_runs():
    from fedpne_jax.cli import run as cli_run
    from fedpne_jax.flower import spec
    assert (spec.DEFAULT_NOISE, spec.DEFAULT_CHECKPOINTS) == (cli_run.DEFAULT_NOISE, cli_run.DEFAULT_CHECKPOINTS)
    problem = spec.problem({"clients": 3, "horizon": 50, "set": "k=3"})
    assert problem.config == fp.make_config("fedpne", num_clients=3, horizon=50, k=3, noise=cli_run.DEFAULT_NOISE,
                                            checkpoints=50)
    with pytest.raises(ValueError, match="unknown key"):
        spec.problem({"horizn": 5})


@pytest.mark.parametrize("reader,key,value,says", [
    ("problem", "clients", 0, "num_clients (M) must be an integer in [1,"),       # 0 is refused, not read as "not given"
    ("problem", "horizon", "0.0", "horizon (T) must be an integer in [1,"),
    ("problem", "horizon", float("inf"), "run config 'horizon': expected an integer, got inf"),
    ("problem", "seed", "1e400", "run config 'seed': expected an integer, got '1e400'"),
    ("problem", "seed", "nan", "run config 'seed': expected an integer, got 'nan'"),
    ("problem", "seed", 2**32, "run config 'seed': expected an integer in [0, 2^32)"),
    ("problem", "objective-seed", -1, "run config 'objective-seed': expected an integer in [0, 2^31 - 1], got -1"),
    ("problem", "f-star", "abc", "run config 'f-star': expected a number, got 'abc'"),
    ("problem", "f-star", "nan", "run config 'f-star': expected a finite number, got 'nan'"),
    ("problem", "amplitude", "inf", "run config 'amplitude': expected a finite number, got 'inf'"),
    ("server_settings", "client-timeout", "nan", "run config 'client-timeout': expected a number of seconds > 0 (inf: no limit), got 'nan'"),
    ("server_settings", "client-timeout", 0, "run config 'client-timeout': expected a number of seconds > 0"),
    ("server_settings", "node-timeout", -5, "run config 'node-timeout': expected a number of seconds > 0"),
    ("server_settings", "node-timeout", "soon", "run config 'node-timeout': expected a number of seconds > 0"),
    ("server_settings", "poll", -1, "run config 'poll': expected a finite number >= 0, got -1"),
    ("server_settings", "poll", "nan", "run config 'poll': expected a finite number >= 0, got 'nan'"),
    ("server_settings", "resume", "maybe", "run config 'resume': expected true or false, got 'maybe'"),
    ("server_settings", "resume", 2, "run config 'resume': expected true or false, got 2"),
    ("server_settings", "on-client-loss", "retry", "run config 'on-client-loss': 'retry' is not one of"),
    ("server_settings", "crash-after-step", "2.7", "run config 'crash-after-step': expected an integer, got '2.7'"),
])
def test_run_config_refuses_naming_the_key(reader, key, value, says):
    """spec.problem (what both sides build) and spec.server_settings (the ServerApp's own keys)."""
    from fedpne_jax.flower import spec
    with pytest.raises(ValueError) as caught:
        getattr(spec, reader)({key: value})
    assert says in str(caught.value)


def test_server_settings_read_yes_and_no_in_any_spelling():
    """A TOML file may hold "false" as a string: a test of truth would resume."""
    from fedpne_jax.flower import spec
    for value in (False, 0, "false", " FALSE ", "no", "off", "0"):
        assert spec.server_settings({"resume": value}).resume is False, value
    for value in (True, 1, "true", "Yes", "on", "1", ""):
        assert spec.server_settings({"resume": value}).resume is True, value
    settings = spec.server_settings({"client-timeout": "inf", "poll": "0", "on-client-loss": " continue "})
    assert settings.client_timeout == float("inf") and settings.poll == 0.0 and settings.on_client_loss == "continue"
    assert spec.server_settings({}) == spec.ServerSettings(True, 300.0, 300.0, spec.DEFAULT_POLL, "stop", -1)


def _reply(content=None, error=None):
    meta = Metadata(run_id=1, message_id="", src_node_id=7, dst_node_id=0, reply_to_message_id="x", group_id="",
                    created_at=time.time(), ttl=60, message_type=wire.QUERY)
    from flwr.app.message import make_message  # a received message, as the Grid returns it
    return make_message(metadata=meta, content=content) if error is None else make_message(metadata=meta,
                                                                                            error=error)


def test_an_exchange_of_a_stopped_run_raises_the_stop_not_lost_clients():
    """A stopped run's messages come back as MESSAGE_UNAVAILABLE errors, which read like lost clients;
    the exchange asks the SuperLink, which refuses a stopped run's requests, and so raises the stop.
    With the run still running, the same errors are the clients that did not answer."""
    from flwr.supercore.run import RunNotRunningException

    from fedpne_jax.flower import server

    class Grid:
        def __init__(self, running):
            self.running = running

        def push_messages(self, messages):
            return ["x"] * len(messages)

        def pull_messages(self, ids):
            return [_reply(error=Error(code=3, reason="Message unavailable"))]

        def get_node_ids(self):
            if not self.running:
                raise RunNotRunningException
            return [7]
    with pytest.raises(RunNotRunningException):
        server.exchange(Grid(running=False), {0: None}, timeout=5.0, poll=0.01)
    replies, missing = server.exchange(Grid(running=True), {0: None}, timeout=5.0, poll=0.01)
    assert list(replies) == [0] and replies[0].error.code in server.LOST and missing == []


@pytest.mark.parametrize("running", [False, True])
def test_a_run_that_fails_once_stopped_reports_the_stop(tmp_path, running, monkeypatch):
    """A stop reaches a run as whatever its next request meets (a push refused mid-object, for one);
    the ServerApp's status says the run was stopped when the SuperLink refuses the stopped run's
    request, and gives the error itself otherwise."""
    from flwr.supercore.run import RunNotRunningException

    from fedpne_jax.flower import server

    class Grid:
        def get_node_ids(self):
            if not running:
                raise RunNotRunningException
            return [7]
    monkeypatch.setattr(server, "quicker_pulls", lambda: None)     # Flower's defaults, for the other tests
    status = tmp_path / "status.json"
    context = SimpleNamespace(run_config={"status": str(status), "horizn": 5})      # fails in serve
    with pytest.raises(ValueError, match="unknown key"):
        server.main(Grid(), context)
    message = json.loads(status.read_text())["message"]
    assert ("stopped at the SuperLink" in message) == (not running) and ("unknown key" in message) == running


def _npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def _npz() -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, means=np.zeros(4))
    return buffer.getvalue()


def _huge() -> bytes:
    """A .npy header that declares 10**13 float64s, followed by 32 bytes."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f8", "fortran_order": False, "shape": (10**13,)})
    return buffer.getvalue() + bytes(32)


# Means a faulty client could send: none may reach the run, allocate what its header claims, or end
# the server with an exception that does not name the client.
_MALFORMED_MEANS = [
    b"",
    _npy(np.zeros(4))[:-8],                                                   # truncated
    _huge(),
    _npy(np.array([1, "a", None, 2.0], dtype=object)),                        # pickled objects
    _npy(np.array([True, False, True, True])),
    _npy(np.zeros(4, np.complex128)),
    _npz(),
]


@pytest.mark.parametrize("content, says", [
    (wire.reply_content("other", 3, 1, np.zeros(4)), "is for run 'other'"),
    (wire.reply_content("run", 2, 1, np.zeros(4)), "is for step 2, not the pending step 3"),
    (wire.reply_content("run", 3, 0, np.zeros(4)), "names partition 0, not 1"),
    (wire.reply_content("run", 3, 1), "has no 'means'"),
    (wire.reply_content("run", 3, 1, np.zeros((2, 2))), "have shape (2, 2), not (4,)"),
    (wire.reply_content("run", 3, 1, np.array([0.0, np.inf, 1, 2])), "are NaN or infinite"),
    (RecordDict({"fedpne": ConfigRecord({"run": "run", "step": 3, "partition": 1, "means": b"1234"})}),
     "are not an array of numbers"),
    (RecordDict({"fedpne": ConfigRecord({"run": "run", "step": 3, "partition": 1,
                                         "means": wire.encode(np.array(["a", "b", "c", "d"]))})}),
     "are not an array of numbers"),
    (RecordDict({"fedpne": ConfigRecord({"run": "run", "step": 3, "partition": 1, "means": 1.5})}),
     "are not an array of numbers"),
    *[(RecordDict({"fedpne": ConfigRecord({"run": "run", "step": 3, "partition": 1, "means": means})}),
       "are not an array of numbers") for means in _MALFORMED_MEANS],
])
def test_check_reply_refuses_naming_the_client(content, says):
    with pytest.raises(wire.ReplyError, match="client 1 \\(node 7\\)") as info:
        wire.check_reply(_reply(content), "run", 3, 1, 7, (4,))
    assert says in str(info.value)


def test_check_reply_refuses_a_missing_key_and_an_error():
    content = RecordDict({"fedpne": ConfigRecord({"run": "run", "partition": 1})})
    with pytest.raises(wire.ReplyError, match="lacks the key 'step'"):
        wire.check_reply(_reply(content), "run", 3, 1, 7, (4,))
    with pytest.raises(wire.ReplyError, match="replied with an error at step 3: code 2: boom"):
        wire.check_reply(_reply(error=Error(code=2, reason="boom")), "run", 3, 1, 7, (4,))
    means = wire.check_reply(_reply(wire.reply_content("run", 3, 1, np.arange(4.0))), "run", 3, 1, 7, (4,))
    assert means.tolist() == [0, 1, 2, 3]


class _LoopState:
    """A SuperNode's NodeState for the loop tests: tasks by id, and the replies each fetch returns in turn."""

    def __init__(self, *batches):
        self.batches, self.tasks, self.done = list(batches), 0, set()

    def create_task(self, **kwargs):
        self.tasks += 1
        return self.tasks

    def get_tasks(self, *, task_ids):
        return [SimpleNamespace(status=SimpleNamespace(status="finished" if t in self.done else "running"))
                for t in task_ids]

    def get_messages_legacy(self, *, is_reply):
        return self.batches.pop(0) if self.batches else []


def _loop(state):
    """Flower's SuperNode loop functions as stubs, wrapped by supernode.answer_each_message: the pull
    takes in message m<task>; the push waits for replies (three tries, then fails) and sends them all."""
    from fedpne_jax.flower import supernode
    sent: list = []

    def pull_and_store(*, receive, state, object_store):
        receive()
        state.create_task(task_type="clientapp", run_id=7)
        return 7

    def push_messages(*, send, state):
        for _ in range(3):
            replies = state.get_messages_legacy(is_reply=True)
            if replies:
                break
        else:
            raise AssertionError("waited for a reply that never came")
        for reply in replies:
            send(reply, None, 0.0)

    loop = SimpleNamespace(_pull_and_store_message=pull_and_store, _push_messages=push_messages)
    supernode.answer_each_message(loop)

    def step(message_id):
        meta = SimpleNamespace(message_id=message_id, run_id=7)
        assert loop._pull_and_store_message(receive=lambda: (SimpleNamespace(metadata=meta), None), state=state,
                                            object_store=None) == 7
        loop._push_messages(send=lambda reply, tree, timeout: sent.append(reply.metadata.reply_to_message_id),
                            state=state)
    return step, sent


def _reply_to(message_id):
    return SimpleNamespace(metadata=SimpleNamespace(reply_to_message_id=message_id))


def test_a_supernode_pushes_replies_until_the_pulled_message_is_answered():
    """A reply to a message the SuperNode gave up on (its run stopped as it came in) does not stand in
    for the next message's: the loop pushes on until that message's own reply has gone (Flower's
    own loop stops after the first reply, and the next run's hello then waited for another message)."""
    step, sent = _loop(_LoopState([_reply_to("given-up")], [], [_reply_to("m1")]))
    step("m1")
    assert sent == ["given-up", "m1"]


def test_a_supernode_goes_on_when_the_pulled_message_s_task_ends_without_a_reply():
    """The loop stops waiting once the message's task has finished with no reply stored (an executor
    stores its reply before it finishes its task), where Flower's would wait for good."""
    state = _LoopState([_reply_to("given-up")])
    step, sent = _loop(state)
    state.done.add(1)
    step("m1")
    assert sent == ["given-up"]


def test_a_message_the_supernode_gives_up_is_forgotten_with_its_task():
    """A message pulled and then given up (its run stopped as it came in: Flower's loop returns no run
    but leaves the message and the task it created) is deleted with its contents and its task is
    finished, so that no executor waits for its contents or answers it.  The run's other tasks (the
    previous message's, still pushing its output) are left alone, and so is a message whose task
    Flower has finished itself (contents that failed to arrive)."""
    from flwr.common.constant import Status, SubStatus
    from flwr.supercore.object_store.in_memory_object_store import InMemoryObjectStore
    from flwr.supernode.nodestate.in_memory_nodestate import InMemoryNodeState

    from fedpne_jax.flower import supernode

    class Store(InMemoryObjectStore):
        def __init__(self):
            super().__init__()
            self.deleted: list = []

        def delete(self, object_id):
            self.deleted.append(object_id)
            super().delete(object_id)

    class State(InMemoryNodeState):
        def __init__(self, store):
            super().__init__(store)
            self.deleted: list = []

        def delete_messages(self, *, message_ids):
            self.deleted += message_ids
            return super().delete_messages(message_ids=message_ids)
    store = Store()
    state = State(store)
    previous = state.create_task(task_type="clientapp", run_id=5, fab_hash="f")
    created: list = []

    def pull_and_store(*, receive, state, object_store):      # Flower's: the task, then the run stops
        receive()
        created.append(state.create_task(task_type="clientapp", run_id=5, fab_hash="f"))
        if flower_fails_it:
            state.finish_task(created[-1], sub_status=SubStatus.FAILED, details="contents failed to arrive")
        return None

    loop = SimpleNamespace(_pull_and_store_message=pull_and_store, _push_messages=None)
    supernode.answer_each_message(loop)
    given_up = SimpleNamespace(metadata=SimpleNamespace(message_id="m5", run_id=5))
    flower_fails_it = False
    assert loop._pull_and_store_message(receive=lambda: (given_up, None), state=state, object_store=store) is None
    assert store.deleted == state.deleted == ["m5"]
    (task,) = state.get_tasks(task_ids=[created[-1]])
    assert task.status.status == Status.FINISHED and task.status.sub_status == SubStatus.STOPPED
    assert state.get_tasks(task_ids=[previous])[0].status.status == Status.PENDING
    flower_fails_it = True
    assert loop._pull_and_store_message(receive=lambda: (given_up, None), state=state, object_store=store) is None
    assert store.deleted == state.deleted == ["m5"]
    assert state.get_tasks(task_ids=[created[-1]])[0].status.sub_status == SubStatus.FAILED


def test_the_supernode_looks_at_its_own_state_often_and_asks_the_superlink_less_when_idle(monkeypatch):
    """The SuperNode's waits (fedpne_jax.flower.supernode._Time): Flower's 0.5 s waits for a reply or
    a message's contents last LOCAL_WAIT; its 3 s idle poll lasts the node poll just after a message,
    lengthening with the time since, up to LONGEST_IDLE."""
    from fedpne_jax.flower import supernode
    clock = supernode._Time(0.1)
    now, slept = [1000.0], []
    monkeypatch.setattr(supernode, "_time", SimpleNamespace(time=lambda: now[0], sleep=slept.append))
    clock.last_message = now[0]
    clock.sleep(0.5)
    clock.sleep(3.0)
    now[0] += 2.0
    clock.sleep(3.0)
    now[0] += 100.0
    clock.sleep(3.0)
    clock.sleep(0.005)
    assert slept == [supernode.LOCAL_WAIT, 0.1, 0.2, supernode.LONGEST_IDLE, 0.005]
    assert supernode.LOCAL_WAIT < 0.1 < supernode.LONGEST_IDLE


def test_node_poll_off_in_any_spelling_of_zero_and_refused_when_not_seconds():
    """FEDPNE_FLOWER_NODE_POLL: 0 in any spelling or "off" keeps Flower's waits (None), unset the
    default; a value that is not seconds is refused by name, by the SuperNode and the warm executor
    (exit status 2, before Flower starts) and by Deployment (before any process starts)."""
    from fedpne_jax.flower import supernode
    for raw in ("0", "0.0", " 0e0 ", "-0", "OFF", "off"):
        assert supernode.node_poll(raw) is None, raw
    assert supernode.node_poll("") == supernode.node_poll(" ") == supernode.DEFAULT_NODE_POLL
    assert supernode.node_poll("0.25") == 0.25 and supernode.node_poll("2") == 2.0
    for raw in ("-0.1", "nan", "inf", "fast", "0.1s"):
        with pytest.raises(ValueError, match=f"FEDPNE_FLOWER_NODE_POLL .*{raw!r}"):
            supernode.node_poll(raw)
    env = dict(os.environ, FEDPNE_FLOWER_NODE_POLL="-1")
    for module in ("fedpne_jax.flower.supernode", "fedpne_jax.flower.warm"):
        done = subprocess.run([sys.executable, "-m", module, "--runtime-api-address", "127.0.0.1:1"]
                              if module.endswith("warm") else [sys.executable, "-m", module, "--insecure"],
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "FEDPNE_FLOWER_NODE_POLL" in done.stderr, (module, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
    for bad in (-0.5, float("nan"), True, "0.1"):
        with pytest.raises(ValueError, match="node_poll"):
            local.Deployment(3, node_poll=bad)


def test_a_deployment_at_node_poll_0_gives_its_processes_off():
    with local.Deployment(3, node_poll=0, out=io.StringIO()) as d:
        assert d.env["FEDPNE_FLOWER_NODE_POLL"] == "off"
    with local.Deployment(3, node_poll=0.25, out=io.StringIO()) as d:
        assert float(d.env["FEDPNE_FLOWER_NODE_POLL"]) == 0.25


def test_message_type_and_hello_round_trip():
    content = wire.query_content("run", 0, wire.EVALUATE, 2, np.ones((3, 2), np.float32), np.array([1, 2, 3]))
    header, points, counts = wire.read_query(_reply(content))
    assert header == {"run": "run", "step": 0, "phase": "evaluate", "partition": 2}
    assert points.dtype == np.float32 and points.shape == (3, 2) and counts.tolist() == [1, 2, 3]
    # Flower moves each record, array and chunk as an object of its own, one request each: a query's
    # and a reply's content are one ConfigRecord in their RecordDict.
    reply = wire.reply_content("run", 0, 2, np.zeros(3))
    assert [len(get_all_nested_objects(c)) for c in (content, reply)] == [2, 2]


def test_the_control_client_says_what_failed_and_prints_nothing_on_standard_output(tmp_path, capsys):
    """Flower's CLI prints "Using SuperLink: ..." as its client is made, which would land in front of
    fedpne flower local --output -'s JSON; a SuperLink that is not there, or a key it cannot take, is
    an error naming it, not an HTTP traceback."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from fedpne_jax.flower import control
    with control.Control(f"127.0.0.1:{local.free_port()}") as c:
        assert capsys.readouterr().out == ""
        with pytest.raises(control.ControlError, match="could not reach the SuperLink at 127.0.0.1:.* to list"):
            c.nodes()
        key = tmp_path / "rsa.pub"
        key.write_bytes(rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH))
        with pytest.raises(ValueError, match="rsa.pub: SuperNode authentication takes an EC public key"):
            c.register(str(key))


def test_dp_clients_add_the_papers_privacy_noise_to_their_means():
    """DP-Fed-PNE (Appendix D): a client's mean of n rewards carries N(0, sigma^2 / n) noise,
    sigma^2 = 2 log(1.25 / delta) / epsilon^2, drawn by the client (here its replies' values)."""
    from fedpne_jax.flower import client, spec
    config = dict(PROBLEM, **{"dp-epsilon": 2.0, "dp-delta": 0.1})
    problem = spec.problem(config)
    sigma2 = 2 * np.log(1.25 / 0.1) / 2.0 ** 2
    assert problem.config.dp and np.isclose(problem.config.dp_sigma2, sigma2)
    K, n = 4000, 4
    points = np.full((K, 1), 0.37, np.float32)
    counts = np.full(K, n)
    clean = client.evaluate(PROBLEM, 1, 0, points[:1], counts[:1])[0]
    noisy = client.evaluate(config, 1, 0, points, counts) - clean
    assert abs(noisy.mean()) < 4 * np.sqrt(sigma2 / n / K)
    # the sample variance of K normals is within 4 of its standard errors, sqrt(2 / K) relative
    assert abs(noisy.var() / (sigma2 / n) - 1) < 4 * np.sqrt(2 / K)
    other = client.evaluate(config, 2, 0, points, counts) - client.evaluate(PROBLEM, 2, 0, points[:1], counts[:1])[0]
    assert not np.allclose(other, noisy)                               # another client: its own key
    again = client.evaluate(config, 1, 0, points, counts) - clean      # the same client and step: the same
    assert np.array_equal(again, noisy)


def test_noisy_runs_over_flower_match_fp_run_in_distribution(request, deployment, tmp_path, beside):
    """Thorough tier: with the clients' own Gaussian noise, the final regret of 20 seeds run over Flower
    side by side (one run of seeds=20: seed indices 0..19) lies within 4 standard errors of fp.run's
    mean over 500 seeds; and its seed 0, server and clients' draws alike, is the one-seed run."""
    if not request.config.getoption("--thorough"):
        pytest.skip("thorough tier (pytest --thorough): 20 seeds over Flower")
    noisy = dict(noise=NOISY)
    outcome, batch = submit(deployment, tmp_path, "noisy20", seeds=20, **noisy)
    assert outcome["ok"], outcome
    outcome, single = submit(deployment, tmp_path, "noisy1", **noisy)
    assert outcome["ok"], outcome
    for key in COMPARED:
        if key in single["per_seed"]:
            assert batch["per_seed"][key][0] == single["per_seed"][key][0], key
    # Runs whose noisy decisions coincide pull the same points (regret counts f, not the noise).
    assert len(set(batch["per_seed"]["final_regret"])) > 10
    reference = np.asarray(beside["noisy"].result()["per_seed"]["final_regret"])
    flower = np.asarray(batch["per_seed"]["final_regret"])
    se = np.sqrt(flower.var(ddof=1) / flower.size + reference.var(ddof=1) / reference.size)
    assert abs(flower.mean() - reference.mean()) < 4 * se, (flower.mean(), reference.mean(), se)


def test_fedpne_flower_local_over_tls_with_auth_is_the_same_run_and_leaves_no_process(cli_beside, reference):
    """The command a user runs, end to end: its own SuperLink and SuperNodes, over TLS with certificates
    made for the run and SuperNode authentication on, its three SuperNodes' ClientApps in one warm
    executor; every process it started is gone at its end.  It runs beside the module's other tests
    (cli_beside), so this test is the module's last."""
    proc, out, workdir, tmp_path = cli_beside
    done = finish_cli(proc, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(out.read_text())
    assert_same_run(data, reference)
    assert_wire(data, reference)
    assert os.path.exists(os.path.join(workdir, "ca.crt"))
    assert all(os.path.exists(os.path.join(workdir, f"supernode-{i}.key.pub")) for i in range(M))
    assert processes_in(workdir) == []
