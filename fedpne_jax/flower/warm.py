"""``python -m fedpne_jax.flower.warm --runtime-api-address HOST:PORT``: one long-lived process that
runs a SuperNode's ClientApp tasks, in place of Flower's per-task ``flwr-clientapp`` processes
(with ``--server``: a SuperLink's ServerApp tasks, in place of its per-run ``flwr-serverapp``).

It takes the tasks from the Runtime API as Flower's executor does and runs each in this process, so
imports and compiled programs stay; the app code, messages, SuperNode and SuperLink are Flower's
own.  It uses Flower 1.42's runtime functions (``flwr.supernode.runtime.run_clientapp``), which are
not public API: ``fedpne flower local --isolation subprocess`` runs Flower's stock executor instead.

What it does step by step: docs/guides/flower.md, section "Inside the apps".
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
import threading
import time
import traceback

# The ServerApp's module at start-up, so that JAX, the package and the app are imported once per
# executor, not per run (a ClientApp executor imports the same JAX and package for its app).
from fedpne_jax.core.processes import exit_when_gone
from fedpne_jax.flower import server  # noqa: F401
from fedpne_jax.flower.supernode import cap_pulls, node_poll, quicker_pulls


def _refused() -> None:
    """A task's last words refused: a run stopped (``flwr stop``, a timeout) revokes its task's token,
    and the SuperLink or SuperNode then answers 401.  The task is over either way; the executor goes
    on to the next one, where Flower's one-task process would simply have exited."""
    print("fedpne: the task's output was refused (its run was stopped?):", file=sys.stderr)
    traceback.print_exc()


def idle_wait(poll: float, last: float, longest: float = 0.25) -> float:
    """Seconds to wait before asking again: ``poll`` just after a task (a run's next message comes
    soon), up to ``longest`` after seconds without one: each ask costs CPU in this process and in
    the SuperNode's, which an idle deployment of many nodes on few cores would otherwise spend."""
    return min(longest, poll + 0.05 * (time.time() - last))


# A task's requests give up on a SuperNode that has gone after this long (Flower retries forever, which
# would hold up a task's executor for good); the executor's own asks for tasks keep trying, at most
# ASK_RETRY_SECONDS apart, so a restarted SuperNode is served at once.
TASK_RETRY_SECONDS = 60.0
ASK_RETRY_SECONDS = 1
# A SuperNode offers a task before it has fetched the message's contents from the SuperLink, so a
# pull waits for that fetch; a stopped run's contents never come, and Flower would retry for two
# hours (PULL_MAX_TIME), holding up every later task of that SuperNode.
TASK_PULL_SECONDS = 10.0


def _task_retries(invoker=None, max_time: float | None = TASK_RETRY_SECONDS):
    """Flower's retry policy for a task's requests, except on 401 and bounded by ``max_time``.  A
    stopped run's task token is revoked, and Flower's policy then sends SIGINT to its own process,
    which ends a one-task flwr-clientapp or flwr-serverapp; here that would end the executor and every
    later run's tasks.  A 401 ends the task instead (RunNotRunningException, as a 403 does)."""
    import httpx
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.run import RunNotRunningException
    invoker = invoker or make_simple_http_retry_invoker()
    invoker.max_time = max_time
    flower_giveup = invoker.should_giveup

    def should_giveup(exc: Exception) -> bool:
        if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code == httpx.codes.UNAUTHORIZED:
            raise RunNotRunningException
        return bool(flower_giveup(exc)) if flower_giveup is not None else False
    invoker.should_giveup = should_giveup
    return invoker


def _connect(address: str, insecure: bool, certificates, interceptors, retries=None):
    """A client of the Runtime API at ``address``, as flwr-clientapp and flwr-serverapp make theirs."""
    from flwr.supercore.runtime import RuntimeHttpClient
    return RuntimeHttpClient.from_server_address(server_address=address, insecure=insecure,
                                                 root_certificates=certificates, interceptors=interceptors,
                                                 retry_invoker=retries or _task_retries())


