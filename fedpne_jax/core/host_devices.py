"""One XLA device per processor core, so that a batch on a CPU runs on every core.

XLA's CPU backend runs a program on one thread; declaring the cores as devices lets the executor
shard the runs over them (fedpne_jax.core.sharding), with the same numbers.  A call of few runs
stays on one device (``share``).  JAX reads the count at its first operation on an array, so
:func:`enable` (``fp.enable_host_devices()`` in Python; the command line calls it) must come before
that; a count the caller chose (``jax_num_cpu_devices``, ``JAX_NUM_CPU_DEVICES``, XLA's
``--xla_force_host_platform_device_count`` or ``FEDPNE_HOST_DEVICES``, a count or ``off``) is kept.

Why, when a call is sharded, and the times: docs/guides/hosts.md, section "A CPU's cores".
"""
from __future__ import annotations

import math
import os

import jax

ENV = "FEDPNE_HOST_DEVICES"
OFF = ("off", "0", "false", "no", "none", "1")
XLA_FLAG = "--xla_force_host_platform_device_count"
# A call shards over the host devices only when each gets this many runs: below it, compiling the
# sharded program costs more than the second core saves (the quick gallery's calls of 4-12 runs
# took 14 % longer sharded over two cores; 100 seeds of Fed-PNE or of a tree algorithm run faster).
MIN_RUNS = 32
# JAX makes every host device up front (a hundred million took 20 GB before the kernel ended the
# process); more devices than this are more than any host has cores.
MAX_DEVICES = 4096
_SET = [0]           # the count enable() set, 0 when it set none


def cores() -> int:
    """The cores this process may run on (its affinity mask, where the system has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def requested(environ=None) -> int | None:
    """The host device count to set from ``environ``: None where the caller chose one (see the module's
    docstring) or asked for JAX's default; ValueError for a ``FEDPNE_HOST_DEVICES`` that is neither
    a positive count nor ``off``."""
    environ = os.environ if environ is None else environ
    if XLA_FLAG in environ.get("XLA_FLAGS", "") or environ.get("JAX_NUM_CPU_DEVICES", "").strip():
        return None
    if jax.config.values["jax_num_cpu_devices"] != -1:
        return None
    value = environ.get(ENV, "").strip().lower()
    if not value:
        return cores()
    if value in OFF:
        return None
    try:
        number = float(value.replace("_", "")) if not value.startswith(("0x", "0b", "0o")) else math.nan
    except ValueError:
        number = math.nan
    if number in (0, 1):            # off in any spelling, as "0" and "1" are
        return None
    if not (number.is_integer() and 1 < number <= MAX_DEVICES):
        raise ValueError(f"{ENV} must be a number of devices in 2 .. {MAX_DEVICES}, or off, got {environ[ENV]!r}")
    return int(number)


def enable(environ=None) -> int | None:
    """Give JAX's CPU backend one device per core (or ``FEDPNE_HOST_DEVICES``) and return the count
    set; None when the caller chose a count, asked for the default, or JAX's backends already exist.
    Results do not change, only how many cores compute them."""
    count = requested(environ)
    if count is None or count == 1:
        return None
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:          # a backend exists already: its devices stay as they are
        return None
    _SET[0] = count
    return count


def count_set() -> int:
    """The count :func:`enable` set in this process, 0 when it set none (what a worker process started
    by this one must set again: a spawned interpreter starts from JAX's defaults)."""
    return _SET[0]


def share(devices: tuple, runs: int) -> tuple:
    """The devices a call of ``runs`` runs uses: all of ``devices``, except that host devices made
    by :func:`enable` take at most one per MIN_RUNS runs (at least one).  Devices the caller made
    (XLA's flag, several processes, accelerators) are used as given."""
    if not _SET[0] or len(devices) < 2 or jax.process_count() > 1 or any(d.platform != "cpu" for d in devices):
        return devices
    return devices[:max(1, min(len(devices), runs // MIN_RUNS))]
