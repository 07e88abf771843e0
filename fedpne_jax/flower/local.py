"""``fedpne flower local``: a SuperLink and N SuperNodes on this machine, the run submitted as
``flwr run`` submits it, and every process stopped afterwards.

:class:`Deployment` starts ``flower-superlink`` and N SuperNodes (``fedpne_jax/flower/supernode.py``)
as subprocesses on free localhost ports, writes a Flower app (:mod:`fedpne_jax.flower.server` and
:mod:`fedpne_jax.flower.client`) and a Flower configuration (``FLWR_HOME``, for ``flwr`` commands
typed beside it), submits the app and streams its log through the SuperLink's Control API from
this process (:mod:`fedpne_jax.flower.control`, what ``flwr run APP fedpne-local --stream`` sends),
and on leaving its ``with`` block stops every process it started and their children, by process
id.  ``tls=True`` runs every connection over TLS, ``auth=True`` admits only registered SuperNodes.

In full: docs/guides/flower.md, sections "One machine: fedpne flower local" and "Inside the apps".
"""
from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional

from fedpne_jax.core.processes import alive, descendants, stop_processes
from fedpne_jax.flower import control

CONNECTION = "fedpne-local"
GRACE = 5.0
# fedpne_jax/flower/supernode.py run as a script: importing it as a module would import the package
# (JAX and every algorithm, 170 MB more per SuperNode) for nothing.
SUPERNODE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "supernode.py")
RUN_FILE = "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
# warm: the SuperLink and each SuperNode in Flower's process isolation, their ServerApp and ClientApp
# tasks run by long-lived executors (fedpne_jax.flower.warm); subprocess: Flower's stock executors,
# a new process per run (ServerApp) and per message (ClientApp).
ISOLATIONS = ("warm", "subprocess")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def make_certificates(folder: str) -> dict:
    """A CA and a server certificate for 127.0.0.1 and localhost: {ca, cert, key} paths."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(days=1), now + datetime.timedelta(days=30)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fedpne-jax local CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    paths = {"ca": os.path.join(folder, "ca.crt"), "cert": os.path.join(folder, "server.pem"),
             "key": os.path.join(folder, "server.key")}
    with open(paths["ca"], "wb") as fh:
        fh.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(paths["cert"], "wb") as fh:
        fh.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(paths["key"], "wb") as fh:
        fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))
    return paths


def make_node_key(folder: str, name: str) -> tuple[str, str]:
    """An EC P-384 key pair in OpenSSH format, as SuperNode authentication takes: (private, public) paths."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP384R1())
    private, public = os.path.join(folder, f"{name}.key"), os.path.join(folder, f"{name}.key.pub")
    with open(private, "wb") as fh:
        fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                   serialization.NoEncryption()))
    os.chmod(private, 0o600)
    with open(public, "wb") as fh:
        fh.write(key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH))
    return private, public


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))