def _heartbeat(client):
    """A task's heartbeat, as Flower's (make_task_heartbeat_fn_http) but without its SIGINT to this
    process when the run has ended: the heartbeat just stops, and the task ends at its next request
    (RunNotRunningException)."""
    import httpx
    from flwr.proto.runtime_pb2 import SendTaskHeartbeatRequest  # pylint: disable=E0611
    from flwr.supercore.heartbeat import HeartbeatSender
    from flwr.supercore.run import RunNotRunningException
    request = SendTaskHeartbeatRequest()
    sender: list = []

    def beat() -> bool:
        try:
            ok = client.SendTaskHeartbeat(request).success
        except httpx.TransportError:
            return False                # retried by the sender
        except httpx.HTTPStatusError as err:
            if err.response.status_code in (httpx.codes.SERVICE_UNAVAILABLE, httpx.codes.GATEWAY_TIMEOUT):
                return False
            ok = False
        except RunNotRunningException:
            ok = False
        if not ok:
            sender[0]._stop_event.set()  # the run is over: no more heartbeats
        return True
    sender.append(HeartbeatSender(beat))
    return sender[0]


def _stop(heartbeat) -> None:
    """Stop a task's heartbeat (it may have stopped itself: the run ended)."""
    with contextlib.suppress(RuntimeError):
        heartbeat.stop()


def _tasks(address: str, insecure: bool, certificates, poll: float, task_type: str):
    """The tokens of the tasks of ``task_type`` the Runtime API hands this executor, one at a time,
    asking again after :func:`idle_wait` while it has none."""
    from flwr.proto.runtime_pb2 import AcquireTaskRequest  # pylint: disable=E0611
    from flwr.supercore.interceptors import RuntimeVersionHttpInterceptor
    from flwr.supercore.retry import exponential
    asks = _task_retries(max_time=None)
    asks.wait_gen_factory = lambda: exponential(base_delay=0.1, max_delay=ASK_RETRY_SECONDS)
    executor = _connect(address, insecure, certificates, [RuntimeVersionHttpInterceptor(component_name="SuperExec")],
                        asks)
    last = time.time()
    while True:
        res = executor.AcquireTask(AcquireTaskRequest(supported_task_types=[task_type]))
        if res.HasField("task") and res.token:
            last = time.time()
            yield res.token
        else:
            time.sleep(idle_wait(poll, last))


def serve(address: str, insecure: bool, root_certificates: str | None, poll: float,
          lock: threading.Lock | None = None) -> None:
    """Run the ClientApp tasks of the SuperNode whose Runtime API is ``address``, one at a time; with
    ``lock``, one at a time across every SuperNode this process serves (serve_several)."""
    from flwr.clientapp.utils import get_load_client_app_fn
    from flwr.supercore.constant import TaskType
    from flwr.supercore.tls import validate_and_resolve_root_certificates

    quicker_pulls()
    # A task's pull of its message gives up after TASK_PULL_SECONDS, and the task then fails as any
    # other; the waits between tries are capped at 1 s, or one of Flower's (up to 10 s) could come
    # after the time is up.
    cap_pulls(max_time=TASK_PULL_SECONDS, backoff_cap=1.0)
    certificates = validate_and_resolve_root_certificates(root_certificates, insecure)
    installed: dict = {}
    load = get_load_client_app_fn(default_app_ref="", app_path=None, multi_app=True)
    lock = lock or threading.Lock()
    for token in _tasks(address, insecure, certificates, poll, TaskType.CLIENT_APP.value):
        _client_task(address, insecure, certificates, token, installed, load, lock)


