"""Processes this one started: stopped with SIGTERM, then SIGKILL once a grace period is over, with
their descendants; and a child process that ends itself once its parents are gone.

The worker pools of ``fedpne reproduce --jobs`` (:mod:`fedpne_jax.experiments.workers`) and the
SuperLink, SuperNodes and executors of ``fedpne flower local`` (:mod:`fedpne_jax.flower.local`,
:mod:`fedpne_jax.flower.warm`) stop and watch their processes by these rules.  Linux's ``/proc``
gives the process tree and tells an exited process that is not yet reaped (a zombie, which ignores
every signal) from a live one; elsewhere only the given processes are signalled, and a process
counts as alive while it can be signalled.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from typing import Iterable

_PROC = "/proc"


def children_map() -> dict:
    """{parent pid: [child pids]} of every process now ({} without Linux's /proc)."""
    out: dict = {}
    try:
        names = os.listdir(_PROC)
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"{_PROC}/{name}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(name))
    return out


def descendants(pids: Iterable[int]) -> list:
    """``pids`` and every process below them."""
    tree = children_map()
    seen: list = []
    todo = list(pids)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.append(pid)
        todo.extend(tree.get(pid, []))
    return seen


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    try:
        with open(f"{_PROC}/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        if os.path.isdir(_PROC):
            return False
    except OSError:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def stop_processes(pids: Iterable[int], grace: float) -> None:
    """SIGTERM ``pids`` and all their descendants, then SIGKILL what is left after ``grace`` seconds
    (and what they started meanwhile).  Returns once every one has exited or 2 s after the SIGKILL;
    reaping its own children is the caller's (``Popen.wait``, ``Process.join``)."""
    pids = list(pids)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        targets = [p for p in descendants(pids) if alive(p)]
        if not targets:
            return
        for pid in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.time() + wait
        while time.time() < deadline and any(alive(p) for p in targets):
            time.sleep(0.05)
        pids = targets


def exit_when_gone(parents: Iterable[int], code: int, poll: float) -> None:
    """Exit this process with ``code`` once every one of ``parents`` has exited, looking every ``poll``
    seconds from a daemon thread.  A parent killed outright (SIGKILL, the kernel for memory) stops no
    child, which would otherwise serve or compute for no one.  The direct parent counts as gone once
    this process is adopted (its pid could be reused)."""
    parents = list(parents)
    ppid = os.getppid()

    def gone(pid: int) -> bool:
        return os.getppid() != ppid if pid == ppid else not alive(pid)

    def watch():
        while not all(gone(pid) for pid in parents):
            time.sleep(poll)
        os._exit(code)
    threading.Thread(target=watch, daemon=True, name="fedpne-parent-watch").start()
