"""Sweeps in worker processes, several at once: ``fedpne reproduce --jobs N``.

Studies are independent sweeps into folders of their own, so N spawned processes compute N of them
at once, with the same numbers (a run's numbers depend on its key alone, and every process compiles
the same programs).  A worker starts as its parent is set up (host device count, compilation cache
folder, warnings), and Ctrl-C is left to the parent, which stops every worker (:meth:`Workers.stop`);
a worker whose parent is killed outright ends itself within a second.
Accelerators, and several processes forming one JAX job, are used whole by one process: there
``jobs`` is 1.

Why studies one at a time leave cores idle, and why workers are spawned: docs/guides/paper-figures.md,
section "fedpne reproduce".
"""
from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import threading
import warnings
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Callable

import jax

from fedpne_jax.core import host_devices
from fedpne_jax.core.processes import exit_when_gone, stop_processes
from fedpne_jax.core.validation import is_int
from fedpne_jax.experiments.runner import run_sweep

__all__ = ["AUTO", "MAX_AUTO", "WorkerError", "Workers", "check_jobs", "default_jobs", "host_only"]

AUTO = "auto"
# Measured on 2 cores only.  Each worker sizes its calls to the memory budget alone, so workers
# multiply memory, and a large study's calls are sharded over every core already.
MAX_AUTO = 4
GRACE_SECONDS = 10.0     # how long a terminated worker may take to die before it is killed
POLL_SECONDS = 0.2       # how often the wait for workers looks for a signal
ORPHAN_SECONDS = 1.0     # how often a worker looks for its parent
_CACHE_OPTIONS = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")


class WorkerError(RuntimeError):
    """A worker process died (killed for memory, say); finished chunks are kept in their folders."""


def host_only(devices: tuple) -> bool:
    """Whether ``devices`` are this process's CPU devices, which worker processes can share."""
    return jax.process_count() == 1 and all(d.platform == "cpu" for d in devices)


def default_jobs(devices: tuple) -> int:
    """``--jobs auto``: one worker per core up to MAX_AUTO on host devices, else 1."""
    return max(1, min(MAX_AUTO, host_devices.cores())) if host_only(devices) else 1


def check_jobs(jobs, devices: tuple) -> int:
    """``jobs`` (a positive integer or ``"auto"``) as a count, or a ValueError naming ``--jobs``."""
    if isinstance(jobs, str) and jobs.strip().lower() == AUTO:
        return default_jobs(devices)
    count = int(jobs.strip()) if isinstance(jobs, str) and jobs.strip().isdigit() else jobs
    if not is_int(count) or count < 1:
        raise ValueError(f"--jobs must be a positive integer or {AUTO}, got {jobs!r}")
    if count > 1 and not host_only(devices):
        where = "several processes form this JAX job" if jax.process_count() > 1 else \
            f"the devices are {devices[0].platform.upper()}s"
        raise ValueError(f"--jobs {count}: studies run in parallel processes on the host's cores only, and {where}, "
                         f"which one process uses whole; use --jobs 1")
    return int(count)