def _client_task(address: str, insecure: bool, certificates, token: str, installed: dict, load,
                 lock: threading.Lock) -> None:
    """One ClientApp task, as flwr-clientapp runs it: its message pulled, the app (installed once
    per FAB) called under ``lock``, the reply and the task's status pushed.  The requests are made
    outside the lock, so a SuperNode that has gone holds up only its own task."""
    from flwr.app import Error, Message
    from flwr.cli.install import install_from_fab
    from flwr.common.constant import ErrorCode, SubStatus
    from flwr.supercore.interceptors import RuntimeTokenHttpInterceptor, RuntimeVersionHttpInterceptor
    from flwr.supercore.run import RunNotRunningException
    from flwr.supernode.runtime.run_clientapp import pull_task_input, push_message, push_task_output

    interceptors = [RuntimeVersionHttpInterceptor(component_name="flwr-clientapp"), RuntimeTokenHttpInterceptor(token)]
    client = _connect(address, insecure, certificates, interceptors)
    heartbeat = _heartbeat(client)
    heartbeat.start()
    message = context = reply = None
    status, details = SubStatus.FAILED, "ClientApp task failed"
    try:
        message, context, run, fab = pull_task_input(client)
        with lock:
            if fab.hash_str not in installed:
                install_from_fab(fab.content, skip_prompt=True)
                installed[fab.hash_str] = load(run.fab_id, run.fab_version, fab.hash_str)
            reply = installed[fab.hash_str](message=message, context=context)
        status, details = SubStatus.COMPLETED, ""
    except RunNotRunningException:     # its run was stopped: no one is waiting for a reply
        status, details, reply = SubStatus.STOPPED, "the run was stopped", None
    except Exception as ex:  # the ClientApp's error goes back to the server, as flwr-clientapp sends it
        traceback.print_exc()
        details = f"{type(ex)}:<'{ex}'>"
        if message is not None:
            reply = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=details), reply_to=message)
    finally:
        try:
            if reply is not None and context is not None:
                push_message(client, reply, context)
            push_task_output(client=client, context=context, sub_status=status, details=details)
        except (Exception, RunNotRunningException):  # noqa: BLE001
            _refused()
        finally:
            _stop(heartbeat)
            client.close()


