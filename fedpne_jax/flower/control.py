"""The SuperLink's Control API, called from this process: what ``flwr run --stream``, ``flwr stop``,
``flwr supernode register`` and ``flwr supernode list`` do, without starting a CLI process for each.

Each of those commands is a new Python process that imports Flower's CLI before it sends one request,
and a local run is a few short steps.  :class:`Control` sends the same requests through Flower's own
Control API client (its HTTP client, interceptors and protobuf messages), with no account
authentication, as a deployment of :mod:`fedpne_jax.flower.local` has none.  Flower is imported when
a :class:`Control` is made, as the package imports no Flower module until a run needs it.  A user's
own SuperLink is driven with the ``flwr`` commands themselves; the times: docs/flower-results.md.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import queue
import threading
import time
from pathlib import Path
from typing import Callable, Optional


class RunTimedOut(Exception):
    """A run outlived the seconds it was given; it has been stopped."""


class ControlError(RuntimeError):
    """The SuperLink refused a request, or could not be reached; the message says which and why."""


class Control:
    """A Control API client of the SuperLink at ``address`` (TLS when ``root_certificates`` names a CA file)."""

    def __init__(self, address: str, root_certificates: Optional[str] = None):
        from flwr.cli.auth_plugin.noop_auth_plugin import NoOpCliAuthPlugin
        from flwr.cli.typing import SuperLinkConnection
        from flwr.cli.utils import init_http_client_from_connection
        self.address = address
        connection = SuperLinkConnection(name="fedpne-local", address=address, root_certificates=root_certificates,
                                         insecure=root_certificates is None)
        # Flower's CLI prints "Using SuperLink: ..." on standard output here, which is the result's
        # JSON for fedpne flower local --output -.
        with contextlib.redirect_stdout(io.StringIO()):
            self.client = init_http_client_from_connection(connection, auth_plugin=NoOpCliAuthPlugin())

    def _call(self, what: str, request):
        """One request; a refusal or a failed connection is a ControlError saying what and why (Flower's
        own code and message where it gave one), not an HTTP traceback."""
        import httpx
        from flwr.supercore.error.base import FlowerError
        try:
            return request()
        except httpx.HTTPStatusError as err:
            reason = FlowerError.from_json(err.response.text)
            why = f"[code {reason.code}] {reason.message}" if reason is not None else \
                f"HTTP {err.response.status_code}: {err.response.text[:300]}"
            raise ControlError(f"the SuperLink at {self.address} refused to {what}: {why}") from None
        except httpx.TransportError as err:
            raise ControlError(f"could not reach the SuperLink at {self.address} to {what}: {err}") from None

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Control:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start_run(self, app: str, num_supernodes: Optional[int] = None) -> int:
        """Submit the Flower app in folder ``app`` (built into a FAB as ``flwr run`` builds it); with
        ``num_supernodes``, to a SuperLink's simulation engine.  Returns the run id."""
        from flwr.cli.build import build_fab_from_disk
        from flwr.common.serde import fab_to_proto, user_config_to_proto
        from flwr.proto.control_pb2 import StartRunRequest  # pylint: disable=E0611
        from flwr.proto.federation_config_pb2 import SimulationConfig  # pylint: disable=E0611
        from flwr.supercore.fab import Fab
        fab_bytes = build_fab_from_disk(Path(app))
        fab = Fab(hashlib.sha256(fab_bytes).hexdigest(), fab_bytes, {})
        request = StartRunRequest(fab=fab_to_proto(fab), override_config=user_config_to_proto({}))
        if num_supernodes is not None:
            request.override_federation_config.CopyFrom(SimulationConfig(num_supernodes=num_supernodes))
        response = self._call("start the run", lambda: self.client.StartRun(request))
        if not response.HasField("run_id"):
            raise RuntimeError(f"the SuperLink did not start the run{': ' + response.note if response.note else ''}")
        return int(response.run_id)

    def stream(self, run_id: int, write: Callable[[str], None], timeout: Optional[float] = None,
               interrupted: Optional[threading.Event] = None) -> None:
        """Pass the run's log to ``write`` until the run ends.  The stream is read by a thread of its
        own, so that a Ctrl-C reaches this one at once, and ``interrupted`` being set raises
        KeyboardInterrupt within 0.2 s; after ``timeout`` seconds the run is stopped and
        :class:`RunTimedOut` raised."""
        from flwr.proto.control_pb2 import StreamLogsRequest  # pylint: disable=E0611
        lines: queue.Queue = queue.Queue()
        end = object()

        def pump() -> None:
            for response in self.client.StreamLogs(StreamLogsRequest(run_id=run_id, after_timestamp=0.0)):
                lines.put(response.log_output)

        def read():
            try:
                self._call(f"stream the log of run {run_id}", pump)
                lines.put(end)
            except BaseException as error:  # noqa: BLE001 -- handed to the caller's thread
                lines.put(error)

        threading.Thread(target=read, daemon=True, name=f"flower-log-{run_id}").start()
        deadline = None if timeout is None else time.monotonic() + timeout
        stopping = None
        while True:
            try:
                item = lines.get(timeout=0.2)
            except queue.Empty:
                item = None
            if interrupted is not None and interrupted.is_set():
                raise KeyboardInterrupt
            if item is end:
                return
            if isinstance(item, BaseException):
                raise item
            if item is not None:
                write(item)
            if deadline is None or time.monotonic() <= deadline:
                continue
            if stopping is None:
                try:
                    stopped = self.stop_run(run_id)
                except ControlError:
                    stopped = False
                if stopped:
                    raise RunTimedOut(f"run {run_id} took more than {timeout:g} s and was stopped")
                # Not stopped: it had just finished (the end of its log is on the way; the SuperLink
                # checks every 0.5 s), or the SuperLink does not answer.
                stopping = time.monotonic()
            elif time.monotonic() - stopping > 2.0:
                raise RunTimedOut(f"run {run_id} took more than {timeout:g} s; stopping it failed")

    def stop_run(self, run_id: int, wait: Optional[float] = None) -> bool:
        """Stop a run (``flwr stop``).  ``wait``: give up waiting for the answer after this many
        seconds (a SuperLink that does not answer is stopped anyway by the caller)."""
        from flwr.proto.control_pb2 import StopRunRequest  # pylint: disable=E0611
        if wait is None:
            return bool(self._call(f"stop run {run_id}",
                                   lambda: self.client.StopRun(StopRunRequest(run_id=run_id))).success)
        answer: list = []
        asker = threading.Thread(target=lambda: answer.append(self.stop_run(run_id)), daemon=True)
        asker.start()
        asker.join(wait)
        return bool(answer and answer[0])

    def register(self, public_key: str) -> int:
        """Register a SuperNode's public key (an OpenSSH file of an EC key, in the form that
        ``flwr supernode register`` sends); returns its node id."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from flwr.proto.control_pb2 import RegisterNodeRequest  # pylint: disable=E0611
        from flwr.supercore.primitives.asymmetric import public_key_to_bytes
        with open(public_key, "rb") as fh:
            key = serialization.load_ssh_public_key(fh.read())
        if not isinstance(key, ec.EllipticCurvePublicKey):
            raise ValueError(f"{public_key}: SuperNode authentication takes an EC public key, not {type(key).__name__}")
        node_id = self._call(f"register the SuperNode key {public_key}", lambda: self.client.RegisterNode(
            RegisterNodeRequest(public_key=public_key_to_bytes(key)))).node_id
        if not node_id:
            raise RuntimeError(f"the SuperLink did not register the SuperNode key {public_key}")
        return int(node_id)

    def nodes(self) -> list:
        """[{"node_id", "status"}] of the SuperLink's SuperNodes, in the order they registered."""
        from flwr.proto.control_pb2 import ListNodesRequest  # pylint: disable=E0611
        listed = self._call("list the SuperNodes", lambda: self.client.ListNodes(ListNodesRequest()))
        info = sorted(listed.nodes_info, key=lambda n: n.registered_at)
        return [{"node_id": int(n.node_id), "status": n.status} for n in info]
