"""``python -m fedpne_jax.flower.warm --runtime-api-address HOST:PORT``: one long-lived process that
runs a SuperNode's ClientApp tasks, in place of Flower's per-task ``flwr-clientapp`` processes.

With ``flower-supernode --isolation process`` a SuperNode starts no executor of its own: something
else takes its tasks from its Runtime API.  Flower's ``flower-superexec`` starts a new Python process
per task (per message), which imports Flower, JAX and this package and compiles the objective again:
seconds of CPU per client per step, most of a Fed-PNE step.  This executor takes the tasks the same
way (``AcquireTask``) and runs each as ``flwr-clientapp`` does (pull the message, context, run and
FAB; load the app; call it; push the reply and the task's status) but in this process, so imports
and compiled programs stay.  The app code, messages, SuperNode and SuperLink are Flower's own.

It uses Flower 1.42's runtime functions (``flwr.supernode.runtime.run_clientapp``), which are not
public API: ``fedpne flower local --isolation subprocess`` runs Flower's stock executor instead.
"""
from __future__ import annotations

import argparse
import io
import os
import sys
import threading
import time
import traceback


def _parent_watch(parent: int) -> None:
    def watch():
        while True:
            time.sleep(0.2)
            try:
                os.kill(parent, 0)
            except ProcessLookupError:
                os._exit(0)
    threading.Thread(target=watch, daemon=True).start()


def serve(address: str, insecure: bool, root_certificates: str | None, poll: float) -> None:
    from flwr.app import Error, Message
    from flwr.cli.install import install_from_fab
    from flwr.clientapp.utils import get_load_client_app_fn
    from flwr.common.constant import ErrorCode, SubStatus
    from flwr.proto.runtime_pb2 import AcquireTaskRequest  # pylint: disable=E0611
    from flwr.supercore.constant import TaskType
    from flwr.supercore.heartbeat import HeartbeatSender, make_task_heartbeat_fn_http
    from flwr.supercore.interceptors import RuntimeTokenHttpInterceptor, RuntimeVersionHttpInterceptor
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient
    from flwr.supercore.tls import validate_and_resolve_root_certificates
    from flwr.supernode.runtime.run_clientapp import pull_task_input, push_message, push_task_output

    certificates = validate_and_resolve_root_certificates(root_certificates, insecure)

    def connect(interceptors):
        return RuntimeHttpClient.from_server_address(server_address=address, insecure=insecure,
                                                     root_certificates=certificates, interceptors=interceptors,
                                                     retry_invoker=make_simple_http_retry_invoker())

    executor = connect([RuntimeVersionHttpInterceptor(component_name="SuperExec")])
    installed: dict = {}
    load = get_load_client_app_fn(default_app_ref="", app_path=None, multi_app=True)
    while True:
        res = executor.AcquireTask(AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP.value]))
        if not (res.HasField("task") and res.token):
            time.sleep(poll)
            continue
        client = connect([RuntimeVersionHttpInterceptor(component_name="flwr-clientapp"),
                          RuntimeTokenHttpInterceptor(res.token)])
        heartbeat = HeartbeatSender(make_task_heartbeat_fn_http(client))
        heartbeat.start()
        message = context = reply = None
        status, details = SubStatus.FAILED, "ClientApp task failed"
        try:
            message, context, run, fab = pull_task_input(client)
            if fab.hash_str not in installed:
                install_from_fab(fab.content, skip_prompt=True)
                installed[fab.hash_str] = load(run.fab_id, run.fab_version, fab.hash_str)
            reply = installed[fab.hash_str](message=message, context=context)
            status, details = SubStatus.COMPLETED, ""
        except Exception as ex:  # the ClientApp's error goes back to the server, as flwr-clientapp sends it
            traceback.print_exc()
            details = f"{type(ex)}:<'{ex}'>"
            if message is not None:
                reply = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=details), reply_to=message)
        finally:
            try:
                if reply is not None and context is not None:
                    push_message(client, reply, context)
            finally:
                push_task_output(client=client, context=context, sub_status=status, details=details)
                heartbeat.stop()
                client.close()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m fedpne_jax.flower.warm", description=__doc__.split("\n\n")[0])
    p.add_argument("--runtime-api-address", required=True, help="the SuperNode's Runtime API, HOST:PORT")
    p.add_argument("--insecure", action="store_true", help="the Runtime API without TLS (the SuperNode's default)")
    p.add_argument("--root-certificates", default=None, help="CA of the Runtime API's certificate (with TLS)")
    p.add_argument("--parent-pid", type=int, default=None, help="exit when this process exits")
    p.add_argument("--poll", type=float, default=0.02, help="seconds between two asks for a task")
    args = p.parse_args(argv)
    if args.parent_pid is not None:
        _parent_watch(args.parent_pid)
    if isinstance(sys.stdout, io.TextIOWrapper):     # not when a caller has replaced it
        sys.stdout.reconfigure(line_buffering=True)
    serve(args.runtime_api_address, args.insecure, args.root_certificates, args.poll)


if __name__ == "__main__":
    main()