def write_app(folder: str, run_config: dict, name: str = "fedpne-flower") -> str:
    """A Flower app folder whose components are this package's and whose run config is ``run_config``."""
    os.makedirs(folder, exist_ok=True)
    lines = ["[build-system]", 'requires = ["hatchling"]', 'build-backend = "hatchling.build"', "",
             "[project]", f'name = "{name}"', 'version = "1.0.0"',
             'description = "Fed-PNE with real clients (fedpne-jax)"', 'license = {file = "LICENSE"}',
             'dependencies = ["fedpne-jax[flower]"]', "",
             "[tool.flwr.app]", 'publisher = "fedpne-jax"', "", "[tool.flwr.app.components]",
             'serverapp = "fedpne_jax.flower.server:app"', 'clientapp = "fedpne_jax.flower.client:app"', "",
             "[tool.flwr.app.config]"]
    lines += [f'{json.dumps(k)} = {_toml_value(v)}' for k, v in run_config.items()]
    with open(os.path.join(folder, "pyproject.toml"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(os.path.join(folder, "LICENSE"), "w") as fh:
        fh.write("MIT (the fedpne-jax package's licence); this folder only names its Flower apps.\n")
    return folder


class Deployment:
    """A SuperLink and ``clients`` SuperNodes on localhost (a context manager that stops them)."""

    def __init__(self, clients: int, tls: bool = False, workdir: Optional[str] = None, node_poll: float = 0.1,
                 exec_poll: float = 0.05, out=None, extra_env: Optional[dict] = None, isolation: str = "warm",
                 auth: bool = False, simulation: bool = False, nodes_per_executor: int = 1,
                 interrupted: Optional[threading.Event] = None):
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
        if isinstance(node_poll, bool) or not (isinstance(node_poll, (int, float)) and math.isfinite(node_poll) and node_poll >= 0):
            raise ValueError(f"node_poll must be a number of seconds, 0 or more (0: Flower's own waits), got {node_poll!r}")
        if int(nodes_per_executor) < 1:
            raise ValueError(f"nodes_per_executor must be at least 1, got {nodes_per_executor!r}")
        if int(nodes_per_executor) > 1 and (isolation != "warm" or simulation):
            raise ValueError("nodes_per_executor > 1 needs warm isolation (warm executors are what it shares) "
                             "and no simulation engine")
        # warm isolation: each ClientApp executor serves this many SuperNodes (fedpne_jax.flower.warm,
        # serve_several), so that many SuperNodes fit in memory: an executor holds Flower, JAX and
        # the app (about 300 MB resident), a SuperNode about 140 MB.
        self.nodes_per_executor = int(nodes_per_executor)
        # Flower's simulation engine: the SuperLink runs the ServerApp and ``clients`` simulated
        # SuperNodes' ClientApps in one process (Ray actors; flwr[simulation]); no SuperNode process.
        self.simulation = bool(simulation)
        isolation = "subprocess" if simulation else isolation
        self.clients, self.tls, self.isolation, self.auth = int(clients), bool(tls or auth), isolation, bool(auth)
        self.node_keys: dict = {}      # partition -> (private, public) key paths, with auth
        self._tmp = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="fedpne-flower-")
            workdir = self._tmp.name
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.home = os.path.join(workdir, "flwr-home")
        os.makedirs(self.home, exist_ok=True)
        self.out = out or sys.stdout
        self.processes: dict = {}      # name -> Popen
        self._control = None
        self.active_run: Optional[int] = None     # a run submitted whose log has not ended
        self.closing = False
        # Set by a caller's signal handler: submit raises KeyboardInterrupt once it is set.
        self.interrupted = interrupted or threading.Event()
        self.logs: dict = {}
        self.port: Optional[int] = None
        self.node_ports: list = []
        self.certs = make_certificates(workdir) if self.tls else None
        self.env = dict(os.environ)
        paths = [os.getcwd()] + [p for p in self.env.get("PYTHONPATH", "").split(os.pathsep) if p]
        # Nothing leaves the machine: no telemetry event, no check for a newer Flower on PyPI.
        self.env.setdefault("FLWR_TELEMETRY_ENABLED", "0")
        self.env.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")
        self.env.update({"FLWR_HOME": self.home, "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
                         "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": str(exec_poll), "FEDPNE_FLOWER_NODE_POLL": repr(float(node_poll)) if node_poll else "off",
                         "PYTHONPATH": os.pathsep.join(paths), "PYTHONUNBUFFERED": "1"})
        self.env.update(extra_env or {})

    # ------------------------------------------------------------ processes

    def _start(self, name: str, command: list, env: Optional[dict] = None) -> subprocess.Popen:
        log = open(os.path.join(self.workdir, f"{name}.log"), "ab")      # a restarted process adds to its log
        self.logs[name] = log.name
        # A session of its own: a Ctrl-C reaches this process only, which stops the others in order.
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env or self.env, cwd=self.workdir, start_new_session=True)
        log.close()
        self.processes[name] = proc
        return proc

    def tls_args(self, server: bool) -> list:
        if self.certs is None:         # not tls
            return ["--insecure"]
        if server:
            return ["--ssl-ca-certfile", self.certs["ca"], "--ssl-certfile", self.certs["cert"],
                    "--ssl-keyfile", self.certs["key"]]
        return ["--root-certificates", self.certs["ca"]]

    def start_superlink(self, extra_env: Optional[dict] = None) -> None:
        self.port = port = self.port or free_port()
        env = dict(self.env, **(extra_env or {}))
        isolation = ["--isolation", "process"] if self.isolation == "warm" else []
        isolation += ["--simulation"] if self.simulation else []
        auth = ["--enable-supernode-auth"] if self.auth else []
        self._start("superlink", ["flower-superlink", *self.tls_args(True), "--port", str(port), *isolation, *auth,
                                  "--disable-runtime-dependency-installation"], env)
        self._wait_port("superlink", port)
        self.write_connection()
        if self.isolation == "warm":
            self.start_server_executor()

    def start_server_executor(self) -> None:
        """The warm executor of the SuperLink's ServerApp tasks (its Runtime API is the SuperLink's port)."""
        self._start("executor-server", [sys.executable, "-m", "fedpne_jax.flower.warm", "--server",
                                        *self.tls_args(False), "--runtime-api-address", f"127.0.0.1:{self.port}",
                                        "--parent-pid", str(self.processes["superlink"].pid), "--poll", "0.05"])

    def start_supernode(self, i: int) -> None:
        while len(self.node_ports) <= i:
            self.node_ports.append(free_port())
        isolation = ["--isolation", "process"] if self.isolation == "warm" else []
        if self.auth:
            isolation += ["--auth-supernode-private-key", self.node_key(i)[0]]
        node = self._start(f"supernode-{i}", [sys.executable, "-c", RUN_FILE, SUPERNODE,
                                              *self.tls_args(False), "--superlink", f"127.0.0.1:{self.port}",
                                              "--port", str(self.node_ports[i]), *isolation,
                                              "--node-config", f"partition-id={i} num-partitions={self.clients}"])
        if self.isolation != "warm":
            return
        if self.nodes_per_executor == 1:
            # Started as the SuperNode's child would be: stopped with it (stop, close) and exits when it does.
            self._start(f"executor-{i}", [sys.executable, "-m", "fedpne_jax.flower.warm", "--insecure",
                                          "--runtime-api-address", f"127.0.0.1:{self.node_ports[i]}",
                                          "--parent-pid", str(node.pid)])
            return
        # A group's executor starts with the group's last SuperNode, and serves a member restarted
        # later on its address; it exits once all of its SuperNodes have.
        first = i - i % self.nodes_per_executor
        group = range(first, min(self.clients, first + self.nodes_per_executor))
        name = f"executor-group-{group[0]}"
        running = name in self.processes and self.processes[name].poll() is None
        others = [self.processes.get(f"supernode-{j}") for j in group if j != i]
        if running and not any(node is not None and node.poll() is None for node in others):
            # Every other SuperNode of the group is stopped too: the executor is exiting (it watches
            # its SuperNodes' processes) and could do so after this one has started, leaving it
            # unserved, so it is stopped now and a new one started.
            self.stop(name)
            running = False
        if running or not all(f"supernode-{j}" in self.processes for j in group):
            return
        command = [sys.executable, "-m", "fedpne_jax.flower.warm", "--insecure"]
        for j in group:
            command += ["--runtime-api-address", f"127.0.0.1:{self.node_ports[j]}",
                        "--parent-pid", str(self.processes[f"supernode-{j}"].pid)]
        self._start(name, command)

    def node_key(self, i: int) -> tuple:
        if i not in self.node_keys:
            self.node_keys[i] = make_node_key(self.workdir, f"supernode-{i}")
        return self.node_keys[i]

    def register(self, i: int) -> None:
        """Register SuperNode ``i``'s public key with the SuperLink (as ``flwr supernode register`` does)."""
        self.control.register(self.node_key(i)[1])

    def start(self) -> Deployment:
        self.start_superlink()
        for i in range(0 if self.simulation else self.clients):
            if self.auth:
                self.register(i)
            self.start_supernode(i)
        return self

    def _wait_port(self, name: str, port: int, timeout: float = 120.0) -> None:
        deadline = time.time() + timeout
        proc = self.processes[name]
        while not port_open(port):
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with status {proc.returncode} before listening on port {port}:\n"
                                   f"{self.tail(name)}")
            if time.time() > deadline:
                raise RuntimeError(f"{name} did not listen on port {port} within {timeout:g} s:\n{self.tail(name)}")
            time.sleep(0.1)

    def write_connection(self) -> None:
        lines = ["[superlink]", f'default = "{CONNECTION}"', "", f"[superlink.{CONNECTION}]",
                 f'address = "127.0.0.1:{self.port}"']
        lines.append(f'root-certificates = "{self.certs["ca"]}"' if self.certs is not None else "insecure = true")
        with open(os.path.join(self.home, "config.toml"), "w") as fh:
            fh.write("\n".join(lines) + "\n")

    def tail(self, name: str, lines: int = 25) -> str:
        try:
            with open(self.logs[name], errors="replace") as fh:
                return "".join(fh.readlines()[-lines:])
        except (OSError, KeyError):
            return ""

    def stop(self, name: str, sig=None) -> None:
        """Stop one started process and its children (``sig``: e.g. SIGKILL at once, a crash)."""
        procs = [self.processes.pop(name)]
        if name.startswith("supernode-") and name.replace("supernode-", "executor-") in self.processes:
            procs.append(self.processes.pop(name.replace("supernode-", "executor-")))
        if sig is not None:
            for pid in descendants([p.pid for p in procs]):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        stop_processes([p.pid for p in procs], GRACE)
        for proc in procs:
            proc.wait()

    def strays(self) -> list:
        """Processes of this deployment outside the tree of the ones it started: a ServerApp or ClientApp
        process whose parent exited first is adopted by init.  Every process it starts runs in its
        working folder with its FLWR_HOME, which identifies them (and no other process)."""
        mark = f"FLWR_HOME={self.home}".encode()
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                if os.readlink(f"/proc/{name}/cwd") != os.path.realpath(self.workdir):
                    continue
                with open(f"/proc/{name}/environ", "rb") as fh:
                    if mark in fh.read().split(b"\0") and alive(int(name)):
                        found.append(int(name))
            except OSError:
                continue
        return found

    def close(self) -> None:
        self.closing = True
        pids = [p.pid for p in self.processes.values()]
        try:
            if self._control is not None:
                # A run still streaming its log (an error, a Ctrl-C) is stopped first: the SuperLink
                # holds its log stream open, and would otherwise take the whole grace period to exit.
                if self.active_run is not None:
                    with contextlib.suppress(Exception):
                        self._control.stop_run(self.active_run, wait=2.0)
                self._control.close()
            stop_processes(pids, GRACE)
            deadline = time.time() + 3 * GRACE
            while (left := self.strays()) and time.time() < deadline:
                stop_processes(left, 1.0)
                time.sleep(0.1)
        finally:
            for proc in self.processes.values():
                with contextlib.suppress(Exception):
                    proc.wait(timeout=5)
            self.processes.clear()
            if self._tmp is not None:
                self._tmp.cleanup()

    def __enter__(self) -> Deployment:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ runs

    def submit(self, run_config: dict, stream: bool = True, timeout: Optional[float] = None,
               on_line=None) -> int:
        """Submit an app with ``run_config``, as ``flwr run APP --stream`` does (through the Control
        API, :mod:`fedpne_jax.flower.control`); its log is written to ``out``, and each line also
        to ``on_line``.  0 once the run has ended; 1 when it outlived ``timeout`` seconds and was
        stopped."""
        if self.interrupted.is_set():
            raise KeyboardInterrupt
        self.submitted = getattr(self, "submitted", 0) + 1
        app = write_app(os.path.join(self.workdir, f"app-{self.submitted}"), run_config)
        self._revive_server_executor()
        run_id = self.active_run = self.control.start_run(app, self.clients if self.simulation else None)
        done = threading.Event()
        watcher = None
        if "executor-server" in self.processes:
            watcher = threading.Thread(target=self._watch_server_executor, args=(run_id, done), daemon=True)
            watcher.start()

        partial = [""]          # the log comes in chunks that need not end at a line's end

        def write(text: str) -> None:
            self.out.write(text)
            self.out.flush()
            if on_line is not None:
                *lines, partial[0] = (partial[0] + text).split("\n")
                for line in lines:
                    on_line(line + "\n")
        try:
            write(f"Successfully started run {run_id}\n")
            if stream:
                self.control.stream(run_id, write, timeout, self.interrupted)
            if self.interrupted.is_set():
                raise KeyboardInterrupt
            self.active_run = None
            return 0
        except control.RunTimedOut as stopped:
            self.active_run = None
            write(f"{stopped}\n")
            return 1
        finally:
            if on_line is not None and partial[0]:
                on_line(partial[0])
            done.set()
            if watcher is not None:
                watcher.join()

    @property
    def control(self):
        """The SuperLink's Control API client (made once the SuperLink listens)."""
        if self._control is None:
            self._control = control.Control(f"127.0.0.1:{self.port}", self.certs["ca"] if self.certs is not None else None)
        return self._control

    def _revive_server_executor(self) -> None:
        executor = self.processes.get("executor-server")
        if executor is not None and executor.poll() is not None:
            self.processes.pop("executor-server")
            self.start_server_executor()

    def _watch_server_executor(self, run_id: int, done: threading.Event) -> None:
        """A warm ServerApp that ended its process (a crash) ends the executor without a word to the
        SuperLink, which would wait for the task's heartbeats to lapse (a minute) before ending the
        run: the run is stopped at once, and another executor started."""
        executor = self.processes["executor-server"]
        while not done.wait(0.2):
            if executor.poll() is None:
                continue
            if self.closing:                   # stopped by close(), not a crash
                return
            self._revive_server_executor()
            self.control.stop_run(run_id)
            return