def serve_server(address: str, insecure: bool, root_certificates: str | None, poll: float) -> None:
    from pathlib import Path
    from queue import Queue

    from flwr.app import RecordDict
    from flwr.cli.config_utils import get_fab_metadata
    from flwr.cli.install import install_from_fab
    from flwr.common.config import get_fused_config_from_dir, get_project_config, get_project_dir
    from flwr.common.constant import SubStatus
    from flwr.common.serde import context_from_proto, context_to_proto, fab_from_proto, run_from_proto
    from flwr.proto.runtime_pb2 import PullTaskInputRequest, PushTaskOutputRequest
    from flwr.server.run_serverapp import run as run_serverapp
    from flwr.supercore.constant import TaskType
    from flwr.supercore.logger import flush_logs, mirror_output_to_queue, start_log_uploader, stop_log_uploader
    from flwr.supercore.run import RunNotRunningException
    from flwr.supercore.task_identity import TaskIdentity
    from flwr.supercore.tls import validate_and_resolve_root_certificates
    from flwr.superlink.grid import HttpGrid

    quicker_pulls()
    certificates = validate_and_resolve_root_certificates(root_certificates, insecure)
    log_queue: Queue = Queue()
    mirror_output_to_queue(log_queue)
    installed: set = set()
    for token in _tasks(address, insecure, certificates, poll, TaskType.SERVER_APP.value):
        while not log_queue.empty():        # what was printed between runs belongs to none
            log_queue.get_nowait()
        grid = HttpGrid(runtime_api_address=address, insecure=insecure, root_certificates=certificates,
                        token=token)
        grid._retry_invoker = _task_retries(grid._retry_invoker)
        heartbeat = _heartbeat(grid._runtime_client)
        heartbeat.start()
        context, uploader = None, None
        status, details = SubStatus.FAILED, "ServerApp task failed"
        try:
            task = grid._runtime_client.PullTaskInput(PullTaskInputRequest())
            TaskIdentity.task_id, TaskIdentity.run_id = task.task_id, task.run.run_id
            TaskIdentity.node_id = task.context.node_id
            context, run, fab = context_from_proto(task.context), run_from_proto(task.run), fab_from_proto(task.fab)
            grid.set_run(run)
            uploader = start_log_uploader(log_queue=log_queue, node_id=0, run_id=run.run_id,
                                          client=grid._runtime_client)
            if fab.hash_str not in installed:
                install_from_fab(fab.content, skip_prompt=True)
                installed.add(fab.hash_str)
            app_path = str(get_project_dir(*get_fab_metadata(fab.content), fab.hash_str))
            attribute = get_project_config(app_path)["tool"]["flwr"]["app"]["components"]["serverapp"]
            context.run_config = get_fused_config_from_dir(Path(app_path), run.override_config)
            context = run_serverapp(grid=grid, server_app_dir=app_path, server_app_attr=attribute, context=context)
            context.state = RecordDict()
            status, details = SubStatus.COMPLETED, ""
        except RunNotRunningException:     # its run was stopped (flwr stop, a timeout)
            status, details = SubStatus.STOPPED, "the run was stopped"
        except Exception as ex:  # as flwr-serverapp: the run fails with the error, the process goes on
            traceback.print_exc()
            details = f"ServerApp failed with exception: {ex}"
        finally:
            try:
                if uploader is not None:
                    flush_logs(log_queue, timeout=0.5)
                grid._runtime_client.PushTaskOutput(PushTaskOutputRequest(
                    context=context_to_proto(context) if context else None, sub_status=status, details=details))
            except (Exception, RunNotRunningException):  # noqa: BLE001
                _refused()
            finally:
                if uploader is not None:
                    stop_log_uploader(log_queue, uploader)
                _stop(heartbeat)
                grid.close()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m fedpne_jax.flower.warm", description=__doc__.split("\n\n")[0])
    p.add_argument("--runtime-api-address", required=True, action="append",
                   help="the SuperNode's Runtime API, HOST:PORT; given several times, this process serves "
                        "several SuperNodes' ClientApp tasks (one at a time)")
    p.add_argument("--insecure", action="store_true", help="the Runtime API without TLS (the SuperNode's default)")
    p.add_argument("--root-certificates", default=None, help="CA of the Runtime API's certificate (with TLS)")
    p.add_argument("--server", action="store_true",
                   help="run a SuperLink's ServerApp tasks (its Runtime API: --runtime-api-address)")
    p.add_argument("--parent-pid", type=int, action="append", default=None,
                   help="exit when this process exits (given several times: when all of them have)")
    p.add_argument("--poll", type=float, default=0.02, help="seconds between two asks for a task")
    args = p.parse_args(argv)
    try:
        node_poll()      # read by every task's quicker_pulls: refused once, here, not in a loop of tasks
    except ValueError as err:
        p.error(str(err))
    if args.parent_pid is not None:
        exit_when_gone(args.parent_pid, 0, 0.2)   # one of several SuperNodes stopped: serve the others
    if isinstance(sys.stdout, io.TextIOWrapper):     # not when a caller has replaced it
        sys.stdout.reconfigure(line_buffering=True)
    addresses = args.runtime_api_address
    if args.server and len(addresses) > 1:
        p.error("--server takes one --runtime-api-address (the SuperLink's)")
    if args.server:
        serve_server(addresses[0], args.insecure, args.root_certificates, args.poll)
    elif len(addresses) == 1:
        serve(addresses[0], args.insecure, args.root_certificates, args.poll)
    else:
        serve_several(addresses, args.insecure, args.root_certificates, args.poll)


def serve_several(addresses: list, insecure: bool, root_certificates: str | None, poll: float) -> None:
    """Several SuperNodes' ClientApp tasks in one process: one thread asks each SuperNode, and a lock
    runs one app call at a time, so the process's memory (Flower, JAX, the app: about 300 MB) is paid
    once for all of them.  A stopped SuperNode holds up only its own thread, which waits for it to
    come back on its address."""
    lock = threading.Lock()

    def keep_serving(address: str) -> None:
        while True:                  # a thread that failed would leave its SuperNode unserved for good
            try:
                serve(address, insecure, root_certificates, poll, lock)
            except Exception:  # noqa: BLE001
                print(f"fedpne: the executor's thread for {address} failed; it starts again:", file=sys.stderr)
                traceback.print_exc()
                time.sleep(ASK_RETRY_SECONDS)
    threads = [threading.Thread(target=keep_serving, args=(a,), daemon=True, name=f"clientapp-{a}")
               for a in addresses]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