class Workers:
    """``jobs`` spawned processes that run :func:`fedpne_jax.experiments.runner.run_sweep`.

    As a context manager: a clean exit waits for the workers; an exception (Ctrl-C included) stops
    them at once.  A stopped worker dies where it is, losing only the call it was computing: every
    chunk finished before is in its folder and indexed, and a file it was writing is still a
    temporary one, which the rerun that resumes removes."""

    def __init__(self, jobs: int):
        self._pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_start, initargs=(_setup(),))
        # Set by the signal handlers: a KeyboardInterrupt raised where Python ignores exceptions (a
        # garbage-collection callback, which JAX registers, or a __del__) is lost, and the workers,
        # which ignore SIGINT, would be waited for with no end; completed() raises it again.
        self.interrupted = threading.Event()
        # True while this process is inside concurrent.futures (waiting for futures, stopping the
        # pool): an exception raised there by a signal handler can leave a future's lock held or
        # the pool half shut down, so the handler only sets `interrupted` and completed() raises.
        self._deferring = False

    def completed(self, futures):
        """The futures as they complete (concurrent.futures.as_completed), raising KeyboardInterrupt
        within POLL_SECONDS of a SIGINT or SIGTERM, even one whose exception was lost."""
        pending = set(futures)
        while pending:
            self._deferring = True
            try:
                done, pending = wait(pending, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
            finally:
                self._deferring = False
            if self.interrupted.is_set():
                raise KeyboardInterrupt
            yield from done

    def submit(self, definition, out: str, **options) -> Future:
        """``run_sweep(definition, out, **options)`` in a worker; the future's result is its Report.
        ``definition`` must pickle (a dict does; ``devices`` a count, not device objects)."""
        return self._pool.submit(run_sweep, definition, out, **options)

    @staticmethod
    def result(future: Future):
        """The future's Report, its exception re-raised, or WorkerError where a worker died."""
        try:
            return future.result()
        except BrokenProcessPool as err:
            raise WorkerError("a worker process died (out of memory?); every finished chunk is kept: rerun with "
                              "--jobs 1 to resume") from err

    def stop(self) -> None:
        self._deferring = True          # a second Ctrl-C must not cut the stop short
        stop_pool(self._pool)

    def __enter__(self) -> Workers:
        # SIGTERM (a scheduler's time limit, `kill`) must stop the workers too: killed by it, this
        # process would leave them computing with no one to read their results.
        self._term = self._int = None
        if threading.current_thread() is threading.main_thread():
            self._term = signal.signal(signal.SIGTERM, self._on_signal) or signal.SIG_DFL
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:    # not an ignored or a caller's
                self._int = signal.signal(signal.SIGINT, self._on_signal)
        return self

    def _on_signal(self, signum, frame) -> None:
        first = not self.interrupted.is_set()
        self.interrupted.set()
        # The caller's own code (writing a finished study's figure) is interrupted at once, once.
        if first and not self._deferring:
            raise KeyboardInterrupt

    def __exit__(self, kind, error, trace) -> None:
        try:
            if kind is None:
                self._pool.shutdown(wait=True)
            else:
                self.stop()
        finally:
            if self._term is not None:
                signal.signal(signal.SIGTERM, self._term)
            if self._int is not None:
                signal.signal(signal.SIGINT, self._int)


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool`` without waiting for its calls: its queued calls cancelled, its processes
    terminated, and killed when one takes more than GRACE_SECONDS to die."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    stop_processes([p.pid for p in processes if p.is_alive()], GRACE_SECONDS)
    for p in processes:
        p.join()


def _setup() -> dict:
    """What a worker must set to match this process (a spawned interpreter starts from defaults)."""
    show: Callable | None = warnings.showwarning
    try:
        pickle.dumps(show)
    except Exception:           # a closure: the worker keeps Python's default
        show = None
    return {"host_devices": host_devices.count_set(), "cpu_devices": jax.config.values["jax_num_cpu_devices"],
            "cache": {k: jax.config.values[k] for k in _CACHE_OPTIONS if jax.config.values[k]},
            "showwarning": show, "parent": os.getpid()}


def _start(setup: dict) -> None:
    # The parent answers Ctrl-C (the terminal sends it to every process of the group) and stops
    # the workers with SIGTERM, whose default action ends one at once, even inside a compiled call.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A worker whose parent is killed outright would finish its study for no one, then wait on the
    # pool's queue for good (every worker holds its writing end too).  The parent's pid from before
    # the spawn: one killed while this worker was starting is gone already.
    exit_when_gone([setup["parent"]], 1, ORPHAN_SECONDS)
    if setup["host_devices"]:
        host_devices.enable({host_devices.ENV: str(setup["host_devices"])})
    elif setup["cpu_devices"] != -1:
        jax.config.update("jax_num_cpu_devices", setup["cpu_devices"])
    for name, value in setup["cache"].items():
        jax.config.update(name, value)
    if setup["showwarning"] is not None:
        warnings.showwarning = setup["showwarning"]