def run_local(clients: int, run_config: dict, tls: bool = False, out=None, timeout: Optional[float] = None,
              workdir: Optional[str] = None, node_poll: float = 0.1, isolation: str = "warm",
              auth: bool = False, simulation: bool = False, nodes_per_executor: int = 1) -> dict:
    """One run on a fresh local deployment: {"ok", "message", "status"} (the server's status file)."""
    out = out or sys.stdout
    # SIGINT too: a command started with SIGINT ignored (a background job of a script inherits that)
    # still stops its deployment on a Ctrl-C, as fedpne run does.
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    # The handler's KeyboardInterrupt is lost when the signal lands in a garbage-collection callback
    # (JAX registers one) or a __del__, which ignore exceptions: the event keeps it, and the log
    # stream's loop raises it again (Control.stream).
    interrupted = threading.Event()

    def on_term(signum, frame):
        interrupted.set()
        raise KeyboardInterrupt

    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        for signum in previous:
            signal.signal(signum, on_term)
    try:
        with Deployment(clients, tls=tls, workdir=workdir, node_poll=node_poll, out=out, isolation=isolation,
                        auth=auth, simulation=simulation, nodes_per_executor=nodes_per_executor,
                        interrupted=interrupted) as d:
            status_path = os.path.join(d.workdir, "status.json")
            with contextlib.suppress(FileNotFoundError):
                os.remove(status_path)          # an earlier run's, in a working folder given again
            config = dict(run_config, status=status_path)
            d.start()

            def logs() -> str:
                executor = f"\nServerApp executor log:\n{d.tail('executor-server')}" if d.isolation == "warm" else ""
                return f"SuperLink log:\n{d.tail('superlink')}{executor}"
            try:
                code = d.submit(config, timeout=timeout)
            except control.ControlError as err:
                if interrupted.is_set():
                    raise KeyboardInterrupt from None
                return {"ok": False, "message": f"{err}; {logs()}"}
            if code:
                return {"ok": False, "message": f"the run outlived --timeout {timeout:g} s and was stopped at the "
                                                f"SuperLink; the server's state of its last step is kept"}
            try:
                with open(status_path) as fh:
                    return json.load(fh)
            except (OSError, ValueError):
                return {"ok": False, "message": f"the ServerApp ended without a status; {logs()}"}
    except Exception:
        # A KeyboardInterrupt raised inside a library can come out as another error (pydantic's
        # compiled code, for one, wraps it while Flower's modules are imported): the signal decides.
        if interrupted.is_set():
            raise KeyboardInterrupt from None
        raise
    finally:
        if in_main:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
